"""The store's per-node outcome cache gives exactly what a fresh allocator gives.

A seeded random walk drives a DraStore through slice, claim, class, taint rule and
node label changes; after every step each claim shape is filtered on every node
through PreFilter and Filter (``prepare``, ``node_result``: parsed slices and cached
outcomes), twice with equivalent claims of different names, and compared with an
allocator built afresh from the store's JSON.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest

from podium.algorithms.dynamic_resources.allocator import AllocationError, Allocator
from podium.algorithms.dynamic_resources.plugin import (
    _STATE as PODCLAIMS_KEY,
)
from podium.algorithms.dynamic_resources.plugin import (
    CANNOT_ALLOCATE,
    NAME,
    DynamicResources,
    PodClaims,
    claims_signature,
    node_result,
    plan_claims,
    prepare,
)
from podium.framework.plugin import Cycle, PluginError
from podium.kube.manifests import make_node, make_pod
from podium.kube.objects import NodeInfo, PodInfo, parse_node, parse_pod
from podium.state.devices import allocated_state
from podium.state.dra import DraStore, parse_claim

Json = dict[str, Any]
D = "d.example.com"
NS = "ns"
NODES = ("n0", "n1", "n2", "n3")
ZONES = ("z1", "z2")


def cel(expression: str) -> Json:
    return {"cel": {"expression": expression}}


def exactly(name: str, klass: str, count: int = 1, **extra: Any) -> Json:
    return {"name": name, "exactly": {"deviceClassName": klass, "count": count, **extra}}


# Claim specs the allocator reads: plain, constrained, prioritized, admin, tolerating,
# "All", consumable capacity (shareIDs), class and claim config.
SHAPES: dict[str, Json] = {
    "one": {"requests": [exactly("r", "gpu")]},
    "two-same-model": {
        "requests": [exactly("a", "gpu"), exactly("b", "gpu")],
        "constraints": [{"matchAttribute": f"{D}/model"}],
    },
    "distinct": {
        "requests": [exactly("a", "gpu", 2)],
        "constraints": [{"distinctAttribute": f"{D}/model"}],
    },
    "first-available": {
        "requests": [
            {
                "name": "r",
                "firstAvailable": [
                    {"name": "big", "deviceClassName": "big"},
                    {"name": "any", "deviceClassName": "gpu", "count": 2},
                ],
            }
        ]
    },
    "admin": {"requests": [exactly("r", "gpu", adminAccess=True)]},
    "tolerating": {
        "requests": [
            exactly("r", "gpu", tolerations=[{"key": "t", "operator": "Exists"}]),
        ],
        "config": [{"requests": ["r"], "opaque": {"driver": D, "parameters": {"x": 1}}}],
    },
    "all-zonal": {
        "requests": [
            {
                "name": "r",
                "exactly": {
                    "deviceClassName": "gpu",
                    "allocationMode": "All",
                    "selectors": [cel(f'device.attributes["{D}"].model == "z"')],
                },
            }
        ]
    },
    "share": {
        "requests": [exactly("r", "gpu", capacity={"requests": {"mem": "1Gi"}})],
    },
    "selector-b": {
        "requests": [exactly("r", "gpu", selectors=[cel(f'device.attributes["{D}"].model == "b"')])]
    },
}


class World:
    """The store, the nodes and a resourceVersion counter, changed by random steps."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.store = DraStore()
        self.rv = 0
        self.labels = {n: {"zone": rng.choice(ZONES)} for n in NODES}
        self.claims = 0
        self.in_flight: list[tuple[Json, Json, str]] = []
        self.apply("deviceclasses", self.klass("gpu", f'device.driver == "{D}"'))
        self.apply("deviceclasses", self.klass("big", f'device.attributes["{D}"].model == "b"'))
        for name in self.slice_names()[:-1]:
            if rng.random() < 0.6:
                self.apply("resourceslices", self.slice(name))

    # -- objects ------------------------------------------------------------------------
    def meta(self, name: str, **extra: Any) -> Json:
        self.rv += 1
        return {"name": name, "resourceVersion": str(self.rv), **extra}

    def klass(self, name: str, expression: str) -> Json:
        spec: Json = {"selectors": [cel(expression)]}
        if self.rng.random() < 0.3:
            spec["config"] = [{"opaque": {"driver": D, "parameters": {"c": name}}}]
        return {"metadata": self.meta(name), "spec": spec}

    def apply(self, kind: str, body: Json, event: str | None = None) -> None:
        self.store.apply(kind, event, body)

    @staticmethod
    def slice_names() -> list[str]:
        local = [f"local-{n}-{part}" for n in NODES for part in "ab"]
        return [*local, "span-n0", "span-n1", "zonal", "everywhere", "per-device", "bogus"]

    def device(self, index: int) -> Json:
        rng = self.rng
        out: Json = {
            "name": f"dev-{index}",
            "attributes": {"model": {"string": rng.choice("abz")}},
            "capacity": {"mem": {"value": rng.choice(["4Gi", "8Gi"])}},
        }
        if rng.random() < 0.2:
            out["allowMultipleAllocations"] = True
        if rng.random() < 0.15:
            out["taints"] = [{"key": "t", "effect": "NoSchedule"}]
        if rng.random() < 0.1:
            out["bindingConditions"] = ["ready"]
            out["bindingFailureConditions"] = ["failed"]
        return out

    def slice(self, name: str) -> Json:
        rng = self.rng
        devices = [self.device(i) for i in range(rng.randint(1, 3))]
        spec: Json = {"driver": D, "devices": devices}
        count = 1
        if name.startswith("local-"):
            node, part = name.split("-")[1:]
            count = rng.choice([1, 2]) if part == "a" else 2
            spec["pool"] = {"name": f"local-{node}"}
            # Now and then the second slice lands elsewhere: the pool changes hands.
            spec["nodeName"] = node if part == "a" or rng.random() < 0.6 else rng.choice(NODES)
            for d in devices:
                d["name"] += f"-{part}"
        elif name.startswith("span-"):
            spec["pool"] = {"name": "span"}
            spec["nodeName"] = rng.choice([name.split("-")[1], "n2"])
            count = rng.choice([1, 2])
            for d in devices:
                d["name"] += f"-{name}"
        elif name == "zonal":
            spec["pool"] = {"name": "zonal"}
            zone = rng.choice(ZONES)
            term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]}
            spec["nodeSelector"] = {"nodeSelectorTerms": [term]}
        elif name == "everywhere":
            spec["pool"] = {"name": "everywhere"}
            spec["allNodes"] = True
            spec["sharedCounters"] = [{"name": "set", "counters": {"c": {"value": "2"}}}]
            for d in devices:
                d["consumesCounters"] = [{"counterSet": "set", "counters": {"c": {"value": "1"}}}]
                d.pop("allowMultipleAllocations", None)
        elif name == "per-device":
            spec["pool"] = {"name": "per-device"}
            spec["perDeviceNodeSelection"] = True
            for d in devices:
                pick = rng.random()
                if pick < 0.4:
                    d["nodeName"] = rng.choice(NODES)
                elif pick < 0.7:
                    term = {
                        "matchExpressions": [{"key": "zone", "operator": "In", "values": ["z2"]}]
                    }
                    d["nodeSelector"] = {"nodeSelectorTerms": [term]}
                else:
                    d["allNodes"] = True
        else:  # a quantity that does not parse: every allocator fails to build
            spec["pool"] = {"name": "bogus"}
            spec["nodeName"] = "n3"
            devices[0]["capacity"] = {"mem": {"value": "lots"}}
        spec["pool"].update(generation=rng.choice([1, 1, 2]), resourceSliceCount=count)
        return {"metadata": self.meta(name), "spec": spec}

    def claim_body(self, name: str, spec: Json, allocation: Json | None = None) -> Json:
        body: Json = {
            "metadata": self.meta(name, namespace=NS, uid=f"uid-{name}"),
            "spec": {"devices": copy.deepcopy(spec)},
        }
        if allocation is not None:
            body["status"] = {"allocation": allocation}
        return body

    def node(self, name: str) -> NodeInfo:
        return parse_node(make_node(name, labels=self.labels[name]))

    # -- steps --------------------------------------------------------------------------
    def step(self) -> str:
        steps: dict[str, Callable[[], None]] = {
            "slice": self.change_slice,
            "delete-slice": self.delete_slice,
            "touch-slice": self.touch_slice,
            "allocate": self.allocate,
            "release": self.release,
            "written": self.written,
            "deallocate": self.deallocate,
            "class": self.change_class,
            "taint-rule": self.change_taint_rule,
            "labels": self.change_labels,
        }
        weights = [5, 2, 2, 6, 3, 1, 3, 1, 1, 1]
        (name,) = self.rng.choices(list(steps), weights)
        steps[name]()
        return name

    def change_slice(self) -> None:
        names = self.slice_names()
        name = self.rng.choice(names[:-1] if self.rng.random() < 0.9 else names)
        self.apply("resourceslices", self.slice(name))

    def delete_slice(self) -> None:
        if self.store.slices:
            name = self.rng.choice(sorted(self.store.slices))
            if "bogus" in self.store.slices and self.rng.random() < 0.5:
                name = "bogus"
            self.apply("resourceslices", {"metadata": {"name": name}}, "DELETED")

    def touch_slice(self) -> None:
        """An update that leaves the spec as it was (a label, a new resourceVersion)."""
        if self.store.slices:
            name = self.rng.choice(sorted(self.store.slices))
            body = copy.deepcopy(dict(self.store.slices[name]))
            body["metadata"] = self.meta(name, labels={"touched": str(self.rv)})
            self.apply("resourceslices", body)

    def allocate(self) -> None:
        """A pod's claim goes through Filter and Reserve; then in flight or written."""
        self.claims += 1
        name = f"c{self.claims}"
        shape = self.rng.choice(sorted(SHAPES))
        self.apply("resourceclaims", self.claim_body(name, SHAPES[shape]))
        pod = pod_with(name, uid=f"pod-{name}")
        node = self.node(self.rng.choice(NODES))
        try:
            state = prepare(self.store, pod)
        except AllocationError:
            return
        if not isinstance(state, PodClaims):
            return
        try:
            if isinstance(node_result(state, node, 0), str):
                return
        except PluginError:
            return
        ((claim, allocation),) = plan_claims(_Plugin(state), self.store, pod, node, 0).items
        assert allocation is not None
        if self.rng.random() < 0.5:
            self.store.assume(claim, allocation, pod.uid)
            self.in_flight.append((self.claim_body(name, SHAPES[shape]), allocation, pod.uid))
        else:
            self.apply("resourceclaims", self.claim_body(name, SHAPES[shape], allocation))

    def written(self) -> None:
        """An allocation written by someone else: a share with capacity, admin access, or
        a capacity that does not parse."""
        self.claims += 1
        name = f"c{self.claims}"
        pool = self.rng.choice(["local-n0", "local-n1", "span", "everywhere"])
        result: Json = {"request": "r", "driver": D, "pool": pool, "device": "dev-0"}
        kind = self.rng.choice(["share", "admin", "bad"])
        if kind == "admin":
            result["adminAccess"] = True
        else:
            result["shareID"] = f"share-{name}"
            result["consumedCapacity"] = {"mem": "lots" if kind == "bad" else "1Gi"}
        allocation = {"devices": {"results": [result]}}
        self.apply("resourceclaims", self.claim_body(name, SHAPES["one"], allocation))

    def release(self) -> None:
        """An in-flight allocation is written (then released) or given up."""
        if not self.in_flight:
            return
        body, allocation, pod_uid = self.in_flight.pop(self.rng.randrange(len(self.in_flight)))
        name = body["metadata"]["name"]
        if self.rng.random() < 0.5:
            written = {**copy.deepcopy(allocation), "allocationTimestamp": "2026-01-01T00:00:00Z"}
            self.apply("resourceclaims", self.claim_body(name, body["spec"]["devices"], written))
        self.store.release(f"uid-{name}", pod_uid)

    def deallocate(self) -> None:
        allocated = sorted(k for k, c in self.store.claims.items() if c.allocation is not None)
        if not allocated:
            return
        claim = self.store.claims[self.rng.choice(allocated)]
        if claim.uid in {f"uid-{b['metadata']['name']}" for b, _, _ in self.in_flight}:
            return
        if self.rng.random() < 0.5:
            self.apply("resourceclaims", dict(claim.raw), "DELETED")
        else:
            spec = claim.raw["spec"]["devices"]
            self.apply("resourceclaims", self.claim_body(claim.name, spec))

    def change_class(self) -> None:
        model = self.rng.choice("abz")
        self.apply(
            "deviceclasses", self.klass("big", f'device.attributes["{D}"].model == "{model}"')
        )

    def change_taint_rule(self) -> None:
        if self.store.taint_rules and self.rng.random() < 0.5:
            self.apply("devicetaintrules", {"metadata": {"name": "rule"}}, "DELETED")
            return
        pool = self.rng.choice(["local-n0", "local-n1", "span", "everywhere"])
        selector = {"driver": D, "pool": pool}
        if self.rng.random() < 0.5:
            selector["device"] = "dev-0-a" if pool.startswith("local") else "dev-0"
        spec = {"deviceSelector": selector, "taint": {"key": "t", "effect": "NoSchedule"}}
        self.apply("devicetaintrules", {"metadata": self.meta("rule"), "spec": spec})

    def change_labels(self) -> None:
        node = self.rng.choice(NODES)
        self.labels[node] = {"zone": self.rng.choice(ZONES), "other": str(self.rv)}


