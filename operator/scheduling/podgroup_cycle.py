"""The pod-group cycle: a PodGroup's members are placed together, bound all or none.

kube-scheduler v1.37 with the GenericWorkload gate (``gangscheduling.go`` and
``schedule_one_podgroup.go``) is the reference:

- PreEnqueue: a member waits, with no condition or Event, while its PodGroup is missing
  or (gang policy) the group has fewer pods than ``minCount``.
- The cycle takes every queued member, places them one by one on the snapshot,
  assuming each placed member so the next sees it, and checks after each whether
  ``minCount`` (1 for a basic group) can still be met (PlacementFeasible). On success
  the assumed members are bound; otherwise every assumption is reverted and no member
  is bound: no partial gang ever holds resources.
- The PodGroup's ``PodGroupInitiallyScheduled`` condition gets Go's reason and message.

All assumptions happen in one synchronous step, before any bind starts, so no other
pod's cycle can interleave with a half-placed group, and no member ever waits at Permit
for the rest: kube-scheduler's 5-minute Permit timeout has nothing to time out.
Group preemption is not done: an unschedulable group reports that no victims were found.
"""

from __future__ import annotations

import json
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from podium.algorithms.dynamic_resources.plugin import ClaimPlan
from podium.algorithms.volume_binding import (
    PodClaims,
    VolumePlan,
    pod_volume_claims,
    volume_binding,
)
from podium.framework.cycle import Placement, Scheduler
from podium.kube.client import ApiError
from podium.kube.objects import PodInfo
from podium.scheduling.nominator import Nominator
from podium.scheduling.queue import GANG, QueuedPod
from podium.state.cache import Cache
from podium.state.podgroups import INITIALLY_SCHEDULED, WORKLOAD_API, PodGroup
from podium.state.snapshot import Snapshot

if TYPE_CHECKING:
    from podium.framework.profile import Profile
    from podium.scheduling.binder import Binder
    from podium.scheduling.queue import SchedulingQueue
    from podium.state.podgroups import PodGroupStore
    from podium.state.volumes import VolumeStore

__all__ = [
    "GroupHost",
    "GroupOutcome",
    "group_unschedulable",
    "pre_enqueue",
    "schedule_group",
]

log = structlog.get_logger("podium.scheduling.podgroup")

GROUP_ERROR = "pod group is unschedulable"
NO_VICTIMS = "pod group preemption: No preemption victims found for incoming preemptor"
DRY_RUN = "SchedulerPolicy"  # what a dry-run decision waits for, as in schedule_one
CLAIMS_UNSUPPORTED = "pod group members with ResourceClaims are not supported by Podium yet"
VOLUMES_UNSUPPORTED = (
    "pod group members with unbound PersistentVolumeClaims are not supported by Podium yet"
)
MIN_COUNT_WAIT = "waiting for minCount pods from a gang to appear in scheduling queue"


class GroupHost(Protocol):
    """What a pod-group cycle uses of the scheduler that runs it (PodiumScheduler).

    The cycle decides; the scheduler owns the state it decides on and how a member's
    failure is reported and its bind carried out. Spelled out here so that this module
    needs nothing of the scheduler's own.
    """

    pod_groups: PodGroupStore
    queue: SchedulingQueue
    cache: Cache
    snapshot: Snapshot
    nominator: Nominator
    algorithm: Scheduler
    volumes: VolumeStore
    binder: Binder

    def fail(
        self,
        entry: QueuedPod,
        reason: str,
        message: str,
        *,
        rejected_by: frozenset[str] = ...,
        error: bool = ...,
        profile: Profile | None = ...,
        elapsed: float = ...,
        reasons: list[str] | None = ...,
        placement: Placement | None = ...,
    ) -> None:
        """Requeue a member, and report why it was not scheduled."""

    def record(
        self, entry: QueuedPod, profile: Profile | None, placement: Placement | None
    ) -> dict[str, Any] | None:
        """The member's decision record, or None when the policy turned records off."""

    def spawn(self, coro: Coroutine[Any, Any, object]) -> None:
        """Run ``coro`` in the background, kept until it ends."""

    def start_bind(
        self,
        entry: QueuedPod,
        node: str,
        profile: Profile,
        started: float,
        record: dict[str, Any] | None,
        plan: VolumePlan,
        claims: ClaimPlan,
    ) -> None:
        """Bind a placed (and assumed) member in the background, counted in flight."""


