"""DefaultPreemption: the PostFilter that runs when a pod fits nowhere.

Follows kube-scheduler's ``preemption.Evaluator`` with the DefaultPreemption
plugin (pkg/scheduler/framework/preemption, plugins/defaultpreemption):

* eligibility: ``preemptionPolicy: Never`` never preempts, and a pod whose
  nominated node still holds victims it is waiting for does not preempt again;
* DryRunPreemption: the nodes the filters rejected as Unschedulable (never the
  unresolvable ones) are tried from a random offset, and the dry run stops once
  enough candidates are found (``candidate_count``) and one of them violates
  no PodDisruptionBudget;
* SelectVictimsOnNode: every lower-priority pod is removed from a what-if copy
  of the node's row, the profile's filters are re-run on that node only, and
  the victims are reprieved, most important first (PDB-violating ones before
  the others), while the pod still fits;
* pickOneNodeForPreemption: fewest PDB violations, lowest highest victim
  priority, lowest priority sum, fewest victims, latest start time of the
  highest-priority victims, then the first candidate;

Pure: it decides; the DefaultPreemption plugin (``podium.algorithms.default_preemption``)
counts it and carries it out, and the offline tools read its message. Pods
nominated by earlier preemptions hold their room on their node for pods of
lower priority (``podium.scheduling.nominator``, ``podium.framework.cycle.filter_with_nominated``).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from podium.framework.cycle import UNRESOLVABLE, UNSCHEDULABLE, Diagnosis, Nominated
from podium.framework.plugin import Cycle
from podium.framework.profile import Profile
from podium.framework.victims import (
    Victim,
    domain_victims,
    filter_units_with_pdb_violation,
    importance,
    start_time,
)
from podium.kube.objects import PodInfo
from podium.kube.pdb import Pdb
from podium.state.podgroups import PodGroup
from podium.state.snapshot import Snapshot

__all__ = [
    "NEVER",
    "NOT_HELPFUL",
    "NO_VICTIMS",
    "TERMINATING",
    "Candidate",
    "PreemptionResult",
    "best_candidates",
    "candidate_count",
    "evaluate",
    "filter_victims_with_pdb_violation",
    "pick_one_node",
    "select_victims_on_node",
]


NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NEVER = "not eligible due to preemptionPolicy=Never."
TERMINATING = "not eligible due to a terminating pod on the nominated node."
# kube-scheduler runs DynamicResources' PostFilter before DefaultPreemption. After a
# PreFilter rejection its PreFilter never ran, so it fails reading its cycle state
# (framework.ErrNotFound) and that error ends the message; no preemption is tried.
PREFILTER_REJECTED = "not found"
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


# -- dry run --------------------------------------------------------------------------------
@dataclass(slots=True)
class Candidate:
    """A node where preemption would let the pod fit; victims most important first."""

    node: str
    victims: list[PodInfo]
    num_pdb_violations: int = 0


@dataclass(slots=True)
class NodeStatus:
    fits: bool
    unresolvable: bool = False
    reasons: list[str] = field(default_factory=list)


@dataclass(slots=True)
class PreemptionResult:
    """``nominating``: None keeps the pod's nomination, "" clears it, a name sets it."""

    message: str
    candidate: Candidate | None = None
    nominating: str | None = None
    statuses: dict[str, NodeStatus] = field(default_factory=dict)
    # Every candidate the dry run found (at most the candidate count per bucket).
    candidates: list[Candidate] = field(default_factory=list)


def candidate_count(profile: Profile, potential: int) -> int:
    """calculateNumCandidates: a share of the nodes, at least the absolute minimum."""
    n = potential * profile.min_candidate_nodes_percentage // 100
    n = max(n, profile.min_candidate_nodes_absolute)
    return min(n, potential)


def filter_victims_with_pdb_violation(
    victims: Sequence[PodInfo], pdbs: Sequence[Pdb]
) -> tuple[list[PodInfo], list[PodInfo]]:
    """FilterVictimsWithPDBViolation: (violating, non-violating), each in the given order."""
    allowed = [pdb.disruptions_allowed for pdb in pdbs]
    violating: list[PodInfo] = []
    others: list[PodInfo] = []
    for pod in victims:
        violates = False
        if pod.labels:
            for i, pdb in enumerate(pdbs):
                if not pdb.matches(pod) or pod.name in pdb.disrupted_pods:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violates = True
                    break
        (violating if violates else others).append(pod)
    return violating, others


