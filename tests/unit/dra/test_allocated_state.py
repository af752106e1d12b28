"""allocated_state: what allocated and in-flight claims hold, as foreachAllocatedDevice reads it."""

from __future__ import annotations

from decimal import Decimal

from podium.algorithms.dynamic_resources.allocator import (
    Allocator,
    DeviceID,
    SharedDeviceID,
    allocated_state,
)
from tests.unit.dra.builders import claim, class_, device, node, request, slice_


def _result(name: str, **extra: object) -> dict[str, object]:
    return {"request": "r", "driver": "d", "pool": "p", "device": name, **extra}


def test_allocated_state_sorts_results() -> None:
    state = allocated_state(
        [
            {"devices": {"results": [_result("dedicated"), _result("admin", adminAccess=True)]}},
            {
                "devices": {
                    "results": [
                        _result("shared", shareID="a", consumedCapacity={"mem": "1Gi"}),
                        _result("shared", shareID="b", consumedCapacity={"mem": "512Mi"}),
                        _result("no-capacity", shareID="c"),
                    ]
                }
            },
            {},
        ]
    )
    assert state.devices == {DeviceID("d", "p", "dedicated")}
    assert state.shared_device_ids == {
        SharedDeviceID("d", "p", "shared", "a"),
        SharedDeviceID("d", "p", "shared", "b"),
        SharedDeviceID("d", "p", "no-capacity", "c"),
    }
    assert state.aggregated_capacity == {
        DeviceID("d", "p", "shared"): {"mem": Decimal(1536 * 2**20)}
    }


def test_allocator_is_reused_across_nodes_and_results_are_copies() -> None:
    slices = [
        slice_("s1", "node-1", "p1", "d", device("a", taints=[{"key": "k", "effect": "None"}])),
        slice_("s2", "node-2", "p2", "d", device("b")),
    ]
    tolerations = [{"key": "k", "operator": "Exists"}]
    claims = [claim("c", request("r", "cls", tolerations=tolerations))]
    allocator = Allocator(allocated_state([]), {"cls": class_("cls", "d")}, slices)
    first = allocator.allocate(node("node-1", "x"), claims)
    second = allocator.allocate(node("node-2", "x"), claims)
    assert first is not None and second is not None
    assert first[0]["devices"]["results"][0]["device"] == "a"
    assert second[0]["devices"]["results"][0]["device"] == "b"
    assert allocator.allocate(node("node-3", "x"), claims) is None
    first[0]["devices"]["results"][0]["tolerations"][0]["key"] = "changed"
    assert tolerations[0]["key"] == "k"
