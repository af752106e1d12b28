"""DynamicResources: the DRA store, the plugin's messages as Go gives them, the score,
and the queue's PreEnqueue wait. The allocator is replaced by a fake here; its own
tests live with it."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

import podium.algorithms.dynamic_resources.plugin as plugin_module
from podium.algorithms.dynamic_resources.allocator import AllocationError
from podium.algorithms.dynamic_resources.plugin import (
    CANNOT_ALLOCATE,
    NOT_AVAILABLE,
    ClaimPlan,
    DynamicResources,
    first_available_score,
    plan_claims,
    pre_enqueue,
    prepare,
    stale_claim,
)
from podium.framework.cycle import Scheduler
from podium.framework.plugin import ClusterEvent, Cycle, PluginError
from podium.kube.manifests import make_node, make_pod
from podium.kube.objects import PodInfo, parse_node, parse_pod
from podium.policy import default_profile
from podium.scheduling.queue import SchedulingQueue
from podium.state.dra import FINALIZER, DraStore, DraUpdate, parse_claim
from podium.state.snapshot import build_snapshot
from podium.tools.simulation import simulate

NS = "ns"
INVALID = "invalid resource pools were encountered"
POD_UID = "pod-uid"


def claim(
    name: str,
    requests: Sequence[Mapping[str, Any]] = (),
    *,
    owner: str = "",
    allocation: Mapping[str, Any] | None = None,
    reserved: Sequence[str] = (),
    deleting: bool = False,
    version: str = "1",
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": NS,
        "uid": f"uid-{name}",
        "resourceVersion": version,
    }
    if owner:
        meta["ownerReferences"] = [{"kind": "Pod", "uid": owner, "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status: dict[str, Any] = {}
    if allocation is not None:
        status["allocation"] = dict(allocation)
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "uid": u} for u in reserved]
    body = {"metadata": meta, "spec": {"devices": {"requests": list(requests)}}}
    if status:
        body["status"] = status
    return body


def exactly(name: str = "gpu", klass: str = "gpu") -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": klass, "count": 1}}


def first_available(name: str, *subs: tuple[str, str]) -> dict[str, Any]:
    return {
        "name": name,
        "firstAvailable": [{"name": s, "deviceClassName": k} for s, k in subs],
    }


def on_node(node: str) -> dict[str, Any]:
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {"devices": {"results": []}, "nodeSelector": {"nodeSelectorTerms": [term]}}


def pod(templates: Mapping[str, str | None] = {}, claims: Mapping[str, str] = {}) -> PodInfo:
    """A pod with template claims (name -> generated claim, None: no status entry yet)."""
    body = make_pod("p")
    body["metadata"].update(namespace=NS, uid=POD_UID)
    refs: list[dict[str, Any]] = [{"name": n, "resourceClaimTemplateName": "t"} for n in templates]
    refs += [{"name": n, "resourceClaimName": c} for n, c in claims.items()]
    body["spec"]["resourceClaims"] = refs
    statuses = [
        {"name": n, **({"resourceClaimName": g} if g else {})}
        for n, g in templates.items()
        if g is not None
    ]
    if statuses:
        body.setdefault("status", {})["resourceClaimStatuses"] = statuses
    return parse_pod(body)


def store_with(*claims: dict[str, Any], classes: Sequence[str] = ("gpu",)) -> DraStore:
    store = DraStore()
    for name in classes:
        store.apply("deviceclasses", None, {"metadata": {"name": name, "resourceVersion": "1"}})
    for body in claims:
        store.apply("resourceclaims", None, body)
    return store


class FakeAllocator:
    """Allocates one device per claim on nodes named in ``fits``; 'boom' raises."""

    fits: frozenset[str] = frozenset({"n1", "n2"})

    def __init__(self, allocated: Any, classes: Any, slices: Any) -> None:
        self.allocated = allocated
        self.last_reason = ""

    def allocate(
        self,
        node: Mapping[str, Any],
        claims: Sequence[Mapping[str, Any]],
        deadline: float | None = None,
    ) -> list[dict[str, Any]] | None:
        name = node["metadata"]["name"]
        if name == "boom":
            raise AllocationError("no such key: model")
        if name not in self.fits:
            self.last_reason = "invalid resource pools were encountered" if name == "bad" else ""
            return None
        return [
            {
                "devices": {
                    "results": [
                        {"request": r["name"], "driver": "d", "pool": name, "device": "gpu-0"}
                        for r in c["spec"]["devices"]["requests"]
                    ]
                },
                "nodeSelector": on_node(name)["nodeSelector"],
            }
            for c in claims
        ]


@pytest.fixture(autouse=True)
def fake_allocator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plugin_module, "Allocator", FakeAllocator)


# -- PreEnqueue and PreFilter messages ---------------------------------------------------


@pytest.mark.parametrize(
    ("the_pod", "claims", "waiting", "rejected"),
    [
        pytest.param(
            pod({"gpu": None}),
            [],
            'pod "ns/p": ResourceClaim not created yet',
            "",
            id="template-claim-not-created",
        ),
        pytest.param(
            pod(claims={"gpu": "c"}),
            [],
            'could not find ResourceClaim "ns/c"',
            "",
            id="named-claim-missing",
        ),
        pytest.param(
            pod({"gpu": "c"}),
            [claim("c", [exactly()], owner="other")],
            "ResourceClaim ns/c was not created for Pod ns/p (Pod is not owner)",
            "",
            id="template-claim-not-owned",
        ),
        pytest.param(
            pod(claims={"gpu": "c"}),
            [claim("c", [exactly()], deleting=True)],
            'resourceclaim "c" is being deleted',
            "",
            id="claim-being-deleted",
        ),
        pytest.param(
            pod(claims={"gpu": "c"}),
            [claim("c", [exactly(klass="nope")])],
            "",
            "request gpu: device class nope does not exist",
            id="class-missing",
        ),
        pytest.param(
            pod(claims={"gpu": "c"}),
            [claim("c", [first_available("gpu", ("a", "gpu"), ("b", "nope"))])],
            "",
            "request gpu/b: device class nope does not exist",
            id="subrequest-class-missing",
        ),
        pytest.param(
            pod(claims={"gpu": "c"}),
            [claim("c", [{"name": "gpu"}])],
            "",
            "resource claim ns/c, request gpu: unknown request type",
            id="unknown-request-type",
        ),
        pytest.param(
            pod({"gpu": "c"}),
            [claim("c", [exactly()], owner=POD_UID)],
            "",
            "",
            id="owned-template-claim",
        ),
    ],
)
def test_pre_enqueue_and_pre_filter_messages(
    the_pod: PodInfo, claims: list[dict[str, Any]], waiting: str, rejected: str
) -> None:
    store = store_with(*claims)
    assert pre_enqueue(store, the_pod) == waiting
    state = prepare(store, the_pod)
    if waiting or rejected:
        assert state == (waiting or rejected)
    else:
        assert state is not None and not isinstance(state, str)


def test_claims_in_flight_for_another_pod_make_this_one_wait() -> None:
    body = claim("c", [exactly()])
    store = store_with(body)
    store.assume(parse_claim(body), on_node("n1"), "other-pod")
    assert prepare(store, pod(claims={"gpu": "c"})) == (
        "resource claim ns/c is in the process of being allocated"
    )


def test_pod_without_claims_costs_nothing() -> None:
    plain = parse_pod(make_pod("plain"))
    assert plain.resource_claims == ()
    assert pre_enqueue(DraStore(), plain) == ""
    _, snapshot = build_snapshot([parse_node(make_node("n1"))], [])
    cycle = Cycle(plain, snapshot)
    plugin = DynamicResources()
    assert plugin.pre_filter(cycle) is None
    assert plugin.filter(cycle, np.arange(1)) == []
    assert not plugin.pre_score(cycle, np.arange(1))


def test_a_template_entry_without_a_claim_name_needs_no_claim() -> None:
    assert prepare(DraStore(), pod({"gpu": ""})) is None


# -- Filter --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("claims", "expected"),
    [
        pytest.param(
            [claim("c", [exactly()])],
            {"n1": "", "n2": "", "n3": CANNOT_ALLOCATE, "bad": INVALID},
            id="allocator-decides",
        ),
        pytest.param(
            [claim("c", [exactly()], allocation=on_node("n2"), reserved=["other"])],
            {"n1": NOT_AVAILABLE, "n2": "", "n3": NOT_AVAILABLE},
            id="allocated-claim-pins-its-node",
        ),
        pytest.param(
            [claim("c", [exactly()]), claim("d", [exactly()], allocation=on_node("n2"))],
            {"n1": NOT_AVAILABLE, "n2": "", "n3": CANNOT_ALLOCATE},
            id="allocator-failure-wins-over-the-node-selector",
        ),
    ],
)
def test_filter_reasons_per_node(claims: list[dict[str, Any]], expected: dict[str, str]) -> None:
    refs = {f"r{i}": c["metadata"]["name"] for i, c in enumerate(claims)}
    the_pod = pod(claims=refs)
    _, snapshot = build_snapshot([parse_node(make_node(n)) for n in expected], [])
    for body in claims:
        snapshot.dra.apply("resourceclaims", None, body)
    snapshot.dra.apply("deviceclasses", None, {"metadata": {"name": "gpu"}})
    cycle = Cycle(the_pod, snapshot)
    plugin = DynamicResources()
    assert plugin.pre_filter(cycle) is None
    nodes = np.arange(len(snapshot))
    rejected = {name: "" for name in snapshot.names}
    for rejection in plugin.filter(cycle, nodes):
        assert rejection.unresolvable
        for row in nodes[rejection.mask]:
            rejected[snapshot.names[int(row)]] = rejection.reason
    assert rejected == expected
    for row, name in enumerate(snapshot.names):
        assert plugin.explain(cycle, row) == expected[name]


def test_an_allocator_error_aborts_the_attempt_with_gos_message() -> None:
    the_pod = pod(claims={"gpu": "c"})
    _, snapshot = build_snapshot([parse_node(make_node("boom"))], [])
    snapshot.dra.apply("resourceclaims", None, claim("c", [exactly()]))
    snapshot.dra.apply("deviceclasses", None, {"metadata": {"name": "gpu"}})
    cycle = Cycle(the_pod, snapshot)
    plugin = DynamicResources()
    plugin.pre_filter(cycle)
    with pytest.raises(PluginError) as raised:
        plugin.filter(cycle, np.arange(1))
    assert str(raised.value) == 'running "DynamicResources" filter plugin: no such key: model'


def test_reserve_plans_only_claims_not_yet_reserved_for_the_pod() -> None:
    shared = claim("s", [exactly()], allocation=on_node("n1"), reserved=["other"])
    mine = claim("m", [exactly()], allocation=on_node("n1"), reserved=[POD_UID])
    fresh = claim("f", [exactly()])
    the_pod = pod(claims={"a": "s", "b": "m", "c": "f"})
    _, snapshot = build_snapshot([parse_node(make_node("n1"))], [])
    for body in (shared, mine, fresh):
        snapshot.dra.apply("resourceclaims", None, body)
    snapshot.dra.apply("deviceclasses", None, {"metadata": {"name": "gpu"}})
    plugin = DynamicResources()
    plan = plan_claims(plugin, snapshot.dra, the_pod, snapshot.nodes[0], 0)
    assert [(c.name, a is not None) for c, a in plan.items] == [("s", False), ("f", True)]
    (_, allocation) = plan.items[1]
    assert allocation is not None
    assert allocation["devices"]["results"][0]["pool"] == "n1"


def test_reserve_never_plans_a_pod_without_its_allocation() -> None:
    the_pod = pod(claims={"gpu": "c"})
    _, snapshot = build_snapshot([parse_node(make_node("n3"))], [])
    snapshot.dra.apply("resourceclaims", None, claim("c", [exactly()]))
    snapshot.dra.apply("deviceclasses", None, {"metadata": {"name": "gpu"}})
    with pytest.raises(PluginError, match="claim allocation not found for node"):
        plan_claims(DynamicResources(), snapshot.dra, the_pod, snapshot.nodes[0], 0)
    assert ClaimPlan().empty


# -- Score ---------------------------------------------------------------------------------


def _result(*requests: str) -> dict[str, Any]:
    return {"devices": {"results": [{"request": r} for r in requests]}}


@pytest.mark.parametrize(
    ("requests", "allocation", "score"),
    [
        pytest.param([exactly()], _result("gpu"), 0, id="exactly-scores-nothing"),
        pytest.param(
            [first_available("gpu", ("a", "x"), ("b", "y"))],
            _result("gpu/a"),
            8,
            id="first-subrequest",
        ),
        pytest.param(
            [first_available("gpu", ("a", "x"), ("b", "y"))],
            _result("gpu/b"),
            7,
            id="second-subrequest",
        ),
        pytest.param(
            [first_available("g", ("a", "x"), ("b", "y")), first_available("h", ("a", "x"))],
            _result("g/b", "h/a"),
            15,
            id="summed-over-requests",
        ),
    ],
)
def test_first_available_score(
    requests: list[dict[str, Any]], allocation: dict[str, Any], score: int
) -> None:
    parsed = parse_claim(claim("c", requests))
    assert first_available_score([parsed], [allocation]) == score


# -- the store -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "before", "event", "after", "update"),
    [
        pytest.param(
            "resourceslices", None, "ADDED", {"spec": {}}, DraUpdate(devices=True), id="slice-added"
        ),
        pytest.param(
            "resourceslices",
            {"spec": {}},
            "DELETED",
            None,
            DraUpdate(),
            id="slice-deleted-helps-nobody",
        ),
        pytest.param(
            "devicetaintrules",
            None,
            "ADDED",
            {"spec": {}},
            DraUpdate(devices=True),
            id="taint-rule-is-a-slice-change",
        ),
        pytest.param(
            "deviceclasses", None, "ADDED", {"spec": {}}, DraUpdate(classes=True), id="class-added"
        ),
        pytest.param(
            "resourceclaims",
            None,
            "ADDED",
            {"spec": {}},
            DraUpdate(changed="ns/x"),
            id="claim-created",
        ),
        pytest.param(
            "resourceclaims",
            {"status": {"allocation": {}}},
            "MODIFIED",
            {},
            DraUpdate(freed=True, changed="ns/x"),
            id="claim-deallocated",
        ),
        pytest.param(
            "resourceclaims",
            {"status": {"allocation": {}}},
            "DELETED",
            None,
            DraUpdate(freed=True),
            id="allocated-claim-deleted",
        ),
        pytest.param(
            "resourceclaims", {}, "DELETED", None, DraUpdate(), id="unallocated-claim-deleted"
        ),
        pytest.param(
            "resourceclaims",
            {"spec": {"a": 1}},
            "MODIFIED",
            {"spec": {"a": 2}},
            DraUpdate(),
            id="claim-spec-change-without-status-change",
        ),
        pytest.param(
            "resourceclaimtemplates",
            None,
            "ADDED",
            {"spec": {}},
            DraUpdate(),
            id="template-wakes-nobody",
        ),
    ],
)
def test_store_updates_say_what_they_can_make_schedulable(
    kind: str,
    before: dict[str, Any] | None,
    event: str,
    after: dict[str, Any] | None,
    update: DraUpdate,
) -> None:
    store = DraStore()

    def body(extra: dict[str, Any], version: str) -> dict[str, Any]:
        meta = {"name": "x", "namespace": NS, "uid": "u", "resourceVersion": version}
        return {"metadata": meta, **extra}

    if before is not None:
        store.apply(kind, None, body(before, "1"))
    version = store.version
    assert store.apply(kind, event, body(after or {}, "2")) == update
    assert (store.version != version) == (event == "DELETED" or after != before)


def test_store_never_goes_back_in_time() -> None:
    store = DraStore()
    written = claim("c", [exactly()], allocation=on_node("n1"), version="7")
    store.apply("resourceclaims", "MODIFIED", written)
    stale = claim("c", [exactly()], version="6")
    assert store.apply("resourceclaims", "MODIFIED", stale) == DraUpdate()
    found = store.claim(NS, "c")
    assert found is not None and found.allocation is not None


def test_in_flight_allocations_hold_their_devices_until_released() -> None:
    body = claim("c", [exactly()])
    store = store_with(body, claim("old", [exactly()], allocation=_result("x")))
    assert store.allocations() == [_result("x")]
    store.assume(parse_claim(body), on_node("n1"), "p1")
    assert store.allocations() == [_result("x"), on_node("n1")]
    pending = store.in_flight["uid-c"].claim
    assert FINALIZER in pending.finalizers
    assert store.pending_allocation("uid-c") == on_node("n1")
    assert store.release("uid-c", "p1")
    assert store.allocations() == [_result("x")]
    assert not store.release("uid-c", "p1")


def test_device_taint_rules_are_applied_to_matching_devices() -> None:
    store = DraStore()
    devices = [{"name": "gpu-0"}, {"name": "gpu-1"}]
    spec = {"driver": "d", "pool": {"name": "n1"}, "devices": devices}
    store.apply("resourceslices", None, {"metadata": {"name": "s"}, "spec": spec})
    taint = {"key": "broken", "effect": "NoSchedule"}
    rules = [
        ("one", {"driver": "d", "device": "gpu-1"}),
        ("other-driver", {"driver": "e"}),
        ("no-selector", None),
    ]
    for name, selector in rules:
        rule_spec: dict[str, Any] = {"taint": taint}
        if selector is not None:
            rule_spec["deviceSelector"] = selector
        store.apply("devicetaintrules", None, {"metadata": {"name": name}, "spec": rule_spec})
    (patched,) = store.allocator_slices()
    assert [d.get("taints") for d in patched["spec"]["devices"]] == [None, [taint]]
    assert "taints" not in store.slices["s"]["spec"]["devices"][1]


def test_pending_pods_are_indexed_by_the_claims_they_name() -> None:
    store = DraStore()
    waiting = pod({"gpu": "gen"}, claims={"x": "named"})
    store.track(waiting, pending=True)
    assert store.users == {"ns/gen": {POD_UID}, "ns/named": {POD_UID}}
    store.track(waiting, pending=False)
    assert store.users == {}
    store.track(waiting, pending=True)
    store.untrack(POD_UID)
    assert store.users == {}


# -- the queue's PreEnqueue wait -----------------------------------------------------------


def test_a_held_pod_waits_uncounted_until_woken() -> None:
    """PreEnqueue holds the pod as it is added: no attempt; the plugin's hint runs
    PreEnqueue again, and the pod goes in once it passes."""
    missing = {"ns/named"}
    queue = SchedulingQueue(
        clock=lambda: 100.0,
        pre_enqueue=lambda p: "DynamicResources" if missing else None,
    )
    queue.add(pod({"gpu": None}))
    entry = queue.entries[POD_UID]
    assert (entry.where, entry.attempts) == ("gated", 0)
    assert queue.rejections() == {("DynamicResources", "podium"): 1}
    queue.hint(["unknown", POD_UID], "DynamicResources", ClusterEvent.RESOURCE_CLAIM)
    assert entry.where == "gated"  # still held
    missing.clear()
    queue.hint(["unknown", POD_UID], "DynamicResources", ClusterEvent.RESOURCE_CLAIM)
    assert (entry.where, entry.rejected_by) == ("active", frozenset())
    assert queue.rejections() == {}


def test_hint_moves_only_pods_the_plugin_rejected() -> None:
    queue = SchedulingQueue(clock=lambda: 100.0)
    queue.add(pod({"gpu": "c"}))
    entry = queue.entries[POD_UID]
    asyncio.run(queue.pop())
    queue.requeue(entry, rejected_by=frozenset({"NodeResourcesFit"}))
    queue.hint([POD_UID], "DynamicResources", ClusterEvent.RESOURCE_CLAIM)
    assert entry.where == "unschedulable"
    entry.rejected_by = frozenset({"DynamicResources"})
    queue.hint([POD_UID], "DynamicResources", ClusterEvent.RESOURCE_CLAIM)
    assert entry.where in ("backoff", "active")


@pytest.mark.parametrize(
    ("reserved", "stale"),
    [
        pytest.param((), True, id="reserved-for-nobody"),
        pytest.param((POD_UID,), True, id="reserved-for-this-pod-only"),
        pytest.param(("other",), False, id="in-use-by-another-pod"),
    ],
)
def test_post_filter_picks_a_claim_no_other_pod_uses(
    reserved: tuple[str, ...], stale: bool
) -> None:
    body = claim("c", [exactly()], allocation=on_node("gone"), reserved=reserved)
    the_pod = pod(claims={"gpu": "c"})
    _, snapshot = build_snapshot([parse_node(make_node("n1"))], [])
    snapshot.dra.apply("resourceclaims", None, body)
    cycle = Cycle(the_pod, snapshot)
    plugin = DynamicResources()
    plugin.pre_filter(cycle)
    (rejection,) = plugin.filter(cycle, np.arange(1))
    assert rejection.reason == NOT_AVAILABLE
    found = stale_claim(plugin, snapshot.dra, the_pod)
    assert (found.name if found else None) == ("c" if stale else None)


def test_explain_and_simulate_inputs_carry_dra_objects_to_the_real_allocator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """build_snapshot loads DRA objects given with the storage ones; the default profile
    then allocates with the real allocator (the fake is put back for this test)."""
    monkeypatch.undo()
    selector = 'device.attributes["d.example.com"].model == "b"'
    request = {
        "name": "gpu",
        "exactly": {"deviceClassName": "gpu", "selectors": [{"cel": {"expression": selector}}]},
    }
    docs: list[dict[str, Any]] = [{"kind": "DeviceClass", "metadata": {"name": "gpu"}, "spec": {}}]
    docs += [
        {
            "kind": "ResourceSlice",
            "metadata": {"name": f"{n}-s"},
            "spec": {
                "driver": "d.example.com",
                "nodeName": n,
                "pool": {"name": n, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "g0", "attributes": {"model": {"string": model}}}],
            },
        }
        for n, model in (("n1", "a"), ("n2", "b"))
    ]
    docs.append({"kind": "ResourceClaim", **claim("c", [request])})
    _, snapshot = build_snapshot([parse_node(make_node(n)) for n in ("n1", "n2")], [], storage=docs)
    placement = Scheduler().schedule(default_profile(), snapshot, pod(claims={"gpu": "c"}))
    assert placement.node == "n2"
    docs = copy.deepcopy(docs)  # a changed object is a new one, as from a watch event
    docs[2]["spec"]["devices"][0]["attributes"]["model"] = {"string": "c"}
    _, snapshot = build_snapshot([parse_node(make_node(n)) for n in ("n1", "n2")], [], storage=docs)
    placement = Scheduler().schedule(default_profile(), snapshot, pod(claims={"gpu": "c"}))
    assert placement.diagnosis is not None
    assert placement.diagnosis.message() == "0/2 nodes are available: 2 cannot allocate all claims."


def test_simulate_never_hands_one_device_to_two_pods(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()
    docs: list[dict[str, Any]] = [{"kind": "DeviceClass", "metadata": {"name": "gpu"}, "spec": {}}]
    docs.append(
        {
            "kind": "ResourceSlice",
            "metadata": {"name": "s"},
            "spec": {
                "driver": "d.example.com",
                "nodeName": "n1",
                "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "g0"}],
            },
        }
    )
    pods = []
    for name in ("c1", "c2"):
        docs.append({"kind": "ResourceClaim", **claim(name, [exactly()])})
        body = make_pod(f"p-{name}")
        body["metadata"].update(namespace=NS, uid=f"uid-p-{name}")
        body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": name}]
        pods.append(parse_pod(body))
    result = simulate(default_profile(), [parse_node(make_node("n1"))], [], pods, storage=docs)
    assert [p.node for p in result.placements] == ["n1"]
    (failure,) = result.unschedulable
    assert failure.message == (
        "0/1 nodes are available: 1 cannot allocate all claims. "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )
