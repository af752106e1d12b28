"""Preemption in ``podium simulate``: the profile's DefaultPreemption decides on the
simulated cluster, and its victims leave the cache at once.

The live scheduler nominates the preemptor, deletes the victims (Go's
``prepareCandidate``) and places the preemptor on a later attempt, its nominated node
tried first (``evaluateNominatedNode``); a PodGroup's members each on theirs. The
simulation has no deletion latency, so that later attempt follows at once. A victim's
PodDisruptionBudget spends one allowed disruption, as the disruption controller would
count the pod gone; an evicted pod is not recreated (no controller runs here).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from podium.algorithms.default_preemption import offline_group_preemption, offline_preemption
from podium.framework.cycle import Diagnosis
from podium.framework.extension import FailedGroup
from podium.framework.podgroup_preemption import GroupPreemption
from podium.framework.preemption import PreemptionResult
from podium.framework.profile import Profile
from podium.kube.objects import PodInfo
from podium.kube.pdb import Pdb
from podium.state.cache import Cache
from podium.state.podgroups import PodGroup
from podium.state.snapshot import Snapshot

__all__ = ["Evictions", "Nominated", "SimEviction"]


@dataclass(slots=True)
class SimEviction:
    """One pod the simulation evicted: where it ran and who it made room for."""

    pod: str
    uid: str
    node: str
    priority: int
    preemptor: str  # the pod's key, or "podgroup <namespace>/<name>"


class Evictions:
    """The simulation's PodDisruptionBudgets and the pods it has evicted so far."""

    def __init__(self, cache: Cache, pdbs: Iterable[Pdb], groups: Mapping[str, PodGroup]) -> None:
        self.cache = cache
        self.pdbs = list(pdbs)
        self.groups = groups
        self.evicted: list[SimEviction] = []

    def preempt_pod(
        self,
        profile: Profile,
        snapshot: Snapshot,
        pod: PodInfo,
        diagnosis: Diagnosis,
        rng: random.Random,
    ) -> tuple[PreemptionResult | None, list[SimEviction]]:
        """DefaultPreemption's PostFilter for ``pod``; the victims of its candidate are
        evicted. (None, []) when the profile does not preempt."""
        result = offline_preemption(profile, snapshot, pod, diagnosis, rng, self.pdbs, self.groups)
        if result is None or result.candidate is None:
            return result, []
        return result, self._evict(result.candidate.victims, pod.key)

    def preempt_group(
        self, failed: FailedGroup
    ) -> tuple[GroupPreemption | None, list[SimEviction]]:
        """DefaultPreemption's PodGroupPostFilter; on Success its victims are evicted."""
        result = offline_group_preemption(failed, self.groups, self.pdbs)
        if result is None or not result.success:
            return result, []
        return result, self._evict(result.victims, f"podgroup {failed.group.key}")

    def _evict(self, victims: Sequence[PodInfo], preemptor: str) -> list[SimEviction]:
        out: list[SimEviction] = []
        for victim in victims:
            state = self.cache.pods.get(victim.uid)
            if state is None:
                continue
            self.cache.remove_pod(victim.uid)
            out.append(SimEviction(victim.key, victim.uid, state.node, victim.priority, preemptor))
            self.pdbs = [_spend(pdb, victim) for pdb in self.pdbs]
        self.evicted.extend(out)
        return out


def _spend(pdb: Pdb, victim: PodInfo) -> Pdb:
    """The budget once ``victim`` is gone: one disruption fewer allowed where it matched,
    unless the budget already counts the pod as disrupted (filterPodsWithPDBViolation
    skips those too)."""
    if not pdb.matches(victim) or victim.name in pdb.disrupted_pods:
        return pdb
    return replace(pdb, disruptions_allowed=max(pdb.disruptions_allowed - 1, 0))


class Nominated:
    """The nominations a group preemption gave its members (Go's ProposedAssignments),
    for the group's next cycle: each member's node is tried first, and a member not yet
    placed holds its room on that node for the others (``filter_with_nominated``)."""

    def __init__(self, cache: Cache, members: Iterable[PodInfo], nodes: Mapping[str, str]) -> None:
        self.cache = cache
        self.pods = {pod.uid: pod for pod in members if pod.uid in nodes}
        self.nodes = dict(nodes)
        # What the preemption gave, as a pod's status would name it: ``restore`` reads it.
        self.given = dict(nodes)

    @property
    def by_node(self) -> Mapping[str, Mapping[str, PodInfo]]:
        out: dict[str, dict[str, PodInfo]] = {}
        for uid, node in self.nodes.items():
            if uid in self.pods and uid not in self.cache.pods:  # placed: in the cache
                out.setdefault(node, {})[uid] = self.pods[uid]
        return out

    def node_of(self, uid: str) -> str:
        return self.nodes.get(uid, "")

    def lower_priority_on(self, node: str, priority: int) -> list[PodInfo]:
        held = self.by_node.get(node, {})
        return [pod for pod in held.values() if pod.priority < priority]

    def remove(self, uid: str) -> None:
        self.nodes.pop(uid, None)
        self.pods.pop(uid, None)

    def restore(self, pod: PodInfo) -> None:
        node = self.given.get(pod.uid)
        if node:
            self.nodes[pod.uid] = node
            self.pods[pod.uid] = pod
