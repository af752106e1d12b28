"""A pod group's devices: each member's allocations are held in flight for the next
member of the same cycle, a claim members share is allocated once and shared, and a
group that does not fit leaves none behind."""

from __future__ import annotations

import random
from typing import Any

import pytest

from podium.algorithms.dynamic_resources.group import GroupClaims
from podium.algorithms.dynamic_resources.plugin import GROUP_PENDING, dynamic_resources
from podium.framework.cycle import Scheduler
from podium.framework.podgroup import Board, place_group
from podium.framework.queued import QueuedPod
from podium.kube.manifests import make_node, make_pod
from podium.kube.objects import PodInfo, parse_node, parse_pod
from podium.policy import default_profile
from podium.state.podgroups import parse_pod_group
from podium.state.snapshot import build_snapshot
from podium.tools.simulation import simulate

GPU = "example.com/gpu"


def _docs(devices: dict[str, int]) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [
        {
            "kind": "DeviceClass",
            "metadata": {"name": "gpu", "resourceVersion": "1"},
            "spec": {"extendedResourceName": GPU},
        }
    ]
    for node, count in devices.items():
        docs.append(
            {
                "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-s", "resourceVersion": "1"},
                "spec": {
                    "driver": "d.example.com",
                    "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": f"g{i}"} for i in range(count)],
                },
            }
        )
    return docs


def _member(name: str, claims: tuple[str, ...] = ()) -> PodInfo:
    body = make_pod(name, cpu="100m", extended={GPU: 1})
    body["metadata"].update(namespace="default", uid=f"uid-{name}")
    body["spec"]["schedulingGroup"] = {"podGroupName": "g"}
    if claims:
        body["spec"]["resourceClaims"] = [{"name": c, "resourceClaimName": c} for c in claims]
    return parse_pod(body)


@pytest.mark.parametrize(
    ("devices", "members", "placed"),
    [
        pytest.param({"n1": 1, "n2": 1}, 2, 2, id="one-device-each-node-two-members"),
        pytest.param({"n1": 2}, 2, 2, id="two-devices-one-node"),
        pytest.param({"n1": 1, "n2": 1}, 3, 0, id="three-members-two-devices"),
    ],
)
def test_members_never_share_a_device_and_a_failed_group_holds_none(
    devices: dict[str, int], members: int, placed: int
) -> None:
    nodes = [parse_node(make_node(n)) for n in ("n1", "n2")]
    cache, snapshot = build_snapshot(nodes, [], storage=_docs(devices))
    profile = default_profile()
    claims = GroupClaims(snapshot.dra, snapshot, dynamic_resources(profile))
    board = Board(
        Scheduler(random.Random(0)),
        cache,
        snapshot,
        reserve=claims.reserve,
        unreserve=claims.unreserve,
    )
    group = parse_pod_group(
        {
            "metadata": {"name": "g", "namespace": "default", "resourceVersion": "1"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": members}}},
        }
    )
    entries = [QueuedPod(_member(f"m{i}")) for i in range(members)]
    outcome = place_group(board, profile, group, entries, [])
    assert outcome.success == bool(placed)
    if not placed:
        assert not snapshot.dra.in_flight and not claims.plans
        return
    held = []
    for entry in entries:
        plan = claims.plans[entry.pod.uid]
        assert plan.extended is not None
        for result in plan.extended.allocation["devices"]["results"]:
            held.append((result["pool"], result["device"]))
    assert len(set(held)) == members, held
    assert len(snapshot.dra.in_flight) == members
    for entry in entries:
        claims.unreserve(entry.pod)
    assert not snapshot.dra.in_flight


def _claim(name: str) -> dict[str, Any]:
    return {
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "resourceVersion": "1",
        },
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
    }


def _sharer(name: str, cpu: str, claims: tuple[str, ...]) -> PodInfo:
    body = make_pod(name, cpu=cpu)
    body["metadata"].update(
        namespace="default", uid=f"uid-{name}", creationTimestamp=f"2026-01-01T00:00:0{name[-1]}Z"
    )
    body["spec"]["schedulingGroup"] = {"podGroupName": "g"}
    body["spec"]["resourceClaims"] = [{"name": c, "resourceClaimName": c} for c in claims]
    return parse_pod(body)