class _Plugin:
    """What ``plan_claims`` reads of the plugin: the Filter's memo."""

    def __init__(self, state: PodClaims) -> None:
        self.state = state

    def memo(self, pod: PodInfo, store: DraStore) -> PodClaims:
        return self.state


def pod_with(*claims: str, uid: str) -> PodInfo:
    body = make_pod(uid)
    body["metadata"].update(namespace=NS, uid=uid)
    body["spec"]["resourceClaims"] = [{"name": c, "resourceClaimName": c} for c in claims]
    return parse_pod(body)


def is_cached(store: DraStore, signature: tuple[str, ...], node: NodeInfo) -> bool:
    found = store.outcomes(signature).get(node.name)
    return found is not None and found.labels == node.labels


def _plain(outcome: object) -> str:
    """An outcome as text, with the random shareIDs made equal."""
    text = json.dumps(outcome, sort_keys=False)
    for found in {t for t in text.split('"shareID": "')[1:]}:
        text = text.replace(found[:36], "share")
    return text


def fresh(store: DraStore, node: NodeInfo, claims: list[Json]) -> str:
    """The outcome on one node from an allocator built from JSON, as node_result says it."""
    try:
        allocator = Allocator(
            allocated_state(store.allocations()),
            store.classes,
            [store.slices[name] for name in sorted(store.slices)],
            taint_rules=list(store.taint_rules.values()),
        )
    except AllocationError as exc:
        return f"prepare error: {exc}"
    try:
        found = allocator.allocate(
            {"metadata": {"name": node.name, "labels": dict(node.labels)}}, claims
        )
    except AllocationError as exc:
        return f'filter error: running "{NAME}" filter plugin: {exc}'
    if found is None:
        return allocator.last_reason or CANNOT_ALLOCATE
    return _plain(found)


