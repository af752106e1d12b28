"""VolumeBinding's PreBind against a fake API: each write is made on the object as it
is, so a PV controller writing part of the bind meanwhile does not fail it, and pods of
one pod group that share a WaitForFirstConsumer claim share its PV."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any, cast

import pytest

from podium.algorithms.volume_binder import VolumeBinder, VolumePlan
from podium.kube.client import ApiError, KubeClient
from podium.kube.manifests import make_pod
from podium.kube.objects import PodInfo, parse_pod
from podium.state.volumes import VolumeStore

PV = "/api/v1/persistentvolumes/pv0"
PVC = "/api/v1/namespaces/ns/persistentvolumeclaims/data"


class FakeApi:
    """A PV and a claim held server-side with resourceVersions (409 on a stale write)."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {
            PV: {
                "kind": "PersistentVolume",
                "metadata": {"name": "pv0", "resourceVersion": "1"},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "local",
                },
                "status": {"phase": "Available"},
            },
            PVC: {
                "kind": "PersistentVolumeClaim",
                "metadata": {
                    "name": "data",
                    "namespace": "ns",
                    "uid": "pvc-uid",
                    "resourceVersion": "1",
                },
                "spec": {
                    "storageClassName": "local",
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}},
                },
                "status": {"phase": "Pending"},
            },
        }
        self.writes: list[str] = []
        # What another writer (the PV controller) does after one of ours, once.
        self.after: dict[str, Callable[[FakeApi], None]] = {}

    async def request(self, method: str, path: str, body: Any = None) -> Any:
        await asyncio.sleep(0)  # another bind may run in between, as on the wire
        key = path.removesuffix("/status")
        stored = self.objects[key]
        if body["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"]:
            raise ApiError(409, {"message": "the object has been modified"})
        self.writes.append(path)
        new = copy.deepcopy(body)
        if path.endswith("/status"):
            new = {**copy.deepcopy(stored), "status": new.get("status", {})}
        new["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 1)
        self.objects[key] = new
        answer = copy.deepcopy(new)
        meanwhile = self.after.pop(path, None)
        if meanwhile is not None:
            meanwhile(self)
        return answer

    def modify(self, key: str, edit: Callable[[dict[str, Any]], None]) -> None:
        """A write by someone else: the object changes and gets a new resourceVersion."""
        stored = self.objects[key]
        edit(stored)
        stored["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 1)

    async def get(self, path: str) -> Any:
        return copy.deepcopy(self.objects[path])


def _pod(name: str) -> PodInfo:
    body = make_pod(name)
    body["metadata"].update(namespace="ns", uid=f"u{name}")
    return parse_pod(body)


@pytest.mark.parametrize("concurrent", [False, True], ids=["one-after-the-other", "at-once"])
def test_members_sharing_a_claim_bind_its_pv_once(concurrent: bool) -> None:
    api = FakeApi()
    store = VolumeStore()
    store.load(copy.deepcopy(list(api.objects.values())))
    claim = store.claim("ns", "data")
    pv = store.pvs["pv0"]
    assert claim is not None
    binder = VolumeBinder(cast(KubeClient, api), store, poll=0.01)
    plans = [VolumePlan([(claim, pv)]) for _ in range(2)]
    for plan in plans:
        binder.assume(plan)
    pods = [_pod("a"), _pod("b")]

    async def bind_all() -> list[str]:
        binds = [binder.bind(p, "n1", q, 5.0) for p, q in zip(pods, plans, strict=True)]
        if concurrent:
            return list(await asyncio.gather(*binds))
        return [await b for b in binds]

    assert asyncio.run(bind_all()) == ["", ""]
    assert api.writes.count(PV) == 1, api.writes
    assert api.objects[PV]["spec"]["claimRef"]["uid"] == "pvc-uid"
    assert api.objects[PVC]["spec"]["volumeName"] == "pv0"
    assert api.objects[PVC]["status"]["phase"] == "Bound"
    assert not store.assumed


def test_a_pv_taken_by_another_claim_still_fails_the_bind() -> None:
    api = FakeApi()
    store = VolumeStore()
    store.load(copy.deepcopy(list(api.objects.values())))
    claim, pv = store.claim("ns", "data"), store.pvs["pv0"]
    assert claim is not None
    other = copy.deepcopy(api.objects[PV])
    other["spec"]["claimRef"] = {"namespace": "ns", "name": "other", "uid": "other-uid"}
    other["metadata"]["resourceVersion"] = "2"
    api.objects[PV] = other
    binder = VolumeBinder(cast(KubeClient, api), store, poll=0.01)
    plan = VolumePlan([(claim, pv)])
    binder.assume(plan)
    why = asyncio.run(binder.bind(_pod("a"), "n1", plan, 5.0))
    assert "modified" in why and not why.startswith("HTTP"), why
    assert not store.assumed


def _controller_binds_claim(api: FakeApi) -> None:
    """The PV controller's syncClaim after our claimRef: the claim bound, both Bound."""

    def claim(body: dict[str, Any]) -> None:
        body["spec"]["volumeName"] = "pv0"
        body["metadata"]["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
        body["status"] = {"phase": "Bound"}

    api.modify(PVC, claim)
    api.modify(PV, lambda body: body["status"].update(phase="Bound"))


def _controller_touches_pv(api: FakeApi) -> None:
    """Some controller write to the PV that leaves the bind to us (a new version only)."""
    api.modify(PV, lambda body: body["metadata"].setdefault("labels", {}).update(seen="yes"))


@pytest.mark.parametrize(
    ("after", "meanwhile", "writes"),
    [
        pytest.param(PV, _controller_binds_claim, [PV], id="controller-finishes-the-bind"),
        pytest.param(
            PV,
            _controller_touches_pv,
            [PV, PVC, PV + "/status", PVC + "/status"],
            id="controller-changes-the-pv",
        ),
    ],
)
def test_a_controller_writing_meanwhile_does_not_fail_the_bind(
    after: str, meanwhile: Callable[[FakeApi], None], writes: list[str]
) -> None:
    api = FakeApi()
    api.after[after] = meanwhile
    store = VolumeStore()
    store.load(copy.deepcopy(list(api.objects.values())))
    claim = store.claim("ns", "data")
    assert claim is not None
    binder = VolumeBinder(cast(KubeClient, api), store, poll=0.01)
    plan = VolumePlan([(claim, store.pvs["pv0"])])
    binder.assume(plan)
    assert asyncio.run(binder.bind(_pod("a"), "n1", plan, 5.0)) == ""
    assert api.writes == writes
    assert api.objects[PV]["spec"]["claimRef"]["uid"] == "pvc-uid"
    assert api.objects[PV]["status"]["phase"] == "Bound"
    assert api.objects[PVC]["spec"]["volumeName"] == "pv0"
    assert api.objects[PVC]["status"]["phase"] == "Bound"
