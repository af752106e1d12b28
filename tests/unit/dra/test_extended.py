"""DRA-backed extended resources: the class map, the claim's requests and the pod's
mappings (Go's createRequestsAndMappings tables), what each node asks of DRA, Fit's
delegation, and the writes PreBind and Unreserve make, in Go's order."""

from __future__ import annotations

import asyncio
import copy
from typing import Any, cast

import pytest

from podium.algorithms.dynamic_resources.allocator import Allocator
from podium.algorithms.dynamic_resources.claim_binder import ClaimBinder
from podium.algorithms.dynamic_resources.extended import (
    ANNOTATION,
    IMPLICIT_PREFIX,
    IN_MEMORY_NAME,
    NO_FIT,
    STALE,
    NodeExtended,
    for_node,
    pod_extended,
    requests_and_mappings,
    resolver,
    uses_dra,
)
from podium.algorithms.dynamic_resources.plugin import (
    CANNOT_ALLOCATE,
    PodClaims,
    dynamic_resources,
    node_result,
    plan_claims,
    prepare,
)
from podium.framework.cycle import Scheduler
from podium.framework.plugin import Cycle
from podium.kube.client import ApiError, KubeClient
from podium.kube.manifests import make_node, make_pod
from podium.kube.objects import PodInfo, parse_node, parse_pod
from podium.policy import default_profile
from podium.state.dra import FINALIZER, DraStore, parse_claim
from podium.state.snapshot import build_snapshot
from podium.tools.explain.engine import explain_pod
from podium.tools.explain.output import format_table

GPU = "example.com/gpu"
DRIVER = "d.example.com"


def device_class(name: str, extended: str = "", created: str = "2026-01-01T00:00:00Z") -> Any:
    spec: dict[str, Any] = {"extendedResourceName": extended} if extended else {}
    meta = {"name": name, "creationTimestamp": created, "resourceVersion": "1"}
    return {"kind": "DeviceClass", "metadata": meta, "spec": spec}


@pytest.mark.parametrize(
    ("classes", "expected"),
    [
        pytest.param([], {}, id="none"),
        pytest.param(
            [device_class("a")], {IMPLICIT_PREFIX + "a": "a"}, id="implicit-name-of-every-class"
        ),
        pytest.param(
            [device_class("a", GPU)],
            {GPU: "a", IMPLICIT_PREFIX + "a": "a"},
            id="explicit-and-implicit",
        ),
        pytest.param(
            [
                device_class("old", GPU, "2026-01-01T00:00:00Z"),
                device_class("new", GPU, "2026-01-02T00:00:00Z"),
            ],
            {GPU: "new", IMPLICIT_PREFIX + "old": "old", IMPLICIT_PREFIX + "new": "new"},
            id="shared-explicit-name-goes-to-the-newest",
        ),
        pytest.param(
            [device_class("b", GPU), device_class("a", GPU)],
            {GPU: "a", IMPLICIT_PREFIX + "a": "a", IMPLICIT_PREFIX + "b": "b"},
            id="same-age-smallest-name",
        ),
    ],
)
def test_resolver(classes: list[Any], expected: dict[str, str]) -> None:
    assert resolver({c["metadata"]["name"]: c for c in classes}) == expected


def _container(name: str, requests: dict[str, int], sidecar: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "resources": {"requests": {k: str(v) for k, v in requests.items()}},
    }
    if sidecar:
        body["restartPolicy"] = "Always"
    return body