def cached(store: DraStore, node: NodeInfo, pod: PodInfo) -> str:
    try:
        state = prepare(store, pod)
    except AllocationError as exc:
        return f"prepare error: {exc}"
    assert isinstance(state, PodClaims)
    try:
        result = node_result(state, node, 0)
    except PluginError as exc:
        return f"filter error: {exc}"
    return result if isinstance(result, str) else _plain(result)


def filtered(store: DraStore, nodes: list[NodeInfo], claim: str) -> list[tuple[str, list[int]]]:
    """The plugin's Filter over all nodes: (reason, rejected positions), or the error."""
    pod = pod_with(claim, uid=f"filter-{claim}")
    try:
        state = prepare(store, pod)
    except AllocationError as exc:
        return [(f"prepare error: {exc}", [])]
    cycle = SimpleNamespace(state={PODCLAIMS_KEY: state}, snapshot=SimpleNamespace(nodes=nodes))
    try:
        found = DynamicResources().filter(cast(Cycle, cycle), np.arange(len(nodes)))
    except PluginError:
        return [("filter error", [])]
    return [(r.reason, np.flatnonzero(r.mask).tolist()) for r in found]


def rejections(wants: list[str]) -> list[tuple[str, list[int]]]:
    """What Filter must say for these fresh outcomes (JSON for a fit, else a reason)."""
    if any(w.startswith("prepare error") for w in wants):
        return [(next(w for w in wants if w.startswith("prepare error")), [])]
    if any(w.startswith("filter error") for w in wants):
        return [("filter error", [])]
    out: dict[str, list[int]] = {}
    for position, want in enumerate(wants):
        if not want.startswith("["):
            out.setdefault(want, []).append(position)
    return list(out.items())


