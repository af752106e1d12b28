"""Ported rows of Go's allocatortesting table: multi-host pools, generations, incomplete
and invalid pools, and the number of search steps for exhaustive searches."""

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
    node,
    pool,
    prioritized,
    request,
    result,
    slice_,
    sub_request,
)
from tests.unit.dra.harness import Case, params, run_case

A = "driver-a"
CLASS_A = class_("class-a", A)
LOCAL1 = local_node_selector("node-1")
INVALID = "invalid resource pools were encountered"


def gen(name: str, node_name: str, generation: int, *devices: str) -> Json:
    return slice_(name, node_name, pool("pool-1", 2, generation), A, *(device(d) for d in devices))


def counters(name: str, node_name: str, pool_: Json | str, *sets: Json) -> Json:
    return slice_(name, node_name, pool_, A, shared_counters=list(sets))


def memory(
    name: str, counter_set_name: str, size: str, capacity: str | None = FROM_COUNTERS
) -> Json:
    return device(name, capacity, consumes=[consumption(counter_set_name, {"memory": size})])


def typed(name: str, kind: str, binding_conditions: list[str] | None = None) -> Json:
    return device(
        name,
        None,
        {"type": {"string": kind}},
        binding_conditions=binding_conditions,
        binding_failure_conditions=[] if binding_conditions else None,
    )


def of_type(kind: str) -> Json:
    return cel(f'device.attributes["{A}"].type == "{kind}"')


FOUR = [device(f"device-{i}") for i in (1, 2, 3, 4)]
MEMORY_AT_LEAST = {
    size: cel(f'device.capacity["{A}"].memory.compareTo(quantity("{size}")) >= 0')
    for size in ("6Gi", "2Gi")
}

