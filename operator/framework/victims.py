"""Preemption units (Go's Victim and DomainVictim, framework/preemption/types.go).

With GenericWorkload on, a pod whose PodGroup has ``disruptionMode: All`` is evicted only
with every scheduled pod of its group: the group is one victim, wherever its pods run.
Any other pod is a victim alone; a member of a ``Single`` group still ranks as a group
(``NewPodVictim`` keys it PodGroup). Single-pod and pod-group preemption both use these.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from podium.kube.objects import PodInfo
from podium.kube.pdb import Pdb
from podium.state.podgroups import PodGroup
from podium.state.snapshot import Snapshot

__all__ = [
    "Victim",
    "domain_victims",
    "filter_units_with_pdb_violation",
    "importance",
    "start_time",
    "victim_priority",
]


def start_time(pod: PodInfo, now: float) -> float:
    """GetPodStartTime: status.startTime, or now for pods that have not started."""
    raw = (pod.raw.get("status") or {}).get("startTime") if isinstance(pod.raw, Mapping) else None
    if isinstance(raw, str) and raw:
        try:
            return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return now
    return now


@dataclass(slots=True)
class Victim:
    """One preemption unit: a pod, or every scheduled pod of a ``disruptionMode: All`` group."""

    pods: list[PodInfo]
    priority: int
    # Go's keyType PodGroup: the pod has a scheduling group (either mode), or it is a group.
    group: bool

    def earliest_start(self, now: float) -> float:
        return min(start_time(p, now) for p in self.pods)


def victim_priority(pod: PodInfo, groups: Mapping[str, PodGroup]) -> int:
    """GetPodPriority: a group member has its PodGroup's priority."""
    group = groups.get(pod.group_key) if pod.pod_group else None
    return group.priority if group is not None else pod.priority


def importance(now: float) -> Callable[[Victim], tuple[int, int, int, float]]:
    """MoreImportantVictim: priority, then groups before pods, then size, then started first."""
    return lambda v: (-v.priority, -(2 if v.group else 1), -len(v.pods), v.earliest_start(now))


def domain_victims(
    snapshot: Snapshot,
    groups: Mapping[str, PodGroup],
    rows: Iterable[int] | None = None,
    exclude: frozenset[str] = frozenset(),
) -> list[Victim]:
    """getCrossNodesVictims over ``rows`` (every node by default), in node order; an All
    group's victim holds its pods on every node (searchCrossNodesVictimPods)."""
    seen: set[str] = set()
    victims: list[Victim] = []
    for row in range(len(snapshot)) if rows is None else rows:
        for pod in snapshot.pods[row].values():
            if pod.uid in exclude:
                continue
            group = groups.get(pod.group_key) if pod.pod_group else None
            if group is None or not group.disruption_all:
                victims.append(Victim([pod], victim_priority(pod, groups), bool(pod.pod_group)))
                continue
            if group.key in seen:
                continue
            seen.add(group.key)
            members = [
                p for _, p in snapshot.iter_pods() if p.pod_group and p.group_key == group.key
            ]
            victims.append(Victim(members, group.priority, True))
    return victims


def filter_units_with_pdb_violation(
    victims: Sequence[Victim], pdbs: Sequence[Pdb]
) -> tuple[list[tuple[Victim, int]], list[Victim]]:
    """FilterVictimsWithPDBViolation: a victim violates when any of its pods does; the
    count is of its violating pods."""
    allowed = [pdb.disruptions_allowed for pdb in pdbs]

    def violates(pod: PodInfo) -> bool:
        if not pod.labels:
            return False
        for i, pdb in enumerate(pdbs):
            if not pdb.matches(pod) or pod.name in pdb.disrupted_pods:
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                return True
        return False

    violating: list[tuple[Victim, int]] = []
    others: list[Victim] = []
    for victim in victims:
        count = sum(1 for pod in victim.pods if violates(pod))
        if count:
            violating.append((victim, count))
        else:
            others.append(victim)
    return violating, others