def _go_quote(text: str) -> str:
    return json.dumps(text)


def group_members(sched: GroupHost, pod: PodInfo) -> tuple[list[QueuedPod], list[PodInfo]]:
    """The group's pods in the queue, and those assumed or bound (Go's scheduled pods)."""
    uids = sched.pod_groups.member_uids(pod.group_key)
    entries, placed = sched.queue.entries, sched.cache.pods
    queued = [entries[uid] for uid in uids if uid in entries]
    scheduled = [placed[uid].pod for uid in uids if uid in placed]
    return queued, scheduled


def waiting_reason(group: PodGroup | None, name: str, members: int) -> str:
    """GangScheduling's PreEnqueue for a group of ``members`` known pods: '' or why they wait."""
    if group is None:
        return f"waiting for pods's pod group {_go_quote(name)} to appear in scheduling queue"
    if group.gang and members < group.required:
        return MIN_COUNT_WAIT
    return ""


def pre_enqueue(sched: GroupHost, pod: PodInfo) -> str:
    """GangScheduling's PreEnqueue: '' when the pod may be scheduled, else why it waits."""
    group = sched.pod_groups.get(pod.namespace, pod.pod_group)
    queued, scheduled = group_members(sched, pod) if group is not None else ([], [])
    return waiting_reason(group, pod.pod_group, len(queued) + len(scheduled))


@dataclass(slots=True)
class GroupOutcome:
    """What one pod-group cycle decided: who is placed where, and the group's status."""

    placements: list[tuple[QueuedPod, Placement | None]] = field(default_factory=list)
    success: bool = False
    # The status's reason and whether it carries errPodGroupUnschedulable (in front).
    message: str = ""
    with_error: bool = False

    def status_message(self) -> str:
        """Go's Status.Message: the error, then the reason."""
        return ", ".join(
            ([GROUP_ERROR] if self.with_error else []) + [self.message] * bool(self.message)
        )

    def as_error(self) -> str:
        """Go's Status.AsError().Error(): the error alone when there is one."""
        return GROUP_ERROR if self.with_error else self.message


def _feasibility(required: int, scheduled: int, remaining: int) -> tuple[str, str]:
    """GangScheduling's PlacementFeasible: ('ok'|'wait'|'unschedulable', message)."""
    counts = f"{scheduled} scheduled, {remaining} remaining"
    if remaining + scheduled < required:
        return "unschedulable", f"minCount ({required}) cannot be satisfied: {counts}"
    if scheduled < required:
        return "wait", f"minCount ({required}) is not yet satisfied: {counts}"
    return "ok", ""


def validate_group(group: PodGroup, queued: list[PodInfo], scheduled: list[PodInfo]) -> str:
    """Go's validatePodGroup: '' or why the group cannot be scheduled at all.

    Every member (queued, then scheduled) needs the first queued member's schedulerName
    and preemption policy, and the PodGroup's priority.
    """
    if not queued:
        return ""
    scheduler, policy = queued[0].scheduler_name, queued[0].preemption_policy
    for pod in [*queued, *scheduled]:
        if pod.scheduler_name != scheduler:
            return (
                "all pods in a single pod group should have the same .spec.schedulerName set, "
                f"got: {_go_quote(pod.scheduler_name)} and {_go_quote(scheduler)}"
            )
        if pod.priority != group.priority:
            return (
                "all pods in a single pod group should have the same priority as the pod "
                f"group's priority, got {pod.priority} and {group.priority}"
            )
        if pod.preemption_policy != policy:
            return (
                "all pods in a single pod group should have the same preemption policy, "
                f"got {pod.preemption_policy} and {policy}"
            )
    return ""


@dataclass(slots=True)
class Board:
    """What a pod-group cycle places members on: the live scheduler's, or a tool's copy."""

    algorithm: Scheduler
    cache: Cache
    snapshot: Snapshot
    nominator: Nominator | None = None
    # A trial's nodes (Go's AssumePlacement): candidates only, the cluster stays visible.
    placement: frozenset[str] | None = None

    def restricted(self, names: list[str]) -> Board:
        return replace(self, placement=frozenset(names))


