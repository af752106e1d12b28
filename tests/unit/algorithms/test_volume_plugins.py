"""VolumeRestrictions (RWOP part), VolumeZone and NodeVolumeLimits, table-driven."""

from __future__ import annotations

from typing import Any

import pytest

from podium.algorithms.node_volume_limits import REASON as LIMIT
from podium.algorithms.node_volume_limits import NodeVolumeLimits
from podium.algorithms.volume_restrictions import RWOP_REASON, VolumeRestrictions
from podium.algorithms.volume_zone import REASON as ZONE_CONFLICT
from podium.algorithms.volume_zone import VolumeZone
from podium.framework.plugin import FilterPlugin

from .conftest import node, on, pod, run_filter, unresolvable
from .volume_builders import ZONE, claims, csinode, pv, pvc, storage_class, volume_snapshot

RWOP = ["ReadWriteOncePod"]
NODES = [node("a", zone="z1"), node("b", zone="z2")]
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"

# (plugin, PVs, PVCs, pods already placed, claims of the incoming pod, node -> reason)
CASES = [
    pytest.param(
        VolumeRestrictions,
        [],
        [pvc("c", modes=RWOP, volume="p")],
        [on("a", pod("holder", volumes=claims("c")))],
        ["c"],
        {"a": RWOP_REASON, "b": RWOP_REASON},
        id="rwop-claim-in-use-rejects-all-nodes",
    ),
    pytest.param(
        VolumeRestrictions,
        [],
        [pvc("c", modes=RWOP, volume="p")],
        [on("a", pod("holder", namespace="other", volumes=claims("c")))],
        ["c"],
        {"a": "", "b": ""},
        id="rwop-same-name-other-namespace",
    ),
    pytest.param(
        VolumeRestrictions,
        [],
        [pvc("c", volume="p")],
        [on("a", pod("holder", volumes=claims("c")))],
        ["c"],
        {"a": "", "b": ""},
        id="rwo-claim-may-be-shared",
    ),
    pytest.param(
        VolumeRestrictions,
        [],
        [],
        [],
        ["gone"],
        {
            "a": 'persistentvolumeclaim "gone" not found',
            "b": 'persistentvolumeclaim "gone" not found',
        },
        id="missing-claim",
    ),
    pytest.param(
        VolumeZone,
        [pv("p", phase="Bound", labels={ZONE: "z1"})],
        [pvc("c", volume="p")],
        [],
        ["c"],
        {"a": "", "b": ZONE_CONFLICT},
        id="zone-label",
    ),
    pytest.param(
        VolumeZone,
        [pv("p", phase="Bound", labels={ZONE: "z1__z2"})],
        [pvc("c", volume="p")],
        [],
        ["c"],
        {"a": "", "b": ""},
        id="multi-zone-label",
    ),
    pytest.param(
        VolumeZone,
        [pv("p", phase="Bound", labels={BETA_ZONE: "z2"})],
        [pvc("c", volume="p")],
        [],
        ["c"],
        {"a": ZONE_CONFLICT, "b": ""},
        id="beta-label-matches-ga-node-label",
    ),
    pytest.param(
        VolumeZone,
        [],
        [pvc("c")],
        [],
        ["c"],
        {"a": "", "b": ""},
        id="unbound-wffc-claim-skipped",
    ),
    pytest.param(
        VolumeZone,
        [],
        [pvc("c", sc="imm")],
        [],
        ["c"],
        {"a": "PersistentVolume had no name", "b": "PersistentVolume had no name"},
        id="unbound-immediate-claim",
    ),
    pytest.param(
        VolumeZone,
        [],
        [pvc("c", volume="nope")],
        [],
        ["c"],
        {"a": 'persistentvolume "nope" not found', "b": 'persistentvolume "nope" not found'},
        id="bound-pv-missing",
    ),
    pytest.param(
        NodeVolumeLimits,
        [pv("p1", csi=("csi.x", "h1")), pv("p2", csi=("csi.x", "h2"))],
        [pvc("c1", volume="p1"), pvc("c2", volume="p2")],
        [on("a", pod("user", volumes=claims("c1")))],
        ["c2"],
        {"a": LIMIT, "b": ""},
        id="limit-reached-by-attached-volume",
    ),
    pytest.param(
        NodeVolumeLimits,
        [pv("p1", csi=("csi.x", "h1"))],
        [pvc("c1", volume="p1")],
        [on("a", pod("user", volumes=claims("c1")))],
        ["c1"],
        {"a": "", "b": ""},
        id="shared-volume-counted-once",
    ),
    pytest.param(
        NodeVolumeLimits,
        [pv("p1", csi=("csi.y", "h1")), pv("p2", csi=("csi.x", "h2"))],
        [pvc("c1", volume="p1"), pvc("c2", volume="p2")],
        [on("a", pod("user", volumes=claims("c1")))],
        ["c2"],
        {"a": "", "b": ""},
        id="other-driver-not-counted",
    ),
    pytest.param(
        NodeVolumeLimits,
        [pv("p1", csi=("csi.x", "h1"))],
        [pvc("c1", volume="p1"), pvc("c", sc="csi")],
        [on("a", pod("user", volumes=claims("c1")))],
        ["c"],
        {"a": LIMIT, "b": ""},
        id="unbound-claim-counts-by-provisioner",
    ),
]

