"""`podium shadow-report LOG`: how a shadow policy's decisions differ from the live ones.

Reads decision records from a Podium log. For every (live schedulerName,
shadow schedulerName) pair it matches, per pod, the live profile's final
decision (the bound attempt, else the last one) with the shadow's decision
for the same attempt (else its last). A pod counts as *agreed* when both chose
the same node or both found none. Packing and spread are computed from the
chosen nodes of the pods both sides decided; a shadow decides each pod against
the live cluster, so these are per-decision figures, not an alternative
cluster's final state.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from podium.framework.decision import read_records

__all__ = ["Comparison", "Side", "compare", "final_decisions", "format_report", "run_shadow_report"]


@dataclass(slots=True)
class Side:
    """One profile's decisions over the pods both sides decided."""

    scheduler_name: str
    policy: str
    placed: int = 0
    unschedulable: int = 0
    nodes_used: int = 0
    pods_per_node_stddev: float = 0.0
    pods_per_zone: dict[str, int] = field(default_factory=dict)
    pods_per_zone_stddev: float = 0.0
    # Live records time pop to bound (the bind included); shadow ones time the decision.
    mean_decision_ms: float = 0.0


@dataclass(slots=True)
class Comparison:
    live: Side
    shadow: Side
    pods: int
    agreed: int
    agreement: float
    live_only: int
    shadow_only: int
    differences: list[dict[str, Any]]


def final_decisions(
    records: Iterable[Mapping[str, Any]], scheduler_name: str, shadow: bool
) -> dict[str, Mapping[str, Any]]:
    """uid -> the record that stands for the pod: the bound attempt, else the last one."""
    out: dict[str, Mapping[str, Any]] = {}
    for record in records:
        if record["scheduler_name"] != scheduler_name or record["shadow"] is not shadow:
            continue
        held = out.get(record["uid"])
        if held is None or held["result"] != "scheduled":
            out[record["uid"]] = record
    return out


def _attempts(
    records: Iterable[Mapping[str, Any]], scheduler_name: str
) -> dict[tuple[str, int], Mapping[str, Any]]:
    return {
        (r["uid"], r["attempt"]): r
        for r in records
        if r["shadow"] and r["scheduler_name"] == scheduler_name
    }


def _std(values: Sequence[int]) -> float:
    return round(statistics.pstdev(values), 3) if values else 0.0


def _side(name: str, decided: Sequence[Mapping[str, Any]]) -> Side:
    nodes = Counter(r["node"] for r in decided if r["node"])
    zones = Counter(r["zone"] or "" for r in decided if r["node"])
    durations = [float(r["duration_ms"]) for r in decided]
    return Side(
        scheduler_name=name,
        policy=str(decided[0]["policy"]) if decided else "",
        placed=sum(nodes.values()),
        unschedulable=sum(1 for r in decided if not r["node"]),
        nodes_used=len(nodes),
        pods_per_node_stddev=_std(list(nodes.values())),
        pods_per_zone=dict(sorted(zones.items())),
        pods_per_zone_stddev=_std(list(zones.values())),
        mean_decision_ms=round(statistics.fmean(durations), 3) if durations else 0.0,
    )


def compare(records: Sequence[Mapping[str, Any]], live: str, shadow: str) -> Comparison:
    live_final = final_decisions(records, live, shadow=False)
    shadow_final = final_decisions(records, shadow, shadow=True)
    by_attempt = _attempts(records, shadow)
    pairs: list[tuple[Mapping[str, Any], Mapping[str, Any]]] = []
    for uid, record in live_final.items():
        other = by_attempt.get((uid, record["attempt"])) or shadow_final.get(uid)
        if other is not None:
            pairs.append((record, other))
    agreed = sum(1 for a, b in pairs if a["node"] == b["node"])
    differences = [
        {
            "pod": f"{a['namespace']}/{a['pod']}",
            "live": a["node"],
            "shadow": b["node"],
            "shadow_message": b["message"],
        }
        for a, b in pairs
        if a["node"] != b["node"]
    ]
    return Comparison(
        live=_side(live, [a for a, _ in pairs]),
        shadow=_side(shadow, [b for _, b in pairs]),
        pods=len(pairs),
        agreed=agreed,
        agreement=round(agreed / len(pairs), 4) if pairs else 0.0,
        live_only=len(set(live_final) - set(shadow_final)),
        shadow_only=len(set(shadow_final) - set(live_final)),
        differences=sorted(differences, key=lambda d: d["pod"]),
    )


def shadow_pairs(records: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(live, shadow) schedulerName pairs that appear in the records."""
    return sorted({(str(r["shadow_of"]), str(r["scheduler_name"])) for r in records if r["shadow"]})


def format_report(comparison: Comparison, limit: int = 20) -> str:
    a, b = comparison.live, comparison.shadow
    lines = [
        f"live {a.scheduler_name} (policy {a.policy}) vs shadow {b.scheduler_name} "
        f"(policy {b.policy}): {comparison.pods} pods decided by both",
        f"agreement: {comparison.agreed}/{comparison.pods} ({comparison.agreement * 100:.1f}%)"
        f"; decided by live only {comparison.live_only}, by shadow only {comparison.shadow_only}",
        "",
    ]
    rows = [
        ("placed", a.placed, b.placed),
        ("unschedulable", a.unschedulable, b.unschedulable),
        ("nodes used", a.nodes_used, b.nodes_used),
        ("pods per node, stddev", a.pods_per_node_stddev, b.pods_per_node_stddev),
        ("pods per zone, stddev", a.pods_per_zone_stddev, b.pods_per_zone_stddev),
        ("mean duration_ms", a.mean_decision_ms, b.mean_decision_ms),
    ]
    for zone in sorted(set(a.pods_per_zone) | set(b.pods_per_zone)):
        rows.append(
            (
                f"pods in zone {zone or '-'}",
                a.pods_per_zone.get(zone, 0),
                b.pods_per_zone.get(zone, 0),
            )
        )
    width = max(len(r[0]) for r in rows)
    lines.append(f"{'METRIC':{width}}  {'LIVE':>10}  {'SHADOW':>10}")
    lines += [f"{label:{width}}  {x!s:>10}  {y!s:>10}" for label, x, y in rows]
    if comparison.differences:
        lines += ["", f"DIFFERENT DECISIONS ({len(comparison.differences)})"]
        for diff in comparison.differences[:limit]:
            lines.append(
                f"{diff['pod']}: live {diff['live'] or '-'}, shadow {diff['shadow'] or '-'}"
            )
        if len(comparison.differences) > limit:
            lines.append(f"... and {len(comparison.differences) - limit} more (-o json)")
    return "\n".join(lines)


def run_shadow_report(args: argparse.Namespace) -> int:
    try:
        text = sys.stdin.read() if args.log == "-" else Path(args.log).read_text(errors="replace")
    except OSError as exc:
        print(f"podium shadow-report: cannot read {args.log}: {exc.strerror}", file=sys.stderr)
        return 1
    records = read_records(text.splitlines())
    pairs = [p for p in shadow_pairs(records) if args.live in (None, p[0])]
    if not pairs:
        print(
            f"podium shadow-report: {args.log} has no shadow decision records "
            "(is a DryRun policy with spec.shadowOf loaded, with decisionRecords enabled?)",
            file=sys.stderr,
        )
        return 1
    comparisons = [compare(records, live, shadow) for live, shadow in pairs]
    if args.output == "json":
        print(json.dumps([asdict(c) for c in comparisons], indent=2))
    else:
        print("\n\n".join(format_report(c) for c in comparisons))
    return 0