def _pod_spec(containers: list[Any], inits: list[Any] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    return {"spec": {"containers": containers, "initContainers": list(inits)}}


R, R1, RI = "example.com/r", "example.com/r1", "example.com/rinit"
RIMPLICIT = IMPLICIT_PREFIX + "classInit"
CLASSES = {R: "class", R1: "class1", RI: "classInit", RIMPLICIT: "classInit"}
# Go's pods in Test_createRequestsAndMappings_*: regular containers con<i>, init
# containers init-con<i>, sidecars sidecar-con<i>.
POD1 = _pod_spec([_container("con0", {R: 1, R1: 2})])
POD2 = _pod_spec([_container("con0", {R: 1}), _container("con1", {R1: 2})])
POD_INIT = _pod_spec([_container("con0", {R: 1})], [_container("init-con0", {RI: 2})])
POD_INIT2 = _pod_spec(
    [_container("con0", {R: 1})],
    [_container("init-con0", {RI: 1}), _container("init-con1", {RI: 2})],
)
POD_INIT3 = _pod_spec(
    [_container("con0", {R: 1})],
    [
        _container("init-con0", {RI: 1}),
        _container("sidecar-con1", {RI: 1}, sidecar=True),
        _container("init-con2", {RI: 2}),
    ],
)
POD_INIT_IMPLICIT = _pod_spec(
    [_container("con0", {R: 1})],
    [_container("init-con0", {RI: 1}), _container("init-con1", {RIMPLICIT: 2})],
)
POD1_INIT_IMPLICIT = _pod_spec([], [_container("init-con0", {RI: 1, RIMPLICIT: 2})])


@pytest.mark.parametrize(
    ("pod", "needed", "classes", "requests"),
    [
        pytest.param(POD1, {}, CLASSES, [], id="nil"),
        pytest.param(
            POD1, {R: 1}, {R: "class"}, [("container-0-request-0", "class", 1)], id="one-match"
        ),
        pytest.param(
            POD1,
            {R: 1, R1: 2},
            {R: "class"},
            [("container-0-request-0", "class", 1)],
            id="one-match-one-not",
        ),
        pytest.param(
            POD1,
            {R: 1, R1: 2},
            CLASSES,
            [("container-0-request-0", "class", 1), ("container-0-request-1", "class1", 2)],
            id="two-resources",
        ),
        pytest.param(
            POD2,
            {R: 1, R1: 2},
            CLASSES,
            [("container-0-request-0", "class", 1), ("container-1-request-0", "class1", 2)],
            id="two-containers",
        ),
        pytest.param(
            POD_INIT,
            {R: 1, RI: 2},
            CLASSES,
            [("container-0-request-0", "classInit", 2), ("container-1-request-0", "class", 1)],
            id="init-and-regular",
        ),
        pytest.param(
            POD_INIT2,
            {R: 1, RI: 2},
            CLASSES,
            [("container-1-request-0", "classInit", 2), ("container-2-request-0", "class", 1)],
            id="two-inits-share-the-largest",
        ),
        pytest.param(
            POD_INIT3,
            {R: 1, RI: 2},
            CLASSES,
            [
                ("container-1-request-0", "classInit", 1),
                ("container-2-request-0", "classInit", 2),
                ("container-3-request-0", "class", 1),
            ],
            id="inits-reuse-a-later-sidecar",
        ),
    ],
)
def test_requests_follow_go(
    pod: dict[str, Any],
    needed: dict[str, int],
    classes: dict[str, str],
    requests: list[tuple[str, str, int]],
) -> None:
    got, _ = requests_and_mappings(pod, needed, classes)
    assert [
        (r["name"], r["exactly"]["deviceClassName"], r["exactly"]["count"]) for r in got
    ] == requests
    assert all(r["exactly"]["allocationMode"] == "ExactCount" for r in got)


@pytest.mark.parametrize(
    ("pod", "needed", "mappings"),
    [
        pytest.param(
            POD1,
            {R: 1, R1: 2},
            [("container-0-request-0", "con0", R), ("container-0-request-1", "con0", R1)],
            id="one-container-two-requests",
        ),
        pytest.param(
            POD1_INIT_IMPLICIT,
            {R: 1, RI: 2, RIMPLICIT: 2},
            [
                ("container-0-request-0", "init-con0", RIMPLICIT),
                ("container-0-request-1", "init-con0", RI),
            ],
            id="explicit-and-implicit",
        ),
        pytest.param(
            POD2,
            {R: 1, R1: 2},
            [("container-0-request-0", "con0", R), ("container-1-request-0", "con1", R1)],
            id="two-containers",
        ),
        pytest.param(
            POD_INIT,
            {R: 1, RI: 2},
            [("container-0-request-0", "init-con0", RI), ("container-1-request-0", "con0", R)],
            id="init-and-regular",
        ),
        pytest.param(
            POD_INIT2,
            {R: 1, RI: 2},
            [
                ("container-1-request-0", "init-con0", RI),
                ("container-1-request-0", "init-con1", RI),
                ("container-2-request-0", "con0", R),
            ],
            id="two-inits-mapped-to-the-largest",
        ),
        pytest.param(
            POD_INIT_IMPLICIT,
            {R: 1, RI: 2, RIMPLICIT: 2},
            [
                ("container-0-request-0", "init-con0", RI),
                ("container-1-request-0", "init-con1", RIMPLICIT),
                ("container-2-request-0", "con0", R),
            ],
            id="inits-explicit-and-implicit",
        ),
        pytest.param(
            POD_INIT3,
            {R: 1, RI: 2},
            [
                ("container-1-request-0", "init-con0", RI),
                ("container-1-request-0", "sidecar-con1", RI),
                ("container-2-request-0", "init-con2", RI),
                ("container-3-request-0", "con0", R),
            ],
            id="init-sidecar-regular",
        ),
    ],
)
def test_mappings_follow_go(
    pod: dict[str, Any], needed: dict[str, int], mappings: list[tuple[str, str, str]]
) -> None:
    _, got = requests_and_mappings(pod, needed, CLASSES)
    assert sorted((m["requestName"], m["containerName"], m["resourceName"]) for m in got) == (
        mappings
    )


def _pod(requests: dict[str, int], name: str = "p") -> PodInfo:
    body = make_pod(name, cpu="100m", extended=requests)
    body["metadata"].update(namespace="ns", uid=f"uid-{name}")
    return parse_pod(body)


def _store(*docs: Any) -> DraStore:
    store = DraStore()
    for doc in docs:
        plural = {"DeviceClass": "deviceclasses", "ResourceSlice": "resourceslices"}
        store.apply(plural.get(doc.get("kind", ""), "resourceclaims"), None, doc)
    return store


@pytest.mark.parametrize(
    ("requests", "allocatable", "expected"),
    [
        pytest.param({GPU: 2}, {}, {GPU: 2}, id="no-device-plugin-dra-serves"),
        pytest.param({GPU: 2}, {GPU: "0"}, {GPU: 2}, id="zero-capacity-dra-serves"),
        pytest.param({GPU: 2}, {GPU: "4"}, None, id="device-plugin-serves"),
        pytest.param({GPU: 1, "example.com/other": 1}, {}, NO_FIT, id="unbacked-resource-missing"),
        pytest.param(
            {GPU: 1, "example.com/other": 1},
            {"example.com/other": "1"},
            {GPU: 1},
            id="unbacked-resource-from-device-plugin",
        ),
    ],
)
def test_what_each_node_asks_of_dra(
    requests: dict[str, int], allocatable: dict[str, str], expected: Any
) -> None:
    store = _store(device_class("gpu", GPU))
    pod = _pod(requests)
    ext = pod_extended(store, pod)
    assert ext is not None and ext.claim.name == IN_MEMORY_NAME
    node = parse_node(make_node("n1", extended=allocatable))
    got = for_node(ext, node)
    if isinstance(expected, str):
        assert got == expected
        return
    assert isinstance(got, NodeExtended)
    if expected is None:
        assert got.claim is None
        return
    assert got.claim is not None
    asked = {r["exactly"]["deviceClassName"]: r["exactly"]["count"] for r in _requests(got)}
    assert asked == {"gpu": expected[GPU]}
    meta = got.claim["metadata"]
    assert meta["generateName"] == "p-extended-resources-"
    assert meta["annotations"] == {ANNOTATION: "true"}
    (owner,) = meta["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Pod",
        "p",
        "uid-p",
        True,
    )


def test_nodes_delegating_the_same_requests_share_one_variant() -> None:
    store = _store(device_class("gpu", GPU))
    ext = pod_extended(store, _pod({GPU: 1, "example.com/other": 1}))
    assert ext is not None
    nodes = [
        make_node("a", extended={"example.com/other": "1"}),
        make_node("b", extended={"example.com/other": "2"}),
        make_node("c", extended={"example.com/other": "1", GPU: "1"}),
    ]
    a, b, c = (for_node(ext, parse_node(n)) for n in nodes)
    assert isinstance(a, NodeExtended) and isinstance(c, NodeExtended)
    assert a is b and a.claim is not None and c.claim is None
    assert a.spec_json is not None and "gpu" in a.spec_json
    assert for_node(ext, parse_node(make_node("d"))) == NO_FIT


def _requests(variant: NodeExtended) -> list[dict[str, Any]]:
    assert variant.claim is not None
    return list(variant.claim["spec"]["devices"]["requests"])


def test_a_claim_of_a_prior_cycle_is_stale_and_without_a_class_nothing_is_dra() -> None:
    pod = _pod({GPU: 1})
    assert pod_extended(_store(), pod) is None
    assert not uses_dra(_store(), pod)
    prior = {
        "metadata": {
            "name": "p-extended-resources-abcde",
            "namespace": "ns",
            "uid": "c1",
            "annotations": {ANNOTATION: "true"},
            "ownerReferences": [{"kind": "Pod", "name": "p", "uid": "uid-p", "controller": True}],
        },
        "spec": {"devices": {"requests": [{"name": "container-0-request-0"}]}},
    }
    store = _store(device_class("gpu", GPU), prior)
    ext = pod_extended(store, pod)
    assert ext is not None and ext.stale
    assert for_node(ext, parse_node(make_node("n1"))) == STALE


def _slice(node: str, count: int) -> dict[str, Any]:
    return {
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-s", "resourceVersion": "1"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"g{i}"} for i in range(count)],
        },
    }


