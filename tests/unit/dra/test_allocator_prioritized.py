"""Ported rows of Go's allocatortesting table: firstAvailable (prioritized lists) and
partitionable devices (shared counters)."""

from __future__ import annotations

from podium.algorithms.dynamic_resources.allocator import DeviceID
from tests.unit.dra.builders import (
    Json,
    allocation,
    cel,
    claim,
    class_,
    class_with_config,
    consumption,
    counter_set,
    device,
    device_configuration,
    local_node_selector,
    pool,
    prioritized,
    request,
    result,
    slice_,
    slice_with_multiple_devices,
    slice_with_one_device,
    sub_request,
)
from tests.unit.dra.harness import Case, params, run_case

A, B = "driver-a", "driver-b"
CLASS_A, CLASS_B = class_("class-a", A), class_("class-b", B)
LOCAL1 = local_node_selector("node-1")
VERSION_ATTR, STRING_ATTR = f"{A}/driverVersion", f"{A}/stringAttribute"
TAINT_NO_SCHEDULE = {"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}


def mem(size: str) -> Json:
    return cel(f'device.capacity["{A}"].memory.compareTo(quantity("{size}")) >= 0')


def kind(value: str) -> Json:
    return cel(f'device.attributes["{A}"].kind == "{value}"')


def mem_device(name: str, size: str, version: str | None = None) -> Json:
    attributes = {"driverVersion": {"version": version}} if version else None
    return device(name, {"memory": size}, attributes)


def counted(
    name: str,
    counter_set_name: str,
    values: dict[str, str],
    *,
    attributes: dict[str, Json] | None = None,
    taints: list[Json] | None = None,
    allow_multiple: bool | None = None,
) -> Json:
    return device(
        name,
        None,
        attributes,
        taints=taints,
        consumes=[consumption(counter_set_name, values)],
        allow_multiple=allow_multiple,
    )


def counters_slice(name: str, driver: str, *sets: Json, count: int = 2) -> Json:
    return slice_(name, "node-1", pool("pool-1", count), driver, shared_counters=list(sets))


def devices_slice(name: str, driver: str, *devices: Json, count: int = 2) -> Json:
    return slice_(name, "node-1", pool("pool-1", count), driver, *devices)


CASES: dict[str, Case] = {
    "prioritized-list-first-unavailable": Case(
        claims=[
            claim(
                "claim-0",
                prioritized(
                    "req-0", sub_request("subReq-0", "class-b"), sub_request("subReq-1", "class-a")
                ),
            )
        ],
        classes=[CLASS_A, CLASS_B],
        slices=[slice_with_one_device("slice-1", "node-1", "pool-1", A)],
        expect=[allocation(LOCAL1, result("req-0/subReq-1", A, "pool-1", "device-1"))],
    ),
    "prioritized-list-non-available": Case(
        claims=[
            claim(
                "claim-0",
                prioritized(
                    "req-0",
                    sub_request("subReq-0", "class-b", 2),
                    sub_request("subReq-1", "class-a", 2),
                ),
            )
        ],
        classes=[CLASS_A, CLASS_B],
        slices=[
            slice_with_one_device("slice-1", "node-1", "pool-1", A),
            slice_with_one_device("slice-2", "node-1", "pool-2", B),
        ],
        expect=None,
    ),
    "prioritized-list-device-config": Case(
        claims=[
            claim(
                "claim-0",
                prioritized(
                    "req-0",
                    sub_request("subReq-0", "class-a"),
                    sub_request("subReq-1", "class-b", 2),
                ),
                config=[
                    {"requests": ["req-0/subReq-0"], **device_configuration(A, "foo")},
                    {"requests": ["req-0/subReq-1"], **device_configuration(B, "bar")},
                ],
            )
        ],
        classes=[CLASS_A, CLASS_B],
        slices=[slice_("slice-1", "node-1", "pool-1", B, device("device-1"), device("device-2"))],
        expect=[
            allocation(
                LOCAL1,
                result("req-0/subReq-1", B, "pool-1", "device-1"),
                result("req-0/subReq-1", B, "pool-1", "device-2"),
                config=[{"source": "FromClaim", **device_configuration(B, "bar")}],
            )
        ],
    ),
    "prioritized-list-class-config": Case(
        claims=[
            claim(
                "claim-0",
                prioritized(
                    "req-0",
                    sub_request("subReq-0", "class-a", 2),
                    sub_request("subReq-1", "class-b", 2),
                ),
            )
        ],
        classes=[class_with_config("class-a", A, "foo"), class_with_config("class-b", B, "bar")],
        slices=[
            slice_("slice-1", "node-1", "pool-1", B, device("device-1"), device("device-2")),
            slice_("slice-2", "node-1", "pool-2", A, device("device-3")),
        ],
        expect=[
            allocation(
                LOCAL1,
                result("req-0/subReq-1", B, "pool-1", "device-1"),
                result("req-0/subReq-1", B, "pool-1", "device-2"),
                config=[{"source": "FromClass", **device_configuration(B, "bar")}],
            )
        ],
    ),
    "claim-config-scoped-to-subrequests-of-one-request": Case(
        claims=[
            claim(
                "claim-0",
                prioritized(
                    "req-0", sub_request("subReq-0", "class-a"), sub_request("subReq-1", "class-b")
                ),
                request("req-1", "class-a"),
                config=[
                    {
                        "requests": ["req-0/subReq-0", "req-0/subReq-1"],
                        **device_configuration(A, "scoped"),
                    }
                ],
            )
        ],
        classes=[CLASS_A, CLASS_B],
        slices=[slice_with_multiple_devices("slice-1", "node-1", "pool-1", A, 2)],
        expect=[
            allocation(
                LOCAL1,
                result("req-0/subReq-0", A, "pool-1", "device-0"),
                result("req-1", A, "pool-1", "device-1"),
                config=[
                    {
                        "source": "FromClaim",
                        "requests": ["req-0/subReq-0", "req-0/subReq-1"],
                        **device_configuration(A, "scoped"),
                    }
                ],
            )
        ],
    ),
    "claim-config-covering-all-requests-is-cleared": Case(
        claims=[
            claim(
                "claim-0",
                prioritized(
                    "req-0", sub_request("subReq-0", "class-a"), sub_request("subReq-1", "class-b")
                ),
                request("req-1", "class-a"),
                config=[
                    {"requests": ["req-0/subReq-0", "req-1"], **device_configuration(A, "all")}
                ],
            )
        ],
        classes=[CLASS_A, CLASS_B],
        slices=[slice_with_multiple_devices("slice-1", "node-1", "pool-1", A, 2)],
        expect=[
            allocation(
                LOCAL1,
                result("req-0/subReq-0", A, "pool-1", "device-0"),
                result("req-1", A, "pool-1", "device-1"),
                config=[{"source": "FromClaim", **device_configuration(A, "all")}],
            )
        ],
    ),
    "prioritized-list-subrequests-with-expressions": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a", 1, mem("1Gi")),
                prioritized(
                    "req-1",
                    sub_request("subReq-0", "class-a", 1, mem("4Gi")),
                    sub_request("subReq-1", "class-a", 2, mem("2Gi")),
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
                mem_device("device-1", "2Gi"),
                mem_device("device-2", "2Gi"),
                mem_device("device-3", "1Gi"),
            )
        ],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-3"),
                result("req-1/subReq-1", A, "pool-1", "device-1"),
                result("req-1/subReq-1", A, "pool-1", "device-2"),
            )
        ],
    ),
    "prioritized-list-subrequests-with-constraints-ref-parent-request": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a", 1, mem("8Gi")),
                prioritized(
                    "req-1",
                    sub_request("subReq-0", "class-a", 1, mem("2Gi")),
                    sub_request("subReq-1", "class-a", 1, mem("1Gi")),
                ),
                constraints=[{"requests": ["req-0", "req-1"], "matchAttribute": VERSION_ATTR}],
            )
        ],
        classes=[CLASS_A],
        slices=[
            slice_("slice-1", "node-1", "pool-1", A, mem_device("device-1", "8Gi", "1.0.0")),
            slice_(
                "slice-2",
                "node-1",
                "pool-2",
                A,
                mem_device("device-2", "2Gi", "2.0.0"),
                mem_device("device-3", "1Gi", "1.0.0"),
            ),
        ],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-1"),
                result("req-1/subReq-1", A, "pool-2", "device-3"),
            )
        ],
    ),
    "prioritized-list-subrequests-with-constraints-ref-sub-request": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a", 1, mem("8Gi")),
                prioritized(
                    "req-1",
                    sub_request("subReq-0", "class-a", 1, mem("2Gi")),
                    sub_request("subReq-1", "class-a", 1, mem("1Gi")),
                ),
                constraints=[
                    {"requests": ["req-0", "req-1/subReq-0"], "matchAttribute": VERSION_ATTR}
                ],
            )
        ],
        classes=[CLASS_A],
        slices=[
            slice_("slice-1", "node-1", "pool-1", A, mem_device("device-1", "8Gi", "1.0.0")),
            slice_("slice-2", "node-1", "pool-2", A, mem_device("device-2", "2Gi", "2.0.0")),
        ],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-1"),
                result("req-1/subReq-1", A, "pool-2", "device-2"),
            )
        ],
    ),
    "prioritized-list-subrequests-with-allocation-mode-all": Case(
        claims=[
            claim(
                "claim-0",
                prioritized(
                    "req-0",
                    sub_request("subReq-0", "class-a", mode="All"),
                    sub_request("subReq-1", "class-a"),
                ),
            )
        ],
        classes=[CLASS_A],
        slices=[slice_("slice-1", "node-1", "pool-1", A, device("device-1"), device("device-2"))],
        allocated=[DeviceID(A, "pool-1", "device-1")],
        expect=[allocation(LOCAL1, result("req-0/subReq-1", A, "pool-1", "device-2"))],
    ),
    "prioritized-list-allocation-mode-all-multiple-requests": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a"),
                prioritized(
                    "req-1",
                    sub_request("subReq-0", "class-a", mode="All"),
                    sub_request("subReq-1", "class-a"),
                ),
            )
        ],
        classes=[CLASS_A],
        slices=[slice_("slice-1", "node-1", "pool-1", A, device("device-1"), device("device-2"))],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-1"),
                result("req-1/subReq-1", A, "pool-1", "device-2"),
            )
        ],
    ),
    "prioritized-list-multi-request": Case(
        claims=[
            claim(
                "claim-0",
                request("req-1", "class-a", 1, mem("8Gi")),
                prioritized(
                    "req-0",
                    sub_request("subReq-0", "class-a", 1, mem("8Gi")),
                    sub_request("subReq-1", "class-a", 1, mem("4Gi")),
                ),
            )
        ],
        classes=[CLASS_A],
        slices=[
            slice_("slice-1", "node-1", "pool-1", A, mem_device("device-1", "8Gi")),
            slice_("slice-2", "node-1", "pool-2", A, mem_device("device-2", "4Gi")),
        ],
        expect=[
            allocation(
                LOCAL1,
                result("req-1", A, "pool-1", "device-1"),
                result("req-0/subReq-1", A, "pool-2", "device-2"),
            )
        ],
    ),
    "prioritized-list-with-backtracking": Case(
        claims=[
            claim(
                "claim-0",
                prioritized(
                    "req-0",
                    sub_request("subReq-0", "class-a", 1, mem("8Gi")),
                    sub_request("subReq-1", "class-a", 1, mem("4Gi")),
                ),
                request("req-1", "class-a", 1, mem("8Gi")),
            )
        ],
        classes=[CLASS_A],
        slices=[
            slice_("slice-1", "node-1", "pool-1", A, mem_device("device-1", "8Gi")),
            slice_("slice-2", "node-1", "pool-2", A, mem_device("device-2", "4Gi")),
        ],
        expect=[
            allocation(
                LOCAL1,
                result("req-0/subReq-1", A, "pool-2", "device-2"),
                result("req-1", A, "pool-1", "device-1"),
            )
        ],
    ),
    "prioritized-list-too-many-in-first-subrequest": Case(
        claims=[
            claim(
                "claim-0",
                prioritized(
                    "req-0",
                    sub_request("subReq-0", "class-b", 500),
                    sub_request("subReq-1", "class-a"),
                ),
            )
        ],
        classes=[CLASS_A, CLASS_B],
        slices=[slice_with_one_device("slice-1", "node-1", "pool-1", A)],
        expect=[allocation(LOCAL1, result("req-0/subReq-1", A, "pool-1", "device-1"))],
    ),
    "prioritized-list-minimum-sum-exceeds-claim-limit": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a", 20),
                prioritized(
                    "req-1",
                    sub_request("subReq-0", "class-a", 20),
                    sub_request("subReq-1", "class-a", 24),
                ),
            )
        ],
        classes=[CLASS_A],
        error="request req-1: adding 20 devices exceeds the claim limit",
    ),
    "prioritized-list-overflowing-first-subrequest-is-pruned": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a"),
                prioritized(
                    "req-1",
                    sub_request("subReq-0", "class-a", 2**63 - 1),
                    sub_request("subReq-1", "class-a"),
                ),
            )
        ],
        classes=[CLASS_A],
        slices=[slice_("slice-1", "node-1", "pool-1", A, device("device-1"), device("device-2"))],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-1"),
                result("req-1/subReq-1", A, "pool-1", "device-2"),
            )
        ],
        allocate_one_calls=8,
    ),
    "partitionable-devices-single-device": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            devices_slice("slice-1", A, counted("device-1", "counter-set-1", {"memory": "4Gi"})),
            counters_slice("slice-2", A, counter_set("counter-set-1", {"memory": "8Gi"})),
        ],
        expect=[allocation(LOCAL1, result("req-0", A, "pool-1", "device-1"))],
    ),
    "partitionable-devices-counter-quantities-are-not-modified": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        allocated=[DeviceID(A, "pool-1", "device-1")],
        classes=[CLASS_A],
        slices=[
            devices_slice(
                "slice-1",
                A,
                counted("device-1", "counter-set-1", {"c": "9000000000000000000"}),
                counted("device-2", "counter-set-1", {"c": "1"}),
            ),
            counters_slice(
                "slice-2", A, counter_set("counter-set-1", {"c": "10000000000000000000"})
            ),
        ],
        expect=[allocation(LOCAL1, result("req-0", A, "pool-1", "device-2"))],
    ),
    "partitionable-devices-counter-cache-scoped-by-pool-ID": Case(
        claims=[
            claim("claim-0", request("req-0", "class-a")),
            claim("claim-1", request("req-1", "class-b")),
        ],
        classes=[CLASS_A, CLASS_B],
        slices=[
            devices_slice("slice-1", A, counted("device-1", "counter-set-1", {"c": "1"})),
            counters_slice("slice-2", A, counter_set("counter-set-1", {"c": "1"})),
            devices_slice("slice-3", B, counted("device-2", "counter-set-1", {"c": "2"})),
            counters_slice("slice-4", B, counter_set("counter-set-1", {"c": "2"})),
        ],
        expect=[
            allocation(LOCAL1, result("req-0", A, "pool-1", "device-1")),
            allocation(LOCAL1, result("req-1", B, "pool-1", "device-2")),
        ],
    ),
    "partitionable-devices-counter-cache-not-crossed-between-driver-schemas": Case(
        claims=[
            claim("claim-0", request("req-0", "class-a")),
            claim("claim-1", request("req-1", "class-b")),
        ],
        classes=[CLASS_A, CLASS_B],
        slices=[
            devices_slice("slice-1", A, counted("device-1", "counter-set-1", {"c": "1"})),
            counters_slice("slice-2", A, counter_set("counter-set-1", {"c": "1"})),
            devices_slice("slice-3", B, counted("device-2", "counter-set-2", {"d": "2"})),
            counters_slice("slice-4", B, counter_set("counter-set-2", {"d": "1"})),
        ],
        expect=None,
    ),
    "partitionable-devices-taint-releases-counter": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            devices_slice(
                "slice-1",
                A,
                counted("device-1", "counter-set-1", {"c": "1"}, taints=[TAINT_NO_SCHEDULE]),
                counted("device-2", "counter-set-1", {"c": "1"}),
            ),
            counters_slice("slice-2", A, counter_set("counter-set-1", {"c": "1"})),
        ],
        expect=[allocation(LOCAL1, result("req-0", A, "pool-1", "device-2"))],
    ),
    "partitionable-devices-constraint-releases-counter": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a", 2),
                constraints=[{"matchAttribute": STRING_ATTR}],
            )
        ],
        classes=[CLASS_A],
        slices=[
            devices_slice(
                "slice-1",
                A,
                *(
                    counted(
                        f"device-{i}",
                        "counter-set-1",
                        {"c": "1"},
                        attributes={"stringAttribute": {"string": color}},
                    )
                    for i, color in ((1, "red"), (2, "blue"), (3, "blue"))
                ),
            ),
            counters_slice("slice-2", A, counter_set("counter-set-1", {"c": "2"})),
        ],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-2"),
                result("req-0", A, "pool-1", "device-3"),
            )
        ],
    ),
    "partitionable-consumable-capacity-backtrack-releases-counter": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a", 1, kind("shared")),
                request("req-1", "class-a", 1, kind("counteronly")),
            )
        ],
        classes=[CLASS_A],
        slices=[
            devices_slice(
                "slice-1",
                A,
                counted(
                    "device-1",
                    "counter-set-1",
                    {"c": "1"},
                    attributes={"kind": {"string": "shared"}},
                    allow_multiple=True,
                ),
                device("device-2", None, {"kind": {"string": "shared"}}),
                counted(
                    "device-3",
                    "counter-set-1",
                    {"c": "1"},
                    attributes={"kind": {"string": "counteronly"}},
                ),
            ),
            counters_slice("slice-2", A, counter_set("counter-set-1", {"c": "1"})),
        ],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-2"),
                result("req-1", A, "pool-1", "device-3"),
            )
        ],
    ),
}


@params(CASES)
def test_allocator(case: Case) -> None:
    run_case(case)
