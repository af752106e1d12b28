"""A profile: the plugins and knobs one schedulerName runs with.

Built from a SchedulerPolicy (see ``policy.py``) or from defaults equal to
kube-scheduler's default profile.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from podium.framework.plugin import ClusterEvent, FilterPlugin, Plugin, ScorePlugin

__all__ = ["DEFAULT_FILTERS", "DEFAULT_SCORES", "Profile"]

T = TypeVar("T")

# kube-scheduler v1.37.2's default profile (default_plugins.go, after its
# feature gates): its filters and its score plugins with their weights, in the
# order it runs them. DynamicResources is inserted just before DefaultPreemption in
# the multi-point list, so it filters after InterPodAffinity and before
# NodeDeclaredFeatures (which the gate appends last) and scores, with weight 2,
# after InterPodAffinity. NodeConditions is Podium's opt-in filter, not part of
# kube-scheduler's profile.
DEFAULT_FILTERS: tuple[str, ...] = (
    "NodeName",
    "NodeUnschedulable",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "VolumeRestrictions",
    "NodeVolumeLimits",
    "VolumeBinding",
    "VolumeZone",
    "PodTopologySpread",
    "InterPodAffinity",
    "DynamicResources",
    "NodeDeclaredFeatures",
)
DEFAULT_SCORES: tuple[tuple[str, int], ...] = (
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodeResourcesFit", 1),
    ("VolumeBinding", 1),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DynamicResources", 2),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
)


@dataclass(slots=True)
class Profile:
    scheduler_name: str = "podium"
    filters: list[FilterPlugin] = field(default_factory=list)
    scores: list[tuple[ScorePlugin, int]] = field(default_factory=list)
    # spec.extensions: plugins at Reserve, Permit, PreBind and PostBind (framework/extension).
    extensions: list[Plugin] = field(default_factory=list)
    # PostFilter plugins of their own, run after the filters' and extensions' PostFilter
    # while ``preemption`` is on: DefaultPreemption (algorithms/default_preemption).
    post_filters: list[Plugin] = field(default_factory=list)
    # PreEnqueue plugins that run before every other: SchedulingGates
    # (algorithms/scheduling_gates), first in kube-scheduler's profile.
    gates: list[Plugin] = field(default_factory=list)
    # PreEnqueue and queueing-hint plugins of their own, after the filters' and extensions':
    # GangScheduling while ``gang_scheduling`` is on (algorithms/gang_scheduling).
    queueing: list[Plugin] = field(default_factory=list)
    percentage_of_nodes_to_score: int = 0
    initial_backoff: float = 1.0
    max_backoff: float = 10.0
    unschedulable_flush: float = 300.0
    post_success_events: bool = True
    dry_run: bool = False
    # Whether ``post_filters`` are in the PostFilter list (``podium run
    # --disable-preemption`` turns it off for every profile).
    preemption: bool = True
    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100
    policy: str = ""
    generation: int = 0
    # spec.decisionRecords: one JSON record per attempt, with the best N nodes' scores.
    record_decisions: bool = True
    record_top_nodes: int = 3
    # spec.shadowOf (DryRun only): also decide, never bind, every pod of that schedulerName.
    shadow_of: str = ""
    # spec.gangScheduling: PodGroup members are placed together, all or none, in one
    # pod-group cycle, and wait for their group in ``queueing`` (needs the Workload API
    # served; kube-scheduler's GenericWorkload with its GangScheduling plugin).
    gang_scheduling: bool = True
    # spec.topologyAwareWorkloadScheduling: the alpha TopologyPlacementGenerator and
    # PodGroupPodsCount plugins (a PodGroup's topology key keeps it in one domain).
    topology_aware_workloads: bool = False
    # spec.opportunisticBatching: kube-scheduler's OpportunisticBatching gate (beta, on):
    # a burst's next pod of the same signature tries the last pod's next-best node first.
    opportunistic_batching: bool = True
    # What ``derived`` worked out from the plugin lists, with the lists it read; a
    # profile made by dataclasses.replace starts its own.
    _derived: dict[object, tuple[tuple[object, ...], Any]] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )

    def derived(self, key: object, compute: Callable[[], T]) -> T:
        """``compute()``, worked out again only when a plugin list changed: a cycle asks
        at every extension point which plugins implement it, and Go's NewFramework builds
        those lists once per profile. Checking costs a tuple comparison."""
        plugins = (
            *self.gates,
            *self.filters,
            *self.scores,
            *self.extensions,
            *self.post_filters,
            *self.queueing,
        )
        kept = self._derived.get(key)
        if kept is None or kept[0] != plugins:
            kept = self._derived[key] = (plugins, compute())
        value: T = kept[1]
        return value

    def interest(self) -> dict[str, ClusterEvent]:
        """Which cluster events each filter wants, for moving unschedulable pods."""
        return {p.name: p.events for p in self.filters}

    def plugin_names(self) -> list[str]:
        names = [p.name for p in self.filters] + [p.name for p, _ in self.scores]
        return names + [p.name for p in self.extensions]
