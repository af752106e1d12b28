"""NodeConditions: the seed's CheckNodeCondition and pressure predicates, opt-in.

kube-scheduler has no such filter: it relies on the node-lifecycle controller
turning conditions into taints, which TaintToleration then checks, so this
plugin is not in the default profile. A SchedulerPolicy that lists it also
reads the conditions directly, so a NotReady node is avoided even in clusters
where that controller is slow or absent; put it after TaintToleration so that
tainted NotReady nodes still report the taint. BestEffort pods avoid memory
pressure, as the kubelet would evict them first.
"""

from __future__ import annotations

from podium.framework.plugin import ClusterEvent, Cycle, FilterPlugin, IndexArray, Rejection
from podium.framework.registry import register

NOT_READY = "node(s) were not ready"
MEMORY_PRESSURE = "node(s) had memory pressure"
DISK_PRESSURE = "node(s) had disk pressure"
PID_PRESSURE = "node(s) had pid pressure"
NETWORK_UNAVAILABLE = "node(s) had unavailable network"


@register
class NodeConditions(FilterPlugin):
    name = "NodeConditions"
    description = (
        "Rejects nodes that are not Ready, have disk or PID pressure, an unavailable "
        "network, or memory pressure (BestEffort pods only)."
    )
    events = ClusterEvent.NODE_ADD | ClusterEvent.NODE_CONDITION

    def filter(self, cycle: Cycle, nodes: IndexArray) -> list[Rejection]:
        snap = cycle.snapshot
        # One reason per node, in the seed's order of precedence.
        left = snap.not_ready[nodes].copy()
        out = [Rejection(NOT_READY, left.copy(), unresolvable=True)] if left.any() else []
        checks = [
            (NETWORK_UNAVAILABLE, snap.pressure["NetworkUnavailable"]),
            (DISK_PRESSURE, snap.pressure["DiskPressure"]),
            (PID_PRESSURE, snap.pressure["PIDPressure"]),
        ]
        if cycle.pod.best_effort:
            checks.insert(0, (MEMORY_PRESSURE, snap.pressure["MemoryPressure"]))
        for reason, column in checks:
            mask = column[nodes] & ~left
            if mask.any():
                out.append(Rejection(reason, mask, unresolvable=reason != MEMORY_PRESSURE))
                left |= mask
        return out

    def explain(self, cycle: Cycle, node: int) -> str:
        info = cycle.snapshot.nodes[node]
        bad = [
            f"{k}={v}" for k, v in sorted(info.conditions.items()) if k != "Ready" and v == "True"
        ]
        ready = info.conditions.get("Ready", "Unknown")
        return f"conditions Ready={ready}" + (", " + ", ".join(bad) if bad else "")
