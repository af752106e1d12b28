"""NodePorts: the pod's host ports must be free on the node.

HostPortInfo.CheckConflict: a wanted port conflicts with a used one of the
same protocol and number when either binds 0.0.0.0 or both bind the same IP.
Ports come from the containers and the restartable (sidecar) init containers;
an empty hostIP means 0.0.0.0 and an empty protocol TCP. Only nodes with host
ports in use are looked at.
"""

from __future__ import annotations

from collections.abc import Iterable

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
from podium.kube.objects import HostPort

REASON = "node(s) didn't have free ports for the requested pod ports"
ANY_IP = "0.0.0.0"


def conflicts(
    wanted: Iterable[HostPort], used: Iterable[HostPort]
) -> list[tuple[HostPort, HostPort]]:
    """(wanted, used) pairs that collide."""
    by_port: dict[tuple[str, int], list[HostPort]] = {}
    for port in used:
        by_port.setdefault((port.protocol or "TCP", port.port), []).append(port)
    out = []
    for want in wanted:
        if want.port <= 0:
            continue
        ip = want.host_ip or ANY_IP
        for have in by_port.get((want.protocol or "TCP", want.port), ()):
            have_ip = have.host_ip or ANY_IP
            if ip == ANY_IP or have_ip in (ANY_IP, ip):
                out.append((want, have))
    return out


@register
class NodePorts(FilterPlugin):
    name = "NodePorts"
    description = "Rejects nodes where one of the pod's hostPorts is already taken."
    events = ClusterEvent.NODE_ADD | ClusterEvent.ASSIGNED_POD_DELETE

    def sign_pod(self, cycle: Cycle) -> SignFragments | None:
        """NodePorts.SignPod: the host port numbers."""
        pod = cycle.pod
        return {signers.HOST_PORTS: signers.host_ports_signer(pod)}

    def filter(self, cycle: Cycle, nodes: IndexArray) -> list[Rejection]:
        wanted = cycle.pod.host_ports
        if not wanted:
            return []
        snap = cycle.snapshot
        mask = np.zeros(len(nodes), dtype=bool)
        for pos in np.flatnonzero(snap.has_ports[nodes]):
            used = [p for p, n in snap.ports[nodes[pos]].items() if n > 0]
            mask[pos] = bool(conflicts(wanted, used))
        return [Rejection(REASON, mask)] if mask.any() else []

    def explain(self, cycle: Cycle, node: int) -> str:
        used = [p for p, n in cycle.snapshot.ports[node].items() if n > 0]
        found = (
            f"host port {w.protocol}/{w.host_ip}:{w.port} in use"
            + (f" (bound to {h.host_ip})" if h.host_ip != w.host_ip else "")
            for w, h in conflicts(cycle.pod.host_ports, used)
        )
        return ", ".join(dict.fromkeys(found))
