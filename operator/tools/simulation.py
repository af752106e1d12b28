"""Placing pending pods one by one with the real algorithm, in memory, and measuring the result.

No API server is involved: pods are placed in queue order (higher priority
first, then earlier creation) with ``podium.framework.cycle.schedule`` and assumed
in the Cache, so each pod sees the ones placed before it, exactly as the live
scheduler's cycles do. Left out, by design: binding latency, watch lag,
retries after cluster events other than the simulated placements themselves.
A pod or PodGroup that fits nowhere preempts as the profile's DefaultPreemption would,
its victims evicted at once (``sim_preemption.py``).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from podium.algorithms.dynamic_resources.extended import uses_dra
from podium.algorithms.dynamic_resources.group import GroupClaims
from podium.algorithms.dynamic_resources.plugin import dynamic_resources, plan_claims
from podium.algorithms.volume_binding import plan_volumes, volume_binding
from podium.framework.cycle import Placement, Scheduler, schedule
from podium.framework.extension import FailedGroup
from podium.framework.plugin import PluginError
from podium.framework.podgroup import (
    GROUP_ERROR,
    Board,
    GroupOutcome,
    group_unschedulable,
    place_group,
    validate_group,
    waiting_reason,
)
from podium.framework.profile import Profile
from podium.framework.queued import QueuedPod
from podium.kube.objects import NodeInfo, PodInfo, parse_pod
from podium.kube.pdb import Pdb
from podium.kube.resources import request_sources
from podium.state.cache import Cache
from podium.state.podgroups import PodGroup, parse_pod_group
from podium.state.snapshot import Snapshot, build_snapshot
from podium.state.volumes import pod_claims
from podium.tools.requests_text import describe_requests
from podium.tools.sim_preemption import Evictions, Nominated, SimEviction

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
class GangCount:
    """One PodGroup after the simulation: members it needs, has placed, and cpu they hold."""

    required: int
    placed: int = 0
    held_cpu: int = 0  # millicpu of the members placed in this simulation

    @property
    def partial(self) -> bool:
        return 0 < self.placed < self.required


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
    gangs: dict[str, GangCount] = field(default_factory=dict)
    evicted: list[SimEviction] = field(default_factory=list)

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
    pod_groups: Sequence[Mapping[str, Any]] = (),
    pdbs: Sequence[Pdb] = (),
) -> SimulationResult:
    """Place ``pending`` one by one with the real algorithm, assuming each placement.

    A placed pod's chosen PVs are assumed bound to its claims, and its ResourceClaims'
    devices taken, as PreBind would.
    ``selectors`` (Services and controllers) give default topology spreading its selector.
    With ``pod_groups`` and a profile with gang scheduling, a group's members are placed
    together by the live scheduler's pod-group cycle, all or none; without gang
    scheduling they are placed one by one, as a scheduler that ignores groups would.
    A pod that fits nowhere preempts lower-priority pods where the profile preempts,
    within ``pdbs`` where it can; the evicted pods are reported, not placed again.
    """
    groups = {g.key: g for g in (parse_pod_group(body) for body in pod_groups)}
    started = time.perf_counter()
    cache, snapshot = build_snapshot(
        nodes, _with_uids(bound, "bound"), storage=storage, selectors=selectors
    )
    known = set(cache.pods)
    state = Scheduler(random.Random(seed))
    evictions = Evictions(cache, pdbs, groups)
    placements: dict[str, SimPlacement] = {}  # by uid, in placement order
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
        tried: set[str] = set()
        for pod in todo:
            if profile.gang_scheduling and pod.pod_group:
                if pod.group_key not in tried:
                    tried.add(pod.group_key)
                    members = [p for p in todo if p.group_key == pod.group_key and p.pod_group]
                    group = groups.get(pod.group_key)
                    for member, target, why in _place_group(
                        profile, state, cache, snapshot, group, members, evictions
                    ):
                        if target:
                            failures.pop(member.uid, None)
                            placements[member.uid] = SimPlacement(
                                member.key,
                                target,
                                None,
                                False,
                                member.priority,
                                _requests(member),
                            )
                            placed[target] += 1
                        else:
                            failures[member.uid] = SimFailure(
                                member.key, why, {}, member.priority, _requests(member)
                            )
                            retry.append(member)
                continue
            snapshot.update(cache)
            if len(snapshot) == 0:
                failures[pod.uid] = SimFailure(
                    pod.key, "no nodes available to schedule pods", {}, pod.priority, _requests(pod)
                )
                continue
            try:
                placement = schedule(profile, snapshot, pod, state)
                if not placement.node:
                    placement = _preempt(profile, state, snapshot, cache, evictions, pod, placement)
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
            placements[pod.uid] = SimPlacement(
                pod.key, placement.node, best, tied, pod.priority, _requests(pod)
            )
            placed[placement.node] += 1
            cache.assume_pod(pod, placement.node)
            if pod_claims(pod) and volume_binding(profile) is not None:
                node = snapshot.nodes[snapshot.index[placement.node]]
                for claim, pv in plan_volumes(snapshot.volumes, pod, node).static:
                    snapshot.volumes.assume(claim, pv)
            dra = dynamic_resources(profile) if uses_dra(snapshot.dra, pod) else None
            if dra is not None:  # its devices are taken for the pods after it
                row = snapshot.index[placement.node]
                plan = plan_claims(dra, snapshot.dra, pod, snapshot.nodes[row], row)
                for resource_claim, allocation in plan.in_flight:
                    snapshot.dra.assume(resource_claim, allocation, pod.uid)
        if len(retry) == len(todo):
            break
        todo = retry
    snapshot.update(cache)
    for eviction in evictions.evicted:  # a pod placed here and evicted later is not placed
        if placements.pop(eviction.uid, None) is not None:
            placed[eviction.node] -= 1
            if not placed[eviction.node]:
                del placed[eviction.node]
    gangs: dict[str, GangCount] = {}
    for key, group in groups.items():
        gangs[key] = GangCount(group.required)
    for state_pod in cache.pods.values():
        count = gangs.get(state_pod.pod.group_key) if state_pod.pod.pod_group else None
        if count is not None:
            count.placed += 1
            if state_pod.assumed:
                count.held_cpu += state_pod.pod.requests.get("cpu", 0)
    return SimulationResult(
        policy=profile.policy or "<built-in>",
        profile=profile,
        placements=list(placements.values()),
        unschedulable=list(failures.values()),
        skipped=skipped,
        snapshot=snapshot,
        placed_per_node=dict(placed),
        elapsed=time.perf_counter() - started,
        passes=passes,
        gangs=gangs,
        evicted=evictions.evicted,
    )


def _preempt(
    profile: Profile,
    state: Scheduler,
    snapshot: Snapshot,
    cache: Cache,
    evictions: Evictions,
    pod: PodInfo,
    failed: Placement,
) -> Placement:
    """PostFilter for a pod that fits nowhere: with victims evicted, its next attempt,
    its nominated node tried first; otherwise the failed placement with the
    "preemption: ..." reason the live message carries."""
    diagnosis = failed.diagnosis
    assert diagnosis is not None
    result, evicted = evictions.preempt_pod(profile, snapshot, pod, diagnosis, state.rng)
    if result is None:
        return failed
    if not evicted:
        diagnosis.post_filter_msg = result.message
        return failed
    assert result.candidate is not None
    snapshot.update(cache)
    return schedule(profile, snapshot, pod, state, nominated_node=result.candidate.node)


def _place_group(
    profile: Profile,
    state: Scheduler,
    cache: Cache,
    snapshot: Snapshot,
    group: PodGroup | None,
    members: list[PodInfo],
    evictions: Evictions,
) -> list[tuple[PodInfo, str, str]]:
    """One pod-group cycle: (member, node or '', why not) for each member. A gang that
    fits nowhere preempts as a unit (PodGroupPostFilter), and the cycle after its
    evictions tries each member's nominated node first."""
    name = members[0].pod_group
    scheduled = [
        s.pod
        for s in cache.pods.values()
        if s.pod.pod_group and s.pod.group_key == members[0].group_key
    ]
    waiting = waiting_reason(group, name, len(members) + len(scheduled))
    if group is None or waiting:
        return [(m, "", waiting) for m in members]
    invalid = validate_group(group, members, scheduled)
    if invalid:
        return [(m, "", invalid) for m in members]
    snapshot.update(cache)
    entries = [QueuedPod(m) for m in members]
    outcome, condition = _group_cycle(profile, state, cache, snapshot, group, entries, scheduled)
    if not outcome.success:
        failed = FailedGroup(profile, group, entries, scheduled, Board(state, cache, snapshot))
        result, evicted = evictions.preempt_group(failed)
        if result is not None:
            condition = f"{outcome.status_message()}, {result.message}"
        if evicted:
            assert result is not None
            snapshot.update(cache)
            nominated = Nominated(cache, members, result.nominations)
            outcome, condition = _group_cycle(
                profile, state, cache, snapshot, group, entries, scheduled, nominated
            )
    out = []
    for entry, placement in outcome.placements:
        if placement is None:
            out.append((entry.pod, "", outcome.status_message()))
        elif placement.node and outcome.success:
            out.append((entry.pod, placement.node, ""))
        elif placement.node:
            out.append((entry.pod, "", f"{GROUP_ERROR}, {condition}"))
        else:
            assert placement.diagnosis is not None
            out.append((entry.pod, "", placement.diagnosis.message()))
    return out


