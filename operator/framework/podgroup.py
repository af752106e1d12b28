"""The pod-group cycle's placement: a PodGroup's members placed together, all or none.

kube-scheduler v1.37 with the GenericWorkload gate (``gangscheduling.go`` and
``schedule_one_podgroup.go``) is the reference. This is the pure half, on a ``Board``
(a cache and its snapshot): GangScheduling's PreEnqueue verdict and PlacementFeasible,
``validatePodGroup``, the TopologyPlacementGenerator and PodGroupPodsCount, and Go's
messages. The live scheduler (``scheduling/podgroup_cycle.py``), ``podium simulate``
and ``podium explain`` all run it, so an offline answer is the live one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from podium.framework.cycle import Placement, Scheduler
from podium.framework.nominations import Nominations
from podium.framework.plugin import PluginError
from podium.framework.queued import QueuedPod
from podium.kube.objects import PodInfo
from podium.state.cache import Cache
from podium.state.podgroups import PodGroup
from podium.state.snapshot import Snapshot

if TYPE_CHECKING:
    from podium.framework.profile import Profile

__all__ = [
    "GROUP_ERROR",
    "MIN_COUNT_WAIT",
    "NO_VICTIMS",
    "Board",
    "GroupOutcome",
    "Nominations",
    "generate_placements",
    "group_unschedulable",
    "place_group",
    "place_members",
    "validate_group",
    "waiting_reason",
]

GROUP_ERROR = "pod group is unschedulable"
# podGroupSchedulingDefaultAlgorithm's status when a member's cycle returns an Error.
OTHER_POD_FAILED = "failed to schedule other pod from a pod group"

NO_VICTIMS = "pod group preemption: No preemption victims found for incoming preemptor"

MIN_COUNT_WAIT = "waiting for minCount pods from a gang to appear in scheduling queue"


def _go_quote(text: str) -> str:
    return json.dumps(text)


def waiting_reason(group: PodGroup | None, name: str, members: int) -> str:
    """GangScheduling's PreEnqueue for a group of ``members`` known pods: '' or why they wait."""
    if group is None:
        return f"waiting for pods's pod group {_go_quote(name)} to appear in scheduling queue"
    if group.gang and members < group.required:
        return MIN_COUNT_WAIT
    return ""


@dataclass(slots=True)
class GroupOutcome:
    """What one pod-group cycle decided: who is placed where, and the group's status."""

    placements: list[tuple[QueuedPod, Placement | None]] = field(default_factory=list)
    success: bool = False
    # The status's reason and whether it carries errPodGroupUnschedulable (in front).
    message: str = ""
    with_error: bool = False
    # A member's plugin Error (Go's Error status, not a rejection): its message and uid.
    # The group's status is then an Error too, and no other member is tried.
    error: str = ""
    failed: str = ""

    def status_message(self) -> str:
        """Go's Status.Message: the error, then the reason."""
        if self.error:
            return f"{OTHER_POD_FAILED}: {self.error}"
        return ", ".join(
            ([GROUP_ERROR] if self.with_error else []) + [self.message] * bool(self.message)
        )

    def as_error(self) -> str:
        """Go's Status.AsError().Error(): the error alone when there is one."""
        if self.error:
            return self.status_message()
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
    nominator: Nominations | None = None
    # A trial's nodes (Go's AssumePlacement): candidates only, the cluster stays visible.
    placement: frozenset[str] | None = None
    # Reserve and Unreserve of what the cache does not hold (a member's devices, in
    # flight for the next member), called as a member is assumed and forgotten.
    reserve: Callable[[PodInfo, str], None] | None = None
    unreserve: Callable[[PodInfo], None] | None = None
    # Go's PodGroupCycleState: what the members' plugins share within this cycle (a
    # claim allocated in flight by one member, for the others that name it).
    group: dict[str, Any] = field(default_factory=dict)
    # The queue's scheduling cycle the members share (Go's CurrentCycle): with it each
    # member's schedulePod takes part in the profile's opportunistic batch, in every
    # trial and in preemption's dry run too; None in tools, which do not batch.
    cycle: int | None = None

    def restricted(self, names: list[str]) -> Board:
        return replace(self, placement=frozenset(names))

    def assume(self, pod: PodInfo, node: str) -> None:
        """Go's ``assume`` in a pod-group cycle: also DeleteNominatedPodIfExists, so that a
        member nominated by an earlier preemption holds no room for its siblings while it
        is assumed (``forget`` gives the nomination back)."""
        self.cache.assume_pod(pod, node)
        if self.nominator is not None:
            self.nominator.remove(pod.uid)
        if self.reserve is not None:
            try:
                self.reserve(pod, node)
            except PluginError:  # assumeAndReserve: unreserveAndForget, then the status
                self.forget(pod)
                raise

    def forget(self, pod: PodInfo) -> None:
        """unreserveAndForget in a pod-group cycle: Unreserve, forget, and the nomination
        ``assume`` removed put back."""
        if self.unreserve is not None:
            self.unreserve(pod)
        self.cache.forget_pod(pod)
        if self.nominator is not None:
            self.nominator.restore(pod)


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
        if outcome.error:  # podGroupSchedulingPlacementAlgorithm returns an Error at once
            return outcome
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
            board.assume(entry.pod, placement.node)
    board.snapshot.update(board.cache)
    return best


def _revert(board: Board, outcome: GroupOutcome) -> None:
    """Forget what a successful trial assumed (a failed one already reverted itself)."""
    if outcome.success:
        for entry, placement in outcome.placements:
            if placement is not None and placement.node:
                board.forget(entry.pod)
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
        try:
            placement = board.algorithm.schedule(
                profile,
                snapshot,
                pod,
                record=profile.record_decisions and profile.record_top_nodes > 0,
                nominated=nominator.by_node if nominator is not None else None,
                nominated_node=nominator.node_of(pod.uid) if nominator is not None else "",
                within=board.placement,
                cycle_count=board.cycle,
                group=board.group,
            )
            if placement.node:
                board.assume(pod, placement.node)
        except PluginError as exc:  # an Error, not a rejection: stop, as Go does
            outcome.error, outcome.failed = str(exc), pod.uid
            outcome.placements.append((entry, None))
            break
        outcome.placements.append((entry, placement))
        remaining -= 1
        if placement.node:
            snapshot.update(cache)
            assumed.append(pod)
            scheduled += 1
        verdict, message = _feasibility(required, scheduled, remaining)
        if verdict == "unschedulable":
            break
        any_scheduled = any_scheduled or bool(placement.node)
    outcome.placements += [(e, None) for e in entries[len(outcome.placements) :]]
    outcome.success = verdict == "ok" and any_scheduled and not outcome.error
    if verdict == "ok" and not any_scheduled:
        outcome.message, outcome.with_error = "", True
    else:
        outcome.message, outcome.with_error = message, verdict == "wait"
    if not outcome.success:
        for pod in reversed(assumed):
            board.forget(pod)
        snapshot.update(cache)
    return outcome


def group_unschedulable(outcome: GroupOutcome, preemption: bool) -> str:
    """The PodGroup condition's message for a failed cycle.

    Go appends each PodGroupPostFilter plugin's reason: DefaultPreemption's (when the
    profile preempts) and DynamicResources' empty one when it is the only one.
    """
    return f"{outcome.status_message()}, {NO_VICTIMS if preemption else ''}"