def filter_node(
    profile: Profile, snapshot: Snapshot, pod: PodInfo, row: int, held: Sequence[PodInfo] = ()
) -> NodeStatus:
    """RunFilterPluginsWithNominatedPods on one node of the (edited) snapshot, PreFilter
    state rebuilt: with the ``held`` nominated pods added to the row and (AddPod) to a
    copy of that state, then, only if that passes and some were added, without them."""
    cycle = Cycle(pod, snapshot)
    for plugin in profile.filters:
        result = plugin.pre_filter(cycle)
        if result is not None and result.reject:
            return NodeStatus(False, result.unresolvable, [result.reject])
    if held:
        backup = snapshot.edit_row(row, add=held)
        try:
            added = Cycle(pod, snapshot, dict(cycle.state))
            for plugin in profile.filters:
                plugin.add_pods(added)
            status = _run_filters_on(profile, added, row)
        finally:
            snapshot.restore_row(row, backup)
        if not status.fits:
            return status
    return _run_filters_on(profile, cycle, row)


def _run_filters_on(profile: Profile, cycle: Cycle, row: int) -> NodeStatus:
    """RunFilterPlugins on one node: the first plugin that rejects it gives the status."""
    nodes = np.array([row], dtype=np.intp)
    for plugin in profile.filters:
        hits = [r for r in plugin.filter(cycle, nodes) if bool(r.mask[0])]
        if hits:
            return NodeStatus(False, any(r.unresolvable for r in hits), [r.reason for r in hits])
    return NodeStatus(True)


def _held(pods: Mapping[str, PodInfo] | None, pod: PodInfo) -> list[PodInfo]:
    return [p for p in (pods or {}).values() if p.priority >= pod.priority and p.uid != pod.uid]


def select_victims_on_node(
    profile: Profile,
    snapshot: Snapshot,
    pod: PodInfo,
    row: int,
    pdbs: Sequence[Pdb] = (),
    nominated: Nominated | None = None,
    now: float | None = None,
    groups: Mapping[str, PodGroup] | None = None,
) -> tuple[list[PodInfo], int, NodeStatus]:
    """SelectVictimsOnNode: the fewest, least important victims whose removal lets ``pod`` fit.

    With ``groups`` (GenericWorkload on) the victims are Go's DomainVictims: a
    ``disruptionMode: All`` group goes whole, its pods on other nodes too.
    """
    now = time.time() if now is None else now
    if groups is None:
        units = [Victim([p], p.priority, False) for p in snapshot.pods[row].values()]
    else:
        units = domain_victims(snapshot, groups, rows=(row,))
    potential = [u for u in units if u.priority < pod.priority]
    if not potential:
        return [], 0, NodeStatus(False, True, [NO_VICTIMS])
    here = snapshot.pods[row]

    def local(unit: Victim) -> list[PodInfo]:
        return [p for p in unit.pods if p.uid in here]

    held = _held((nominated or {}).get(snapshot.names[row]), pod)
    backup = snapshot.edit_row(row, remove=[p for u in potential for p in local(u)])
    try:
        status = filter_node(profile, snapshot, pod, row, held)
        if not status.fits:
            return [], 0, status
        potential.sort(key=importance(now))
        violating, others = filter_units_with_pdb_violation(potential, pdbs)
        chosen: list[Victim] = []
        violations = 0

        def reprieve(victim: Victim) -> bool:
            undo = snapshot.edit_row(row, add=local(victim))
            if filter_node(profile, snapshot, pod, row, held).fits:
                return True
            snapshot.restore_row(row, undo)
            chosen.append(victim)
            return False

        for victim, count in violating:
            if not reprieve(victim):
                violations += count
        for victim in others:
            reprieve(victim)
        if violating and others:
            chosen.sort(key=importance(now))
        return [p for v in chosen for p in v.pods], violations, status
    finally:
        snapshot.restore_row(row, backup)


def pick_one_node(candidates: Sequence[Candidate], now: float | None = None) -> Candidate | None:
    """pickOneNodeForPreemption; victims must be sorted most important first."""
    best = best_candidates(candidates, now)
    return best[0] if best else None


