"""NodePorts: the pod's host ports must be free on the node.

HostPortInfo.CheckConflict: a wanted port conflicts with a used one of the
same protocol and number when either binds 0.0.0.0 or both bind the same IP.
Ports come from the containers and the restartable (sidecar) init containers;
an empty hostIP means 0.0.0.0 and an empty protocol TCP. Only nodes with host
ports in use are looked at.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

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
from podium.state.arrays import MaskArray
from podium.state.rows import RowTracker, kept_index, same_object

if TYPE_CHECKING:
    from podium.state.snapshot import Snapshot

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


PortKey = tuple[str, int]  # (protocol, port number)


class PortIndex:
    """The nodes using each host port, with the IPs bound there, and per port two row
    masks (bound on any IP; bound on 0.0.0.0), kept up to date row by row as binds and
    what-if edits rewrite rows. A filter then costs an array lookup per wanted port,
    where checking each node's ports in Python grew with the nodes already using one."""

    def __init__(self) -> None:
        self.tracker: RowTracker[Counter[HostPort]] = RowTracker(same_object)
        self.by_port: dict[PortKey, dict[str, frozenset[str]]] = {}
        self.any_ip: dict[PortKey, MaskArray] = {}
        self.wildcard: dict[PortKey, MaskArray] = {}
        self.row_of: Mapping[str, int] = {}
        self.rows = 0
        self.stamp: tuple[int, int] | None = None

    def refresh(self, snapshot: Snapshot) -> None:
        stamp = (snapshot.version, len(snapshot))
        if stamp == self.stamp:
            return
        self.stamp = stamp
        renumbered = snapshot.index is not self.row_of or len(snapshot) != self.rows
        touched: set[tuple[int, PortKey]] = set()
        for name, old, new in self.tracker.changes(snapshot, snapshot.ports):
            used = _in_use(new)
            for key in {_key(p) for p in _in_use(old)} | {_key(p) for p in used}:
                ips = frozenset(p.host_ip or ANY_IP for p in used if _key(p) == key)
                nodes = self.by_port.setdefault(key, {})
                if ips:
                    nodes[name] = ips
                else:
                    nodes.pop(name, None)
                    if not nodes:
                        del self.by_port[key]
                if new is not None and not renumbered:
                    touched.add((snapshot.index[name], key))
        self.row_of, self.rows = snapshot.index, len(snapshot)
        if renumbered:
            self.any_ip.clear()
            self.wildcard.clear()
            for key in self.by_port:
                self._build(key)
            return
        for row, key in touched:
            ips = self.by_port.get(key, {}).get(snapshot.names[row], frozenset())
            if key not in self.any_ip:
                self._build(key)
            self.any_ip[key][row] = bool(ips)
            self.wildcard[key][row] = ANY_IP in ips

    def _build(self, key: PortKey) -> None:
        any_ip = np.zeros(self.rows, dtype=bool)
        wildcard = np.zeros(self.rows, dtype=bool)
        for name, ips in self.by_port.get(key, {}).items():
            row = self.row_of[name]
            any_ip[row] = True
            wildcard[row] = ANY_IP in ips
        self.any_ip[key], self.wildcard[key] = any_ip, wildcard

    def conflicting(self, key: PortKey, ip: str) -> MaskArray | None:
        """Rows where a pod binding ``key`` on ``ip`` collides (CheckConflict); None if
        no node uses the port."""
        if key not in self.by_port:
            return None
        if ip == ANY_IP:
            return self.any_ip[key]
        mask = self.wildcard[key].copy()
        for name, ips in self.by_port[key].items():
            if ip in ips:
                mask[self.row_of[name]] = True
        return mask


def _in_use(ports: Counter[HostPort] | None) -> list[HostPort]:
    return [p for p, n in ports.items() if n > 0] if ports is not None else []


def _key(port: HostPort) -> PortKey:
    return (port.protocol or "TCP", port.port)


def port_index(snapshot: Snapshot) -> PortIndex:
    """The snapshot's PortIndex, brought up to date (cheap when few rows changed)."""
    return kept_index(snapshot, "ports", PortIndex)


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
        index = port_index(cycle.snapshot)
        rejected: MaskArray | None = None
        for want in wanted:
            if want.port <= 0:
                continue
            hit = index.conflicting(_key(want), want.host_ip or ANY_IP)
            if hit is not None:
                rejected = hit if rejected is None else rejected | hit
        if rejected is None:
            return []
        mask: MaskArray = rejected[nodes]
        return [Rejection(REASON, mask)] if mask.any() else []

    def explain(self, cycle: Cycle, node: int) -> str:
        used = [p for p, n in cycle.snapshot.ports[node].items() if n > 0]
        found = (
            f"host port {w.protocol}/{w.host_ip}:{w.port} in use"
            + (f" (bound to {h.host_ip})" if h.host_ip != w.host_ip else "")
            for w, h in conflicts(cycle.pod.host_ports, used)
        )
        return ", ".join(dict.fromkeys(found))
