"""The pod-group cycle: a PodGroup's members are placed together, bound all or none.

kube-scheduler v1.37 with the GenericWorkload gate (``gangscheduling.go`` and
``schedule_one_podgroup.go``) is the reference:

- A member reaches the cycle once the profile's PreEnqueue lets it into the queue
  (the gang plugin's: its PodGroup exists and a gang has ``minCount`` pods).
- The cycle takes every queued member, places them one by one on the snapshot,
  assuming each placed member so the next sees it, and checks after each whether
  ``minCount`` (1 for a basic group) can still be met (PlacementFeasible). On success
  the assumed members are bound; otherwise every assumption is reverted and no member
  is bound: no partial gang ever holds resources.
- The PodGroup's ``PodGroupInitiallyScheduled`` condition gets Go's reason and message.

All assumptions happen in one synchronous step, before any bind starts, so no other
pod's cycle can interleave with a half-placed group, and no member ever waits at Permit
for the rest: kube-scheduler's 5-minute Permit timeout has nothing to time out.
An unschedulable group runs the profile's PodGroupPostFilter plugins
(``run_pod_group_post_filter``; the preemption plugin's preempts for the group as one
unit while the profile preempts): on Success its members are nominated and wait for the
victims to go, as Go's waitingOnPreemption.

The placement itself is ``podium.framework.podgroup`` (pure, shared with simulate and
explain); this module is the live half: the queue, the binds and the PodGroup's status.
"""

from __future__ import annotations

import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from podium.framework.binding import (
    BindingHandle,
    run_group_reserve,
    run_group_unreserve,
    run_pod_group_post_filter,
)
from podium.framework.cycle import Placement, Scheduler
from podium.framework.extension import FailedGroup
from podium.framework.podgroup import (
    GROUP_ERROR,
    Board,
    GroupOutcome,
    place_group,
    validate_group,
)
from podium.framework.queued import QueuedPod
from podium.kube.client import ApiError
from podium.kube.objects import PodInfo
from podium.metrics import Metrics
from podium.scheduling.nominator import Nominator
from podium.state.cache import Cache
from podium.state.podgroups import INITIALLY_SCHEDULED, WORKLOAD_API, PodGroup
from podium.state.snapshot import Snapshot

if TYPE_CHECKING:
    from podium.framework.profile import Profile
    from podium.metrics import Metrics
    from podium.scheduling.binder import Binder
    from podium.scheduling.queue import SchedulingQueue
    from podium.state.podgroups import PodGroupStore

__all__ = [
    "GroupHost",
    "GroupOutcome",
    "schedule_group",
]

log = structlog.get_logger("podium.scheduling.podgroup")

DRY_RUN = "SchedulerPolicy"  # what a dry-run decision waits for, as in schedule_one


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
    handle: BindingHandle
    binder: Binder
    metrics: Metrics

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
        nominating: str | None = ...,
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
    ) -> None:
        """Bind a placed (and assumed) member in the background, counted in flight."""


def group_members(sched: GroupHost, key: str) -> tuple[list[QueuedPod], list[PodInfo]]:
    """The group's pods in the queue, and those assumed or bound (Go's scheduled pods)."""
    uids = sched.pod_groups.member_uids(key)
    entries, placed = sched.queue.entries, sched.cache.pods
    queued = [entries[uid] for uid in uids if uid in entries]
    scheduled = [placed[uid].pod for uid in uids if uid in placed]
    return queued, scheduled


@dataclass(slots=True)
class _Held:
    """What the filters' Reserve holds for the members this cycle assumed (their devices,
    for the next member's Filter), and the node of each, for their Unreserve."""

    profile: Profile
    handle: BindingHandle
    nodes: dict[str, str] = field(default_factory=dict)

    def reserve(self, pod: PodInfo, node: str) -> None:
        self.nodes[pod.uid] = node
        run_group_reserve(self.profile, self.handle, pod, node)

    def unreserve(self, pod: PodInfo) -> None:
        node = self.nodes.pop(pod.uid, None)
        if node is not None:
            run_group_unreserve(self.profile, self.handle, pod, node)


