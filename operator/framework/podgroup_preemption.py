"""Workload-aware preemption: a PodGroup that fits nowhere preempts as one unit.

Follows kube-scheduler v1.37's ``PodGroupEvaluator`` (framework/preemption/
podgrouppreemption.go) with the victims of ``newDomainForWorkloadPreemption`` (types.go):

* the domain is the whole cluster; a pod whose PodGroup has ``disruptionMode: All``
  is one victim with every scheduled pod of its group, any other pod is a victim alone;
* every victim of lower priority than the group is removed, and the group is placed
  once (Go's ``podGroupSchedulingFunc``); if it still does not fit, nothing is preempted;
* victims are reprieved most important first (``MoreImportantVictim``), PDB-violating
  ones before the others: a victim is put back, and the placed members are filtered
  again on their nodes in order, each assumed for the next; if all still fit, it stays;
* the members are nominated to the nodes the placement gave them.

Pure: it decides on the board's cache (restored before it returns), and
``podium.scheduling.preemptor`` carries the decision out.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from podium.framework.podgroup import Board, place_group
from podium.framework.preemption import (
    DISRUPTION_TARGET,
    NEVER,
    PREEMPTION_BY_SCHEDULER,
    filter_node,
)
from podium.framework.queued import QueuedPod
from podium.framework.victims import (
    Victim,
    domain_victims,
    filter_units_with_pdb_violation,
    importance,
    victim_priority,
)
from podium.kube.objects import PodInfo
from podium.kube.pdb import Pdb
from podium.state.cache import PodState
from podium.state.podgroups import PodGroup

if TYPE_CHECKING:
    from podium.framework.profile import Profile

__all__ = [
    "FOUND",
    "NO_VICTIMS",
    "ONGOING",
    "PREFIX",
    "GroupPreemption",
    "preempt_group",
]

PREFIX = "pod group preemption: "
NO_VICTIMS = "No preemption victims found for incoming preemptor"
ONGOING = "ongoing preemption on nominated nodes"
FOUND = "found a placement for podgroup, preempting {} victims"


@dataclass(slots=True)
class GroupPreemption:
    """The PodGroupPostFilter's verdict; ``message`` carries Go's "pod group preemption: "."""

    message: str
    success: bool = False
    victims: list[PodInfo] = field(default_factory=list)
    # uid -> node for every member placed (Go's ModeOverride NominatingInfo).
    nominations: dict[str, str] = field(default_factory=dict)
    num_pdb_violations: int = 0
    num_group_disruptions: int = 0
    unresolvable: bool = False
    # The scheduling function returned an Error (a member's plugin failed): Preempt
    # returns that status as it is.
    error: bool = False


def _terminating_by_preemption(pod: PodInfo) -> bool:
    """PodTerminatingByPreemption."""
    condition = pod.conditions.get(DISRUPTION_TARGET) or {}
    return (
        pod.deleting
        and condition.get("status") == "True"
        and condition.get("reason") == PREEMPTION_BY_SCHEDULER
    )


def preempt_group(
    board: Board,
    profile: Profile,
    group: PodGroup,
    entries: list[QueuedPod],
    scheduled: list[PodInfo],
    groups: Mapping[str, PodGroup],
    pdbs: Iterable[Pdb] = (),
    now: float | None = None,
) -> GroupPreemption:
    """PodGroupEvaluator.Preempt without actuation; the board's cache is left as it was."""
    now = time.time() if now is None else now
    members = [e.pod for e in entries]
    if members and members[0].preemption_policy == "Never":
        return GroupPreemption(PREFIX + NEVER)
    snapshot = board.snapshot
    snapshot.update(board.cache)
    nominated_nodes = {p.nominated_node for p in members if p.nominated_node}
    for node in sorted(nominated_nodes):
        row = snapshot.index.get(node)
        if row is None:
            continue
        for other in snapshot.pods[row].values():
            if victim_priority(other, groups) < group.priority and _terminating_by_preemption(
                other
            ):
                current = {p.uid: p.nominated_node for p in members}
                return GroupPreemption(PREFIX + ONGOING, True, nominations=current)
    own = frozenset(p.uid for p in [*members, *scheduled])
    potential = [
        v for v in domain_victims(snapshot, groups, exclude=own) if v.priority < group.priority
    ]
    if not potential:
        return GroupPreemption(PREFIX + NO_VICTIMS, unresolvable=True)
    cache = board.cache
    removed: dict[str, PodState] = {}

    def take(victim: Victim) -> None:
        for pod in victim.pods:
            state = cache.pods.get(pod.uid)
            if state is not None:
                removed[pod.uid] = state
                cache.remove_pod(pod.uid)

    def give_back(victim: Victim) -> None:
        for pod in victim.pods:
            state = removed.pop(pod.uid, None)
            if state is None:
                continue
            if state.assumed:
                cache.assume_pod(state.pod, state.node)
            else:
                cache.add_pod(state.pod)

    for victim in potential:
        take(victim)
    try:
        outcome = place_group(board, profile, group, entries, scheduled)
        valid = [
            (entry.pod, placement.node)
            for entry, placement in outcome.placements
            if placement is not None and placement.node
        ]
        if outcome.success:  # the scheduling func's assumptions are reverted, as Go's
            for pod, _ in valid:
                board.forget(pod)
        else:
            return GroupPreemption(PREFIX + outcome.status_message(), error=bool(outcome.error))
        potential.sort(key=importance(now))
        violating, others = filter_units_with_pdb_violation(potential, list(pdbs))

        def reprieve(victim: Victim) -> bool:
            give_back(victim)
            assumed: list[PodInfo] = []
            try:
                for pod, node in valid:
                    snapshot.update(cache)
                    if not filter_node(profile, snapshot, pod, snapshot.index[node]).fits:
                        take(victim)
                        return False
                    cache.assume_pod(pod, node)
                    assumed.append(pod)
                return True
            finally:
                for pod in reversed(assumed):
                    cache.forget_pod(pod)

        to_preempt: list[Victim] = []
        violations = 0
        for victim, count in violating:
            if not reprieve(victim):
                to_preempt.append(victim)
                violations += count
        for victim in others:
            if not reprieve(victim):
                to_preempt.append(victim)
        to_preempt.sort(key=importance(now))
        return GroupPreemption(
            PREFIX + FOUND.format(sum(len(v.pods) for v in to_preempt)),
            True,
            victims=[pod for v in to_preempt for pod in v.pods],
            nominations={pod.uid: node for pod, node in valid},
            num_pdb_violations=violations,
            num_group_disruptions=sum(1 for v in to_preempt if v.group),
        )
    finally:
        for uid in list(removed):
            give_back(Victim([removed[uid].pod], 0, False))
        snapshot.update(cache)
