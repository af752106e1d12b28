"""Decision records: one JSON log line per scheduling attempt, with a versioned schema.

A record is built from what the algorithm already computed (``Placement`` and
its ``Diagnosis``), so it explains the attempt that really ran rather than a
re-run. The only extra work is counting filter rejections per plugin and, when
``top_nodes`` > 0, picking the best N feasible nodes; with records disabled the
scheduler builds nothing. docs/decision-record.md documents every field and
docs/decision-record.schema.json is the machine-readable schema; a change to
the shape bumps ``SCHEMA``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import numpy as np

from podium.framework.cycle import Placement
from podium.framework.profile import Profile
from podium.kube.objects import PodInfo
from podium.state.snapshot import Snapshot

__all__ = [
    "EVENT",
    "RESULTS",
    "SCHEMA",
    "ZONE_LABEL",
    "build_record",
    "read_records",
    "rejections",
    "top_nodes",
]

SCHEMA = "podium.dev/decision-record/v1"
EVENT = "decision"
ZONE_LABEL = "topology.kubernetes.io/zone"
# scheduled: bound; dry_run: a node was chosen and deliberately not bound (DryRun or
# shadow); abandoned: the pod was deleted or bound by someone else during the bind.
RESULTS = ("scheduled", "unschedulable", "error", "dry_run", "abandoned")


def rejections(profile: Profile | None, placement: Placement | None) -> dict[str, dict[str, int]]:
    """Filter rejection counts per reason and per plugin; a PreFilter rejection counts all nodes."""
    diagnosis = (placement.filtered or placement.diagnosis) if placement is not None else None
    if profile is None or diagnosis is None:
        return {"by_reason": {}, "by_plugin": {}}
    by_reason = dict(diagnosis.reasons)
    by_plugin: dict[str, int] = {}
    if diagnosis.prefilter_msg:
        by_reason[diagnosis.prefilter_msg] = diagnosis.num_all_nodes
        by_plugin[diagnosis.prefilter_plugin] = diagnosis.num_all_nodes
        return {"by_reason": by_reason, "by_plugin": by_plugin}
    hit = diagnosis.plugin[diagnosis.plugin >= 0]
    if hit.size:
        counts = np.bincount(hit, minlength=len(profile.filters))
        for position in np.flatnonzero(counts):
            by_plugin[profile.filters[int(position)].name] = int(counts[position])
    return {"by_reason": by_reason, "by_plugin": by_plugin}


def top_nodes(snapshot: Snapshot, placement: Placement, count: int) -> list[dict[str, Any]]:
    """The ``count`` best feasible nodes, best first (ties by name), with per-plugin scores.

    Scores are each plugin's normalised 0..100 score; ``total`` is the weighted
    sum the algorithm compared. A plugin that skipped itself (PreScore) is absent.
    """
    candidates = placement.candidates
    if count <= 0 or candidates is None or candidates.size == 0:
        return []
    names = snapshot.names
    totals = placement.totals
    if totals is None:  # the only feasible node, or the nominated one: nothing was scored
        return [{"node": placement.node, "total": None, "scores": {}}]
    k = min(count, int(totals.size))
    best = np.argpartition(-totals, k - 1)[:k] if k < totals.size else np.arange(totals.size)
    order = sorted(
        (int(i) for i in best), key=lambda i: (-int(totals[i]), names[int(candidates[i])])
    )
    scores = placement.plugin_scores
    return [
        {
            "node": names[int(candidates[i])],
            "total": int(totals[i]),
            "scores": {plugin: int(values[i]) for plugin, values in scores.items()},
        }
        for i in order
    ]


def build_record(
    profile: Profile | None,
    snapshot: Snapshot,
    pod: PodInfo,
    attempt: int,
    placement: Placement | None,
    *,
    top: int,
    result: str = "",
    message: str = "",
    duration_ms: float = 0.0,
    shadow_of: str = "",
) -> dict[str, Any]:
    """The record as a dict; ``result`` and ``duration_ms`` may be filled in later (on bind)."""
    node = placement.node if placement is not None else ""
    row = snapshot.index.get(node) if node else None
    zone = snapshot.nodes[row].labels.get(ZONE_LABEL) if row is not None else None
    return {
        "schema": SCHEMA,
        "shadow": bool(shadow_of),
        "shadow_of": shadow_of or None,
        "policy": (profile.policy or "<built-in>") if profile else None,
        "generation": profile.generation if profile else 0,
        "scheduler_name": pod.scheduler_name if profile is None else profile.scheduler_name,
        "pod": pod.name,
        "namespace": pod.namespace,
        "uid": pod.uid,
        "attempt": attempt,
        "nodes": {
            "total": len(snapshot),
            "evaluated": placement.evaluated if placement is not None else 0,
            "feasible": placement.feasible if placement is not None else 0,
        },
        "rejections": rejections(profile, placement),
        "weights": {s.name: w for s, w in profile.scores} if profile else {},
        "top_nodes": top_nodes(snapshot, placement, top) if placement is not None else [],
        "nominated": bool(placement is not None and placement.nominated),
        "node": node or None,
        "zone": zone,
        "result": result,
        "message": message,
        "duration_ms": duration_ms,
    }


def read_records(lines: Iterable[str]) -> list[dict[str, Any]]:
    """Decision records of this schema from log lines, in log order; other lines are skipped.

    Podium's log mixes records with other events (and kopf's lines), so a line
    that is not a JSON object of this schema is not an error.
    """
    records: list[dict[str, Any]] = []
    for line in lines:
        if '"decision"' not in line:
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(item, dict) and item.get("event") == EVENT and item.get("schema") == SCHEMA:
            records.append(item)
    return records
