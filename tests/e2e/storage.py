"""PV, PVC, StorageClass and CSINode builders and writers for the e2e suites.

No PV controller runs in the test cluster, so tests set what it would:
``status.phase: Available`` on new PVs, and ``volumeName`` plus the
bind-completed annotation on claims that start bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def node_affinity(key: str, values: Sequence[str]) -> dict[str, Any]:
    return {
        "required": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}
            ]
        }
    }


def make_pv(
    name: str,
    storage_class: str,
    size: str = "1Gi",
    modes: Sequence[str] = ("ReadWriteOnce",),
    affinity: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    csi: tuple[str, str] | None = None,
    claim: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """A PV; ``csi`` is (driver, handle), ``claim`` (namespace, name) prebinds it."""
    spec: dict[str, Any] = {
        "capacity": {"storage": size},
        "accessModes": list(modes),
        "storageClassName": storage_class,
        "persistentVolumeReclaimPolicy": "Retain",
    }
    if csi is not None:
        spec["csi"] = {"driver": csi[0], "volumeHandle": csi[1]}
    else:
        spec["hostPath"] = {"path": f"/tmp/{name}"}
    if affinity is not None:
        spec["nodeAffinity"] = dict(affinity)
    if claim is not None:
        spec["claimRef"] = {"namespace": claim[0], "name": claim[1]}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": spec,
    }


def make_pvc(
    name: str,
    storage_class: str,
    size: str = "1Gi",
    modes: Sequence[str] = ("ReadWriteOnce",),
    volume_name: str = "",
) -> dict[str, Any]:
    """A claim; with ``volume_name`` it is created already bound (bind-completed)."""
    meta: dict[str, Any] = {"name": name}
    spec: dict[str, Any] = {
        "accessModes": list(modes),
        "resources": {"requests": {"storage": size}},
        "storageClassName": storage_class,
    }
    if volume_name:
        meta["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
        spec["volumeName"] = volume_name
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}


def make_storage_class(
    name: str, mode: str = "WaitForFirstConsumer", provisioner: str = "kubernetes.io/no-provisioner"
) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }


def make_csinode(node: str, limits: Mapping[str, int]) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": node},
        "spec": {
            "drivers": [
                {"name": driver, "nodeID": node, "topologyKeys": [], "allocatable": {"count": n}}
                for driver, n in limits.items()
            ]
        },
    }


def claim_volume(claim: str, volume: str = "data") -> dict[str, Any]:
    return {"name": volume, "persistentVolumeClaim": {"claimName": claim}}


class Storage:
    """Creates storage objects for one test and deletes the cluster-scoped ones after it."""

    def __init__(self, api: ApiClient, namespace: str) -> None:
        self.core = client.CoreV1Api(api)
        self.storage = client.StorageV1Api(api)
        self.namespace = namespace
        self.pvs: list[str] = []
        self.classes: list[str] = []
        self.csinodes: list[str] = []

    async def pv(self, body: dict[str, Any], phase: str = "Available") -> None:
        await self.core.create_persistent_volume(body)
        self.pvs.append(body["metadata"]["name"])
        if phase:
            await self.core.patch_persistent_volume_status(
                body["metadata"]["name"], {"status": {"phase": phase}}
            )

    async def pvc(self, body: dict[str, Any]) -> None:
        await self.core.create_namespaced_persistent_volume_claim(self.namespace, body)

    async def storage_class(self, body: dict[str, Any]) -> None:
        await self.storage.create_storage_class(body)
        self.classes.append(body["metadata"]["name"])

    async def csinode(self, body: dict[str, Any]) -> None:
        await self.storage.create_csi_node(body)
        self.csinodes.append(body["metadata"]["name"])

    async def read_pv(self, name: str) -> dict[str, Any]:
        raw = await self.core.read_persistent_volume(name, _preload_content=False)
        return dict(await raw.json())

    async def read_pvc(self, name: str) -> dict[str, Any]:
        raw = await self.core.read_namespaced_persistent_volume_claim(
            name, self.namespace, _preload_content=False
        )
        return dict(await raw.json())

    async def cleanup(self) -> None:
        """Delete, dropping the protection finalizers that no controller would clear."""
        unprotect = {"metadata": {"finalizers": None}}
        claims = await self.core.list_namespaced_persistent_volume_claim(self.namespace)
        for item in claims.items:
            name = item.metadata.name
            await self.core.patch_namespaced_persistent_volume_claim(
                name, self.namespace, unprotect
            )
            await self.core.delete_namespaced_persistent_volume_claim(name, self.namespace)
        for name in self.pvs:
            await self.core.patch_persistent_volume(name, unprotect)
            await self.core.delete_persistent_volume(name)
        for name in self.classes:
            await self.storage.delete_storage_class(name)
        for name in self.csinodes:
            await self.storage.delete_csi_node(name)
