"""Which DeviceClass and devices, or which device plugin, would serve a pod's extended
resources on each feasible node (DRA-backed extended resources, docs/dra.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from podium.algorithms.dynamic_resources.extended import Extended, NodeExtended, uses_dra
from podium.algorithms.dynamic_resources.plugin import (
    PodClaims,
    dynamic_resources,
    node_result,
    prepare,
)
from podium.framework.profile import Profile
from podium.kube.objects import PodInfo
from podium.state.snapshot import Snapshot
from podium.tools.explain.model import NodeRow


def describe(
    ext: Extended,
    variant: NodeExtended,
    allocations: Sequence[Mapping[str, Any]],
    allocatable: Mapping[str, int],
) -> list[str]:
    """One sentence per class-backed resource: its class and devices, or the node's
    device-plugin capacity. ``allocations``: the node's, the extended claim's last."""
    results: list[Mapping[str, Any]] = []
    if variant.claim is not None and allocations:
        results = list((allocations[-1].get("devices") or {}).get("results") or [])
    out = []
    for resource, amount in sorted(ext.requests.items()):
        klass = ext.classes.get(resource)
        if amount <= 0 or klass is None:
            continue
        names = {m["requestName"] for m in variant.mappings if m["resourceName"] == resource}
        if not names:
            have = allocatable.get(resource, 0)
            out.append(f"{resource} {amount}: device plugin ({have} allocatable)")
            continue
        devices = [
            f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}"
            for r in results
            if r.get("request") in names
        ]
        out.append(f"{resource} {amount}: DeviceClass {klass}, devices {', '.join(devices)}")
    return out


def add_extended(
    profile: Profile, snapshot: Snapshot, pod: PodInfo, rows: Sequence[NodeRow]
) -> None:
    """Fill ``NodeRow.extended`` for the feasible rows, with the plugin's own Filter state."""
    plugin = dynamic_resources(profile)
    if plugin is None or not uses_dra(snapshot.dra, pod):
        return
    state = prepare(snapshot.dra, pod, plugin.binding_timeout, plugin.filter_timeout)
    if not isinstance(state, PodClaims) or state.extended is None:
        return
    for row in rows:
        index = snapshot.index[row.node]
        node = snapshot.nodes[index]
        result = node_result(state, node, index)
        variant = state.extended.nodes.get(index)
        if isinstance(result, str) or not isinstance(variant, NodeExtended):
            continue
        row.extended = describe(state.extended, variant, result, node.allocatable)
