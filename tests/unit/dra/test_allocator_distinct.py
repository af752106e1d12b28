"""Ported rows of Go's allocatortesting table: distinctAttribute constraints, shared
devices with counters, and whole-unit capacity ranges (DRAFractionalCapacityRange off)."""

from __future__ import annotations

from podium.algorithms.dynamic_resources.allocator import DeviceID, SharedDeviceID
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
CLASS_A, MULTI = class_("class-a", A), class_("class-a", A, multi_alloc=True)
LOCAL1 = local_node_selector("node-1")
INT_ATTR, VERSION_ATTR = f"{A}/numa", f"{A}/driverVersion"
STRING_ATTR, BOOL_ATTR = f"{A}/stringAttribute", f"{A}/boolAttribute"
DEV1 = DeviceID(A, "pool-1", "device-1")


def distinct(attribute: str, *requests: str) -> Json:
    out: Json = {"distinctAttribute": attribute}
    if requests:
        out["requests"] = list(requests)
    return out


def share(request_name: str, name: str, consumed: dict[str, str] | None = None) -> Json:
    extra: Json = {"shareID": FIXED_SHARE_ID}
    if consumed:
        extra["consumedCapacity"] = consumed
    return result(request_name, A, "pool-1", name, **extra)


def strings(*values: str) -> list[Json]:
    return [
        device(f"device-{i}", None, {"stringAttribute": {"string": v}})
        for i, v in enumerate(values, start=1)
    ]


def numas(*values: int) -> list[Json]:
    return [
        device(f"device-{i}", None, {"numa": {"int": v}}) for i, v in enumerate(values, start=1)
    ]


def ranged(value: str) -> Json:
    return {
        "capacity-0": {
            "value": value,
            "requestPolicy": {"default": "2", "validRange": {"min": "2", "step": "2", "max": "4"}},
        }
    }


def one_slice(*devices: Json) -> list[Json]:
    return [slice_("slice-1", "node-1", "pool-1", A, *devices)]


def bool_or_any(name: str) -> Json:
    return prioritized(
        name,
        sub_request("subReq-0", "class-a", 1, cel(f'device.attributes["{A}"].boolAttribute')),
        sub_request("subReq-1", "class-a"),
    )


def counted(name: str, *consumes: Json, attributes: dict[str, Json] | None = None) -> Json:
    return device(name, FROM_COUNTERS, attributes, consumes=list(consumes), allow_multiple=True)