@pytest.mark.parametrize(
    ("resource", "nodes", "slices", "node", "devices", "message"),
    [
        pytest.param(GPU, {"n1": {}, "n2": {}}, {"n2": 2}, "n2", ["g0", "g1"], "", id="dra-only"),
        pytest.param(
            GPU, {"n1": {GPU: "1"}, "n2": {GPU: "4"}}, {}, "n2", [], "", id="device-plugin-only"
        ),
        pytest.param(
            GPU,
            {"n1": {GPU: "1"}, "n2": {}},
            {"n2": 1},
            "",
            [],
            "0/2 nodes are available: 1 Insufficient example.com/gpu, "
            "1 cannot allocate all claims.",
            id="both-too-small",
        ),
        pytest.param(
            IMPLICIT_PREFIX + "gpu", {"n1": {}}, {"n1": 2}, "n1", ["g0", "g1"], "", id="implicit"
        ),
    ],
)
def test_scheduling_with_the_real_allocator(
    resource: str,
    nodes: dict[str, dict[str, str]],
    slices: dict[str, int],
    node: str,
    devices: list[str],
    message: str,
) -> None:
    """Fit leaves a class-backed resource to DynamicResources where no device plugin
    offers it; the chosen node's plan holds the claim to create and its devices."""
    docs = [device_class("gpu", GPU), *(_slice(n, c) for n, c in slices.items())]
    parsed = [parse_node(make_node(n, extended=e)) for n, e in nodes.items()]
    _, snapshot = build_snapshot(parsed, [], storage=docs)
    pod = _pod({resource: 2})
    placement = Scheduler().schedule(default_profile(), snapshot, pod)
    assert placement.node == node
    if not node:
        assert placement.diagnosis is not None
        assert placement.diagnosis.message() == message
        return
    plugin = dynamic_resources(default_profile())
    assert plugin is not None
    row = snapshot.index[node]
    plan = plan_claims(plugin, snapshot.dra, pod, snapshot.nodes[row], row)
    assert plan.pre_flight and not plan.items
    if not devices:
        assert plan.extended is None
        return
    assert plan.extended is not None
    results = plan.extended.allocation["devices"]["results"]
    # The request's index is the resource's among the container's sorted requests (cpu first).
    assert [(r["request"], r["device"]) for r in results] == [
        ("container-0-request-1", d) for d in devices
    ]
    assert plan.extended.mappings == [
        {"containerName": "main", "resourceName": resource, "requestName": "container-0-request-1"}
    ]


