"""`podium simulate`: run the real scheduling code over a cluster held in memory.

No API server is involved. A snapshot comes from a file (``kubectl get
nodes,pods -A -o yaml``, multi-document YAML, JSON) or is generated; pods are
placed one by one in queue order (higher priority first, then earlier
creation) with ``podium.algorithm.schedule`` and assumed in the Cache, so each
pod sees the ones placed before it, exactly as the live scheduler's cycles do.

What the simulation leaves out, by design: binding latency, watch lag, retries
after cluster events other than the simulated placements themselves, and
preemption (no pod is ever evicted).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from podium.algorithm import Scheduler, schedule
from podium.cache import Cache
from podium.objects import NodeInfo, PodInfo, parse_node, parse_pod
from podium.pod_resources import describe_requests
from podium.policy import PolicyError, build_profile, default_profile
from podium.profile import Profile
from podium.selectors import OBJECT_KINDS as SELECTOR_KINDS
from podium.snapshot import Snapshot
from podium.volume_binder import plan_volumes, volume_binding
from podium.volumes import OBJECT_KINDS, pod_claims

__all__ = [
    "ClusterObjects",
    "SimulateError",
    "SimulationResult",
    "build_cache",
    "compare_rows",
    "generate_cluster",
    "load_objects",
    "load_policy",
    "run_simulate",
    "simulate",
]

ZONE_LABEL = "topology.kubernetes.io/zone"
GENERATED_ZONES = ("zone-a", "zone-b", "zone-c")
# Beyond this many placements the table shows a summary instead of every row.
PLACEMENT_ROWS = 50
# Retry passes over unschedulable pods; only placements change the cluster, so
# a pass that places nothing ends the simulation.
MAX_PASSES = 10


class SimulateError(RuntimeError):
    """A bad input file or policy; the CLI prints it and exits 1."""


# -- inputs -------------------------------------------------------------------------------
@dataclass(slots=True)
class ClusterObjects:
    """Raw Node, Pod, SchedulerPolicy, storage and selector bodies read from files or generated."""

    nodes: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    policies: list[dict[str, Any]] = field(default_factory=list)
    # PersistentVolumes, PersistentVolumeClaims, StorageClasses and CSINodes.
    storage: list[dict[str, Any]] = field(default_factory=list)
    # Services, ReplicationControllers, ReplicaSets and StatefulSets.
    selectors: list[dict[str, Any]] = field(default_factory=list)


_LIST_KINDS = {
    "NodeList": "Node",
    "PodList": "Pod",
    "SchedulerPolicyList": "SchedulerPolicy",
    **{f"{kind}List": kind for kind in OBJECT_KINDS},
    **{f"{kind}List": kind for kind in SELECTOR_KINDS},
}


def _flatten(doc: Any, kind: str = "") -> Iterable[dict[str, Any]]:
    if doc is None:
        return
    if isinstance(doc, list):
        for item in doc:
            yield from _flatten(item, kind)
        return
    if not isinstance(doc, dict):
        raise SimulateError(f"expected a Kubernetes object or list, got {type(doc).__name__}")
    doc_kind = str(doc.get("kind") or "")
    if "items" in doc and (doc_kind.endswith("List") or not doc_kind):
        yield from _flatten(doc.get("items") or [], _LIST_KINDS.get(doc_kind, ""))
        return
    if not doc_kind and kind:
        doc = {**doc, "kind": kind}
    yield doc


def parse_documents(text: str, source: str = "<input>") -> list[dict[str, Any]]:
    """Objects from JSON or (multi-document) YAML text, with List wrappers unpacked."""
    stripped = text.lstrip()
    try:
        if stripped.startswith(("{", "[")):
            try:
                docs: list[Any] = [json.loads(text)]
            except json.JSONDecodeError:
                docs = list(yaml.safe_load_all(text))
        else:
            docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise SimulateError(f"{source}: not valid YAML or JSON: {exc}") from exc
    return list(_flatten(docs))


def read_documents(path: str) -> list[dict[str, Any]]:
    if path == "-":
        return parse_documents(sys.stdin.read(), "<stdin>")
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise SimulateError(f"cannot read {path}: {exc.strerror or exc}") from exc
    return parse_documents(text, path)


def load_objects(paths: Iterable[str]) -> ClusterObjects:
    """Nodes, pods, policies, storage and selector objects from files; other kinds are ignored."""
    out = ClusterObjects()
    for path in paths:
        for doc in read_documents(path):
            kind = doc.get("kind")
            if kind == "Node":
                out.nodes.append(doc)
            elif kind == "Pod":
                out.pods.append(doc)
            elif kind == "SchedulerPolicy":
                out.policies.append(doc)
            elif kind in OBJECT_KINDS:
                out.storage.append(doc)
            elif kind in SELECTOR_KINDS:
                out.selectors.append(doc)
    return out


def profile_from_policy(doc: Mapping[str, Any], source: str = "") -> Profile:
    """A Profile from one SchedulerPolicy object (or a bare spec), validated like the live one."""
    is_object = "spec" in doc and isinstance(doc.get("spec"), Mapping)
    spec = doc["spec"] if is_object else doc
    meta = doc.get("metadata") if is_object else None
    meta = meta if isinstance(meta, Mapping) else {}
    name = str(meta.get("name") or source or "policy")
    generation = meta.get("generation")
    try:
        return build_profile(
            spec, policy=name, generation=generation if isinstance(generation, int) else 0
        )
    except PolicyError as exc:
        raise SimulateError(f"policy {name}: {exc}") from exc


def load_policy(path: str | None) -> Profile:
    """The SchedulerPolicy in ``path``, or kube-scheduler's default profile when None."""
    if path is None:
        return default_profile()
    docs = read_documents(path)
    policies = [d for d in docs if d.get("kind") == "SchedulerPolicy"]
    if not policies:
        policies = [d for d in docs if not d.get("kind")]
    if not policies:
        raise SimulateError(f"{path}: no SchedulerPolicy found")
    if len(policies) > 1:
        raise SimulateError(f"{path}: {len(policies)} SchedulerPolicies; give one per file")
    return profile_from_policy(policies[0], Path(path).stem)


