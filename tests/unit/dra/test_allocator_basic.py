"""Ported rows of Go's allocatortesting table: basic selection, pools, "All", errors."""

from __future__ import annotations

from podium.algorithms.dynamic_resources.allocator import DeviceID
from tests.unit.dra.builders import (
    NODE_SELECTION_ALL,
    all_request,
    allocation,
    cel,
    claim,
    class_,
    device,
    local_node_selector,
    node,
    node_label_selector,
    pool,
    request,
    result,
    slice_,
    slice_with_multiple_devices,
    slice_with_one_device,
)
from tests.unit.dra.harness import Case, params, run_case

A, B = "driver-a", "driver-b"
CLASS_A = class_("class-a", A)
LOCAL1 = local_node_selector("node-1")


def _memory_at_least(size: str) -> dict[str, object]:
    return cel(f'device.capacity["{A}"].memory.compareTo(quantity("{size}")) >= 0')


def _small_and_large(*devices: dict[str, object]) -> list[dict[str, object]]:
    return [slice_("slice-1", "node-1", "pool-1", A, *devices)]


DEV1_1GI = device("device-1", {"memory": "1Gi"})
DEV2_2GI = device("device-2", {"memory": "2Gi"})

CASES: dict[str, Case] = {
    "empty": Case(expect=[]),
    "simple": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[slice_with_one_device("slice-1", "node-1", "pool-1", A)],
        expect=[allocation(LOCAL1, result("req-0", A, "pool-1", "device-1"))],
    ),
    "other-node": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            slice_with_one_device("slice-1", "node-1", "pool-1", B),
            slice_with_one_device("slice-2", "node-2", "pool-2", A),
        ],
        node=node("node-2", "region-2"),
        expect=[
            allocation(local_node_selector("node-2"), result("req-0", A, "pool-2", "device-1"))
        ],
    ),
    "small-and-large": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a", 1, _memory_at_least("1Gi")),
                request("req-1", "class-a", 1, _memory_at_least("2Gi")),
            )
        ],
        classes=[CLASS_A],
        slices=_small_and_large(DEV1_1GI, DEV2_2GI),
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-1"),
                result("req-1", A, "pool-1", "device-2"),
            )
        ],
    ),
    "small-and-large-backtrack-requests": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a", 1, _memory_at_least("1Gi")),
                request("req-1", "class-a", 1, _memory_at_least("2Gi")),
            )
        ],
        classes=[CLASS_A],
        slices=_small_and_large(DEV2_2GI, DEV1_1GI),
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-1"),
                result("req-1", A, "pool-1", "device-2"),
            )
        ],
    ),
    "small-and-large-backtrack-claims": Case(
        claims=[
            claim("claim-0", request("req-0", "class-a", 1, _memory_at_least("1Gi"))),
            claim("claim-1", request("req-1", "class-a", 1, _memory_at_least("2Gi"))),
        ],
        classes=[CLASS_A],
        slices=_small_and_large(DEV2_2GI, DEV1_1GI),
        expect=[
            allocation(LOCAL1, result("req-0", A, "pool-1", "device-1")),
            allocation(LOCAL1, result("req-1", A, "pool-1", "device-2")),
        ],
    ),
    "devices-split-across-different-slices": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 2))],
        classes=[CLASS_A],
        slices=[
            slice_with_one_device("slice-1", "node-1", "pool-1", A),
            slice_with_one_device("slice-2", "node-1", "pool-2", A),
        ],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-1"),
                result("req-0", A, "pool-2", "device-1"),
            )
        ],
    ),
    "obsolete-slice": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            slice_("slice-1-obsolete", "node-1", pool("pool-1", 2), A, device("device-1")),
            slice_("slice-1-obsolete", "node-1", pool("pool-1", 2, 2), A, device("device-2")),
        ],
        expect=None,
    ),
    "duplicate-slice": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            slice_with_one_device("slice-1", "node-1", pool("pool-1", 2), A),
            slice_with_one_device("slice-1-2", "node-1", pool("pool-1", 2), A),
        ],
        expect=None,
        reason="invalid resource pools were encountered",
    ),
    "no-slices": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        expect=None,
    ),
    "not-enough-suitable-devices": Case(
        claims=[
            claim("claim-0", request("req-0", "class-a")),
            claim("claim-0", request("req-1", "class-a")),
        ],
        classes=[CLASS_A],
        slices=[slice_with_one_device("slice-1", "node-1", "pool-1", A)],
        expect=None,
    ),
    "no-classes": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        slices=[slice_with_one_device("slice-1", "node-1", "pool-1", A)],
        error="could not retrieve device class class-a",
    ),
    "unknown-class": Case(
        claims=[claim("claim-0", request("req-0", "unknown-class"))],
        classes=[CLASS_A],
        slices=[slice_with_one_device("slice-1", "node-1", "pool-1", A)],
        error="could not retrieve device class unknown-class",
    ),
    "empty-class": Case(
        claims=[claim("claim-0", request("req-0", ""))],
        classes=[CLASS_A],
        slices=[slice_with_one_device("slice-1", "node-1", "pool-1", A)],
        error="claim claim-0, request req-0: missing device class name (unsupported request type?)",
    ),
    "no-claims-to-allocate": Case(
        classes=[CLASS_A],
        slices=[slice_with_one_device("slice-1", "node-1", "pool-1", A)],
        expect=[],
    ),
    "all-devices-single": Case(
        claims=[claim("claim-0", all_request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[slice_with_one_device("slice-1", "node-1", "pool-1", A)],
        expect=[allocation(LOCAL1, result("req-0", A, "pool-1", "device-1"))],
    ),
    "all-devices-many": Case(
        claims=[claim("claim-0", all_request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            slice_with_one_device("slice-1", "node-1", "pool-1", A),
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
    "all-devices-of-the-incomplete-pool": Case(
        claims=[claim("claim-0", all_request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[slice_with_one_device("slice-1", "node-1", pool("pool-1", 2), A)],
        error="claim claim-0, request req-0: asks for all devices, but resource pool "
        "driver-a/pool-1 is currently being updated",
    ),
    "all-devices-some-allocated": Case(
        claims=[claim("claim-0", all_request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[slice_with_multiple_devices("slice-1", "node-1", "pool-1", A, 2)],
        allocated=[DeviceID(A, "pool-1", "device-0")],
        expect=None,
    ),
    "network-attached-device": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            slice_with_one_device("slice-1", node_label_selector("region", "region-1"), "pool-1", A)
        ],
        expect=[
            allocation(
                node_label_selector("region", "region-1"), result("req-0", A, "pool-1", "device-1")
            )
        ],
    ),
    "unsuccessful-allocation-network-attached-device": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            slice_with_one_device("slice-1", node_label_selector("region", "region-2"), "pool-1", A)
        ],
        expect=None,
    ),
    "all-nodes-slice": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[slice_with_one_device("slice-1", NODE_SELECTION_ALL, "pool-1", A)],
        expect=[allocation(None, result("req-0", A, "pool-1", "device-1"))],
    ),
    "already-allocated-devices": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[slice_with_one_device("slice-1", "node-1", "pool-1", A)],
        allocated=[DeviceID(A, "pool-1", "device-1")],
        expect=None,
    ),
    "invalid-CEL-one-device": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 1, cel("noSuchVar")))],
        classes=[CLASS_A],
        slices=[slice_with_one_device("slice-1", "node-1", "pool-1", A)],
        error="undeclared reference",
    ),
    "invalid-CEL-one-device-class": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[{"metadata": {"name": "class-a"}, "spec": {"selectors": [cel("noSuchVar")]}}],
        slices=[slice_with_one_device("slice-1", "node-1", "pool-1", A)],
        error="class class-a: selector #0: CEL compile error: compilation failed: undeclared "
        "reference to 'noSuchVar'",
    ),
    "invalid-CEL-all-devices": Case(
        claims=[claim("claim-0", all_request("req-0", "class-a", selectors=[cel("noSuchVar")]))],
        classes=[CLASS_A],
        slices=[slice_with_one_device("slice-1", "node-1", "pool-1", A)],
        error="undeclared reference",
    ),
    "cel-runtime-error": Case(
        claims=[
            claim("claim-0", request("req-0", "class-a", 1, cel('device.attributes["x.io"].y')))
        ],
        classes=[CLASS_A],
        slices=[slice_with_one_device("slice-1", "node-1", "pool-1", A)],
        error="claim claim-0: selector #0 on device driver-a/pool-1/device-1: CEL runtime error: "
        "no such key",
    ),
    "invalid-CEL-syntax": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 1, cel("device.driver ==")))],
        classes=[CLASS_A],
        slices=[slice_with_one_device("slice-1", "node-1", "pool-1", A)],
        error="claim claim-0: selector #0: CEL compile error",
    ),
}


@params(CASES)
def test_allocator(case: Case) -> None:
    run_case(case)
