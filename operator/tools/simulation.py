"""Placing pending pods one by one with the real algorithm, in memory, and measuring the result.

No API server is involved: pods are placed in queue order (higher priority
first, then earlier creation) with ``podium.framework.cycle.schedule`` and assumed
in the Cache, so each pod sees the ones placed before it, exactly as the live
scheduler's cycles do. Left out, by design: binding latency, watch lag,
retries after cluster events other than the simulated placements themselves,
and preemption (no pod is ever evicted).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from podium.algorithms.dynamic_resources.plugin import dynamic_resources, plan_claims
from podium.algorithms.volume_binding import plan_volumes, volume_binding
from podium.framework.cycle import Scheduler, schedule
from podium.framework.plugin import PluginError
from podium.framework.profile import Profile
from podium.kube.objects import NodeInfo, PodInfo, parse_pod
from podium.kube.resources import request_sources
from podium.state.snapshot import Snapshot, build_snapshot
from podium.state.volumes import pod_claims
from podium.tools.requests_text import describe_requests

ZONE_LABEL = "topology.kubernetes.io/zone"


# Retry passes over unschedulable pods; only placements change the cluster, so
# a pass that places nothing ends the simulation.
MAX_PASSES = 10


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
    raw = pod.raw
    sources = request_sources(raw.get("spec") or {}, raw.get("status") or {}, pod.bound)
    return describe_requests(pod.requests, sources, pod.qos)


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

    A placed pod's chosen PVs are assumed bound to its claims, and its ResourceClaims'
    devices taken, as PreBind would.
    ``selectors`` (Services and controllers) give default topology spreading its selector.
    """
    started = time.perf_counter()
    cache, snapshot = build_snapshot(
        nodes, _with_uids(bound, "bound"), storage=storage, selectors=selectors
    )
    known = set(cache.pods)
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
            try:
                placement = schedule(profile, snapshot, pod, state)
            except PluginError as exc:  # an allocator error aborts the attempt
                failures[pod.uid] = SimFailure(pod.key, str(exc), {}, pod.priority, _requests(pod))
                continue
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
            dra = dynamic_resources(profile) if pod.resource_claims else None
            if dra is not None:  # its devices are taken for the pods after it
                row = snapshot.index[placement.node]
                plan = plan_claims(dra, snapshot.dra, pod, snapshot.nodes[row], row)
                for resource_claim, allocation in plan.items:
                    if allocation is not None:
                        snapshot.dra.assume(resource_claim, allocation, pod.uid)
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