def generate_cluster(nodes: int, pods: int, seed: int = 0) -> ClusterObjects:
    """Benchmark-like nodes (4 cpu, 32Gi, 110 pods, three zones) and pending pods.

    Pods mostly ask for 100m and 500Mi, with some larger ones, a few labels,
    higher priorities and zone selectors, from a seeded generator.
    """
    rng = random.Random(seed)
    out = ClusterObjects()
    width = max(len(str(nodes - 1)), 1)
    for i in range(nodes):
        name = f"node-{i:0{width}d}"
        resources = {"cpu": "4", "memory": "32Gi", "pods": "110"}
        out.nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "uid": f"simulated-node-{i}",
                    "labels": {
                        "kubernetes.io/hostname": name,
                        "kubernetes.io/os": "linux",
                        ZONE_LABEL: GENERATED_ZONES[i % len(GENERATED_ZONES)],
                    },
                },
                "spec": {},
                "status": {
                    "capacity": dict(resources),
                    "allocatable": dict(resources),
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    cpus = ("100m", "100m", "100m", "100m", "200m", "250m", "500m")
    memories = ("500Mi", "500Mi", "500Mi", "256Mi", "512Mi", "1Gi", "2Gi")
    width = max(len(str(pods - 1)), 1)
    for i in range(pods):
        spec: dict[str, Any] = {
            "schedulerName": "podium",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {
                        "requests": {"cpu": rng.choice(cpus), "memory": rng.choice(memories)}
                    },
                }
            ],
        }
        roll = rng.random()
        if roll < 0.05:
            spec["priority"] = 1000
        elif roll < 0.10:
            spec["nodeSelector"] = {ZONE_LABEL: rng.choice(GENERATED_ZONES)}
        out.pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"pod-{i:0{width}d}",
                    "namespace": "default",
                    "uid": f"simulated-pod-{i}",
                    "labels": {"app": f"app-{rng.randrange(20)}"},
                },
                "spec": spec,
                "status": {"phase": "Pending"},
            }
        )
    return out


# -- simulation ---------------------------------------------------------------------------
@dataclass(slots=True)
class SimPlacement:
    pod: str
    node: str
    total: int | None
    tied: bool
    priority: int
    requests: str


@dataclass(slots=True)
class SimFailure:
    pod: str
    message: str
    reasons: dict[str, int]
    priority: int
    requests: str


