"""VolumeZone: a bound PV's zone/region labels must match the node's.

PreFilter collects the topology labels of the PVs the pod's claims are bound
to (claims still waiting for their first consumer are skipped; VolumeBinding
judges those). Filter rejects a node that has any topology label but not a
matching value for each PV label; a beta label on the PV is also matched
against the node's GA label. Rejections are unresolvable, as in
kube-scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass

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
from podium.state.volumes import pod_claims

__all__ = ["REASON", "TOPOLOGY_LABELS", "VolumeZone"]

REASON = "node(s) had no available volume zone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
GA_ZONE = "topology.kubernetes.io/zone"
GA_REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, GA_ZONE, GA_REGION)
_GA = {BETA_ZONE: GA_ZONE, BETA_REGION: GA_REGION}
_STATE = "VolumeZone/topologies"


@dataclass(frozen=True, slots=True)
class PVTopology:
    pv: str
    key: str
    values: frozenset[str]


def _not_found(kind: str, name: str) -> PreFilterResult:
    return PreFilterResult(reject=f'{kind} "{name}" not found')


@register
class VolumeZone(FilterPlugin):
    name = "VolumeZone"
    description = (
        "Rejects nodes outside the zone or region of the PVs the pod's claims are bound to."
    )
    events = ClusterEvent.NODE_ADD | ClusterEvent.NODE_LABEL | ClusterEvent.VOLUME

    def sign_pod(self, cycle: Cycle) -> SignFragments | None:
        """VolumeZone.SignPod: the volumes but configMaps and secrets."""
        pod = cycle.pod
        return {signers.VOLUMES: signers.volumes_signer(pod)}

    def pre_filter(self, cycle: Cycle) -> PreFilterResult | None:
        pod = cycle.pod
        store = cycle.snapshot.volumes
        topologies: list[PVTopology] = []
        for name, _ in pod_claims(pod):
            if not name:
                return PreFilterResult(reject="PersistentVolumeClaim had no name")
            claim = store.claim(pod.namespace, name)
            if claim is None:
                return _not_found("persistentvolumeclaim", name)
            if not claim.volume_name:
                if not claim.storage_class:
                    return PreFilterResult(
                        reject="PersistentVolumeClaim had no pv name and storageClass name"
                    )
                storage_class = store.classes.get(claim.storage_class)
                if storage_class is None:
                    return _not_found("storageclass.storage.k8s.io", claim.storage_class)
                if storage_class.wait_for_first_consumer:
                    continue
                return PreFilterResult(reject="PersistentVolume had no name")
            pv = store.pv(claim.volume_name)
            if pv is None:
                return _not_found("persistentvolume", claim.volume_name)
            for key in TOPOLOGY_LABELS:
                if key in pv.labels:
                    topologies.append(
                        PVTopology(pv.name, key, frozenset(pv.labels[key].split("__")))
                    )
        cycle.state[_STATE] = topologies
        return None

    def filter(self, cycle: Cycle, nodes: IndexArray) -> list[Rejection]:
        topologies: list[PVTopology] = cycle.state.get(_STATE, [])
        if not topologies:
            return []
        mask = np.zeros(nodes.size, dtype=bool)
        for position, row in enumerate(nodes):
            labels = cycle.snapshot.nodes[int(row)].labels
            mask[position] = _conflict(topologies, labels) is not None
        return [Rejection(REASON, mask, unresolvable=True)] if mask.any() else []

    def explain(self, cycle: Cycle, node: int) -> str:
        topologies: list[PVTopology] = cycle.state.get(_STATE, [])
        hit = _conflict(topologies, cycle.snapshot.nodes[node].labels)
        if hit is None:
            return ""
        return f"PV {hit.pv} needs {hit.key} in [{', '.join(sorted(hit.values))}]"


def _conflict(topologies: list[PVTopology], labels: dict[str, str]) -> PVTopology | None:
    if not any(key in labels for key in TOPOLOGY_LABELS):
        return None  # a node without topology labels takes any volume
    for topology in topologies:
        value = labels.get(topology.key)
        if value is None:
            value = labels.get(_GA.get(topology.key, topology.key))
        if value is None or value not in topology.values:
            return topology
    return None
