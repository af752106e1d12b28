"""NodeVolumeLimits: CSI attach limits from CSINode ``allocatable.count``.

A volume is counted once per node by driver and volume handle: the PV's CSI
source when the claim is bound, else the StorageClass provisioner with a
per-claim placeholder handle (kube-scheduler's random-prefix handle), so a
claim still to be provisioned counts too. Nodes without a CSINode, or a
driver without a count, have no limit. Inline and in-tree (migrated) volumes
are not counted. The rejection is resolvable: evicting pods frees slots.
"""

from __future__ import annotations

import numpy as np

from podium.framework import signers
from podium.framework.plugin import (
    ClusterEvent,
    Cycle,
    FilterPlugin,
    IndexArray,
    PreFilterResult,
    Rejection,
    SignFragments,
)
from podium.framework.registry import register
from podium.kube.objects import PodInfo
from podium.state.volumes import VolumeStore, pod_claims

__all__ = ["REASON", "NodeVolumeLimits", "csi_volumes"]

REASON = "node(s) exceed max volume count"
_STATE = "NodeVolumeLimits/new"


def csi_volumes(store: VolumeStore, pod: PodInfo) -> dict[str, str]:
    """filterAttachableVolumes: unique volume name -> CSI driver, for claims that resolve."""
    out: dict[str, str] = {}
    for name, _ in pod_claims(pod):
        claim = store.claim(pod.namespace, name)
        if claim is None:
            continue
        driver = handle = ""
        pv = store.pv(claim.volume_name) if claim.volume_name else None
        if pv is not None:
            driver, handle = pv.csi_driver, pv.csi_handle
        elif claim.storage_class in store.classes:
            driver = store.classes[claim.storage_class].provisioner
            handle = f"podium-{claim.namespace}/{claim.name}"
        if driver and handle:
            out[f"{driver}/{handle}"] = driver
    return out


@register
class NodeVolumeLimits(FilterPlugin):
    name = "NodeVolumeLimits"
    description = "Rejects nodes where the pod's new CSI volumes would exceed the driver's limit."
    events = ClusterEvent.NODE_ADD | ClusterEvent.ASSIGNED_POD_DELETE | ClusterEvent.VOLUME

    def sign_pod(self, cycle: Cycle) -> SignFragments | None:
        """CSILimits.SignPod: the volumes but configMaps and secrets."""
        pod = cycle.pod
        return {signers.VOLUMES: signers.volumes_signer(pod)}

    def pre_filter(self, cycle: Cycle) -> PreFilterResult | None:
        cycle.state[_STATE] = csi_volumes(cycle.snapshot.volumes, cycle.pod)
        return None

    def _over(self, cycle: Cycle, row: int) -> list[tuple[str, int, int]]:
        """(driver, attached, limit) for each driver the pod's new volumes would overflow."""
        new: dict[str, str] = dict(cycle.state.get(_STATE, {}))
        snapshot = cycle.snapshot
        csinode = snapshot.volumes.csinodes.get(snapshot.names[row])
        if not new or csinode is None or not csinode.limits:
            return []
        attached: dict[str, str] = {}
        for other in snapshot.pods[row].values():
            attached.update(csi_volumes(snapshot.volumes, other))
        counts: dict[str, int] = {}
        for unique, driver in attached.items():
            new.pop(unique, None)
            counts[driver] = counts.get(driver, 0) + 1
        wanted: dict[str, int] = {}
        for driver in new.values():
            wanted[driver] = wanted.get(driver, 0) + 1
        return [
            (driver, counts.get(driver, 0), csinode.limits[driver])
            for driver, count in wanted.items()
            if driver in csinode.limits and counts.get(driver, 0) + count > csinode.limits[driver]
        ]

    def filter(self, cycle: Cycle, nodes: IndexArray) -> list[Rejection]:
        if not cycle.state.get(_STATE):
            return []
        mask = np.fromiter((bool(self._over(cycle, int(r))) for r in nodes), bool, nodes.size)
        return [Rejection(REASON, mask)] if mask.any() else []

    def explain(self, cycle: Cycle, node: int) -> str:
        return ", ".join(
            f"{driver} has {attached} of {limit} volumes attached"
            for driver, attached, limit in self._over(cycle, node)
        )
