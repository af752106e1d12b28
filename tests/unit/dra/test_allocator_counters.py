"""Ported rows of Go's allocatortesting table: partitionable devices with several counter
sets, pools and counters, and the remaining "All" and limit rows."""

from __future__ import annotations

from podium.algorithms.dynamic_resources.allocator import DeviceID
from tests.unit.dra.builders import (
    FROM_COUNTERS,
    Json,
    all_request,
    allocation,
    cel,
    claim,
    class_,
    consumption,
    counter_set,
    device,
    local_node_selector,
    pool,
    prioritized,
    request,
    result,
    slice_,
    sub_request,
)
from tests.unit.dra.harness import FIXED_SHARE_ID, Case, params, run_case

A, B = "driver-a", "driver-b"
CLASS_A, CLASS_B = class_("class-a", A), class_("class-b", B)
LOCAL1 = local_node_selector("node-1")


def part(name: str, *uses: dict[str, str], capacity: str | None = FROM_COUNTERS) -> Json:
    """A device consuming from counter-set-1, counter-set-2, ... in order."""
    return device(
        name,
        capacity,
        consumes=[consumption(f"counter-set-{i}", use) for i, use in enumerate(uses, start=1)],
    )


def sets(name: str, pool_: Json | str, *counters: dict[str, str]) -> Json:
    return slice_(
        name,
        "node-1",
        pool_,
        A,
        shared_counters=[counter_set(f"counter-set-{i}", c) for i, c in enumerate(counters, 1)],
    )


def mem(size: str) -> Json:
    return cel(f'device.capacity["{A}"].memory.compareTo(quantity("{size}")) >= 0')


P2 = pool("pool-1", 2)

