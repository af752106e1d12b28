"""Ported rows of Go's allocatortesting table: admin access, node selection, constraints,
configs, limits, prioritized lists."""

from __future__ import annotations

from podium.algorithms.dynamic_resources.allocator import DeviceID
from tests.unit.dra.builders import (
    NODE_SELECTION_ALL,
    Json,
    all_request,
    allocation,
    claim,
    class_,
    class_with_config,
    consumption,
    counter_set,
    device,
    device_configuration,
    local_node_selector,
    multiple_results,
    node_label_selector,
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
TWO_DEVICES = slice_("slice-1", "node-1", "pool-1", A, device("device-1"), device("device-2"))
INT_ATTR, VERSION_ATTR = f"{A}/numa", f"{A}/driverVersion"
STRING_ATTR, BOOL_ATTR = f"{A}/stringAttribute", f"{A}/boolAttribute"


def attrs(**values: object) -> dict[str, Json]:
    kinds = {bool: "bool", int: "int", str: "string"}
    out: dict[str, Json] = {}
    for name, value in values.items():
        if isinstance(value, tuple):  # ("version", "1.0.0")
            out[name] = {value[0]: value[1]}
        else:
            out[name] = {kinds[type(value)]: value}
    return out


def match(attribute: str, *requests: str) -> Json:
    out: Json = {"matchAttribute": attribute}
    if requests:
        out["requests"] = list(requests)
    return out


def distinct(attribute: str, *requests: str) -> Json:
    out: Json = {"distinctAttribute": attribute}
    if requests:
        out["requests"] = list(requests)
    return out


def two_with(name: str, first: object, second: object) -> Json:
    return slice_(
        "slice-1",
        "node-1",
        "pool-1",
        A,
        device("device-1", None, attrs(**{name: first})),
        device("device-2", None, attrs(**{name: second})),
    )


ALL_ATTRS = attrs(
    driverVersion=("version", "1.0.0"),
    numa=1,
    stringAttribute="stringAttributeValue",
    boolAttribute=True,
)

CASES: dict[str, Case] = {
    "all-devices-plus-another": Case(
        claims=[
            claim("claim-0", all_request("req-0", "class-a")),
            claim("claim-1", request("req-0", "class-b")),
        ],
        classes=[CLASS_A, CLASS_B],
        slices=[
            slice_with_one_device("slice-1", "node-1", "pool-1", A),
            slice_with_one_device("slice-1", "node-1", "pool-1", B),
        ],
        expect=[
            allocation(LOCAL1, result("req-0", A, "pool-1", "device-1")),
            allocation(LOCAL1, result("req-0", B, "pool-1", "device-1")),
        ],
    ),
    "all-devices-plus-another-reversed": Case(
        claims=[
            claim("claim-1", request("req-0", "class-b")),
            claim("claim-0", all_request("req-0", "class-a")),
        ],
        classes=[CLASS_A, CLASS_B],
        slices=[
            slice_with_one_device("slice-1", "node-1", "pool-1", A),
            slice_with_one_device("slice-1", "node-1", "pool-1", B),
        ],
        expect=[
            allocation(LOCAL1, result("req-0", B, "pool-1", "device-1")),
            allocation(LOCAL1, result("req-0", A, "pool-1", "device-1")),
        ],
    ),
    "all-devices-many-plus-another": Case(
        claims=[
            claim("claim-0", all_request("req-0", "class-a")),
            claim("claim-1", request("req-0", "class-b")),
        ],
        classes=[CLASS_A, CLASS_B],
        slices=[TWO_DEVICES, slice_with_one_device("slice-1", "node-1", "pool-1", B)],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-1"),
                result("req-0", A, "pool-1", "device-2"),
            ),
            allocation(LOCAL1, result("req-0", B, "pool-1", "device-1")),
        ],
    ),
    "all-devices-no-solution": Case(
        claims=[
            claim("claim-1", request("req-0", "class-a")),
            claim("claim-0", all_request("req-0", "class-a")),
        ],
        classes=[CLASS_A],
        slices=[slice_with_one_device("slice-1", "node-1", "pool-1", A)],
        expect=None,
    ),
    "all-devices-no-solution-reversed": Case(
        claims=[
            claim("claim-0", all_request("req-0", "class-a")),
            claim("claim-1", request("req-0", "class-a")),
        ],
        classes=[CLASS_A],
        slices=[slice_with_one_device("slice-1", "node-1", "pool-1", A)],
        expect=None,
    ),
    "all-devices-slice-without-devices": Case(
        claims=[claim("claim-0", all_request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[slice_("slice-1", "node-1", "pool-1", A)],
        expect=None,
    ),
    "all-devices-no-slices": Case(
        claims=[claim("claim-0", all_request("req-0", "class-a"))],
        classes=[CLASS_A],
        expect=None,
    ),
    "all-devices-with-consumed-counters": Case(
        claims=[claim("claim-0", all_request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                pool("pool-1", 2),
                A,
                device("device-1", consumes=[consumption("counter-set-1", {"memory": "4Gi"})]),
            ),
            slice_(
                "slice-2",
                "node-1",
                pool("pool-1", 2),
                A,
                shared_counters=[counter_set("counter-set-1", {"memory": "8Gi"})],
            ),
        ],
        expect=[allocation(LOCAL1, result("req-0", A, "pool-1", "device-1"))],
    ),
    "all-devices-some-allocated-admin-access": Case(
        claims=[claim("claim-0", all_request("req-0", "class-a", admin_access=True))],
        allocated=[DeviceID(A, "pool-1", "device-1")],
        classes=[CLASS_A],
        slices=[TWO_DEVICES],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-1", True),
                result("req-0", A, "pool-1", "device-2", True),
            )
        ],
    ),
    "all-devices-some-allocating-admin-access": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a", 1, admin_access=True),
                all_request("req-1", "class-a", admin_access=True),
            )
        ],
        classes=[CLASS_A],
        slices=[TWO_DEVICES],
        expect=None,
    ),
    "count-devices-some-allocated-admin-access": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 2, admin_access=True))],
        allocated=[DeviceID(A, "pool-1", "device-1")],
        classes=[CLASS_A],
        slices=[TWO_DEVICES],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-1", True),
                result("req-0", A, "pool-1", "device-2", True),
            )
        ],
    ),
    "separate-claims-share-device-admin-access": Case(
        claims=[
            claim("claim-0", request("req-0", "class-a", admin_access=True)),
            claim("claim-1", request("req-0", "class-a", admin_access=True)),
        ],
        classes=[CLASS_A],
        slices=[TWO_DEVICES],
        expect=[
            allocation(LOCAL1, result("req-0", A, "pool-1", "device-1", True)),
            allocation(LOCAL1, result("req-0", A, "pool-1", "device-1", True)),
        ],
    ),
    "admin-access-claims-device-allocating-for-non-admin-access": Case(
        claims=[
            claim("claim-0", request("req-0", "class-a")),
            claim("claim-1", request("req-0", "class-a", admin_access=True)),
        ],
        classes=[CLASS_A],
        slices=[TWO_DEVICES],
        expect=[
            allocation(LOCAL1, result("req-0", A, "pool-1", "device-1")),
            allocation(LOCAL1, result("req-0", A, "pool-1", "device-1", True)),
        ],
    ),
    "admin-access-enabled": Case(
        claims=[claim("claim-0", request("req-0", "class-a", admin_access=True))],
        allocated=[DeviceID(A, "pool-1", "device-1"), DeviceID(A, "pool-1", "device-2")],
        classes=[CLASS_A],
        slices=[slice_with_one_device("slice-1", "node-1", "pool-1", A)],
        expect=[allocation(LOCAL1, result("req-0", A, "pool-1", "device-1", True))],
    ),
    "all-devices-slice-without-devices-prioritized-list": Case(
        claims=[
            claim(
                "claim-0",
                prioritized(
                    "req-0",
                    sub_request("subReq-0", "class-a", mode="All"),
                    sub_request("subReq-1", "class-b"),
                ),
            )
        ],
        classes=[CLASS_A, CLASS_B],
        slices=[
            slice_("slice-1", "node-1", "pool-1", A),
            slice_with_one_device("slice-2", "node-1", "pool-2", B),
        ],
        expect=[allocation(LOCAL1, result("req-0/subReq-1", B, "pool-2", "device-1"))],
    ),
    "all-devices-no-slices-prioritized-list": Case(
        claims=[
            claim(
                "claim-0",
                prioritized(
                    "req-0",
                    sub_request("subReq-0", "class-a", mode="All"),
                    sub_request("subReq-1", "class-b"),
                ),
            )
        ],
        classes=[CLASS_A, CLASS_B],
        slices=[slice_with_one_device("slice-2", "node-1", "pool-2", B)],
        expect=[allocation(LOCAL1, result("req-0/subReq-1", B, "pool-2", "device-1"))],
    ),
    "all-devices-some-allocated-prioritized-list": Case(
        claims=[
            claim(
                "claim-0",
                prioritized(
                    "req-0",
                    sub_request("subReq-0", "class-a", mode="All"),
                    sub_request("subReq-1", "class-b"),
                ),
            )
        ],
        allocated=[DeviceID(A, "pool-1", "device-1")],
        classes=[CLASS_A, CLASS_B],
        slices=[TWO_DEVICES, slice_with_one_device("slice-2", "node-1", "pool-2", B)],
        expect=[allocation(LOCAL1, result("req-0/subReq-1", B, "pool-2", "device-1"))],
    ),
    "many-network-attached-devices": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 4))],
        classes=[CLASS_A],
        slices=[
            slice_with_one_device(
                "slice-1", node_label_selector("region", "region-1"), "pool-1", A
            ),
            slice_with_one_device("slice-1", NODE_SELECTION_ALL, "pool-2", A),
            slice_with_one_device("slice-1", node_label_selector("planet", "earth"), "pool-3", A),
            slice_with_one_device("slice-1", local_node_selector("node-1"), "pool-4", A),
        ],
        expect=[
            allocation(
                {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "region", "operator": "In", "values": ["region-1"]},
                                {"key": "planet", "operator": "In", "values": ["earth"]},
                            ],
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["node-1"]}
                            ],
                        }
                    ]
                },
                *(result("req-0", A, f"pool-{i}", "device-1") for i in range(1, 5)),
            )
        ],
    ),
    "local-and-network-attached-devices": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 2))],
        classes=[CLASS_A],
        slices=[
            slice_with_one_device(
                "slice-1", node_label_selector("region", "region-1"), "pool-1", A
            ),
            slice_with_one_device("slice-1", "node-1", "pool-2", A),
        ],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-1"),
                result("req-0", A, "pool-2", "device-1"),
            )
        ],
    ),
    "several-different-drivers": Case(
        claims=[
            claim("claim-0", request("req-0", "class-a")),
            claim("claim-0", request("req-0", "class-b")),
        ],
        classes=[CLASS_A, CLASS_B],
        slices=[TWO_DEVICES, slice_with_one_device("slice-1", "node-1", "pool-1", B)],
        expect=[
            allocation(LOCAL1, result("req-0", A, "pool-1", "device-1")),
            allocation(LOCAL1, result("req-0", B, "pool-1", "device-1")),
        ],
    ),
    "with-constraint": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a"),
                request("req-1", "class-a"),
                constraints=[
                    match(INT_ATTR),
                    match(VERSION_ATTR),
                    match(STRING_ATTR),
                    match(BOOL_ATTR),
                ],
            )
        ],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                "pool-1",
                A,
                device("device-1", None, ALL_ATTRS),
                device("device-2", None, ALL_ATTRS),
            )
        ],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-1"),
                result("req-1", A, "pool-1", "device-2"),
            )
        ],
    ),
    "with-constraint-non-existent-attribute": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a"),
                constraints=[match(f"{A}/NonExistentAttribute")],
            )
        ],
        classes=[CLASS_A],
        slices=[slice_with_one_device("slice-1", "node-1", "pool-1", A)],
        expect=None,
    ),
    "with-constraint-not-matching-int-attribute": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 2), constraints=[match(INT_ATTR)])],
        classes=[CLASS_A, CLASS_B],
        slices=[two_with("numa", 1, 2)],
        expect=None,
    ),
    "with-constraint-not-matching-int-attribute-all-devices": Case(
        claims=[claim("claim-0", all_request("req-0", "class-a"), constraints=[match(INT_ATTR)])],
        classes=[CLASS_A, CLASS_B],
        slices=[two_with("numa", 1, 2)],
        error="claim claim-0, request req-0: cannot add device driver-a/pool-1/device-2 because "
        "a claim constraint would not be satisfied",
    ),
    "partitionable-all-mode-constraint-must-error-with-reserved-counter": Case(
        claims=[claim("claim-0", all_request("req-0", "class-a"), constraints=[match(INT_ATTR)])],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                pool("pool-1", 2),
                A,
                device("device-1", None, attrs(numa=1)),
                device(
                    "device-2",
                    None,
                    attrs(numa=2),
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
        error="claim claim-0, request req-0: cannot add device driver-a/pool-1/device-2 because "
        "a claim constraint would not be satisfied",
    ),
    "with-constraint-not-matching-string-attribute": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 2), constraints=[match(STRING_ATTR)])],
        classes=[CLASS_A, CLASS_B],
        slices=[two_with("stringAttribute", "stringAttributeValue", "stringAttributeValue2")],
        expect=None,
    ),
    "with-constraint-not-matching-bool-attribute": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 2), constraints=[match(BOOL_ATTR)])],
        classes=[CLASS_A, CLASS_B],
        slices=[two_with("boolAttribute", True, False)],
        expect=None,
    ),
    "with-constraint-not-matching-version-attribute": Case(
        claims=[
            claim("claim-0", request("req-0", "class-a", 2), constraints=[match(VERSION_ATTR)])
        ],
        classes=[CLASS_A, CLASS_B],
        slices=[two_with("driverVersion", ("version", "1.0.0"), ("version", "2.0.0"))],
        expect=None,
    ),
    "with-constraint-for-request": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a"),
                request("req-1", "class-a"),
                constraints=[match(VERSION_ATTR, "req-0")],
            )
        ],
        classes=[CLASS_A, CLASS_B],
        slices=[two_with("driverVersion", ("version", "1.0.0"), ("version", "2.0.0"))],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-1"),
                result("req-1", A, "pool-1", "device-2"),
            )
        ],
    ),
    "with-constraint-for-request-retry": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a"),
                request("req-1", "class-a"),
                constraints=[match(VERSION_ATTR, "req-0"), match(STRING_ATTR)],
            )
        ],
        classes=[CLASS_A, CLASS_B],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                "pool-1",
                A,
                device(
                    "device-1", None, attrs(driverVersion=("version", "1.0.0"), stringAttribute="a")
                ),
                device(
                    "device-2", None, attrs(driverVersion=("version", "2.0.0"), stringAttribute="b")
                ),
                device(
                    "device-3", None, attrs(driverVersion=("version", "3.0.0"), stringAttribute="b")
                ),
            )
        ],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-2"),
                result("req-1", A, "pool-1", "device-3"),
            )
        ],
    ),
    "with-class-device-config": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[class_with_config("class-a", A, "classAttribute")],
        slices=[slice_with_one_device("slice-1", "node-1", "pool-1", A)],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-1"),
                config=[
                    {"source": "FromClass", **device_configuration(A, "classAttribute")},
                ],
            )
        ],
    ),
    "with-class-device-config-with-multiple-request-and-configs": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a"),
                request("req-1", "class-a"),
                request("req-2", "class-b"),
            )
        ],
        classes=[
            class_with_config("class-a", A, "classAttribute-A"),
            class_with_config("class-b", B, "classAttribute-B"),
        ],
        slices=[
            slice_with_multiple_devices("slice-1", "node-1", "pool-1", A, 2),
            slice_with_one_device("slice-2", "node-1", "pool-1", B),
        ],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-0"),
                result("req-1", A, "pool-1", "device-1"),
                result("req-2", B, "pool-1", "device-1"),
                config=[
                    {
                        "source": "FromClass",
                        "requests": ["req-0", "req-1"],
                        **device_configuration(A, "classAttribute-A"),
                    },
                    {
                        "source": "FromClass",
                        "requests": ["req-2"],
                        **device_configuration(B, "classAttribute-B"),
                    },
                ],
            )
        ],
    ),
    "with-claim-config-for-two-requests": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a"),
                request("req-1", "class-a"),
                request("req-2", "class-a"),
                config=[
                    {"requests": ["req-0", "req-1"], **device_configuration(A, "deviceAttribute")}
                ],
            )
        ],
        classes=[CLASS_A],
        slices=[slice_with_multiple_devices("slice-1", "node-1", "pool-1", A, 3)],
        expect=[
            allocation(
                LOCAL1,
                *multiple_results("req-0", A, "pool-1", 1, 0),
                result("req-1", A, "pool-1", "device-1"),
                result("req-2", A, "pool-1", "device-2"),
                config=[
                    {
                        "source": "FromClaim",
                        "requests": ["req-0", "req-1"],
                        **device_configuration(A, "deviceAttribute"),
                    }
                ],
            )
        ],
    ),
    "claim-with-device-config": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a"),
                config=[device_configuration(A, "deviceAttribute")],
            )
        ],
        classes=[CLASS_A],
        slices=[slice_with_one_device("slice-1", "node-1", "pool-1", A)],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-1"),
                config=[{"source": "FromClaim", **device_configuration(A, "deviceAttribute")}],
            )
        ],
    ),
    "unknown-selector": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 1, {}))],
        classes=[CLASS_A],
        slices=[slice_with_one_device("slice-1", "node-1", "pool-1", A)],
        error="CEL expression empty (unsupported selector type?)",
    ),
    "unknown-allocation-mode": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 1, mode="future-mode"))],
        classes=[CLASS_A],
        slices=[slice_with_one_device("slice-1", "node-1", "pool-1", A)],
        error="unsupported count mode future-mode",
    ),
    "unknown-constraint": Case(
        claims=[claim("claim-0", request("req-0", "class-a"), constraints=[{}])],
        classes=[CLASS_A],
        slices=[slice_with_one_device("slice-1", "node-1", "pool-1", A)],
        error="empty constraint (unsupported constraint type?)",
    ),
    "too-many-devices-single-request": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 500))],
        classes=[CLASS_A],
        error="exceeds the claim limit",
    ),
    "many-devices-okay": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 32))],
        classes=[CLASS_A],
        expect=None,
    ),
    "too-many-devices-total": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 32), request("req-1", "class-a"))],
        classes=[CLASS_A],
        slices=[slice_with_multiple_devices("slice-1", "node-1", "pool-1", A, 33)],
        error="exceeds the claim limit",
    ),
    "exact-count-total-overflows-claim-limit": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a", 2**62 + 1),
                request("req-1", "class-a", 2**62 + 1),
            )
        ],
        classes=[CLASS_A],
        error="exceeds the claim limit",
    ),
    "exact-count-sum-exceeds-claim-limit": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 20), request("req-1", "class-a", 20))],
        classes=[CLASS_A],
        error="request req-1: adding 20 devices exceeds the claim limit",
    ),
    "exact-count-sum-exactly-fills-claim-limit": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 16), request("req-1", "class-a", 16))],
        classes=[CLASS_A],
        slices=[slice_with_multiple_devices("slice-1", "node-1", "pool-1", A, 32)],
        expect=[
            allocation(
                LOCAL1,
                *multiple_results("req-0", A, "pool-1", 16, 0),
                *multiple_results("req-1", A, "pool-1", 16, 16),
            )
        ],
    ),
    "distinct-attribute": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 2), constraints=[distinct(INT_ATTR)])],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                "pool-1",
                A,
                device("device-1", None, attrs(numa=1)),
                device("device-2", None, attrs(numa=1)),
                device("device-3", None, attrs(numa=2)),
            )
        ],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-1"),
                result("req-0", A, "pool-1", "device-3"),
            )
        ],
    ),
}


@params(CASES)
def test_allocator(case: Case) -> None:
    run_case(case)
