"""A pod group's devices in the offline tools (simulate, explain): each member's
allocations held in flight from its placement on, so the next member of the same
pod-group cycle sees those devices taken.

kube-scheduler v1.37.2 runs DynamicResources' Reserve for each member as the pod-group
cycle assumes it (``SignalClaimPendingAllocation``) and Unreserve when the group is
reverted. The live cycle does the same through the plugin's own Reserve and Unreserve
(``run_group_reserve``); the tools bind nothing, so they hold the allocations alone.
A claim that members share is allocated by the first and shared by the others, as in
the live cycle (the plan's ``group``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from podium.algorithms.dynamic_resources.claim_binder import assume, release
from podium.algorithms.dynamic_resources.extended import uses_dra
from podium.algorithms.dynamic_resources.plugin import ClaimPlan, DynamicResources, plan_claims
from podium.kube.objects import PodInfo
from podium.state.dra import DraStore
from podium.state.snapshot import Snapshot

__all__ = ["GroupClaims"]


@dataclass(slots=True)
class GroupClaims:
    """Reserve and Unreserve for the members of one pod-group cycle, and their plans for
    PreBind. Without the DynamicResources plugin in the profile, claims are left alone."""

    store: DraStore
    snapshot: Snapshot
    plugin: DynamicResources | None
    plans: dict[str, ClaimPlan] = field(default_factory=dict)

    def reserve(self, pod: PodInfo, node: str) -> None:
        """Reserve: the member's allocations on ``node`` go in flight (PluginError when
        they cannot be had, as for a single pod)."""
        if self.plugin is None or not uses_dra(self.store, pod):
            return
        row = self.snapshot.index[node]
        plan = plan_claims(self.plugin, self.store, pod, self.snapshot.nodes[row], row)
        assume(self.store, pod, plan)
        self.plans[pod.uid] = plan

    def unreserve(self, pod: PodInfo) -> None:
        """Unreserve: the member's in-flight allocations are dropped (nothing was written)."""
        plan = self.plans.pop(pod.uid, None)
        if plan is not None:
            release(self.store, pod, plan)