@dataclass(slots=True)
class SimulationResult:
    policy: str
    profile: Profile
    placements: list[SimPlacement]
    unschedulable: list[SimFailure]
    skipped: list[tuple[str, str]]
    snapshot: Snapshot
    placed_per_node: dict[str, int]
    elapsed: float
    passes: int

    def metrics(self) -> dict[str, Any]:
        return cluster_metrics(self)


def _requests(pod: PodInfo) -> str:
    """What the pod asks, with where pod-level or resize values came from."""
    return describe_requests(pod.requests, pod.request_sources, pod.qos)


def build_cache(nodes: Iterable[NodeInfo], bound: Iterable[PodInfo]) -> Cache:
    """A Cache holding the nodes and the bound, non-terminal pods."""
    cache = Cache()
    for node in nodes:
        cache.add_node(node)
    for pod in bound:
        if pod.bound and not pod.terminal:
            cache.add_pod(pod)
    return cache


def _with_uids(pods: Sequence[PodInfo], prefix: str) -> list[PodInfo]:
    seen: set[str] = set()
    for i, pod in enumerate(pods):
        if not pod.uid or pod.uid in seen:
            pod.uid = f"{prefix}-{i}-{pod.namespace}-{pod.name}"
        seen.add(pod.uid)
    return list(pods)


def split_pods(bodies: Iterable[Mapping[str, Any]]) -> tuple[list[PodInfo], list[PodInfo]]:
    """(bound and running, pending) pods; terminal ones count as neither."""
    bound: list[PodInfo] = []
    pending: list[PodInfo] = []
    for body in bodies:
        pod = parse_pod(body)
        if pod.terminal:
            continue
        (bound if pod.bound else pending).append(pod)
    return bound, pending


def queue_order(pods: Iterable[PodInfo]) -> list[PodInfo]:
    """activeQ order: higher priority first, then earlier creation, then input order."""
    return sorted(pods, key=lambda p: (-p.priority, p.created))


def simulate(
    profile: Profile,
    nodes: Sequence[NodeInfo],
    bound: Sequence[PodInfo],
    pending: Sequence[PodInfo],
    seed: int = 0,
    storage: Sequence[Mapping[str, Any]] = (),
    selectors: Sequence[Mapping[str, Any]] = (),
) -> SimulationResult:
    """Place ``pending`` one by one with the real algorithm, assuming each placement.

    A placed pod's chosen PVs are assumed bound to its claims, as PreBind would.
    ``selectors`` (Services and controllers) give default topology spreading its selector.
    """
    started = time.perf_counter()
    cache = build_cache(nodes, _with_uids(bound, "bound"))
    known = set(cache.pods)
    snapshot = Snapshot()
    snapshot.volumes.load(storage)
    snapshot.selectors.load(selectors)
    state = Scheduler(random.Random(seed))
    placements: list[SimPlacement] = []
    failures: dict[str, SimFailure] = {}
    skipped: list[tuple[str, str]] = []
    placed: Counter[str] = Counter()

    todo: list[PodInfo] = []
    for pod in queue_order(_with_uids(pending, "pending")):
        if pod.uid in known:
            skipped.append((pod.key, "already in the snapshot as a bound pod"))
        elif pod.deleting:
            skipped.append((pod.key, "being deleted"))
        elif pod.scheduling_gates:
            skipped.append((pod.key, f"scheduling gates: {', '.join(pod.scheduling_gates)}"))
        elif pod.problem:
            failures[pod.uid] = SimFailure(
                pod.key, f"invalid pod: {pod.problem}", {}, pod.priority, _requests(pod)
            )
        else:
            todo.append(pod)

    passes = 0
    while todo and passes < MAX_PASSES:
        passes += 1
        retry: list[PodInfo] = []
        for pod in todo:
            snapshot.update(cache)
            if len(snapshot) == 0:
                failures[pod.uid] = SimFailure(
                    pod.key, "no nodes available to schedule pods", {}, pod.priority, _requests(pod)
                )
                continue
            placement = schedule(profile, snapshot, pod, state)
            if not placement.node:
                diagnosis = placement.diagnosis
                assert diagnosis is not None
                failures[pod.uid] = SimFailure(
                    pod.key,
                    diagnosis.message(),
                    dict(diagnosis.reasons),
                    pod.priority,
                    _requests(pod),
                )
                retry.append(pod)
                continue
            failures.pop(pod.uid, None)
            totals = placement.totals
            tied = totals is not None and int(np.count_nonzero(totals == totals.max())) > 1
            best = int(totals.max()) if totals is not None else None
            placements.append(
                SimPlacement(pod.key, placement.node, best, tied, pod.priority, _requests(pod))
            )
            placed[placement.node] += 1
            cache.assume_pod(pod, placement.node)
            if pod_claims(pod) and volume_binding(profile) is not None:
                node = snapshot.nodes[snapshot.index[placement.node]]
                for claim, pv in plan_volumes(snapshot.volumes, pod, node).static:
                    snapshot.volumes.assume(claim, pv)
        if len(retry) == len(todo):
            break
        todo = retry
    snapshot.update(cache)
    return SimulationResult(
        policy=profile.policy or "<built-in>",
        profile=profile,
        placements=placements,
        unschedulable=list(failures.values()),
        skipped=skipped,
        snapshot=snapshot,
        placed_per_node=dict(placed),
        elapsed=time.perf_counter() - started,
        passes=passes,
    )