@pytest.mark.parametrize("seed", range(12))
def test_cached_outcomes_equal_fresh_allocations(seed: int) -> None:
    rng = random.Random(seed)
    world = World(rng)
    for name, spec in SHAPES.items():
        for twin in ("", "-twin"):
            world.apply("resourceclaims", world.claim_body(f"probe-{name}{twin}", spec))
    history: list[str] = []
    hits = 0
    for _ in range(45):
        history.append(world.step())
        nodes = [world.node(n) for n in NODES]
        try:
            want_state = allocated_state(world.store.allocations())
        except AllocationError as exc:
            with pytest.raises(AllocationError, match=re.escape(str(exc))):
                world.store.allocated_state()
        else:
            assert world.store.allocated_state() == want_state, history
        for name in SHAPES:
            claim = world.store.claims[f"{NS}/probe-{name}"]
            wants = [fresh(world.store, node, [dict(claim.raw)]) for node in nodes]
            assert filtered(world.store, nodes, f"probe-{name}") == rejections(wants)
            for node, want in zip(nodes, wants, strict=True):
                for twin in ("", "-twin"):
                    pod = pod_with(f"probe-{name}{twin}", uid=f"probe-{name}{twin}")
                    signature = claims_signature([claim])
                    assert signature is not None
                    hits += is_cached(world.store, signature, node)
                    got = cached(world.store, node, pod)
                    if got.startswith("filter error"):
                        # Claim names appear in error texts: compare with this claim's.
                        twin_claim = world.store.claims[f"{NS}/probe-{name}{twin}"]
                        want_here = fresh(world.store, node, [dict(twin_claim.raw)])
                    else:
                        want_here = want
                    assert got == want_here, (history, name, node.name, twin)
    assert "allocate" in history
    assert hits > 0


