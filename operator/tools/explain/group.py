"""``podium explain`` for a pod of a PodGroup: the group as a pod-group cycle sees it.

The same code the live scheduler runs (``podium.scheduling.podgroup_cycle``) places the
group's pending members on explain's copy of the cluster, then gives every assumption
back: which members wait and why, where each member would go, the member that breaks
an all-or-nothing placement, and how many members would fit now.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import replace

from podium.algorithms.default_preemption import offline_group_preemption
from podium.algorithms.dynamic_resources.group import GroupClaims
from podium.algorithms.dynamic_resources.plugin import dynamic_resources
from podium.framework.cycle import Scheduler
from podium.framework.extension import FailedGroup
from podium.framework.podgroup import (
    Board,
    GroupOutcome,
    group_unschedulable,
    place_group,
    validate_group,
    waiting_reason,
)
from podium.framework.profile import Profile
from podium.framework.queued import QueuedPod
from podium.kube.objects import PodInfo
from podium.kube.pdb import Pdb
from podium.state.cache import Cache
from podium.state.podgroups import PodGroup
from podium.state.snapshot import Snapshot
from podium.tools.explain.model import GroupReport

__all__ = ["explain_group"]


def _placed(outcome: GroupOutcome) -> list[PodInfo]:
    return [e.pod for e, p in outcome.placements if p is not None and p.node]


def _give_back(board: Board, outcome: GroupOutcome) -> None:
    if outcome.success:
        for pod in _placed(outcome):
            board.forget(pod)
        board.snapshot.update(board.cache)


def explain_group(
    profile: Profile,
    cache: Cache,
    snapshot: Snapshot,
    group: PodGroup | None,
    name: str,
    pending: list[PodInfo],
    scheduled: list[PodInfo],
    groups: Mapping[str, PodGroup] | None = None,
    pdbs: Sequence[Pdb] = (),
) -> GroupReport:
    """Explain the group ``name`` of pods ``pending`` (unbound) and ``scheduled`` (bound).

    ``groups`` (every PodGroup) and ``pdbs`` let a profile that preempts say which
    victims workload-aware preemption would evict, as the live cycle would."""
    policy = "missing"
    if group is not None:
        policy = f"gang (minCount {group.min_count})" if group.gang else "basic"
    report = GroupReport(
        name=name,
        policy=policy,
        pending=sorted(p.name for p in pending),
        scheduled=sorted(p.name for p in scheduled),
        waiting=waiting_reason(group, name, len(pending) + len(scheduled)),
    )
    if group is None:
        report.suggestions.append(f"create the PodGroup {name} in this namespace")
        return report
    if report.waiting:
        missing = group.required - len(pending) - len(scheduled)
        report.suggestions.append(
            f"{missing} more member(s), or a minCount of {len(pending) + len(scheduled)}"
        )
        return report
    report.invalid = validate_group(group, pending, scheduled)
    if report.invalid:
        return report
    # Each member's devices held for the next, as the live cycle holds them.
    claims = GroupClaims(snapshot.dra, snapshot, dynamic_resources(profile))
    board = Board(
        Scheduler(random.Random(0)),
        cache,
        snapshot,
        reserve=claims.reserve,
        unreserve=claims.unreserve,
    )
    ordered = sorted(pending, key=lambda p: (-p.priority, p.created, p.name))
    entries = [QueuedPod(p) for p in ordered]
    outcome = place_group(board, profile, group, entries, scheduled)
    _give_back(board, outcome)
    report.fits = outcome.success
    for entry, placement in outcome.placements:
        if placement is None:
            where = f"not tried: {outcome.status_message()}"
        elif placement.node:
            where = placement.node
        else:
            assert placement.diagnosis is not None
            where = placement.diagnosis.message()
            report.breaks = report.breaks or f"{entry.pod.name}: {where}"
        report.members[entry.pod.name] = where
    if outcome.success:
        return report
    report.message = group_unschedulable(outcome, False)
    known = {group.key: group, **(groups or {})}
    failed = FailedGroup(profile, group, entries, scheduled, board)
    result = offline_group_preemption(failed, known, pdbs)
    if result is not None:
        report.message = f"{outcome.status_message()}, {result.message}"
        if result.success:
            report.victims = [p.key for p in result.victims]
            names = {e.pod.uid: e.pod.name for e in entries}
            report.nominated = {names[uid]: n for uid, n in result.nominations.items()}
    # How many fit now, placed one by one with no minimum (a basic group).
    trial = place_group(board, profile, replace(group, min_count=None), entries, scheduled)
    _give_back(board, trial)
    fit = len(_placed(trial)) + len(scheduled)
    if group.gang and fit > 0:
        report.suggestions.append(
            f"{fit} of {len(pending) + len(scheduled)} members fit now: "
            f"a minCount of {fit} or less would place the group"
        )
    elif fit == 0:
        report.suggestions.append("no member fits anywhere now; see the member reasons above")
    return report
