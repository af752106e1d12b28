"""NodeName: a pod that names its node fits only there."""

from __future__ import annotations

import numpy as np

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

REASON = "node(s) didn't match the requested node name"


@register
class NodeName(FilterPlugin):
    name = "NodeName"
    description = "Rejects every node but the one in spec.nodeName, when it is set."
    events = ClusterEvent.NODE_ADD

    def sign_pod(self, cycle: Cycle) -> SignFragments | None:
        """NodeName.SignPod: spec.nodeName."""
        pod = cycle.pod
        return {signers.NODE_NAME: pod.node_name}

    def filter(self, cycle: Cycle, nodes: IndexArray) -> list[Rejection]:
        wanted = cycle.pod.node_name
        if not wanted:
            return []
        target = cycle.snapshot.index.get(wanted, -1)
        mask = np.asarray(nodes != target)
        return [Rejection(REASON, mask, unresolvable=True)] if mask.any() else []

    def explain(self, cycle: Cycle, node: int) -> str:
        return f"pod asks for node {cycle.pod.node_name!r}"
