"""NoDiskConflict: volumerestrictions' isVolumeConflict rules."""

from __future__ import annotations

from typing import Any

import pytest

from podium.algorithms.no_disk_conflict import REASON, NoDiskConflict
from podium.framework.plugin import ClusterEvent
from podium.policy import default_profile

from .conftest import explain, node, on, pod, run_filter, snapshot, unresolvable


def gce(name: str, ro: bool = False) -> dict[str, Any]:
    return {"name": "v", "gcePersistentDisk": {"pdName": name, "readOnly": ro}}


def ebs(volume: str, ro: bool = False) -> dict[str, Any]:
    return {"name": "v", "awsElasticBlockStore": {"volumeID": volume, "readOnly": ro}}


def iscsi(iqn: str, ro: bool = False, lun: int = 0) -> dict[str, Any]:
    return {
        "name": "v",
        "iscsi": {"targetPortal": "10.0.0.1:3260", "iqn": iqn, "lun": lun, "readOnly": ro},
    }


def rbd(
    monitors: list[str], image: str = "img", pool: str | None = None, ro: bool = False
) -> dict[str, Any]:
    spec: dict[str, Any] = {"monitors": monitors, "image": image, "readOnly": ro}
    if pool is not None:
        spec["pool"] = pool
    return {"name": "v", "rbd": spec}


# (volumes of the pod on n1, volumes of the incoming pod, conflict)
CASES = [
    pytest.param([], [gce("d")], False, id="nothing-in-use"),
    pytest.param([gce("d")], [], False, id="pod-without-volumes"),
    pytest.param([gce("d")], [gce("d")], True, id="gce-same-disk"),
    pytest.param([gce("d")], [gce("e")], False, id="gce-other-disk"),
    pytest.param([gce("d", ro=True)], [gce("d", ro=True)], False, id="gce-both-read-only"),
    pytest.param([gce("d", ro=True)], [gce("d")], True, id="gce-one-read-write"),
    pytest.param([ebs("vol-1")], [ebs("vol-1")], True, id="ebs-same-volume"),
    pytest.param(
        [ebs("vol-1", ro=True)], [ebs("vol-1", ro=True)], True, id="ebs-read-only-still-conflicts"
    ),
    pytest.param([ebs("vol-1")], [ebs("vol-2")], False, id="ebs-other-volume"),
    pytest.param([iscsi("iqn.a")], [iscsi("iqn.a", lun=1)], True, id="iscsi-same-iqn-any-lun"),
    pytest.param(
        [iscsi("iqn.a", ro=True)], [iscsi("iqn.a", ro=True)], False, id="iscsi-both-read-only"
    ),
    pytest.param([iscsi("iqn.a")], [iscsi("iqn.b")], False, id="iscsi-other-iqn"),
    pytest.param([rbd(["m1", "m2"])], [rbd(["m2", "m3"])], True, id="rbd-overlapping-monitors"),
    pytest.param([rbd(["m1"])], [rbd(["m2"])], False, id="rbd-disjoint-monitors"),
    pytest.param([rbd(["m1"], pool="p1")], [rbd(["m1"], pool="p2")], False, id="rbd-other-pool"),
    pytest.param([rbd(["m1"], pool="rbd")], [rbd(["m1"])], True, id="rbd-default-pool"),
    pytest.param([rbd(["m1"], image="a")], [rbd(["m1"], image="b")], False, id="rbd-other-image"),
    pytest.param([rbd(["m1"], ro=True)], [rbd(["m1"], ro=True)], False, id="rbd-both-read-only"),
    pytest.param([rbd([])], [rbd([])], False, id="rbd-no-monitors"),
    pytest.param([gce("d")], [ebs("d")], False, id="different-kinds-never-conflict"),
    pytest.param(
        [{"name": "v", "emptyDir": {}}], [{"name": "v", "emptyDir": {}}], False, id="emptydir"
    ),
    pytest.param(
        [gce("d")], [{"name": "v", "gcePersistentDisk": "oops"}], False, id="malformed-source"
    ),
]


@pytest.mark.parametrize(("used", "wanted", "conflict"), CASES)
def test_conflicts(
    used: list[dict[str, Any]], wanted: list[dict[str, Any]], conflict: bool
) -> None:
    snap = snapshot([node("n1"), node("n2")], [on("n1", pod("old", volumes=used))])
    assert run_filter(NoDiskConflict(), snap, pod("new", volumes=wanted)) == {
        "n1": REASON if conflict else "",
        "n2": "",
    }


def test_resolvable_and_explained() -> None:
    snap = snapshot([node("n1")], [on("n1", pod("old", volumes=[gce("data")]))])
    incoming = pod("new", volumes=[gce("data", ro=True)])
    assert unresolvable(NoDiskConflict(), snap, incoming) == set()
    assert explain(NoDiskConflict(), snap, incoming, "n1") == (
        "gce data (read-only) conflicts with pod default/old using gce data (read-write)"
    )


def test_not_in_the_default_profile() -> None:
    assert "NoDiskConflict" not in [p.name for p in default_profile().filters]


def test_metadata() -> None:
    assert NoDiskConflict.description
    assert NoDiskConflict.events == ClusterEvent.NODE_ADD | ClusterEvent.ASSIGNED_POD_DELETE
