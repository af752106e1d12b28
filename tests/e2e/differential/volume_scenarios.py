"""Random storage states for differential runs of the volume plugins against kube-scheduler.

A scenario is a few zoned nodes, StorageClasses (WaitForFirstConsumer without
a provisioner, Immediate, a CSI class), PVs (local to one node, zonal by
node affinity, zone-labelled, CSI), claims (unbound, bound, prebound,
ReadWriteOncePod), CSINode limits, pods already using claims, and one
incoming pod with one or two claims. Object names are templates: ``{p}``
is replaced per run so each scheduler sees fresh, identical objects.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from tests.e2e.storage import (
    HOSTNAME,
    ZONE,
    make_csinode,
    make_pv,
    make_pvc,
    make_storage_class,
    node_affinity,
)

ZONES = ("z1", "z2")
DRIVER = "csi.podium.dev"
SIZES = ("1Gi", "2Gi", "5Gi")


@dataclass
class VolumeScenario:
    seed: int
    nodes: list[dict[str, Any]] = field(default_factory=list)
    classes: list[dict[str, Any]] = field(default_factory=list)
    pvs: list[tuple[dict[str, Any], str]] = field(default_factory=list)  # (PV, status phase)
    claims: list[dict[str, Any]] = field(default_factory=list)
    csinodes: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    incoming: dict[str, Any] = field(default_factory=dict)


def _node(name: str, zone: str) -> dict[str, Any]:
    resources = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {HOSTNAME: name, ZONE: zone}},
        "spec": {},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def _pod(name: str, claims: list[str], node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
        "volumes": [
            {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
            for i, c in enumerate(claims)
        ],
    }
    if node:
        spec["nodeName"] = node
        spec["schedulerName"] = "none"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def generate(seed: int, prefix: str, namespace_slot: str = "{ns}") -> VolumeScenario:
    """``prefix`` names the nodes; PV and class names carry ``{p}``, claims' namespace ``{ns}``."""
    rng = random.Random(seed)
    s = VolumeScenario(seed)
    names = [f"{prefix}-n{i}" for i in range(rng.randint(2, 4))]
    zones = {n: rng.choice(ZONES) for n in names}
    s.nodes = [_node(n, zones[n]) for n in names]
    wffc, immediate, csi = "{p}-wffc", "{p}-imm", "{p}-csi"
    s.classes = [
        make_storage_class(wffc),
        make_storage_class(immediate, mode="Immediate"),
        make_storage_class(csi, mode="Immediate", provisioner=DRIVER),
    ]
    # Free PVs for WaitForFirstConsumer claims.
    for i in range(rng.randint(0, 4)):
        kind = rng.choice(["local", "zonal", "any"])
        affinity = None
        if kind == "local":
            affinity = node_affinity(HOSTNAME, [rng.choice(names)])
        elif kind == "zonal":
            affinity = node_affinity(ZONE, [rng.choice(ZONES)])
        modes = [rng.choice(["ReadWriteOnce", "ReadWriteOnce", "ReadWriteMany"])]
        pv = make_pv(f"{{p}}-free{i}", wffc, rng.choice(SIZES), modes, affinity)
        s.pvs.append((pv, rng.choice(["Available", "Available", "Available", "Released"])))
    incoming: list[str] = []
    for j in range(rng.randint(1, 2)):
        kind = rng.choices(
            ["wffc", "bound", "bound-csi", "rwop", "immediate", "missing"], [5, 3, 2, 2, 1, 1]
        )[0]
        claim = f"c{j}"
        if kind == "wffc":
            modes = [rng.choice(["ReadWriteOnce", "ReadWriteMany"])]
            s.claims.append(make_pvc(claim, wffc, rng.choice(SIZES[:2]), modes))
        elif kind in ("bound", "rwop"):
            pv_name = f"{{p}}-bound{j}"
            labels, affinity = {}, None
            if rng.random() < 0.5:
                labels = {ZONE: rng.choice(ZONES)}
            elif rng.random() < 0.5:
                affinity = node_affinity(
                    rng.choice([HOSTNAME, ZONE]), [rng.choice(names + list(ZONES))]
                )
            modes = ["ReadWriteOncePod"] if kind == "rwop" else ["ReadWriteOnce"]
            pv = make_pv(
                pv_name, wffc, "1Gi", modes, affinity, labels, claim=(namespace_slot, claim)
            )
            s.pvs.append((pv, "Bound"))
            s.claims.append(make_pvc(claim, wffc, "1Gi", modes, volume_name=pv_name))
            if kind == "rwop" and rng.random() < 0.6:
                s.pods.append(_pod(f"holder{j}", [claim], rng.choice(names)))
        elif kind == "bound-csi":
            pv_name = f"{{p}}-csi{j}"
            pv = make_pv(
                pv_name, csi, "1Gi", csi=(DRIVER, f"{{p}}-h{j}"), claim=(namespace_slot, claim)
            )
            s.pvs.append((pv, "Bound"))
            s.claims.append(make_pvc(claim, csi, "1Gi", volume_name=pv_name))
        elif kind == "immediate":
            s.claims.append(make_pvc(claim, immediate, "1Gi"))
        incoming.append(claim)
    # CSI volumes already attached, and per-node limits.
    attached = 0
    for node in names:
        if rng.random() < 0.5:
            s.csinodes.append(make_csinode(node, {DRIVER: rng.randint(0, 2)}))
        for _ in range(rng.randint(0, 2)):
            claim = f"att{attached}"
            pv_name = f"{{p}}-att{attached}"
            pv = make_pv(
                pv_name,
                csi,
                "1Gi",
                csi=(DRIVER, f"{{p}}-a{attached}"),
                claim=(namespace_slot, claim),
            )
            s.pvs.append((pv, "Bound"))
            s.claims.append(make_pvc(claim, csi, "1Gi", volume_name=pv_name))
            s.pods.append(_pod(f"user{attached}", [claim], node))
            attached += 1
    s.incoming = _pod("incoming", incoming)
    return s