@pytest.mark.parametrize(
    ("members", "min_count", "nodes"),
    [
        pytest.param([("m0", "1", ("c",)), ("m1", "1", ("c",))], 2, ["n1", "n1"], id="both-share"),
        pytest.param(
            [("m0", "1", ("c",)), ("m1", "1", ("c",)), ("m2", "1", ("c",))],
            3,
            ["n1", "n1", "n1"],
            id="three-share",
        ),
        pytest.param(
            [("m0", "1", ("c",)), ("m1", "1", ("c", "own"))],
            2,
            ["n1", "n1"],
            id="shared-then-own-on-the-same-node",
        ),
        # The claim pins the second member to the first one's node, where cpu runs out.
        pytest.param([("m0", "3", ("c",)), ("m1", "3", ("c",))], 2, [], id="pinned-node-full"),
    ],
)
def test_a_claim_members_share_is_allocated_once_and_pins_them(
    members: list[tuple[str, str, tuple[str, ...]]], min_count: int, nodes: list[str]
) -> None:
    """Go's pendingAllocations: the first member allocates the claim in flight, the next
    ones take that allocation (no device of their own) and go where it is reachable."""
    cluster = [parse_node(make_node(n, cpu="4")) for n in ("n1", "n2")]
    storage = [*_docs({"n1": 2, "n2": 2}), _claim("c"), _claim("own")]
    cache, snapshot = build_snapshot(cluster, [], storage=storage)
    profile = default_profile()
    claims = GroupClaims(snapshot.dra, snapshot, dynamic_resources(profile))
    board = Board(
        Scheduler(random.Random(0)),
        cache,
        snapshot,
        reserve=claims.reserve,
        unreserve=claims.unreserve,
    )
    group = parse_pod_group(
        {
            "metadata": {"name": "g", "namespace": "default", "resourceVersion": "1"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
        }
    )
    entries = [QueuedPod(_sharer(*m)) for m in members]
    outcome = place_group(board, profile, group, entries, [])
    assert outcome.success == bool(nodes)
    pending = board.group.get(GROUP_PENDING, {})
    if not nodes:
        assert not snapshot.dra.in_flight and not claims.plans and not pending
        return
    assert [p.node for _, p in outcome.placements if p is not None] == nodes
    shared = snapshot.dra.in_flight["uid-c"]
    assert shared.pods == {e.pod.uid for e in entries}
    assert pending["uid-c"] == shared.pods
    allocations = [a for e in entries for c, a in claims.plans[e.pod.uid].items if c.name == "c"]
    assert all(a == allocations[0] for a in allocations), "one allocation, shared"
    held = [
        (r["pool"], r["device"])
        for flight in snapshot.dra.in_flight.values()
        for r in (flight.claim.allocation or {})["devices"]["results"]
    ]
    assert len(held) == len(set(held)), held
    for entry in reversed(entries):
        claims.unreserve(entry.pod)
    assert not snapshot.dra.in_flight and not pending


def test_a_claim_in_flight_outside_the_cycle_still_waits() -> None:
    """A pending allocation not made in this pod-group cycle is not shared (Go shares
    only within one cycle): the member waits for it to be written."""
    cluster = [parse_node(make_node(n, cpu="4")) for n in ("n1", "n2")]
    storage = [*_docs({"n1": 1, "n2": 1}), _claim("c")]
    cache, snapshot = build_snapshot(cluster, [], storage=storage)
    profile = default_profile()
    first = GroupClaims(snapshot.dra, snapshot, dynamic_resources(profile))
    earlier = Board(
        Scheduler(random.Random(0)),
        cache,
        snapshot,
        reserve=first.reserve,
        unreserve=first.unreserve,
    )
    group = parse_pod_group(
        {
            "metadata": {"name": "g", "namespace": "default", "resourceVersion": "1"},
            "spec": {"schedulingPolicy": {"basic": {}}},
        }
    )
    assert place_group(earlier, profile, group, [QueuedPod(_sharer("m0", "1", ("c",)))], []).success
    later = Board(
        Scheduler(random.Random(0)),
        cache,
        snapshot,
        reserve=first.reserve,
        unreserve=first.unreserve,
    )
    outcome = place_group(later, profile, group, [QueuedPod(_sharer("m1", "1", ("c",)))], [])
    assert not outcome.success
    (_, placement) = outcome.placements[0]
    assert placement is not None and placement.diagnosis is not None
    assert "is in the process of being allocated" in placement.diagnosis.message()


def test_simulate_holds_a_placed_gangs_devices_for_the_pods_after_it() -> None:
    """Two devices: the first gang of two takes both, the second gang gets none."""
    nodes = [parse_node(make_node(n)) for n in ("n1", "n2")]
    pending = []
    for g in ("a", "b"):
        for i in range(2):
            body = make_pod(f"{g}{i}", cpu="100m", extended={GPU: 1})
            body["metadata"].update(
                namespace="default",
                uid=f"uid-{g}{i}",
                creationTimestamp=f"2026-01-0{i + 1}T00:00:00Z",
            )
            body["spec"]["schedulingGroup"] = {"podGroupName": g}
            pending.append(parse_pod(body))
    groups = [
        {
            "kind": "PodGroup",
            "metadata": {"name": g, "namespace": "default", "generation": 1},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
        }
        for g in ("a", "b")
    ]
    result = simulate(
        default_profile(), nodes, [], pending, storage=_docs({"n1": 1, "n2": 1}), pod_groups=groups
    )
    assert sorted(p.pod.rsplit("/", 1)[-1] for p in result.placements if p.node) == ["a0", "a1"]
    assert len(result.unschedulable) == 2