CSINODES = [csinode("a", csi_x=1), csinode("b", csi_x=5)]
CLASSES = [storage_class("wffc"), storage_class("imm", mode="Immediate")]


@pytest.mark.parametrize(("plugin", "pvs", "pvcs", "pods", "used", "expected"), CASES)
def test_filter(
    plugin: type[FilterPlugin],
    pvs: list[Any],
    pvcs: list[Any],
    pods: list[Any],
    used: list[str],
    expected: dict[str, str],
) -> None:
    classes = [*CLASSES, storage_class("csi", mode="Immediate", provisioner="csi.x")]
    csinodes = [csinode("a", csi_x=1)] if plugin is NodeVolumeLimits else []
    snap = volume_snapshot(NODES, pods, pvs, pvcs, classes, csinodes)
    assert run_filter(plugin(), snap, pod("p", volumes=claims(*used))) == expected


@pytest.mark.parametrize(
    ("plugin", "pvs", "pvcs", "pods", "used", "expected"),
    [
        pytest.param(
            VolumeRestrictions,
            [],
            [pvc("c", modes=RWOP, volume="p")],
            [on("a", pod("holder", volumes=claims("c")))],
            ["c"],
            set(),
            id="rwop-is-resolvable-by-preemption",
        ),
        pytest.param(
            VolumeZone,
            [pv("p", labels={ZONE: "z1"})],
            [pvc("c", volume="p")],
            [],
            ["c"],
            {"b"},
            id="zone-is-unresolvable",
        ),
        pytest.param(
            NodeVolumeLimits,
            [],
            [pvc("c", sc="csi")],
            [],
            ["c"],
            set(),
            id="limit-is-resolvable",
        ),
    ],
)
def test_resolvability(
    plugin: type[FilterPlugin],
    pvs: list[Any],
    pvcs: list[Any],
    pods: list[Any],
    used: list[str],
    expected: set[str],
) -> None:
    classes = [*CLASSES, storage_class("csi", mode="Immediate", provisioner="csi.x")]
    snap = volume_snapshot(NODES, pods, pvs, pvcs, classes, [csinode("a", csi_x=0)])
    assert unresolvable(plugin(), snap, pod("p", volumes=claims(*used))) == expected


def test_rwop_frees_when_the_holder_is_removed() -> None:
    """Preemption's what-if removal of the holder makes the node fit again."""
    holder = on("a", pod("holder", volumes=claims("c")))
    snap = volume_snapshot(NODES, [holder], pvcs=[pvc("c", modes=RWOP, volume="p")])
    plugin = VolumeRestrictions()
    incoming = pod("p", volumes=claims("c"))
    assert run_filter(plugin, snap, incoming) == {"a": RWOP_REASON, "b": RWOP_REASON}
    row = snap.index["a"]
    backup = snap.edit_row(row, remove=list(snap.pods[row].values()))
    assert run_filter(plugin, snap, incoming) == {"a": "", "b": ""}
    snap.restore_row(row, backup)