CASES: dict[str, Case] = {
    "with-distinct-constraints": Case(
        claims=[
            claim(
                "claim-0",
                *(request(f"req-{i}", "class-a") for i in range(4)),
                constraints=[
                    distinct(BOOL_ATTR, "req-0", "req-1"),
                    distinct(VERSION_ATTR, "req-0", "req-1", "req-2"),
                    distinct(INT_ATTR, "req-0", "req-1", "req-2", "req-3"),
                ],
            )
        ],
        classes=[CLASS_A],
        slices=one_slice(
            *(
                device(
                    f"device-{i}",
                    None,
                    {
                        "driverVersion": {"version": version},
                        "numa": {"int": i - 1},
                        "boolAttribute": {"bool": flag},
                    },
                    allow_multiple=True,
                )
                for i, version, flag in (
                    (1, "1.0.0", True),
                    (2, "1.0.1", False),
                    (3, "1.0.2", True),
                    (4, "1.0.0", True),
                )
            )
        ),
        expect=[allocation(LOCAL1, *(share(f"req-{i}", f"device-{i + 1}") for i in range(4)))],
    ),
    "distinct-constraint-single-request-count-3-not-distinct": Case(
        claims=[
            claim("claim-0", request("req-0", "class-a", 3), constraints=[distinct(STRING_ATTR)])
        ],
        classes=[CLASS_A],
        slices=one_slice(*strings("value1", "value2", "value1")),
        expect=None,
    ),
    "distinct-constraint-single-request-count-3-all-distinct": Case(
        claims=[
            claim("claim-0", request("req-0", "class-a", 3), constraints=[distinct(STRING_ATTR)])
        ],
        classes=[CLASS_A],
        slices=one_slice(*strings("value1", "value2", "value3")),
        expect=[
            allocation(LOCAL1, *(result("req-0", A, "pool-1", f"device-{i}") for i in (1, 2, 3)))
        ],
    ),
    "distinct-constraint-two-requests-with-count-not-distinct": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a", 2),
                request("req-1", "class-a"),
                constraints=[distinct(STRING_ATTR, "req-0", "req-1")],
            )
        ],
        classes=[CLASS_A],
        slices=one_slice(*strings("value1", "value2", "value1")),
        expect=None,
    ),
    "with-distinct-constraints-attribute-not-set": Case(
        claims=[
            claim(
                "claim-0", request("req-0", "class-a"), constraints=[distinct(BOOL_ATTR, "req-0")]
            )
        ],
        classes=[CLASS_A],
        slices=one_slice(device("device-1", allow_multiple=True)),
        expect=None,
    ),
    "with-distinct-constraints-unknown-type-attribute": Case(
        claims=[
            claim(
                "claim-0", request("req-0", "class-a"), constraints=[distinct(BOOL_ATTR, "req-0")]
            )
        ],
        classes=[CLASS_A],
        slices=one_slice(device("device-1", None, {"boolAttribute": {}}, allow_multiple=True)),
        error="unsupported attribute value",
    ),
    "with-distinct-constraints-with-subrequests": Case(
        claims=[
            claim(
                "claim-0",
                bool_or_any("req-0"),
                bool_or_any("req-1"),
                bool_or_any("req-2"),
                constraints=[distinct(BOOL_ATTR, "req-0", "req-1")],
            )
        ],
        classes=[CLASS_A],
        slices=one_slice(
            device("device-1", None, {"boolAttribute": {"bool": True}}, allow_multiple=True),
            device("device-2", None, {"boolAttribute": {"bool": False}}, allow_multiple=True),
        ),
        expect=[
            allocation(
                LOCAL1,
                share("req-0/subReq-0", "device-1"),
                share("req-1/subReq-1", "device-2"),
                share("req-2/subReq-0", "device-1"),
            )
        ],
    ),
    "distinct-constraint-single-request-multiple-devices-attribute-not-set": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 3), constraints=[distinct(INT_ATTR)])],
        classes=[CLASS_A],
        slices=one_slice(device("device-1"), device("device-2"), device("device-3")),
        expect=None,
    ),
    "distinct-constraint-single-request-not-enough-distinct-values": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 3), constraints=[distinct(INT_ATTR)])],
        classes=[CLASS_A],
        slices=one_slice(*numas(1, 2, 2, 2)),
        expect=None,
    ),
    "distinct-constraint-single-request-multiple-devices-attribute-set": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 3), constraints=[distinct(INT_ATTR)])],
        classes=[CLASS_A],
        slices=one_slice(*numas(1, 2, 1, 3)),
        expect=[
            allocation(LOCAL1, *(result("req-0", A, "pool-1", f"device-{i}") for i in (1, 2, 4)))
        ],
    ),
    "distinct-constraint-one-multi-allocatable-device-with-distinct-constraint": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a", capacity="1"),
                request("req-1", "class-a", capacity="1"),
                constraints=[distinct(STRING_ATTR)],
            )
        ],
        classes=[MULTI],
        slices=one_slice(
            device(
                "device-1",
                ranged("2"),
                {"stringAttribute": {"string": "stringAttributeValue"}},
                allow_multiple=True,
            )
        ),
        expect=None,
    ),
    "distinct-constraint-two-multi-allocatable-devices-with-distinct-constraint": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a", capacity="2"),
                request("req-1", "class-a", capacity="2"),
                constraints=[distinct(STRING_ATTR)],
            )
        ],
        classes=[MULTI],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                pool("pool-1", 2),
                A,
                device(
                    f"device-{i}",
                    ranged("4"),
                    {"stringAttribute": {"string": f"stringAttributeValue{i}"}},
                    allow_multiple=True,
                ),
            )
            for i in (1, 2)
        ],
        expect=[
            allocation(
                LOCAL1,
                share("req-0", "device-1", {"capacity-0": "2"}),
                share("req-1", "device-2", {"capacity-0": "2"}),
            )
        ],
    ),
    "consumable-capacity-fractional-range-gate-disabled": Case(
        claims=[claim("claim-0", request("req-0", "class-a", capacity="200m"))],
        classes=[MULTI],
        slices=one_slice(
            device(
                "device-1",
                {
                    "capacity-0": {
                        "value": "1",
                        "requestPolicy": {
                            "default": "200m",
                            "validRange": {"min": "200m", "step": "100m", "max": "1"},
                        },
                    }
                },
                allow_multiple=True,
            )
        ),
        expect=[allocation(LOCAL1, share("req-0", "device-1", {"capacity-0": "1"}))],
    ),
    "allow-multiple-allocations-with-partitionable-device": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a"),
                prioritized(
                    "req-1",
                    sub_request(
                        "subReq-0",
                        "class-a",
                        1,
                        cel(f'device.capacity["{A}"].memory.compareTo(quantity("6Gi")) >= 0'),
                    ),
                    sub_request(
                        "subReq-1",
                        "class-a",
                        1,
                        cel(f'device.capacity["{A}"].memory.compareTo(quantity("4Gi")) >= 0'),
                    ),
                ),
            )
        ],
        classes=[MULTI],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                pool("pool-1", 2),
                A,
                *(
                    counted(f"device-{i}", consumption("counter-set-1", {"memory": size}))
                    for i, size in ((1, "4Gi"), (2, "6Gi"), (3, "4Gi"))
                ),
            ),
            slice_(
                "slice-2",
                "node-1",
                pool("pool-1", 2),
                A,
                shared_counters=[counter_set("counter-set-1", {"memory": "8Gi"})],
            ),
        ],
        expect=[
            allocation(
                LOCAL1,
                share("req-0", "device-1", {"memory": "4Gi"}),
                share("req-1/subReq-1", "device-3", {"memory": "4Gi"}),
            )
        ],
    ),
    "allow-multiple-allocations-with-shared-device-counter-cross-cycle": Case(
        claims=[
            claim(
                "claim-0",
                request(
                    "req-0",
                    "class-a",
                    1,
                    cel(f'device.attributes["{A}"].mode == "b"'),
                    capacity="1",
                ),
            )
        ],
        allocated_shared=[SharedDeviceID(A, "pool-1", "device-1", FIXED_SHARE_ID)],
        allocated_capacity={DEV1: {"capacity-0": "1"}},
        classes=[MULTI],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                pool("pool-1", 2),
                A,
                counted(
                    "device-1",
                    consumption("counter-set-1", {"capacity-0": "1"}),
                    attributes={"mode": {"string": "a"}},
                ),
                counted(
                    "device-2",
                    consumption("counter-set-1", {"capacity-0": "1"}),
                    attributes={"mode": {"string": "b"}},
                ),
            ),
            slice_(
                "slice-2",
                "node-1",
                pool("pool-1", 2),
                A,
                shared_counters=[counter_set("counter-set-1", {"capacity-0": "1"})],
            ),
        ],
        expect=None,
    ),
    "partitionable-consumable-capacity-shared-device-counter-not-recharged": Case(
        allocated_shared=[SharedDeviceID(A, "pool-1", "device-1", FIXED_SHARE_ID)],
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                pool("pool-1", 2),
                A,
                device(
                    "device-1",
                    allow_multiple=True,
                    consumes=[consumption("counter-set-1", {"c": "1"})],
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
        expect=[allocation(LOCAL1, share("req-0", "device-1"))],
    ),
}


@params(CASES)
def test_allocator(case: Case) -> None:
    run_case(case)