def place_group(
    board: Board,
    profile: Profile,
    group: PodGroup,
    entries: list[QueuedPod],
    already_scheduled: list[PodInfo],
) -> GroupOutcome:
    """Place the group, with TopologyAware placements when the profile asks for them.

    On success the placed members are assumed in the cache for their binds.
    """
    if not profile.topology_aware_workloads:
        return place_members(board, profile, group, entries, len(already_scheduled))
    placements = generate_placements(board.snapshot, group, already_scheduled)
    results: list[GroupOutcome] = []
    for nodes in placements.values():
        trial = board.restricted(nodes)
        outcome = place_members(trial, profile, group, entries, len(already_scheduled))
        _revert(board, outcome)  # each trial starts from the same cluster
        results.append(outcome)
    feasible = [r for r in results if r.success]
    if not feasible:
        first = results[0] if results else GroupOutcome(placements=[(e, None) for e in entries])
        return GroupOutcome(
            placements=first.placements,
            message=(
                f"0/{len(placements)} placements are available, "
                f"first placement status: {first.as_error()}"
            ),
            with_error=True,
        )

    # PodGroupPodsCount: the placement placing the most members; ties at random, as Go.
    def placed(result: GroupOutcome) -> int:
        return sum(1 for _, p in result.placements if p is not None and p.node)

    most = max(placed(r) for r in feasible)
    best = board.algorithm.rng.choice([r for r in feasible if placed(r) == most])
    for entry, placement in best.placements:
        if placement is not None and placement.node:
            board.cache.assume_pod(entry.pod, placement.node)
    board.snapshot.update(board.cache)
    return best


def _revert(board: Board, outcome: GroupOutcome) -> None:
    """Forget what a successful trial assumed (a failed one already reverted itself)."""
    if outcome.success:
        for entry, placement in outcome.placements:
            if placement is not None and placement.node:
                board.cache.forget_pod(entry.pod)
        board.snapshot.update(board.cache)


def generate_placements(
    snapshot: Snapshot, group: PodGroup, scheduled: list[PodInfo]
) -> dict[str, list[str]]:
    """TopologyPlacementGenerator: one placement per domain of the group's topology key
    (only the domain of members already scheduled), or one of every node without a key."""
    if not group.topology_key:
        return {"": list(snapshot.names)}
    key = group.topology_key
    required = {
        snapshot.nodes[snapshot.index[p.node_name]].labels.get(key)
        for p in scheduled
        if p.node_name in snapshot.index
    }
    out: dict[str, list[str]] = {}
    for name, node in zip(snapshot.names, snapshot.nodes, strict=True):
        domain = node.labels.get(key)
        if domain is not None and (not required or domain in required):
            out.setdefault(domain, []).append(name)
    return dict(sorted(out.items()))


def place_members(
    board: Board,
    profile: Profile,
    group: PodGroup,
    entries: list[QueuedPod],
    already_scheduled: int,
) -> GroupOutcome:
    """Place the members on the snapshot, assuming each; revert all unless the group fits.

    On success the placed members stay assumed in ``cache``.
    """
    outcome = GroupOutcome()
    required = group.required
    scheduled, remaining = already_scheduled, len(entries)
    verdict, message = _feasibility(required, scheduled, remaining)
    if verdict == "unschedulable":
        outcome.message, outcome.with_error = message, True
        outcome.placements = [(e, None) for e in entries]
        return outcome
    assumed: list[PodInfo] = []
    any_scheduled = False
    cache, snapshot, nominator = board.cache, board.snapshot, board.nominator
    snapshot.update(cache)
    for entry in entries:
        pod = entry.pod
        placement = board.algorithm.schedule(
            profile,
            snapshot,
            pod,
            record=profile.record_decisions and profile.record_top_nodes > 0,
            nominated=nominator.by_node if nominator is not None else None,
            nominated_node=nominator.node_of(pod.uid) if nominator is not None else "",
            within=board.placement,
        )
        outcome.placements.append((entry, placement))
        remaining -= 1
        if placement.node:
            cache.assume_pod(pod, placement.node)
            snapshot.update(cache)
            assumed.append(pod)
            scheduled += 1
        verdict, message = _feasibility(required, scheduled, remaining)
        if verdict == "unschedulable":
            break
        any_scheduled = any_scheduled or bool(placement.node)
    outcome.placements += [(e, None) for e in entries[len(outcome.placements) :]]
    outcome.success = verdict == "ok" and any_scheduled
    if verdict == "ok" and not any_scheduled:
        outcome.message, outcome.with_error = "", True
    else:
        outcome.message, outcome.with_error = message, verdict == "wait"
    if not outcome.success:
        for pod in reversed(assumed):
            cache.forget_pod(pod)
        snapshot.update(cache)
    return outcome