def _group_cycle(
    profile: Profile,
    state: Scheduler,
    cache: Cache,
    snapshot: Snapshot,
    group: PodGroup,
    entries: list[QueuedPod],
    scheduled: list[PodInfo],
    nominated: Nominated | None = None,
) -> tuple[GroupOutcome, str]:
    """place_group on the simulated cluster, each member's devices held for the next
    member and, once placed, for later pods; with the condition's message if it failed."""
    claims = GroupClaims(snapshot.dra, snapshot, dynamic_resources(profile))
    board = Board(
        state, cache, snapshot, nominated, reserve=claims.reserve, unreserve=claims.unreserve
    )
    outcome = place_group(board, profile, group, entries, scheduled)
    condition = "" if outcome.success else group_unschedulable(outcome, profile.preemption)
    return outcome, condition


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
        "pods_evicted": len(result.evicted),
        "placements_tied": sum(1 for p in result.placements if p.tied),
        "pods_per_node_stddev": round(_std(snap.pod_count), 3),
        "pods_per_zone_stddev": round(_std(list(zones.values())), 3),
        "zones": len(zones),
        "elapsed_seconds": round(result.elapsed, 3),
        "gangs": len(result.gangs),
        "gangs_placed": sum(1 for g in result.gangs.values() if g.placed >= g.required),
        "gangs_waiting": sum(1 for g in result.gangs.values() if g.placed < g.required),
        "gangs_partial": sum(1 for g in result.gangs.values() if g.partial),
        "cpu_held_by_partial_gangs": sum(g.held_cpu for g in result.gangs.values() if g.partial),
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
        "evicted": [
            {"pod": e.pod, "node": e.node, "priority": e.priority, "preemptor": e.preemptor}
            for e in result.evicted
        ],
        "nodeUtilisation": node_rows(result),
    }


_COMPARE_METRICS = (
    ("pods_placed", "pods placed"),
    ("pods_unschedulable", "pods unschedulable"),
    ("pods_evicted", "pods evicted by preemption"),
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
_GANG_METRICS = (
    ("gangs_placed", "gangs placed whole"),
    ("gangs_waiting", "gangs waiting"),
    ("gangs_partial", "gangs partly placed"),
    ("cpu_held_by_partial_gangs", "cpu (m) held idle by partial gangs"),
)


def compare_rows(a: SimulationResult, b: SimulationResult) -> list[tuple[str, Any, Any]]:
    ma, mb = a.metrics(), b.metrics()
    metrics = _COMPARE_METRICS + (_GANG_METRICS if ma["gangs"] or mb["gangs"] else ())
    return [(label, ma[key], mb[key]) for key, label in metrics]


def differing_placements(a: SimulationResult, b: SimulationResult) -> int:
    where_a = {p.pod: p.node for p in a.placements}
    where_b = {p.pod: p.node for p in b.placements}
    return sum(1 for pod in set(where_a) | set(where_b) if where_a.get(pod) != where_b.get(pod))
