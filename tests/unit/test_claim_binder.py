"""PreBind and Unreserve for DynamicResources against a fake API: what is written, in
which order, and what a failure leaves behind (the reason, which the framework runner
prefixes with the plugin's name)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import Any, cast

import pytest

from podium.algorithms.dynamic_resources.claim_binder import ClaimBinder, ClaimPlan
from podium.kube.client import ApiError, KubeClient
from podium.kube.manifests import make_pod
from podium.kube.objects import parse_pod
from podium.state.dra import FINALIZER, DraStore, parse_claim

PATH = "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c"
ALLOCATION = {"devices": {"results": [{"request": "gpu", "pool": "n1", "device": "gpu-0"}]}}


class FakeApi:
    """One claim held server-side with a resourceVersion; scripted failures by call."""

    def __init__(self, claim: dict[str, Any], fail: Mapping[int, int] | None = None) -> None:
        self.claim = claim
        self.calls: list[tuple[str, str]] = []
        self.fail = dict(fail or {})

    def _answer(self, body: Mapping[str, Any]) -> dict[str, Any]:
        stored = copy.deepcopy(dict(body))
        version = int(self.claim["metadata"]["resourceVersion"]) + 1
        stored["metadata"]["resourceVersion"] = str(version)
        self.claim = stored
        return copy.deepcopy(stored)

    async def request(self, method: str, path: str, body: Any = None) -> Any:
        self.calls.append((method, path))
        status = self.fail.pop(len(self.calls), 0)
        if status:
            raise ApiError(status, {"message": f"scripted {status}"})
        if body["metadata"]["resourceVersion"] != self.claim["metadata"]["resourceVersion"]:
            raise ApiError(409, {"message": "the object has been modified"})
        if path.endswith("/status"):
            merged = {**body, "metadata": self.claim["metadata"]}
            return self._answer(merged)
        return self._answer({**body, "status": self.claim.get("status", {})})

    async def get(self, path: str) -> Any:
        self.calls.append(("GET", path))
        return copy.deepcopy(self.claim)

    async def patch(self, path: str, body: Any, kind: str = "") -> Any:
        self.calls.append(("PATCH", path))
        uid = body["status"]["reservedFor"][0]["uid"]
        claim = copy.deepcopy(self.claim)
        status = claim.setdefault("status", {})
        status["reservedFor"] = [r for r in status.get("reservedFor", []) if r["uid"] != uid]
        return self._answer(claim)


def _claim(allocated: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": "c", "namespace": "ns", "uid": "cu", "resourceVersion": "1"},
        "spec": {"devices": {"requests": [{"name": "gpu"}]}},
    }
    if allocated:
        body["metadata"]["finalizers"] = [FINALIZER]
        body["status"] = {"allocation": dict(ALLOCATION), "reservedFor": [{"uid": "other"}]}
    return body


def _pod() -> Any:
    body = make_pod("p")
    body["metadata"].update(namespace="ns", uid="pu")
    return parse_pod(body)


def _binder(api: FakeApi) -> tuple[ClaimBinder, DraStore, list[str]]:
    store = DraStore()
    store.apply("resourceclaims", None, api.claim)
    woken: list[str] = []

    async def note(pod: Any, reason: str, text: str) -> None:
        woken.append(f"{reason}: {text}")

    binder = ClaimBinder(
        cast(KubeClient, api),
        store,
        lambda kind, event, body: store.apply(kind, event, body) and None,
        woken.append,
        note,
        poll=0.01,
    )
    return binder, store, woken


@pytest.mark.parametrize(
    ("allocated", "fail", "calls", "why"),
    [
        pytest.param(
            False, {}, [("PUT", PATH), ("PUT", PATH + "/status")], "", id="finalizer-then-status"
        ),
        pytest.param(True, {}, [("PUT", PATH + "/status")], "", id="shared-claim-only-reserved"),
        pytest.param(
            False,
            {2: 409},
            [("PUT", PATH), ("PUT", PATH + "/status"), ("GET", PATH), ("PUT", PATH + "/status")],
            "",
            id="conflict-rereads-and-retries",
        ),
        pytest.param(
            False,
            {2: 500},
            [("PUT", PATH), ("PUT", PATH + "/status")],
            "add allocation and reservation to claim ns/c: scripted 500",
            id="status-write-fails",
        ),
        pytest.param(
            False,
            {1: 403},
            [("PUT", PATH)],
            "add finalizer to claim ns/c: scripted 403",
            id="finalizer-write-fails",
        ),
    ],
)
def test_prebind_writes(
    allocated: bool, fail: dict[int, int], calls: list[tuple[str, str]], why: str
) -> None:
    api = FakeApi(_claim(allocated), fail)
    binder, store, woken = _binder(api)
    pod = _pod()
    claim = store.claims["ns/c"]
    plan = ClaimPlan([(claim, None if allocated else copy.deepcopy(ALLOCATION))])
    binder.assume(pod, plan)
    assert bool(store.in_flight) != allocated
    assert asyncio.run(binder.bind(pod, "n1", plan, 600.0)) == why
    assert api.calls == calls
    assert not store.in_flight, "in-flight allocations are dropped either way"
    status = api.claim.get("status", {})
    reserved = [r["uid"] for r in status.get("reservedFor", [])]
    if why:
        assert "pu" not in reserved
        assert woken == ["ns/c"]
        return
    assert reserved == (["other", "pu"] if allocated else ["pu"])
    assert status["allocation"]["devices"] == ALLOCATION["devices"]
    assert status["allocation"]["allocationTimestamp"]
    assert FINALIZER in api.claim["metadata"]["finalizers"]
    seen = store.claims["ns/c"]
    assert seen.resource_version == api.claim["metadata"]["resourceVersion"]


def test_a_claim_allocated_meanwhile_fails_the_attempt() -> None:
    api = FakeApi(_claim())
    binder, store, _ = _binder(api)
    pod = _pod()
    planned = parse_claim(_claim())
    plan = ClaimPlan([(planned, copy.deepcopy(ALLOCATION))])
    store.apply(
        "resourceclaims",
        "MODIFIED",
        {**_claim(True), "metadata": {**_claim(True)["metadata"], "resourceVersion": "2"}},
    )
    why = asyncio.run(binder.bind(pod, "n1", plan, 600.0))
    assert why.endswith("claim ns/c got allocated elsewhere in the meantime")
    assert api.calls == []


def test_unreserve_after_a_failed_binding_takes_the_pod_out_of_reserved_for() -> None:
    api = FakeApi(_claim())
    binder, store, _ = _binder(api)
    pod = _pod()
    plan = ClaimPlan([(store.claims["ns/c"], copy.deepcopy(ALLOCATION))])
    binder.assume(pod, plan)
    assert asyncio.run(binder.bind(pod, "n1", plan, 600.0)) == ""
    asyncio.run(binder.unreserve(pod, plan))
    assert api.calls[-1] == ("PATCH", PATH + "/status")
    status = api.claim["status"]
    assert status["reservedFor"] == []
    assert status["allocation"]["devices"] == ALLOCATION["devices"], "the allocation stays"


def test_unreserve_survives_a_lost_connection() -> None:
    """A network error while undoing must not escape: the bind task resolves its pod."""
    api = FakeApi(_claim())
    binder, store, _ = _binder(api)
    pod = _pod()
    plan = ClaimPlan([(store.claims["ns/c"], copy.deepcopy(ALLOCATION))])
    binder.assume(pod, plan)
    assert asyncio.run(binder.bind(pod, "n1", plan, 600.0)) == ""

    tried: list[str] = []

    async def unreachable(path: str, body: Any, kind: str = "") -> Any:
        tried.append(path)
        raise ConnectionError("connection refused")

    api.patch = unreachable  # type: ignore[method-assign]
    asyncio.run(binder.unreserve(pod, plan))  # returns instead of raising
    assert tried == [PATH + "/status"]
    assert store.in_flight == {}


BOUND_DEVICE = {
    "request": "gpu",
    "driver": "d",
    "pool": "n1",
    "device": "gpu-0",
    "bindingConditions": ["Attached"],
    "bindingFailureConditions": ["Failed"],
}
PENDING = "BindingConditionsPending: waiting for binding conditions for device on node n1"


def _device_status(**conditions: str) -> list[dict[str, Any]]:
    return [
        {
            "driver": "d",
            "pool": "n1",
            "device": "gpu-0",
            "conditions": [
                {"type": t, "status": v, "reason": "Driver", "message": "boom"}
                for t, v in conditions.items()
            ],
        }
    ]


@pytest.mark.parametrize(
    ("devices", "later", "timeout", "stamp", "why"),
    [
        pytest.param(_device_status(Attached="True"), None, 5.0, "", "", id="met-at-once"),
        pytest.param(
            _device_status(Attached="False"),
            _device_status(Attached="True"),
            5.0,
            "",
            "",
            id="met-after-a-poll",
        ),
        pytest.param(
            _device_status(Attached="False", Failed="True"),
            None,
            5.0,
            "",
            'device binding failed: claim=c, reason=Driver, message="boom"',
            id="failure-condition",
        ),
        pytest.param(
            [],
            _device_status(Failed="True"),
            5.0,
            "",
            'device binding failed: claim=c, reason=Driver, message="boom"',
            id="failure-reported-later",
        ),
        pytest.param(
            [],
            None,
            0.05,
            "",
            "device binding timeout: context deadline exceeded",
            id="never-reported-poll-deadline",
        ),
        pytest.param(
            _device_status(Attached="False"),
            None,
            5.0,
            "2020-01-01T00:00:00Z",
            "device binding timeout: claim=c",
            id="allocation-older-than-timeout",
        ),
    ],
)
def test_prebind_waits_for_binding_conditions(
    devices: list[dict[str, Any]],
    later: list[dict[str, Any]] | None,
    timeout: float,
    stamp: str,
    why: str,
) -> None:
    """isPodReadyForBinding's outcomes: bound, failed, timed out; a failure leaves the
    pod out of reservedFor (Unreserve) and the allocation in place for PostFilter."""
    body = _claim(True)
    allocation = {"devices": {"results": [dict(BOUND_DEVICE)]}}
    if stamp:
        allocation["allocationTimestamp"] = stamp
    body["status"] = {"allocation": allocation, "reservedFor": [{"uid": "pu"}]}
    body["status"]["devices"] = devices
    api = FakeApi(body)
    binder, store, notes = _binder(api)
    pod = _pod()
    claim = store.claims["ns/c"]
    plan = ClaimPlan(claims=[claim])

    async def driver() -> None:
        await asyncio.sleep(0.03)
        changed = copy.deepcopy(api.claim)
        changed["status"]["devices"] = later
        store.apply("resourceclaims", "MODIFIED", changed)

    async def run() -> str:
        if later is not None:
            task = asyncio.create_task(driver())
        result = await binder.bind(pod, "n1", plan, timeout)
        if later is not None:
            await task
        return result

    assert asyncio.run(run()) == why
    assert notes[0] == PENDING
    reserved = [r["uid"] for r in api.claim["status"]["reservedFor"]]
    assert reserved == ([] if why else ["pu"])
    assert api.claim["status"]["allocation"]["devices"] == allocation["devices"]


def test_prebind_without_binding_conditions_does_not_wait() -> None:
    api = FakeApi(_claim(True))
    binder, store, notes = _binder(api)
    claim = store.claims["ns/c"]
    plan = ClaimPlan([(claim, None)], claims=[claim])
    assert asyncio.run(binder.bind(_pod(), "n1", plan, 1.0)) == ""
    assert PENDING not in notes


@pytest.mark.parametrize("applied", [True, False], ids=["applied", "not-applied"])
def test_a_status_write_whose_answer_is_lost_is_settled_by_a_re_read(applied: bool) -> None:
    """The connection breaks on the allocation write: the claim is read again (the first
    read fails too) before the attempt fails. Applied, the store holds the allocation once
    the in-flight one is dropped, so the device stays taken; not applied, it is free."""
    api = FakeApi(_claim())
    binder, store, _ = _binder(api)
    pod = _pod()
    plan = ClaimPlan([(store.claims["ns/c"], copy.deepcopy(ALLOCATION))])
    binder.assume(pod, plan)
    put, get = api.request, api.get
    reads: list[str] = []

    async def lost(method: str, path: str, body: Any = None) -> Any:
        if path.endswith("/status"):
            if applied:
                await put(method, path, body)
            raise ConnectionResetError("the API server closed the connection")
        return await put(method, path, body)

    async def flaky_get(path: str) -> Any:
        reads.append(path)
        if len(reads) == 1:
            raise ConnectionRefusedError("connect call failed")
        return await get(path)

    api.request = lost  # type: ignore[method-assign]
    api.get = flaky_get  # type: ignore[method-assign]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("podium.algorithms.dynamic_resources.claim_binder.SETTLE_BACKOFF", 0.0)
        why = asyncio.run(binder.bind(pod, "n1", plan, 600.0))
    assert why == (
        "add allocation and reservation to claim ns/c: the API server closed the connection"
    )
    assert reads == [PATH, PATH]
    assert not store.in_flight
    held = store.claims["ns/c"].allocation
    assert (held is not None) == applied
    if applied:
        assert api.claim["status"]["reservedFor"] == [], "Unreserve took the pod out"
        assert api.claim["status"]["allocation"]["devices"] == ALLOCATION["devices"]


@pytest.mark.parametrize("concurrent", [False, True], ids=["one-after-the-other", "at-once"])
def test_members_sharing_an_allocation_write_it_once_and_both_reserve(concurrent: bool) -> None:
    """Two members of one pod-group cycle share the claim's in-flight allocation: the
    first write allocates, the other only adds itself to reservedFor (also after a
    conflict with the first), and nothing stays in flight."""
    api = FakeApi(_claim())
    binder, store, _ = _binder(api)
    group: dict[str, set[str]] = {}
    pods, plans = [], []
    for name in ("a", "b"):
        body = make_pod(name)
        body["metadata"].update(namespace="ns", uid=f"u{name}")
        pod = parse_pod(body)
        plan = ClaimPlan([(store.claims["ns/c"], copy.deepcopy(ALLOCATION))], group=group)
        binder.assume(pod, plan)
        pods.append(pod)
        plans.append(plan)
    assert group == {"cu": {"ua", "ub"}} and store.in_flight["cu"].pods == {"ua", "ub"}

    async def bind_all() -> list[str]:
        if concurrent:
            return list(
                await asyncio.gather(
                    *(binder.bind(p, "n1", q, 600.0) for p, q in zip(pods, plans, strict=True))
                )
            )
        return [await binder.bind(p, "n1", q, 600.0) for p, q in zip(pods, plans, strict=True)]

    assert asyncio.run(bind_all()) == ["", ""]
    status = api.claim["status"]
    assert [r["uid"] for r in status["reservedFor"]] == ["ua", "ub"]
    assert status["allocation"]["devices"] == ALLOCATION["devices"]
    assert not store.in_flight and group == {}


def test_an_unshared_plan_still_fails_on_a_claim_allocated_meanwhile() -> None:
    """Only members sharing the allocation in flight take a written claim as theirs."""
    api = FakeApi(_claim())
    binder, store, _ = _binder(api)
    plan = ClaimPlan([(store.claims["ns/c"], copy.deepcopy(ALLOCATION))], group={"cu": {"pu"}})
    binder.assume(_pod(), plan)
    store.apply(
        "resourceclaims",
        "MODIFIED",
        {**_claim(True), "metadata": {**_claim(True)["metadata"], "resourceVersion": "2"}},
    )
    why = asyncio.run(binder.bind(_pod(), "n1", plan, 600.0))
    assert why.endswith("claim ns/c got allocated elsewhere in the meantime")