# -- metrics ------------------------------------------------------------------------------
def utilisation(snapshot: Snapshot) -> dict[str, np.ndarray]:
    """Per-node requested/allocatable for cpu, memory and the pod count, in 0..1+."""
    out: dict[str, np.ndarray] = {}
    for resource in ("cpu", "memory"):
        col = snapshot.resource_index[resource]
        alloc = snapshot.allocatable[:, col].astype(float)
        used = snapshot.requested[:, col].astype(float)
        out[resource] = np.divide(used, alloc, out=np.zeros_like(used), where=alloc > 0)
    pods = snapshot.pod_count.astype(float)
    limit = snapshot.max_pods.astype(float)
    out["pods"] = np.divide(pods, limit, out=np.zeros_like(pods), where=limit > 0)
    return out


def _std(values: Sequence[float] | np.ndarray) -> float:
    array = np.asarray(values, dtype=float)
    return float(array.std()) if array.size else 0.0


def cluster_metrics(result: SimulationResult) -> dict[str, Any]:
    snap = result.snapshot
    used = snap.pod_count > 0
    util = utilisation(snap)
    zones: Counter[str] = Counter()
    for i, node in enumerate(snap.nodes):
        zones[node.labels.get(ZONE_LABEL, "")] += int(snap.pod_count[i])
    metrics: dict[str, Any] = {
        "nodes": len(snap),
        "nodes_used": int(used.sum()),
        "pods_placed": len(result.placements),
        "pods_unschedulable": len(result.unschedulable),
        "pods_skipped": len(result.skipped),
        "placements_tied": sum(1 for p in result.placements if p.tied),
        "pods_per_node_stddev": round(_std(snap.pod_count), 3),
        "pods_per_zone_stddev": round(_std(list(zones.values())), 3),
        "zones": len(zones),
        "elapsed_seconds": round(result.elapsed, 3),
    }
    for resource in ("cpu", "memory", "pods"):
        values = util[resource]
        mean = float(values[used].mean()) if used.any() else 0.0
        metrics[f"{resource}_mean_utilisation_used_nodes"] = round(mean, 4)
        metrics[f"{resource}_max_utilisation"] = round(float(values.max()) if values.size else 0, 4)
    return metrics


def node_rows(result: SimulationResult) -> list[dict[str, Any]]:
    snap = result.snapshot
    util = utilisation(snap)
    rows: list[dict[str, Any]] = []
    for i, name in enumerate(snap.names):
        rows.append(
            {
                "node": name,
                "zone": snap.nodes[i].labels.get(ZONE_LABEL, ""),
                "cpu": round(float(util["cpu"][i]), 4),
                "memory": round(float(util["memory"][i]), 4),
                "pods": int(snap.pod_count[i]),
                "max_pods": int(snap.max_pods[i]),
                "placed": result.placed_per_node.get(name, 0),
            }
        )
    rows.sort(key=lambda r: r["node"])
    return rows