def best_candidates(candidates: Sequence[Candidate], now: float | None = None) -> list[Candidate]:
    """The candidates pickOneNodeForPreemption cannot tell apart; it takes the first.

    More than one means the choice depends on the order nodes were visited in,
    which kube-scheduler starts at a random offset.
    """
    now = time.time() if now is None else now

    def latest_start(c: Candidate) -> float:
        top = c.victims[0].priority
        return min(start_time(p, now) for p in c.victims if p.priority == top)

    scores = (
        lambda c: -c.num_pdb_violations,
        lambda c: -c.victims[0].priority,
        lambda c: -sum(p.priority + 2**31 for p in c.victims),
        lambda c: -len(c.victims),
        latest_start,
    )
    remaining = list(candidates)
    for score in scores:
        if len(remaining) <= 1:
            break
        values = [score(c) for c in remaining]
        best = max(values)
        remaining = [c for c, v in zip(remaining, values, strict=True) if v == best]
    return remaining


def _terminating_by_preemption(pod: PodInfo) -> bool:
    """PodTerminatingByPreemption."""
    if not pod.deleting:
        return False
    condition = pod.conditions.get(DISRUPTION_TARGET) or {}
    return condition.get("status") == "True" and condition.get("reason") == PREEMPTION_BY_SCHEDULER


def evaluate(
    profile: Profile,
    snapshot: Snapshot,
    pod: PodInfo,
    diagnosis: Diagnosis,
    rng: random.Random | None = None,
    pdbs: Iterable[Pdb] = (),
    nominated: Nominated | None = None,
    nominated_node: str = "",
    groups: Mapping[str, PodGroup] | None = None,
) -> PreemptionResult:
    """Evaluator.Preempt without actuation: the candidate and the "preemption: ..." message.

    ``groups`` (the PodGroups, when GenericWorkload is on) makes victims of whole
    ``disruptionMode: All`` groups."""
    if diagnosis.prefilter_msg:
        return PreemptionResult(PREFILTER_REJECTED)
    if pod.preemption_policy == "Never":
        return PreemptionResult("preemption: " + NEVER)
    nominated_node = nominated_node or pod.nominated_node
    row = snapshot.index.get(nominated_node) if nominated_node else None
    if row is not None and diagnosis.status[row] != UNRESOLVABLE:
        for other in snapshot.pods[row].values():
            if other.priority < pod.priority and _terminating_by_preemption(other):
                return PreemptionResult("preemption: " + TERMINATING)
    now = time.time()
    total = diagnosis.num_all_nodes
    potential = np.flatnonzero(diagnosis.status == UNSCHEDULABLE)
    statuses: dict[str, NodeStatus] = {}
    clean: list[Candidate] = []
    violating: list[Candidate] = []
    budgets = list(pdbs)
    if potential.size:
        count = candidate_count(profile, int(potential.size))
        offset = (rng or random).randrange(potential.size)
        for i in range(int(potential.size)):
            node = int(potential[(offset + i) % potential.size])
            victims, violations, status = select_victims_on_node(
                profile, snapshot, pod, node, budgets, nominated, now, groups
            )
            if status.fits and victims:
                found = Candidate(snapshot.names[node], victims, violations)
                bucket = violating if violations else clean
                if len(bucket) < count:
                    bucket.append(found)
                if clean and len(clean) + len(violating) >= count:
                    break
                continue
            if status.fits:
                name = snapshot.names[node]
                status = NodeStatus(
                    False, False, [f'expected at least one victim pod on node "{name}"']
                )
            statuses[snapshot.names[node]] = status
    candidates = clean + violating
    best = pick_one_node(candidates, now)
    if best is None:
        reasons: Counter[str] = Counter()
        for status in statuses.values():
            reasons.update(status.reasons)
        if total > len(statuses):
            reasons[NOT_HELPFUL] += total - len(statuses)
        histogram = sorted(f"{n} {reason}" for reason, n in reasons.items())
        message = f"preemption: 0/{total} nodes are available: " + ", ".join(histogram) + "."
        return PreemptionResult(message, nominating="", statuses=statuses)
    message = (
        f"preemption: found a potential placement for pod on node {best.node}, "
        f"preempting {len(best.victims)} victims"
    )
    return PreemptionResult(message, best, best.node, statuses, candidates)