def test_cache_is_used_and_invalidated_per_node() -> None:
    """An allocation on one node-local pool leaves the other nodes' outcomes cached."""
    store = DraStore()
    store.apply(
        "deviceclasses",
        None,
        {"metadata": {"name": "gpu"}, "spec": {"selectors": [cel(f'device.driver == "{D}"')]}},
    )
    for n in NODES:
        spec = {
            "driver": D,
            "pool": {"name": n, "generation": 1, "resourceSliceCount": 1},
            "nodeName": n,
            "devices": [{"name": "dev-0"}],
        }
        store.apply("resourceslices", None, {"metadata": {"name": n}, "spec": spec})
    spec = {"devices": SHAPES["one"]}
    for name in ("a", "b"):
        store.apply(
            "resourceclaims",
            None,
            {"metadata": {"name": name, "namespace": NS, "uid": name}, "spec": spec},
        )
    nodes = [parse_node(make_node(n)) for n in NODES]
    state = prepare(store, pod_with("a", uid="pa"))
    signature = claims_signature(state.to_allocate) if isinstance(state, PodClaims) else None
    assert isinstance(state, PodClaims) and signature is not None
    for row, node in enumerate(nodes):
        assert not isinstance(node_result(state, node, row), str)
        assert is_cached(store, signature, node)
    ((claim, allocation),) = plan_claims(
        _Plugin(state), store, pod_with("a", uid="pa"), nodes[0], 0
    ).items
    assert allocation is not None
    assert allocation is not state.nodes[0][0]  # type: ignore[index]
    store.assume(parse_claim(dict(claim.raw)), allocation, "pa")
    assert not is_cached(store, signature, nodes[0])
    for node in nodes[1:]:
        assert is_cached(store, signature, node)
    other = prepare(store, pod_with("b", uid="pb"))
    assert isinstance(other, PodClaims)
    assert other.outcomes is state.outcomes
    assert node_result(other, nodes[0], 0) == CANNOT_ALLOCATE
    changed = parse_node(make_node("n1", labels={"zone": "z9"}))
    assert is_cached(store, signature, nodes[1])
    assert not is_cached(store, signature, changed)