def result_dict(result: SimulationResult) -> dict[str, Any]:
    return {
        "policy": result.policy,
        "schedulerName": result.profile.scheduler_name,
        "metrics": result.metrics(),
        "placements": [
            {"pod": p.pod, "node": p.node, "score": p.total, "tied": p.tied, "requests": p.requests}
            for p in result.placements
        ],
        "unschedulable": [
            {"pod": f.pod, "message": f.message, "reasons": f.reasons, "requests": f.requests}
            for f in result.unschedulable
        ],
        "skipped": [{"pod": pod, "why": why} for pod, why in result.skipped],
        "nodeUtilisation": node_rows(result),
    }


_COMPARE_METRICS = (
    ("pods_placed", "pods placed"),
    ("pods_unschedulable", "pods unschedulable"),
    ("nodes_used", "nodes used"),
    ("cpu_mean_utilisation_used_nodes", "cpu mean utilisation (used nodes)"),
    ("cpu_max_utilisation", "cpu max utilisation"),
    ("memory_mean_utilisation_used_nodes", "memory mean utilisation (used nodes)"),
    ("memory_max_utilisation", "memory max utilisation"),
    ("pods_mean_utilisation_used_nodes", "pod slots mean utilisation (used nodes)"),
    ("pods_per_node_stddev", "pods per node, stddev"),
    ("pods_per_zone_stddev", "pods per zone, stddev"),
    ("placements_tied", "placements decided by a tie"),
    ("elapsed_seconds", "simulation seconds"),
)


def compare_rows(a: SimulationResult, b: SimulationResult) -> list[tuple[str, Any, Any]]:
    ma, mb = a.metrics(), b.metrics()
    return [(label, ma[key], mb[key]) for key, label in _COMPARE_METRICS]


def differing_placements(a: SimulationResult, b: SimulationResult) -> int:
    where_a = {p.pod: p.node for p in a.placements}
    where_b = {p.pod: p.node for p in b.placements}
    return sum(1 for pod in set(where_a) | set(where_b) if where_a.get(pod) != where_b.get(pod))


# -- output -------------------------------------------------------------------------------
def _pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    body = [[str(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in body:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in body:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return lines


def format_result(result: SimulationResult, pending: int) -> str:
    m = result.metrics()
    rate = len(result.placements) / result.elapsed if result.elapsed > 0 else math.inf
    lines = [
        f"Policy {result.policy} (schedulerName {result.profile.scheduler_name}): "
        f"{pending} pods onto {m['nodes']} nodes in {result.elapsed:.2f}s "
        f"({rate:,.0f} placements/s, {result.passes} pass(es))",
        f"Placed {m['pods_placed']}, unschedulable {m['pods_unschedulable']}, "
        f"skipped {m['pods_skipped']}.",
        "",
    ]
    if len(result.placements) <= PLACEMENT_ROWS:
        lines.append("PLACEMENTS")
        lines += _table(
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
        lines += _table(("POD", "REQUESTS", "WHY"), ((f.pod, f.requests, f.message) for f in shown))
        if len(result.unschedulable) > len(shown):
            lines.append(f"... and {len(result.unschedulable) - len(shown)} more (-o json)")
    if result.skipped:
        lines += ["", f"SKIPPED ({len(result.skipped)})"]
        lines += _table(("POD", "WHY"), result.skipped[:PLACEMENT_ROWS])
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
    lines += _table(
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
    lines = _table(("METRIC", name_a, name_b), rows)
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


# -- command ------------------------------------------------------------------------------
def _inputs(
    args: argparse.Namespace,
) -> tuple[list[NodeInfo], list[PodInfo], list[PodInfo], ClusterObjects]:
    if args.snapshot:
        objects = load_objects(args.snapshot)
        if not objects.nodes:
            raise SimulateError("the snapshot has no Node objects")
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
            from podium.report import check_available

            check_available(args.report)
        nodes, bound, pending, objects = _inputs(args)
        if args.compare:
            profiles = [load_policy(path) for path in args.compare]
        else:
            profiles = [load_policy(args.policy)]
        results = [
            simulate(
                profile,
                nodes,
                [_copy(p) for p in bound],
                [_copy(p) for p in pending],
                seed=args.seed,
                storage=objects.storage,
                selectors=objects.selectors,
            )
            for profile in profiles
        ]
        if args.report:
            from podium.report import write_report

            write_report(args.report, results)
    except SimulateError as exc:
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


def _copy(pod: PodInfo) -> PodInfo:
    return replace(pod)
