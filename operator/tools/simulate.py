"""`podium simulate`: the command, its inputs and its text output.

A snapshot comes from a file (``kubectl get nodes,pods -A -o yaml``,
multi-document YAML, JSON) or is generated; ``podium.tools.simulation`` places
the pods. See docs/simulate.md.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from dataclasses import replace
from typing import Any

import numpy as np

from podium.kube.objects import NodeInfo, PodInfo, parse_node, parse_pod
from podium.kube.pdb import parse_pdb
from podium.tools.generate import generate_cluster
from podium.tools.inputs import ClusterObjects, InputError, load_objects, load_policy
from podium.tools.report import check_available, write_report
from podium.tools.simulation import (
    SimulationResult,
    compare_rows,
    differing_placements,
    node_rows,
    result_dict,
    simulate,
    split_pods,
)
from podium.tools.tables import table

# Beyond this many placements the table shows a summary instead of every row.
PLACEMENT_ROWS = 50


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def format_result(result: SimulationResult, pending: int) -> str:
    m = result.metrics()
    rate = len(result.placements) / result.elapsed if result.elapsed > 0 else math.inf
    lines = [
        f"Policy {result.policy} (schedulerName {result.profile.scheduler_name}): "
        f"{pending} pods onto {m['nodes']} nodes in {result.elapsed:.2f}s "
        f"({rate:,.0f} placements/s, {result.passes} pass(es))",
        f"Placed {m['pods_placed']}, unschedulable {m['pods_unschedulable']}, "
        f"skipped {m['pods_skipped']}, evicted {m['pods_evicted']}.",
        "",
    ]
    if m["gangs"]:
        lines[-1:-1] = [
            f"Gangs: {m['gangs_placed']} of {m['gangs']} placed whole, {m['gangs_waiting']} "
            f"waiting, {m['gangs_partial']} partly placed holding "
            f"{m['cpu_held_by_partial_gangs']}m cpu idle."
        ]
    if len(result.placements) <= PLACEMENT_ROWS:
        lines.append("PLACEMENTS")
        lines += table(
            ("POD", "NODE", "SCORE", "TIE", "REQUESTS"),
            (
                (
                    p.pod,
                    p.node,
                    "only fit" if p.total is None else p.total,
                    "tie" if p.tied else "",
                    p.requests,
                )
                for p in result.placements
            ),
        )
    else:
        counts = np.array(sorted(result.placed_per_node.values()), dtype=float)
        lines.append(
            f"PLACEMENTS: {len(result.placements)} pods on {len(result.placed_per_node)} nodes; "
            f"new pods per node min {int(counts.min())}, median {np.median(counts):g}, "
            f"max {int(counts.max())}; {m['placements_tied']} decided by a tie "
            "(-o json lists every placement)"
        )
    if result.unschedulable:
        lines += ["", f"UNSCHEDULABLE ({len(result.unschedulable)})"]
        shown = result.unschedulable[:PLACEMENT_ROWS]
        lines += table(("POD", "REQUESTS", "WHY"), ((f.pod, f.requests, f.message) for f in shown))
        if len(result.unschedulable) > len(shown):
            lines.append(f"... and {len(result.unschedulable) - len(shown)} more (-o json)")
    if result.evicted:
        lines += ["", f"EVICTED BY PREEMPTION ({len(result.evicted)})"]
        evicted = result.evicted[:PLACEMENT_ROWS]
        lines += table(
            ("POD", "NODE", "PRIORITY", "FOR"),
            ((e.pod, e.node, e.priority, e.preemptor) for e in evicted),
        )
        if len(result.evicted) > len(evicted):
            lines.append(f"... and {len(result.evicted) - len(evicted)} more (-o json)")
    if result.skipped:
        lines += ["", f"SKIPPED ({len(result.skipped)})"]
        lines += table(("POD", "WHY"), result.skipped[:PLACEMENT_ROWS])
    rows = node_rows(result)
    lines += [
        "",
        f"NODES: {m['nodes_used']} of {m['nodes']} used; cpu mean "
        f"{_pct(m['cpu_mean_utilisation_used_nodes'])} (max {_pct(m['cpu_max_utilisation'])}), "
        f"memory mean {_pct(m['memory_mean_utilisation_used_nodes'])} "
        f"(max {_pct(m['memory_max_utilisation'])}); pods per node stddev "
        f"{m['pods_per_node_stddev']}, per zone stddev {m['pods_per_zone_stddev']}",
    ]
    if len(rows) > 20:
        rows = sorted(rows, key=lambda r: (-r["cpu"], -r["memory"], r["node"]))[:10]
        lines.append("busiest 10 by cpu:")
    lines += table(
        ("NODE", "ZONE", "CPU", "MEMORY", "PODS", "PLACED"),
        (
            (
                r["node"],
                r["zone"] or "-",
                _pct(r["cpu"]),
                _pct(r["memory"]),
                f"{r['pods']}/{r['max_pods']}",
                r["placed"],
            )
            for r in rows
        ),
    )
    return "\n".join(lines)


def format_compare(a: SimulationResult, b: SimulationResult) -> str:
    rows = [(label, _fmt(x), _fmt(y)) for label, x, y in compare_rows(a, b)]
    name_a, name_b = a.policy, b.policy
    if name_a == name_b:
        name_a, name_b = f"A: {name_a}", f"B: {name_b}"
    lines = table(("METRIC", name_a, name_b), rows)
    lines.append("")
    lines.append(f"pods placed on a different node (or only by one): {differing_placements(a, b)}")
    for result in (a, b):
        if result.unschedulable:
            reasons: Counter[str] = Counter()
            for failure in result.unschedulable:
                reasons.update(failure.reasons)
            top = ", ".join(f"{n} {r}" for r, n in reasons.most_common(3)) or "see -o json"
            lines.append(f"{result.policy}: {len(result.unschedulable)} unschedulable ({top})")
    return "\n".join(lines)


def _inputs(
    args: argparse.Namespace,
) -> tuple[list[NodeInfo], list[PodInfo], list[PodInfo], ClusterObjects]:
    if args.snapshot:
        objects = load_objects(args.snapshot)
        if not objects.nodes:
            raise InputError("the snapshot has no Node objects")
    else:
        objects = generate_cluster(args.nodes, args.pods or 0, args.seed)
    node_infos = [parse_node(body) for body in objects.nodes]
    bound, pending = split_pods(objects.pods)
    if args.place:
        pending = []
        for body in load_objects(args.place).pods:
            pod = parse_pod(body)
            if not pod.terminal:
                pod.node_name = ""
                pending.append(pod)
    return node_infos, bound, pending, objects


def run_simulate(args: argparse.Namespace) -> int:
    try:
        if args.snapshot and (args.nodes is not None or args.pods is not None):
            print("podium simulate: give --snapshot or --nodes/--pods, not both", file=sys.stderr)
            return 2
        if not args.snapshot and args.nodes is None:
            print("podium simulate: give --snapshot FILE or --nodes N [--pods M]", file=sys.stderr)
            return 2
        if args.report:
            check_available(args.report)
        nodes, bound, pending, objects = _inputs(args)
        if args.compare:
            profiles = [load_policy(path) for path in args.compare]
        else:
            profiles = [load_policy(args.policy)]
        if args.disable_preemption:
            profiles = [replace(profile, preemption=False) for profile in profiles]
        results = [
            simulate(
                profile,
                nodes,
                [replace(p) for p in bound],
                [replace(p) for p in pending],
                seed=args.seed,
                storage=objects.storage,
                selectors=objects.selectors,
                pod_groups=objects.pod_groups,
                pdbs=[b for b in (parse_pdb(body) for body in objects.pdbs) if b is not None],
            )
            for profile in profiles
        ]
        if args.report:
            write_report(args.report, results)
    except InputError as exc:
        print(f"podium simulate: {exc}", file=sys.stderr)
        return 1
    if args.output == "json":
        if len(results) == 2:
            payload: dict[str, Any] = {
                "compare": [result_dict(r) for r in results],
                "metrics": [
                    {"metric": label, results[0].policy: x, results[1].policy: y}
                    for label, x, y in compare_rows(*results)
                ],
                "differingPlacements": differing_placements(*results),
            }
        else:
            payload = result_dict(results[0])
        print(json.dumps(payload, indent=2))
    elif len(results) == 2:
        print(format_compare(*results))
    else:
        print(format_result(results[0], len(pending)))
    if args.report:
        print(f"report written to {args.report}", file=sys.stderr)
    return 0