def validate_members(sched: GroupHost, profile: Profile, live: list[QueuedPod]) -> str:
    """Members whose devices or volumes would have to be held in flight from one member's
    placement to the next: until the cycle does that, such a group fails loudly rather
    than risk binding a part of it."""
    if any(m.pod.resource_claims for m in live):
        return CLAIMS_UNSUPPORTED
    if volume_binding(profile) is not None:
        for member in live:
            claims = pod_volume_claims(sched.volumes, member.pod)
            if isinstance(claims, PodClaims) and claims.delayed:
                return VOLUMES_UNSUPPORTED
    return ""


def group_unschedulable(outcome: GroupOutcome, preemption: bool) -> str:
    """The PodGroup condition's message for a failed cycle.

    Go appends each PodGroupPostFilter plugin's reason: DefaultPreemption's (when the
    profile preempts) and DynamicResources' empty one when it is the only one.
    """
    return f"{outcome.status_message()}, {NO_VICTIMS if preemption else ''}"


def schedule_group(sched: GroupHost, entry: QueuedPod, profile: Profile) -> None:
    """Run one pod-group cycle for the group of the popped member ``entry``."""
    started = time.perf_counter()
    pod = entry.pod
    waiting = pre_enqueue(sched, pod)
    if waiting:
        log.debug("pod_group_waiting", pod=pod.name, namespace=pod.namespace, reason=waiting)
        sched.queue.requeue(entry, rejected_by=frozenset({GANG}))
        return
    group = sched.pod_groups.get(pod.namespace, pod.pod_group)
    assert group is not None
    queued, scheduled = group_members(sched, pod)
    entries = [entry]
    for other in queued:
        if other is not entry and not other.pod.scheduling_gates:
            taken = sched.queue.take(other.pod.uid)
            if taken is not None:
                entries.append(taken)
    spawned: set[str] = set()
    try:
        _decide(sched, profile, group, entries, scheduled, started, spawned)
    except Exception:
        # Nothing this cycle took or assumed may be left behind: the worker fails the
        # popped entry; every other member not yet bound is forgotten and failed here.
        for member in entries:
            uid = member.pod.uid
            if uid in spawned:
                continue
            if sched.cache.is_assumed(uid):
                sched.cache.forget_pod(member.pod)
            if member is not entry and member.where == "in_flight":
                sched.fail(member, "SchedulerError", "pod group cycle failed", error=True)
        raise