@pytest.mark.parametrize("tainted", [False, True], ids=["plain", "tainted"])
def test_metadata_update_keeps_parsed_slices(tainted: bool) -> None:
    """A slice update that leaves its spec alone is not parsed again; its JSON is new."""
    store = DraStore()
    if tainted:
        spec = {"deviceSelector": {"driver": D}, "taint": {"key": "t", "effect": "NoSchedule"}}
        store.apply("devicetaintrules", None, {"metadata": {"name": "r"}, "spec": spec})
    body: Json = {
        "metadata": {"name": "s", "resourceVersion": "1"},
        "spec": {"driver": D, "pool": {"name": "p"}, "nodeName": "n0", "devices": [{"name": "x"}]},
    }
    store.apply("resourceslices", None, body)
    index = store.slice_index()
    store.apply("resourceslices", None, {**body, "metadata": {"name": "s", "resourceVersion": "2"}})
    assert store.slice_index() is index
    (json_slice,) = store.allocator_slices()
    assert json_slice["metadata"]["resourceVersion"] == "2"
    assert bool(json_slice["spec"]["devices"][0].get("taints")) is tainted
    changed = copy.deepcopy(body)
    changed["metadata"]["resourceVersion"] = "3"
    changed["spec"]["devices"][0]["name"] = "y"
    store.apply("resourceslices", None, changed)
    assert [d.name for d in store.slice_index().all[0].devices] == ["y"]


def test_pool_seen_at_two_generations_keeps_each_nodes_counters() -> None:
    """One pool with a counter budget of 1 on node A (generation 1) and 2 on node B
    (generation 2): filtering A first must not lend A's budget to B's kept outcome."""
    store = DraStore()
    store.apply(
        "deviceclasses",
        None,
        {"metadata": {"name": "gpu"}, "spec": {"selectors": [cel(f'device.driver == "{D}"')]}},
    )
    for node, generation, budget in (("A", 1, "1"), ("B", 2, "2")):
        pool = {"name": "p", "generation": generation, "resourceSliceCount": 2}
        counters = {"name": "set", "counters": {"c": {"value": budget}}}
        uses = [{"counterSet": "set", "counters": {"c": {"value": "1"}}}]
        for suffix, extra in (
            ("c", {"sharedCounters": [counters]}),
            ("d", {"devices": [{"name": d, "consumesCounters": uses} for d in ("d1", "d2")]}),
        ):
            spec = {"driver": D, "pool": pool, "nodeName": node, **extra}
            store.apply(
                "resourceslices", None, {"metadata": {"name": f"{node}-{suffix}"}, "spec": spec}
            )
    spec = {"devices": {"requests": [exactly("r", "gpu", count=2)]}}
    for name in ("c1", "c2"):
        body = {"metadata": {"name": name, "namespace": NS, "uid": name}, "spec": spec}
        store.apply("resourceclaims", None, body)
    a, b = parse_node(make_node("A")), parse_node(make_node("B"))
    first = prepare(store, pod_with("c1", uid="p1"))
    assert isinstance(first, PodClaims)
    assert node_result(first, a, 0) == CANNOT_ALLOCATE
    assert not isinstance(node_result(first, b, 1), str)
    second = prepare(store, pod_with("c2", uid="p2"))
    assert isinstance(second, PodClaims)
    assert node_result(second, b, 1) != CANNOT_ALLOCATE
    assert fresh(store, b, [dict(store.claims[f"{NS}/c2"].raw)]) == _plain(
        node_result(second, b, 1)
    )