def test_reserved_devices_are_not_given_twice() -> None:
    docs = [device_class("gpu", GPU), _slice("n1", 1)]
    _, snapshot = build_snapshot([parse_node(make_node("n1"))], [], storage=docs)
    plugin = dynamic_resources(default_profile())
    assert plugin is not None
    first = _pod({GPU: 1}, "p1")
    assert Scheduler().schedule(default_profile(), snapshot, first).node == "n1"
    plan = plan_claims(plugin, snapshot.dra, first, snapshot.nodes[0], 0)
    for claim, allocation in plan.in_flight:
        snapshot.dra.assume(claim, allocation, first.uid)
    second = Scheduler().schedule(default_profile(), snapshot, _pod({GPU: 1}, "p2"))
    assert second.node == ""
    state = prepare(snapshot.dra, _pod({GPU: 1}, "p3"))
    assert state is not None and not isinstance(state, str) and state.extended is not None


class FakeApi:
    """Claims created with a generated name, written, deleted; pod status patched."""

    def __init__(self, fail: str = "") -> None:
        self.calls: list[tuple[str, str]] = []
        self.claims: dict[str, dict[str, Any]] = {}
        self.pod_status: dict[str, Any] = {}
        self.fail = fail

    def _check(self, what: str) -> None:
        if self.fail == what:
            raise ApiError(500, {"message": f"scripted {what}"})

    async def post(self, path: str, body: Any) -> Any:
        self.calls.append(("POST", path))
        self._check("create")
        assert "name" not in body["metadata"] and "uid" not in body["metadata"]
        made = copy.deepcopy(body)
        name = body["metadata"]["generateName"] + "x1y2z"
        made["metadata"].update(name=name, uid="real-uid", resourceVersion="1")
        self.claims[name] = made
        return copy.deepcopy(made)

    async def request(self, method: str, path: str, body: Any = None) -> Any:
        self.calls.append((method, path))
        self._check(path.rsplit("/", 1)[-1])
        name = path.removesuffix("/status").rsplit("/", 1)[-1]
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(int(body["metadata"]["resourceVersion"]) + 1)
        self.claims[name] = stored
        return copy.deepcopy(stored)

    async def get(self, path: str) -> Any:
        self.calls.append(("GET", path))
        return copy.deepcopy(self.claims[path.rsplit("/", 1)[-1]])

    async def patch(self, path: str, body: Any, kind: str = "") -> Any:
        self.calls.append(("PATCH", path))
        self._check("pod")
        self.pod_status = body["status"]
        return {}

    async def delete(self, path: str, body: Any = None) -> Any:
        self.calls.append(("DELETE", path))
        self.claims.pop(path.rsplit("/", 1)[-1])
        return {}


