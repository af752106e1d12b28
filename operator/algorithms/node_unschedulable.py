"""NodeUnschedulable: cordoned nodes take only pods that tolerate the cordon taint."""

from __future__ import annotations

from podium.framework import signers
from podium.framework.plugin import (
    ClusterEvent,
    Cycle,
    FilterPlugin,
    IndexArray,
    Rejection,
    SignFragments,
)
from podium.framework.registry import register
from podium.kube.objects import Taint

REASON = "node(s) were unschedulable"
_CORDON = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


@register
class NodeUnschedulable(FilterPlugin):
    name = "NodeUnschedulable"
    description = "Rejects nodes with spec.unschedulable unless the pod tolerates the cordon."
    events = ClusterEvent.NODE_ADD | ClusterEvent.NODE_TAINT

    def sign_pod(self, cycle: Cycle) -> SignFragments | None:
        """NodeUnschedulable.SignPod: the tolerations."""
        pod = cycle.pod
        return {signers.TOLERATIONS: signers.tolerations_signer(pod)}

    def filter(self, cycle: Cycle, nodes: IndexArray) -> list[Rejection]:
        if any(t.tolerates(_CORDON) for t in cycle.pod.tolerations):
            return []
        mask = cycle.snapshot.unschedulable[nodes]
        return [Rejection(REASON, mask, unresolvable=True)] if mask.any() else []

    def explain(self, cycle: Cycle, node: int) -> str:
        return "node is cordoned (spec.unschedulable) and the pod does not tolerate it"