def schedule_group(sched: GroupHost, entry: QueuedPod, profile: Profile) -> None:
    """Run one pod-group cycle for the group of the popped member ``entry``."""
    started = time.perf_counter()
    pod = entry.pod
    group = sched.pod_groups.get(pod.namespace, pod.pod_group)
    if group is None:
        # Deleted since PreEnqueue let the pod in: back through the queue, whose
        # PreEnqueue now holds it.
        sched.queue.requeue(entry)
        return
    queued, scheduled = group_members(sched, pod.group_key)
    entries = [entry]
    for other in queued:
        if other is not entry:
            taken = sched.queue.take(other.pod.uid)
            if taken is not None:
                entries.append(taken)
    spawned: set[str] = set()
    held = _Held(profile, sched.handle)
    try:
        _decide(sched, profile, group, entries, scheduled, started, spawned, held)
    except Exception:
        # Nothing this cycle took or assumed may be left behind: the worker fails the
        # popped entry; every other member not yet bound is forgotten and failed here.
        for member in entries:
            uid = member.pod.uid
            if uid in spawned:
                continue
            if sched.cache.is_assumed(uid):
                sched.cache.forget_pod(member.pod)
            held.unreserve(member.pod)
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
    held: _Held,
) -> None:
    """Validate, place and bind (or fail) the taken members; ``spawned`` gets the uids
    whose binds are started, all at once after every bind was prepared; ``held``
    reserves each member as it is assumed."""
    live: list[QueuedPod] = []
    for member in entries:
        if member.pod.deleting:
            sched.queue.done(member.pod.uid)
        else:
            live.append(member)
    # PodGroupMemberPodsOrderingFunc: priority, then more attempts, then the earlier
    # queue time (when the queue last took the member in, finer than
    # creationTimestamp's seconds), then name.
    live.sort(key=lambda e: (-e.pod.priority, -e.attempts, e.added, e.pod.name))
    invalid = validate_group(group, [m.pod for m in live], scheduled)
    if invalid:
        sched.metrics.podgroup_attempt("error", profile.scheduler_name, _since(started))
        for member in live:  # handlePodGroupFailureBeforeScheduling: clearNominatedNode
            sched.fail(
                member, "SchedulerError", invalid, error=True, profile=profile, nominating=""
            )
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
        sched.metrics.podgroup_attempt("unschedulable", profile.scheduler_name, _since(started))
        for member in live:  # no rejecting plugin, as Go's ErrNoNodesAvailable: backoffQ
            sched.fail(
                member,
                "Unschedulable",
                "no nodes available to schedule pods",
                profile=profile,
                nominating="",  # Go's clearNominatedNode with ErrNoNodesAvailable
            )
        return
    board = Board(
        sched.algorithm,
        sched.cache,
        sched.snapshot,
        sched.nominator,
        reserve=held.reserve,
        unreserve=held.unreserve,
        cycle=entries[0].cycle,
    )
    outcome = place_group(board, profile, group, live, scheduled)
    elapsed = time.perf_counter() - started
    sched.metrics.podgroup_algorithm_duration.observe(elapsed)
    if profile.dry_run:  # decided, never bound: members wait as schedule_one's dry run does
        for member, placement in outcome.placements:
            if outcome.success and placement is not None and placement.node:
                board.forget(member.pod)
            sched.queue.requeue(member, rejected_by=frozenset({DRY_RUN}))
        log.info(
            "dry_run_pod_group",
            pod_group=group.key,
            result="scheduled" if outcome.success else "unschedulable",
            nodes={m.pod.name: p.node for m, p in outcome.placements if p is not None and p.node},
            duration_ms=round(elapsed * 1000, 3),
        )
        return
    if outcome.error:
        _errored(sched, profile, group, outcome, elapsed, _since(started))
        return
    condition_message = ""
    waiting = False
    nominations: Mapping[str, str] = {}
    if not outcome.success:
        # The PodGroupPostFilter plugins; Go appends their reasons to the group's status.
        preemptor = Board(
            sched.algorithm, sched.cache, sched.snapshot, sched.nominator, cycle=board.cycle
        )
        failed = FailedGroup(profile, group, live, scheduled, preemptor)
        answer = run_pod_group_post_filter(profile, sched.handle, failed)
        if answer.status.code == "Error":  # every result takes the PostFilter's Error
            _errored(sched, profile, group, outcome, elapsed, _since(started), answer.status.reason)
            return
        condition_message = f"{outcome.status_message()}, {answer.status.reason}"
        waiting = answer.status.ok
        nominations = answer.nominations if waiting else {}
    binds = [
        (member, placement.node, sched.record(member, profile, placement))
        for member, placement in outcome.placements
        if outcome.success and placement is not None and placement.node
    ]
    for member, node, record in binds:  # nothing here raises: all binds or none start
        sched.nominator.remove(member.pod.uid)
        spawned.add(member.pod.uid)
        # Each member was reserved as it was assumed: its PreBind writes its claims.
        sched.start_bind(member, node, profile, started, record)
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
                nominating=_nominating(member, nominations, waiting, noop=True),
            )
        elif placement is not None:  # placed, then reverted with its group
            sched.fail(
                member,
                "Unschedulable",
                # Waiting on preemption, Go fails it with the group's status as it is.
                condition_message if waiting else f"{GROUP_ERROR}, {condition_message}",
                profile=profile,
                elapsed=elapsed,
                placement=placement,
                nominating=_nominating(member, nominations, waiting, noop=False),
            )
        else:  # never evaluated: the group's status before PostFilter
            message = outcome.status_message()
            sched.fail(
                member,
                "Unschedulable",
                message,
                profile=profile,
                elapsed=elapsed,
                nominating=_nominating(member, nominations, waiting, noop=True),
            )
    log.info(
        "pod_group_cycle",
        pod_group=group.key,
        members=len(live),
        placed=sum(1 for _, p in outcome.placements if p is not None and p.node),
        result="scheduled"
        if outcome.success
        else ("waiting_on_preemption" if waiting else "unschedulable"),
        message=condition_message,
        duration_ms=round(elapsed * 1000, 3),
    )
    result = "scheduled" if outcome.success else "unschedulable"
    sched.metrics.podgroup_attempt(result, profile.scheduler_name, _since(started))
    if outcome.success:
        _write(sched, profile, group, {"status": "True", "reason": "Scheduled", "message": ""})
    else:
        reason = {"status": "False", "reason": "Unschedulable", "message": condition_message}
        _write(sched, profile, group, reason)