CLAIMS = "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims"
MADE = f"{CLAIMS}/p-extended-resources-x1y2z"
POD_STATUS = "/api/v1/namespaces/ns/pods/p/status"


@pytest.mark.parametrize(
    ("fail", "calls", "why"),
    [
        pytest.param(
            "",
            [("POST", CLAIMS), ("PUT", MADE), ("PUT", MADE + "/status"), ("PATCH", POD_STATUS)],
            "",
            id="create-finalizer-status-then-pod",
        ),
        pytest.param(
            "create",
            [("POST", CLAIMS)],
            "create claim for extended resources ns/: scripted create",
            id="create-fails",
        ),
        pytest.param(
            "pod",
            [
                ("POST", CLAIMS),
                ("PUT", MADE),
                ("PUT", MADE + "/status"),
                ("PATCH", POD_STATUS),
                ("PUT", MADE),
                ("DELETE", MADE),
            ],
            "update pod ns/p ExtendedResourceClaimStatus: scripted pod",
            id="pod-patch-fails-claim-deleted",
        ),
    ],
)
def test_prebind_writes_in_gos_order(fail: str, calls: list[tuple[str, str]], why: str) -> None:
    docs = [device_class("gpu", GPU), _slice("n1", 1)]
    _, snapshot = build_snapshot([parse_node(make_node("n1"))], [], storage=docs)
    pod = _pod({GPU: 1})
    plugin = dynamic_resources(default_profile())
    assert plugin is not None
    assert Scheduler().schedule(default_profile(), snapshot, pod).node == "n1"
    plan = plan_claims(plugin, snapshot.dra, pod, snapshot.nodes[0], 0)
    api = FakeApi(fail)
    store = snapshot.dra

    async def note(pod: Any, reason: str, text: str) -> None:
        return None

    binder = ClaimBinder(
        cast(KubeClient, api),
        store,
        lambda kind, event, body: store.apply(kind, event, body) and None,
        lambda key: None,
        note,
    )
    binder.assume(pod, plan)
    assert store.in_flight
    assert asyncio.run(binder.bind(pod, "n1", plan, 600.0)) == why
    assert api.calls == calls
    assert not store.in_flight
    if why:
        assert not api.claims
        return
    (made,) = api.claims.values()
    assert made["metadata"]["finalizers"] == [FINALIZER]
    assert made["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "uid-p"}]
    assert made["status"]["allocation"]["devices"]["results"][0]["device"] == "g0"
    assert api.pod_status == {
        "extendedResourceClaimStatus": {
            "requestMappings": [
                {
                    "containerName": "main",
                    "resourceName": GPU,
                    "requestName": "container-0-request-1",
                }
            ],
            "resourceClaimName": "p-extended-resources-x1y2z",
        }
    }
    assert parse_claim(made).name == "p-extended-resources-x1y2z"


def test_explain_names_the_class_and_devices_or_the_device_plugin() -> None:
    docs = [device_class("gpu", GPU), _slice("n1", 2)]
    nodes = [parse_node(make_node("n1")), parse_node(make_node("n2", extended={GPU: "4"}))]
    _, snapshot = build_snapshot(nodes, [], storage=docs)
    explanation = explain_pod(default_profile(), snapshot, _pod({GPU: 2}))
    served = {r.node: r.extended for r in explanation.feasible}
    assert served == {
        "n1": [f"{GPU} 2: DeviceClass gpu, devices {DRIVER}/n1/g0, {DRIVER}/n1/g1"],
        "n2": [f"{GPU} 2: device plugin (4 allocatable)"],
    }
    assert "    n1: example.com/gpu 2: DeviceClass gpu" in format_table(explanation)


def test_fit_explains_only_what_device_plugins_must_provide() -> None:
    """NodeResourcesFit's sentence leaves out a resource it hands to DynamicResources."""
    docs = [device_class("gpu", GPU)]
    nodes = [parse_node(make_node("n1")), parse_node(make_node("n2", extended={GPU: "1"}))]
    _, snapshot = build_snapshot(nodes, [], storage=docs)
    pod = _pod({GPU: 2})
    explanation = explain_pod(default_profile(), snapshot, pod)
    rows = {r.node: r for r in explanation.rejected}
    assert rows["n1"].plugin == "DynamicResources"
    assert rows["n2"].plugin == "NodeResourcesFit"
    assert rows["n2"].detail == f"needs 2 {GPU}, 1 free"
    fit = next(p for p in default_profile().filters if p.name == "NodeResourcesFit")
    assert fit.explain(Cycle(pod, snapshot), snapshot.index["n1"]) == ""


def test_pods_asking_alike_share_the_allocators_outcome_per_node_variant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The outcome on a node is cached under the pod's claims plus the node's variant of
    the extended claim; a second pod asking the same is judged without the allocator,
    and the same as the first."""
    docs = [device_class("gpu", GPU), _slice("n1", 2), _slice("n2", 1)]
    nodes = [parse_node(make_node(n)) for n in ("n1", "n2")]
    nodes.append(parse_node(make_node("n3", extended={GPU: "4"})))
    _, snapshot = build_snapshot(nodes, [], storage=docs)
    first = Scheduler().schedule(default_profile(), snapshot, _pod({GPU: 2}, "a"))
    assert first.node in ("n1", "n3")

    def no_search(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the allocator ran for a cached outcome")

    monkeypatch.setattr(Allocator, "allocate", no_search)
    again = Scheduler().schedule(default_profile(), snapshot, _pod({GPU: 2}, "b"))
    assert again.node in ("n1", "n3")
    state = prepare(snapshot.dra, _pod({GPU: 2}, "c"))
    assert isinstance(state, PodClaims)
    assert node_result(state, snapshot.nodes[1], 1) == CANNOT_ALLOCATE