CASES: dict[str, Case] = {
    "partitionable-devices-multiple-capacity-pools": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a"),
                prioritized(
                    "req-1",
                    sub_request("subReq-0", "class-a", 1, mem("6Gi")),
                    sub_request("subReq-1", "class-a", 1, mem("4Gi")),
                ),
            )
        ],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                P2,
                A,
                part("device-1", {"memory": "4Gi"}, {"cpus": "4"}),
                part("device-2", {"memory": "6Gi"}, {"cpus": "6"}),
                part("device-3", {"memory": "4Gi"}, {"cpus": "4"}),
            ),
            sets("slice-2", P2, {"memory": "18Gi"}, {"cpus": "8"}),
        ],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-1"),
                result("req-1/subReq-1", A, "pool-1", "device-3"),
            )
        ],
    ),
    "partitionable-devices-multiple-counters": Case(
        claims=[claim("claim-0", request("req-0", "class-a"), request("req-1", "class-a"))],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                P2,
                A,
                part("device-1", {"memory": "4Gi", "cpus": "6"}, {"cpus": "4", "memory": "2Gi"}),
                part("device-2", {"memory": "6Gi", "cpus": "4"}, {"cpus": "6", "memory": "6Gi"}),
                part("device-3", {"memory": "4Gi", "cpus": "4"}, {"cpus": "4", "memory": "4Gi"}),
            ),
            sets("slice-2", P2, {"cpus": "8", "memory": "18Gi"}, {"cpus": "12", "memory": "18Gi"}),
        ],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-2"),
                result("req-1", A, "pool-1", "device-3"),
            )
        ],
    ),
    "partitionable-devices-multiple-pools": Case(
        claims=[claim("claim-0", request("req-0", "class-a"), request("req-1", "class-a"))],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                P2,
                A,
                part("device-1", {"cpus": "6", "memory": "4Gi"}),
                part("device-2", {"cpus": "4", "memory": "6Gi"}),
                part("device-3", {"cpus": "4", "memory": "4Gi"}),
            ),
            sets("slice-2", P2, {"cpus": "8", "memory": "18Gi"}),
            slice_(
                "slice-3",
                "node-1",
                pool("pool-2", 2),
                A,
                part("device-1", {"cpus": "6", "memory": "4Gi"}),
                part("device-2", {"cpus": "1", "memory": "7Gi"}),
                part("device-3", {"cpus": "1", "memory": "7Gi"}),
            ),
            sets("slice-4", pool("pool-2", 2), {"cpus": "8", "memory": "18Gi"}),
        ],
        allocated=[
            DeviceID(A, "pool-1", "device-2"),
            DeviceID(A, "pool-1", "device-3"),
            DeviceID(A, "pool-2", "device-1"),
        ],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-2", "device-2"),
                result("req-1", A, "pool-2", "device-3"),
            )
        ],
    ),
    "partitionable-devices-unused-counters-in-counter-set": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 2))],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                P2,
                A,
                part("device-1", {"memory": "5Gi"}, capacity=None),
                part("device-2", {"memory": "4Gi"}, capacity=None),
                part("device-3", {"memory": "4Gi"}, capacity=None),
            ),
            sets("slice-2", P2, {"memory": "8Gi", "unused": "1Gi"}),
        ],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-2"),
                result("req-0", A, "pool-1", "device-3"),
            )
        ],
    ),
    "partitionable-devices-no-capacity-available": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                "pool-1",
                A,
                part("device-1", {"memory": "4Gi"}),
                part("device-2", {"memory": "16Gi"}),
            ),
            sets("slice-2", "pool-1", {"memory": "18Gi"}),
        ],
        allocated=[DeviceID(A, "pool-1", "device-2")],
        expect=None,
    ),
    "partitionable-devices-overallocated-capacity-pool": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                "pool-1",
                A,
                part("device-1", {"memory": "4Gi"}),
                part("device-2", {"memory": "20Gi"}),
            ),
            sets("slice-2", "pool-1", {"memory": "18Gi"}),
        ],
        allocated=[DeviceID(A, "pool-1", "device-2")],
        expect=None,
    ),
    "all-devices-many-plus-another-reversed": Case(
        claims=[
            claim("claim-1", request("req-0", "class-b")),
            claim("claim-0", all_request("req-0", "class-a")),
        ],
        classes=[CLASS_A, CLASS_B],
        slices=[
            slice_("slice-1", "node-1", "pool-1", A, device("device-1"), device("device-2")),
            slice_("slice-1", "node-1", "pool-1", B, device("device-1")),
        ],
        expect=[
            allocation(LOCAL1, result("req-0", B, "pool-1", "device-1")),
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-1"),
                result("req-0", A, "pool-1", "device-2"),
            ),
        ],
    ),
    "all-devices-invalid-CEL": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 500))],
        classes=[CLASS_A],
        error="exceeds the claim limit",
    ),
    "exact-count-total-would-wrap-to-zero": Case(
        claims=[claim("claim-0", *(request(f"req-{i}", "class-a", 2**62) for i in range(4)))],
        classes=[CLASS_A],
        error="exceeds the claim limit",
    ),
    "consumable-capacity-with-partitionable-device-multiple-capacity-pools": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a", capacity="1"),
                request("req-2", "class-a", capacity="2"),
                prioritized(
                    "req-1",
                    sub_request(
                        "subReq-0",
                        "class-a",
                        1,
                        cel(f'device.capacity["{A}"]["capacity-0"].compareTo(quantity("4")) >= 0'),
                        capacity="1",
                    ),
                    sub_request(
                        "subReq-1",
                        "class-a",
                        1,
                        cel(f'device.capacity["{A}"]["capacity-0"].compareTo(quantity("2")) >= 0'),
                        capacity="1",
                    ),
                ),
            )
        ],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                P2,
                A,
                *(
                    device(
                        f"device-{i}",
                        {
                            "capacity-0": c0,
                            "capacity-1": {
                                "value": "4",
                                "requestPolicy": {
                                    "default": "2",
                                    "validRange": {"min": "2", "step": "2", "max": "4"},
                                },
                            },
                        },
                        consumes=[
                            consumption("counter-set-1", {"capacity-0": c0}),
                            consumption("counter-set-2", {"capacity-1": "4"}),
                        ],
                        allow_multiple=True,
                    )
                    for i, c0 in ((1, "2"), (2, "4"), (3, "2"))
                ),
            ),
            sets("slice-2", P2, {"capacity-0": "4"}, {"capacity-1": "8"}),
        ],
        expect=[
            allocation(
                LOCAL1,
                *(
                    result(
                        name,
                        A,
                        "pool-1",
                        dev,
                        shareID=FIXED_SHARE_ID,
                        consumedCapacity={"capacity-0": c0, "capacity-1": "2"},
                    )
                    for name, dev, c0 in (
                        ("req-0", "device-1", "1"),
                        ("req-2", "device-3", "2"),
                        ("req-1/subReq-1", "device-1", "1"),
                    )
                ),
            )
        ],
    ),
    "partitionable-devices-with-binding-conditions-multiple": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 2))],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                P2,
                A,
                *(
                    device(
                        f"device-{i}",
                        FROM_COUNTERS,
                        consumes=[consumption("counter-set-1", {"memory": "4Gi"})],
                        binding_conditions=[cond],
                        binding_failure_conditions=[fail],
                    )
                    for i, cond, fail in (
                        (1, "IsPrepare", "BindingFailed"),
                        (2, "IsPrepare2", "BindingFailed2"),
                    )
                ),
            ),
            sets("slice-2", P2, {"memory": "8Gi"}),
        ],
        expect=[
            allocation(
                LOCAL1,
                result(
                    "req-0",
                    A,
                    "pool-1",
                    "device-1",
                    bindingConditions=["IsPrepare"],
                    bindingFailureConditions=["BindingFailed"],
                ),
                result(
                    "req-0",
                    A,
                    "pool-1",
                    "device-2",
                    bindingConditions=["IsPrepare2"],
                    bindingFailureConditions=["BindingFailed2"],
                ),
            )
        ],
    ),
    "partitionable-devices-with-binding-conditions-and-taints": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 2))],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                "pool-1",
                A,
                device(
                    "device-1",
                    FROM_COUNTERS,
                    consumes=[consumption("counter-set-1", {"memory": "4Gi"})],
                    binding_conditions=["IsPrepare"],
                    binding_failure_conditions=["BindingFailed"],
                    taints=[{"key": "key1", "value": "value1", "effect": "NoSchedule"}],
                ),
                part("device-2", {"memory": "4Gi"}),
            ),
            sets("slice-2", "pool-1", {"memory": "8Gi"}),
        ],
        expect=None,
    ),
    "list-attributes-disabled-distinct-constraint-with-lists": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a", 2),
                constraints=[{"distinctAttribute": f"{A}/stringAttribute"}],
            )
        ],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                "pool-1",
                A,
                device("device-1", None, {"stringAttribute": {"strings": ["value1", "value2"]}}),
                device("device-2", None, {"stringAttribute": {"strings": ["value2", "value4"]}}),
            )
        ],
        expect=None,
    ),
}


@params(CASES)
def test_allocator(case: Case) -> None:
    run_case(case)
