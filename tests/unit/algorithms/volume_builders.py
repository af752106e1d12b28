"""Raw storage objects and a snapshot with a filled volume store, for plugin tables."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from podium.state.snapshot import Snapshot

from .conftest import snapshot

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def affinity(key: str, *values: str) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}
    return {"required": {"nodeSelectorTerms": [term]}}


def pv(
    name: str,
    sc: str = "wffc",
    size: str = "1Gi",
    modes: Sequence[str] = ("ReadWriteOnce",),
    node_affinity: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    phase: str = "Available",
    claim: str | None = None,
    csi: tuple[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "capacity": {"storage": size},
        "accessModes": list(modes),
        "storageClassName": sc,
    }
    if node_affinity is not None:
        spec["nodeAffinity"] = dict(node_affinity)
    if claim is not None:
        spec["claimRef"] = {"namespace": "default", "name": claim}
    if csi is not None:
        spec["csi"] = {"driver": csi[0], "volumeHandle": csi[1]}
    return {
        "metadata": {"name": name, "labels": dict(labels or {}), "resourceVersion": "1"},
        "spec": spec,
        "status": {"phase": phase},
    }


def pvc(
    name: str,
    sc: str = "wffc",
    size: str = "1Gi",
    modes: Sequence[str] = ("ReadWriteOnce",),
    volume: str = "",
    annotations: Mapping[str, str] | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": f"uid-{name}",
        "annotations": dict(annotations or {}),
        "resourceVersion": "1",
    }
    if volume:
        meta["annotations"]["pv.kubernetes.io/bind-completed"] = "yes"
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: dict[str, Any] = {
        "accessModes": list(modes),
        "resources": {"requests": {"storage": size}},
        "storageClassName": sc,
    }
    if volume:
        spec["volumeName"] = volume
    return {"metadata": meta, "spec": spec}


def storage_class(
    name: str, mode: str = "WaitForFirstConsumer", provisioner: str = "kubernetes.io/no-provisioner"
) -> dict[str, Any]:
    return {"metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode}


def csinode(name: str, **limits: int) -> dict[str, Any]:
    drivers = [
        {"name": d.replace("_", "."), "allocatable": {"count": n}} for d, n in limits.items()
    ]
    return {"metadata": {"name": name}, "spec": {"drivers": drivers}}


def claims(*names: str) -> list[dict[str, Any]]:
    return [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": n}} for i, n in enumerate(names)
    ]


DEFAULT_CLASSES = (storage_class("wffc"), storage_class("imm", mode="Immediate"))


def volume_snapshot(
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]] = (),
    pvs: Iterable[Mapping[str, Any]] = (),
    pvcs: Iterable[Mapping[str, Any]] = (),
    classes: Iterable[Mapping[str, Any]] = DEFAULT_CLASSES,
    csinodes: Iterable[Mapping[str, Any]] = (),
) -> Snapshot:
    snap = snapshot(nodes, pods)
    for kind, bodies in (
        ("persistentvolumes", pvs),
        ("persistentvolumeclaims", pvcs),
        ("storageclasses", classes),
        ("csinodes", csinodes),
    ):
        for body in bodies:
            snap.volumes.apply(kind, None, body)
    return snap