def _errored(
    sched: GroupHost,
    profile: Profile,
    group: PodGroup,
    outcome: GroupOutcome,
    elapsed: float,
    since: float,
    error: str = "",
) -> None:
    """The group's status is an Error: a member's cycle returned one (then no
    PodGroupPostFilter runs), or a PodGroupPostFilter did (``error``, given to every
    result by applyPodGroupPostFilterResult). Every member fails with clearNominatedNode,
    a member whose own cycle erred with its own error and the others with the group's,
    and the condition is a SchedulerError (submitPodGroupAlgorithmResult)."""
    message = error or outcome.status_message()
    sched.metrics.podgroup_attempt("error", profile.scheduler_name, since)
    for member, _ in outcome.placements:
        own = member.pod.uid == outcome.failed
        sched.fail(
            member,
            "SchedulerError",
            outcome.error if own else message,
            error=True,
            profile=profile,
            elapsed=elapsed,
            nominating="",
        )
    log.info("pod_group_error", pod_group=group.key, message=message)
    _write(
        sched, profile, group, {"status": "False", "reason": "SchedulerError", "message": message}
    )


def _nominating(
    member: QueuedPod, nominations: Mapping[str, str], waiting: bool, *, noop: bool
) -> str:
    """The nominatingInfo submitPodGroupAlgorithmResult fails a member with: the group
    preemption's node while the group waits on it; for a member placed then reverted
    with its group, clearNominatedNode; otherwise ModeNoop, which leaves in memory just
    the node the pod's status names ("" for none)."""
    kept = member.pod.nominated_node
    if waiting:
        return nominations.get(member.pod.uid, kept)
    return kept if noop else ""


def _since(started: float) -> float:
    return time.perf_counter() - started


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
