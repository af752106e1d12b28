"""VolumeRestrictions: disk conflicts plus ReadWriteOncePod claims in use elsewhere.

The disk part is NoDiskConflict's check (which stays registered under its
seed name). The ReadWriteOncePod part follows kube-scheduler: PreFilter
finds the pod's RWOP claims (a missing claim rejects the pod, unresolvable)
and Filter rejects every node while another pod anywhere uses one of them.
That rejection is plain Unschedulable, as in kube-scheduler, because
preempting the pod that holds the claim frees it; the count is therefore
taken from the snapshot's pods at Filter time, so preemption's what-if edits
are seen.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from podium.algorithms.no_disk_conflict import REASON as DISK_REASON
from podium.algorithms.no_disk_conflict import NoDiskConflict
from podium.framework import signers
from podium.framework.plugin import (
    ClusterEvent,
    Cycle,
    IndexArray,
    PreFilterResult,
    Rejection,
    SignFragments,
)
from podium.framework.registry import register

RWOP = "ReadWriteOncePod"
# The v1.37 binary's wording (older releases said "node has pod using
# PersistentVolumeClaim with the same name and ReadWriteOncePod access mode").
RWOP_REASON = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
    "already in-use by another pod"
)
_STATE = "VolumeRestrictions/rwop"


def claim_names(volumes: tuple[dict[str, object], ...]) -> list[str]:
    """Names of the persistentVolumeClaim volumes (not ephemeral ones), as PVCRefCounts keys."""
    out = []
    for volume in volumes:
        source = volume.get("persistentVolumeClaim")
        if isinstance(source, Mapping):
            out.append(str(source.get("claimName") or ""))
    return out


@register
class VolumeRestrictions(NoDiskConflict):
    name = "VolumeRestrictions"
    description = (
        "Rejects nodes with a conflicting GCE PD, AWS EBS, iSCSI or RBD disk in use, and "
        "every node while a ReadWriteOncePod claim of the pod is used by another pod."
    )
    events = (
        ClusterEvent.NODE_ADD
        | ClusterEvent.ASSIGNED_POD_DELETE
        | ClusterEvent.ASSIGNED_POD_UPDATE
        | ClusterEvent.VOLUME
    )

    def sign_pod(self, cycle: Cycle) -> SignFragments | None:
        """VolumeRestrictions.SignPod: the volumes but configMaps and secrets."""
        pod = cycle.pod
        return {signers.VOLUMES: signers.volumes_signer(pod)}

    def pre_filter(self, cycle: Cycle) -> PreFilterResult | None:
        pod = cycle.pod
        store = cycle.snapshot.volumes
        wanted: set[str] = set()
        for name in claim_names(pod.volumes):
            claim = store.claim(pod.namespace, name)
            if claim is None:
                return PreFilterResult(reject=f'persistentvolumeclaim "{name}" not found')
            if RWOP in claim.access_modes:
                wanted.add(name)
        cycle.state[_STATE] = frozenset(wanted)
        return None

    def _rwop_in_use(self, cycle: Cycle) -> bool:
        wanted: frozenset[str] = cycle.state.get(_STATE, frozenset())
        if not wanted:
            return False
        pod = cycle.pod
        for _, other in cycle.snapshot.iter_pods():
            if (
                other.uid != pod.uid
                and other.namespace == pod.namespace
                and wanted.intersection(claim_names(other.volumes))
            ):
                return True
        return False

    def filter(self, cycle: Cycle, nodes: IndexArray) -> list[Rejection]:
        rejections = super().filter(cycle, nodes)
        if self._rwop_in_use(cycle):
            disk = rejections[0].mask if rejections else np.zeros(nodes.size, dtype=bool)
            rejections.append(Rejection(RWOP_REASON, ~disk))
        return rejections

    def explain(self, cycle: Cycle, node: int) -> str:
        disk = super().explain(cycle, node)
        if disk or not self._rwop_in_use(cycle):
            return disk
        wanted = sorted(cycle.state.get(_STATE, ()))
        return f"ReadWriteOncePod claim(s) {', '.join(wanted)} already used by another pod"


__all__ = ["DISK_REASON", "RWOP_REASON", "VolumeRestrictions", "claim_names"]