CASES: dict[str, Case] = {
    "allocation-mode-all-with-multi-host-resource-pool": Case(
        claims=[claim("claim-0", all_request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[gen("slice-1", "node-1", 1, "device-1"), gen("slice-2", "node-2", 1, "device-2")],
        expect=[allocation(LOCAL1, result("req-0", A, "pool-1", "device-1"))],
    ),
    "multi-host-resource-pool-with-stale-slice-for-current-node": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[gen("slice-1", "node-1", 1, "device-1"), gen("slice-2", "node-2", 2, "device-2")],
        expect=None,
    ),
    "multi-host-resource-pool-complete-update-from-node-1-to-node-2": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            gen("slice-1", "node-1", 1, "device-1"),
            gen("slice-1", "node-1", 1, "device-2"),
            gen("slice-2", "node-2", 2, "device-1"),
            gen("slice-2", "node-2", 2, "device-2"),
        ],
        expect=[allocation(LOCAL1, result("req-0", A, "pool-1", "device-1"))],
    ),
    "multi-host-resource-pool-complete-update-from-node-2-to-node-1": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            gen("slice-1", "node-2", 1, "device-1"),
            gen("slice-1", "node-2", 1, "device-2"),
            gen("slice-2", "node-1", 2, "device-1"),
            gen("slice-2", "node-1", 2, "device-2"),
        ],
        expect=[allocation(LOCAL1, result("req-0", A, "pool-1", "device-1"))],
    ),
    "multi-host-resource-pool-incomplete-update-from-node-1-to-node-2": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            gen("slice-1", "node-1", 1, "device-1"),
            gen("slice-1", "node-1", 1, "device-2"),
            gen("slice-2", "node-2", 2, "device-1"),
        ],
        expect=[allocation(LOCAL1, result("req-0", A, "pool-1", "device-1"))],
    ),
    "multi-host-resource-pool-incomplete-update-from-node-2-to-node-1": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            gen("slice-1", "node-2", 1, "device-1"),
            gen("slice-1", "node-2", 1, "device-2"),
            gen("slice-2", "node-1", 2, "device-1"),
        ],
        expect=None,
    ),
    "partitionable-devices-same-counter-set-name-in-different-resource-slices": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            slice_("slice-1", "node-1", pool("pool-1", 4), A, device("device-1")),
            counters("slice-2", "node-1", pool("pool-1", 4), counter_set("counter-set-1", {})),
            slice_("slice-3", "node-1", pool("pool-1", 4), A, device("device-2")),
            counters("slice-4", "node-1", pool("pool-1", 4), counter_set("counter-set-1", {})),
        ],
        expect=None,
        reason=INVALID,
    ),
    "partitionable-devices-device-counter-consumption-references-unknown-counter-set": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                pool("pool-1", 2),
                A,
                device("device-1", consumes=[consumption("counter-set-2", {})]),
            ),
            counters("slice-2", "node-1", pool("pool-1", 2), counter_set("counter-set-1", {})),
        ],
        expect=None,
        reason=INVALID,
    ),
    (
        "partitionable-devices-device-counter-consumption-references-unknown-counter-in-counter-set"
    ): Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                pool("pool-1", 2),
                A,
                memory("device-1", "counter-set-1", "8Gi", None),
            ),
            counters(
                "slice-2",
                "node-1",
                pool("pool-1", 2),
                counter_set("counter-set-1", {"other-memory": "8Gi"}),
            ),
        ],
        expect=None,
        reason=INVALID,
    ),
    "partitionable-devices-device-counter-consumption-references-counter-set-in-other-pool": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1", "node-1", "pool-1", A, memory("device-1", "counter-set-1", "8Gi", None)
            ),
            counters(
                "slice-2", "node-1", "pool-2", counter_set("counter-set-1", {"memory": "8Gi"})
            ),
        ],
        expect=None,
        reason=INVALID,
    ),
    "partitionable-devices-devices-on-different-nodes-consume-same-counter-set": Case(
        claims=[
            claim(
                "claim-0",
                prioritized(
                    "req-0",
                    sub_request("subReq-0", "class-a", 1, MEMORY_AT_LEAST["6Gi"]),
                    sub_request("subReq-1", "class-a", 1, MEMORY_AT_LEAST["2Gi"]),
                ),
            )
        ],
        classes=[CLASS_A],
        slices=[
            counters(
                "slice-1",
                "node-1",
                pool("pool-1", 3),
                counter_set("counter-set-1", {"memory": "8Gi"}),
            ),
            slice_(
                "slice-2",
                "node-1",
                pool("pool-1", 3),
                A,
                memory("device-1", "counter-set-1", "6Gi"),
                memory("device-2", "counter-set-1", "2Gi"),
            ),
            slice_(
                "slice-3",
                "node-2",
                pool("pool-1", 3),
                A,
                memory("device-3", "counter-set-1", "6Gi", None),
            ),
        ],
        allocated=[DeviceID(A, "pool-1", "device-3")],
        expect=[allocation(LOCAL1, result("req-0/subReq-1", A, "pool-1", "device-2"))],
    ),
    "partitionable-devices-devices-consume-counter-set-in-different-nodes": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            counters(
                "slice-1",
                "node-1",
                pool("pool-1", 3),
                counter_set("counter-set-1", {"memory": "8Gi"}),
            ),
            slice_(
                "slice-2",
                "node-1",
                pool("pool-1", 3),
                A,
                memory("device-1", "counter-set-1", "6Gi"),
            ),
            slice_(
                "slice-3",
                "node-2",
                pool("pool-1", 3),
                A,
                memory("device-2", "counter-set-1", "6Gi"),
                memory("device-3", "counter-set-1", "2Gi"),
            ),
        ],
        allocated=[DeviceID(A, "pool-1", "device-1")],
        node=node("node-2", "region-1"),
        expect=[
            allocation(local_node_selector("node-2"), result("req-0", A, "pool-1", "device-3"))
        ],
    ),
    "partitionable-devices-validation-error-on-non-targeting-slice": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            counters(
                "slice-1",
                "node-1",
                pool("pool-1", 3),
                counter_set("counter-set-1", {"memory": "8Gi"}),
            ),
            slice_(
                "slice-2",
                "node-1",
                pool("pool-1", 3),
                A,
                memory("device-1", "counter-set-1", "6Gi"),
            ),
            slice_(
                "slice-3",
                "node-2",
                pool("pool-1", 3),
                A,
                memory("device-3", "counter-set-2", "6Gi", None),
            ),
        ],
        expect=None,
        reason=INVALID,
    ),
    "different-resourceslices-in-pool-can-target-different-nodes": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            slice_("slice-1", "node-2", pool("pool-1", 2), A, device("device-1")),
            slice_("slice-2", "node-1", pool("pool-1", 2), A, device("device-2")),
        ],
        expect=[allocation(LOCAL1, result("req-0", A, "pool-1", "device-2"))],
    ),
    "invalid-pool-is-ok-if-devices-can-be-allocated-from-other": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            slice_("slice-1", "node-1", pool("pool-1", 2), A, device("device-1")),
            slice_("slice-2", "node-1", pool("pool-1", 2), A, device("device-1")),
            slice_("slice-3", "node-1", pool("pool-2", 1), A, device("device-2")),
        ],
        expect=[allocation(LOCAL1, result("req-0", A, "pool-2", "device-2"))],
    ),
    "invalid-pool-is-error-if-no-other-device-can-be-allocated": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            slice_("slice-1", "node-1", pool("pool-1", 2), A, device("device-1")),
            slice_("slice-2", "node-1", pool("pool-1", 2), A, device("device-1")),
            slice_("slice-3", "node-1", pool("pool-2", 1), A, device("device-2")),
        ],
        allocated=[DeviceID(A, "pool-2", "device-2")],
        expect=None,
        reason=INVALID,
    ),
    "no-allocation-from-incomplete-pools": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[slice_("slice-1", "node-1", pool("pool-1", 2), A, device("device-1"))],
        expect=None,
    ),
    "check-combinations-within-single-request-single-pool-single-slice": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 5))],
        classes=[CLASS_A],
        slices=[slice_("slice-1", "node-1", "pool-1", A, *FOUR)],
        expect=None,
        allocate_one_calls=16,
    ),
    "check-combinations-within-single-request-single-pool-multiple-slices": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 5))],
        classes=[CLASS_A],
        slices=[
            slice_("slice-1", "node-1", pool("pool-1", 2), A, *FOUR[:2]),
            slice_("slice-2", "node-1", pool("pool-1", 2), A, *FOUR[2:]),
        ],
        expect=None,
        allocate_one_calls=16,
    ),
    "check-combinations-within-single-request-multiple-pools-multiple-slices": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 5))],
        classes=[CLASS_A],
        slices=[
            slice_("slice-1", "node-1", pool("pool-1", 2), A, FOUR[0]),
            slice_("slice-2", "node-1", pool("pool-1", 2), A, FOUR[1]),
            slice_("slice-3", "node-1", "pool-2", A, *FOUR[2:]),
        ],
        expect=None,
        allocate_one_calls=16,
    ),
    "check-combinations-within-single-request-many-pools": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 5))],
        classes=[CLASS_A],
        slices=[slice_(f"slice-{i}", "node-1", f"pool-{i}", A, FOUR[i - 1]) for i in (1, 2, 3, 4)],
        expect=None,
        allocate_one_calls=16,
    ),
    "check-combinations-with-backtracking": Case(
        claims=[
            claim(
                "claim-0",
                request("req-1", "class-a", 2),
                request("req-2", "class-a", 1, of_type("X")),
            )
        ],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                "pool-1",
                A,
                typed("device-1", "X"),
                typed("device-2", "Y"),
                typed("device-3", "Y"),
            )
        ],
        expect=[
            allocation(
                LOCAL1,
                result("req-1", A, "pool-1", "device-2"),
                result("req-1", A, "pool-1", "device-3"),
                result("req-2", A, "pool-1", "device-1"),
            )
        ],
        allocate_one_calls=12,
    ),
    "check-combinations-with-backtracking-across-slices-and-pools": Case(
        claims=[
            claim(
                "claim-0",
                request("req-1", "class-a", 2),
                request("req-2", "class-a", 1, of_type("X")),
            )
        ],
        classes=[CLASS_A],
        slices=[
            slice_("slice-1", "node-1", pool("pool-1", 2), A, typed("device-1", "X")),
            slice_("slice-2", "node-1", pool("pool-1", 2), A, typed("device-2", "Y")),
            slice_(
                "slice-3",
                "node-1",
                "pool-2",
                A,
                typed("device-3", "Y", ["IsPrepare"]),
            ),
        ],
        expect=[
            allocation(
                LOCAL1,
                result("req-1", A, "pool-1", "device-2"),
                result("req-1", A, "pool-2", "device-3", bindingConditions=["IsPrepare"]),
                result("req-2", A, "pool-1", "device-1"),
            )
        ],
        allocate_one_calls=12,
    ),
    "check-combinations-with-prioritized-list": Case(
        claims=[
            claim(
                "claim-0",
                prioritized(
                    "req-1",
                    sub_request("subReq-0", "class-a", 3, of_type("Y")),
                    sub_request("subReq-1", "class-a", 2),
                ),
                prioritized(
                    "req-2",
                    sub_request("subReq-0", "class-a", 2),
                    sub_request("subReq-1", "class-a", 1, of_type("X")),
                ),
            )
        ],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                "pool-1",
                A,
                typed("device-1", "X"),
                typed("device-2", "Y"),
                typed("device-3", "Y"),
            )
        ],
        expect=[
            allocation(
                LOCAL1,
                result("req-1/subReq-1", A, "pool-1", "device-2"),
                result("req-1/subReq-1", A, "pool-1", "device-3"),
                result("req-2/subReq-1", A, "pool-1", "device-1"),
            )
        ],
        allocate_one_calls=26,
    ),
}


@params(CASES)
def test_allocator(case: Case) -> None:
    run_case(case)