def _decide(
    sched: GroupHost,
    profile: Profile,
    group: PodGroup,
    entries: list[QueuedPod],
    scheduled: list[PodInfo],
    started: float,
    spawned: set[str],
) -> None:
    """Validate, place and bind (or fail) the taken members; ``spawned`` gets the uids
    whose binds are started, all at once after every bind was prepared."""
    live: list[QueuedPod] = []
    for member in entries:
        if member.pod.deleting:
            sched.queue.done(member.pod.uid)
        else:
            live.append(member)
    live.sort(key=lambda e: (-e.pod.priority, e.pod.created, e.pod.name))
    invalid = validate_group(group, [m.pod for m in live], scheduled)
    invalid = invalid or validate_members(sched, profile, live)
    if invalid:
        for member in live:
            sched.fail(member, "SchedulerError", invalid, error=True, profile=profile)
        log.info("pod_group_invalid", pod_group=group.key, message=invalid)
        _write(
            sched,
            profile,
            group,
            {"status": "False", "reason": "SchedulerError", "message": invalid},
        )
        return
    sched.snapshot.update(sched.cache)
    if len(sched.snapshot) == 0:
        for member in live:
            sched.fail(
                member,
                "Unschedulable",
                "no nodes available to schedule pods",
                rejected_by=frozenset({"NodeName"}),
                profile=profile,
            )
        return
    board = Board(sched.algorithm, sched.cache, sched.snapshot, sched.nominator)
    outcome = place_group(board, profile, group, live, scheduled)
    elapsed = time.perf_counter() - started
    if profile.dry_run:  # decided, never bound: members wait as schedule_one's dry run does
        for member, placement in outcome.placements:
            if outcome.success and placement is not None and placement.node:
                sched.cache.forget_pod(member.pod)
            sched.queue.requeue(member, rejected_by=frozenset({DRY_RUN}))
        log.info(
            "dry_run_pod_group",
            pod_group=group.key,
            result="scheduled" if outcome.success else "unschedulable",
            nodes={m.pod.name: p.node for m, p in outcome.placements if p is not None and p.node},
            duration_ms=round(elapsed * 1000, 3),
        )
        return
    condition_message = ""
    if not outcome.success:
        condition_message = group_unschedulable(outcome, profile.preemption)
    binds = [
        (member, placement.node, sched.record(member, profile, placement))
        for member, placement in outcome.placements
        if outcome.success and placement is not None and placement.node
    ]
    for member, node, record in binds:  # nothing here raises: all binds or none start
        sched.nominator.remove(member.pod.uid)
        spawned.add(member.pod.uid)
        # Members with claims or unbound volumes never get here (validate_members).
        sched.start_bind(member, node, profile, started, record, VolumePlan(), ClaimPlan())
    for member, placement in outcome.placements:
        if outcome.success and placement is not None and placement.node:
            continue
        if placement is not None and not placement.node:
            diagnosis = placement.diagnosis
            assert diagnosis is not None
            sched.fail(
                member,
                "Unschedulable",
                diagnosis.message(),
                rejected_by=frozenset(diagnosis.rejected_by),
                profile=profile,
                elapsed=elapsed,
                reasons=sorted(diagnosis.reasons),
                placement=placement,
            )
        elif placement is not None:  # placed, then reverted with its group
            sched.fail(
                member,
                "Unschedulable",
                f"{GROUP_ERROR}, {condition_message}",
                profile=profile,
                elapsed=elapsed,
                placement=placement,
            )
        else:  # never evaluated: the group's status before PostFilter
            message = outcome.status_message()
            sched.fail(member, "Unschedulable", message, profile=profile, elapsed=elapsed)
    log.info(
        "pod_group_cycle",
        pod_group=group.key,
        members=len(live),
        placed=sum(1 for _, p in outcome.placements if p is not None and p.node),
        result="scheduled" if outcome.success else "unschedulable",
        message=condition_message,
        duration_ms=round(elapsed * 1000, 3),
    )
    if outcome.success:
        _write(sched, profile, group, {"status": "True", "reason": "Scheduled", "message": ""})
    else:
        reason = {"status": "False", "reason": "Unschedulable", "message": condition_message}
        _write(sched, profile, group, reason)


def _write(sched: GroupHost, profile: Profile, group: PodGroup, condition: dict[str, str]) -> None:
    """Set the condition now for the next cycle, and write it to the API server."""
    conditions = merged_conditions(group, condition)
    if conditions is not None and not profile.dry_run:
        sched.pod_groups.written(group.key, tuple(conditions))
        sched.spawn(write_conditions(sched, group, conditions))


def merged_conditions(group: PodGroup, condition: dict[str, str]) -> list[dict[str, Any]] | None:
    """Go's SetStatusCondition on the group's conditions; None when nothing would change.

    A True condition is never set back to False (a later cycle for extra members).
    """
    existing = group.condition()
    if existing is not None and existing.get("status") == "True" and condition["status"] != "True":
        return None
    new = {"type": INITIALLY_SCHEDULED, **condition, "observedGeneration": group.generation}
    if existing is not None:
        same = all(existing.get(k) == v for k, v in new.items())
        if same:
            return None
        transition = existing.get("lastTransitionTime")
        if existing.get("status") != condition["status"] or not transition:
            transition = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        new["lastTransitionTime"] = transition
    else:
        new["lastTransitionTime"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    others = [dict(c) for c in group.conditions if c.get("type") != INITIALLY_SCHEDULED]
    return [*others, new]


async def write_conditions(
    sched: GroupHost, group: PodGroup, conditions: list[dict[str, Any]]
) -> None:
    path = f"{WORKLOAD_API}/namespaces/{group.namespace}/podgroups/{group.name}/status"
    try:
        await sched.binder.client.patch(
            path, {"status": {"conditions": conditions}}, kind="merge-patch"
        )
    except ApiError as exc:
        log.warning("pod_group_status_failed", pod_group=group.key, error=str(exc))
