"""Ported rows of Go's allocatortesting table: state rolled back on rejection and
backtracking, and the behaviour of features that are off in v1.37 (compatibility groups,
list-type attributes, derived attributes)."""

from __future__ import annotations

from tests.unit.dra.builders import (
    FROM_COUNTERS,
    Json,
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

A = "driver-a"
CLASS_A = class_("class-a", A)
LOCAL1 = local_node_selector("node-1")
STRING_ATTR = f"{A}/stringAttribute"


def kind(*values: str) -> Json:
    return cel(" || ".join(f'device.attributes["{A}"].kind == "{v}"' for v in values))


def string_is(value: str) -> Json:
    return cel(f'device.attributes["{A}"].stringAttribute == "{value}"')


def memory(name: str, size: str) -> Json:
    return device(name, FROM_COUNTERS, consumes=[consumption("counter-set-1", {"memory": size})])


def mem_at_least(size: str) -> Json:
    return cel(f'device.capacity["{A}"].memory.compareTo(quantity("{size}")) >= 0')


def share(request_name: str, name: str, consumed: dict[str, str] | None = None) -> Json:
    extra: Json = {"shareID": FIXED_SHARE_ID}
    if consumed:
        extra["consumedCapacity"] = consumed
    return result(request_name, A, "pool-1", name, **extra)


def grouped(name: str, groups: list[str] | None, amount: str) -> Json:
    consumed = consumption("counter-set-1", {"capacity-0": amount})
    if groups:
        consumed["compatibilityGroups"] = groups
    return device(name, consumes=[consumed])


MEMORY_POOL = [
    slice_(
        "slice-1",
        "node-1",
        pool("pool-1", 2),
        A,
        memory("device-1", "4Gi"),
        memory("device-2", "6Gi"),
        memory("device-3", "4Gi"),
    ),
    slice_(
        "slice-2",
        "node-1",
        pool("pool-1", 2),
        A,
        shared_counters=[counter_set("counter-set-1", {"memory": "8Gi"})],
    ),
]

CASES: dict[str, Case] = {
    "consumable-capacity-rejection-rolls-back-constraints": Case(
        claims=[
            claim("claim-0", request("req-0", "class-a", 1, string_is("cap"), capacity="2")),
            claim(
                "claim-1",
                prioritized(
                    "req-0",
                    sub_request(
                        "subReq-0", "class-a", 1, string_is("cap"), mode="All", capacity="2"
                    ),
                    sub_request("subReq-1", "class-a", 1, string_is("fb")),
                ),
                constraints=[{"matchAttribute": STRING_ATTR}],
            ),
        ],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                "pool-1",
                A,
                device(
                    "device-1",
                    {"capacity-0": "2"},
                    {"stringAttribute": {"string": "cap"}},
                    allow_multiple=True,
                ),
                device("device-2", None, {"stringAttribute": {"string": "fb"}}),
            )
        ],
        expect=[
            allocation(LOCAL1, share("req-0", "device-1", {"capacity-0": "2"})),
            allocation(LOCAL1, result("req-0/subReq-1", A, "pool-1", "device-2")),
        ],
    ),
    "partitionable-empty-capacity-multiple-share-backtrack-keeps-counter-ownership": Case(
        claims=[
            claim("claim-0", request("req-0", "class-a", 1, kind("shared"))),
            claim(
                "claim-1",
                request("req-1", "class-a", 1, kind("shared", "fallback")),
                request("req-2", "class-a", 1, kind("gate")),
                request("req-3", "class-a", 1, kind("shared")),
                constraints=[{"matchAttribute": STRING_ATTR, "requests": ["req-1", "req-2"]}],
            ),
        ],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                pool("pool-1", 2),
                A,
                device(
                    "device-1",
                    None,
                    {"kind": {"string": "shared"}, "stringAttribute": {"string": "red"}},
                    allow_multiple=True,
                    consumes=[consumption("counter-set-1", {"c": "1"})],
                ),
                device(
                    "device-2",
                    None,
                    {"kind": {"string": "fallback"}, "stringAttribute": {"string": "blue"}},
                ),
                device(
                    "device-3",
                    None,
                    {"kind": {"string": "gate"}, "stringAttribute": {"string": "blue"}},
                ),
            ),
            slice_(
                "slice-2",
                "node-1",
                pool("pool-1", 2),
                A,
                shared_counters=[counter_set("counter-set-1", {"c": "1"})],
            ),
        ],
        expect=[
            allocation(LOCAL1, share("req-0", "device-1")),
            allocation(
                LOCAL1,
                result("req-1", A, "pool-1", "device-2"),
                result("req-2", A, "pool-1", "device-3"),
                share("req-3", "device-1"),
            ),
        ],
    ),
    "partitionable-devices-prioritized-list": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a"),
                prioritized(
                    "req-1",
                    sub_request("subReq-0", "class-a", 1, mem_at_least("6Gi")),
                    sub_request("subReq-1", "class-a", 1, mem_at_least("4Gi")),
                ),
            )
        ],
        classes=[CLASS_A],
        slices=MEMORY_POOL,
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-1"),
                result("req-1/subReq-1", A, "pool-1", "device-3"),
            )
        ],
    ),
    "partitionable-devices-multiple-devices": Case(
        claims=[claim("claim-0", request("req-0", "class-a"), request("req-1", "class-a"))],
        classes=[CLASS_A],
        slices=MEMORY_POOL,
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-1"),
                result("req-1", A, "pool-1", "device-3"),
            )
        ],
    ),
    "compatibility-groups-disabled-skips-grouped-pool": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            slice_("slice-1", "node-1", pool("pool-1", 2), A, grouped("device-1", ["mig"], "2")),
            slice_(
                "slice-2",
                "node-1",
                pool("pool-1", 2),
                A,
                shared_counters=[counter_set("counter-set-1", {"capacity-0": "4"})],
            ),
            slice_(
                "slice-3",
                "node-1",
                pool("pool-2", 2),
                A,
                device("device-2", consumes=[consumption("counter-set-2", {"capacity-0": "2"})]),
            ),
            slice_(
                "slice-4",
                "node-1",
                pool("pool-2", 2),
                A,
                shared_counters=[counter_set("counter-set-2", {"capacity-0": "4"})],
            ),
        ],
        expect=[allocation(LOCAL1, result("req-0", A, "pool-2", "device-2"))],
    ),
    "compatibility-groups-disabled-skips-ungrouped-device-in-grouped-pool": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            slice_("slice-1", "node-1", pool("pool-1", 3), A, grouped("device-1", ["mig"], "1")),
            slice_("slice-2", "node-1", pool("pool-1", 3), A, grouped("device-2", None, "1")),
            slice_(
                "slice-3",
                "node-1",
                pool("pool-1", 3),
                A,
                shared_counters=[counter_set("counter-set-1", {"capacity-0": "4"})],
            ),
        ],
        expect=None,
    ),
    "list-attributes-disabled-match-constraint-with-lists": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a", 2),
                constraints=[{"matchAttribute": STRING_ATTR}],
            )
        ],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                "pool-1",
                A,
                device("device-1", None, {"stringAttribute": {"strings": ["v1", "v2", "v3"]}}),
                device("device-2", None, {"stringAttribute": {"strings": ["v2", "v3", "v4"]}}),
            )
        ],
        expect=None,
    ),
    "derived-attributes-disabled": Case(
        claims=[
            claim(
                "claim-0",
                {
                    "name": "req-0",
                    "exactly": {
                        "deviceClassName": "class-a",
                        "allocationMode": "ExactCount",
                        "count": 1,
                        "derivedAttributes": [
                            {"name": "derived/numa", "expression": "device.driver"}
                        ],
                    },
                },
            )
        ],
        classes=[CLASS_A],
        slices=[slice_("slice-1", "node-1", "pool-1", A, device("device-1"))],
        error="claim claim-0, request req-0: cannot handle request with derived attributes, "
        "the feature is disabled",
    ),
}


@params(CASES)
def test_allocator(case: Case) -> None:
    run_case(case)
