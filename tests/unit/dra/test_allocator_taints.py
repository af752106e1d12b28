"""Ported rows of Go's allocatortesting table: device taints and per-device node selection.

The "-disabled" rows of the table are left out: DRADeviceTaints and DRAPartitionableDevices
are on in v1.37, so the allocator has no disabled mode for them.
"""

from __future__ import annotations

from podium.algorithms.dynamic_resources.allocator import DeviceID
from tests.unit.dra.builders import (
    FROM_COUNTERS,
    NODE_SELECTION_ALL,
    NODE_SELECTION_PER_DEVICE,
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
    node_label_selector,
    pool,
    prioritized,
    request,
    result,
    slice_,
    sub_request,
)
from tests.unit.dra.harness import Case, params, run_case

A, B = "driver-a", "driver-b"
CLASS_A, CLASS_B = class_("class-a", A), class_("class-b", B)
LOCAL1 = local_node_selector("node-1")
TAINT_NONE = {"key": "taint-key", "value": "taint-value", "effect": "None"}
TAINT_NO_SCHEDULE = {"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}
TAINT_NO_EXECUTE = {"key": "taint-key", "value": "taint-value-2", "effect": "NoExecute"}
TOLERATE_NO_SCHEDULE = {"operator": "Exists", "key": "taint-key", "effect": "NoSchedule"}
TOLERATE_NO_EXECUTE = {
    "operator": "Equal",
    "key": "taint-key",
    "value": "taint-value-2",
    "effect": "NoExecute",
}


def tainted(*devices: tuple[str, list[Json]]) -> list[Json]:
    return [
        slice_("slice-1", "node-1", "pool-1", A, *(device(name, taints=t) for name, t in devices))
    ]


TWO_TAINTED = tainted(("device-1", [TAINT_NO_SCHEDULE]), ("device-2", [TAINT_NO_EXECUTE]))


def mem(size: str) -> Json:
    return cel(f'device.capacity["{A}"].memory.compareTo(quantity("{size}")) >= 0')


def partition(name: str, counter_set_name: str, size: str, selection: object) -> Json:
    return device(
        name,
        FROM_COUNTERS,
        consumes=[consumption(counter_set_name, {"memory": size})],
        node_selection=selection,
    )


CASES: dict[str, Case] = {
    "tainted-two-devices": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=TWO_TAINTED,
        expect=None,
    ),
    "tainted-one-device-two-taints": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=tainted(("device-1", [TAINT_NO_SCHEDULE, TAINT_NO_EXECUTE])),
        expect=None,
    ),
    "tainted-two-devices-tolerated": Case(
        claims=[claim("claim-0", request("req-0", "class-a", tolerations=[TOLERATE_NO_EXECUTE]))],
        classes=[CLASS_A],
        slices=TWO_TAINTED,
        expect=[
            allocation(LOCAL1, result("req-0", A, "pool-1", "device-2", False, TOLERATE_NO_EXECUTE))
        ],
    ),
    "tainted-two-devices-prioritized-list-tolerated": Case(
        claims=[
            claim(
                "claim-0",
                prioritized(
                    "req-0",
                    sub_request("subReq-0", "class-a"),
                    sub_request("subReq-1", "class-a", tolerations=[TOLERATE_NO_EXECUTE]),
                ),
            )
        ],
        classes=[CLASS_A],
        slices=TWO_TAINTED,
        expect=[
            allocation(
                LOCAL1,
                result("req-0/subReq-1", A, "pool-1", "device-2", False, TOLERATE_NO_EXECUTE),
            )
        ],
    ),
    "tainted-no-effect": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=tainted(("device-1", [TAINT_NONE])),
        expect=[allocation(LOCAL1, result("req-0", A, "pool-1", "device-1"))],
    ),
    "tainted-one-device-two-taints-both-tolerated": Case(
        claims=[
            claim(
                "claim-0",
                request(
                    "req-0", "class-a", tolerations=[TOLERATE_NO_SCHEDULE, TOLERATE_NO_EXECUTE]
                ),
            )
        ],
        classes=[CLASS_A],
        slices=tainted(("device-1", [TAINT_NO_SCHEDULE, TAINT_NO_EXECUTE])),
        expect=[
            allocation(
                LOCAL1,
                result(
                    "req-0",
                    A,
                    "pool-1",
                    "device-1",
                    False,
                    TOLERATE_NO_SCHEDULE,
                    TOLERATE_NO_EXECUTE,
                ),
            )
        ],
    ),
    "tainted-prioritized-list": Case(
        claims=[
            claim(
                "claim-0",
                prioritized(
                    "req-0", sub_request("subReq-0", "class-b"), sub_request("subReq-1", "class-a")
                ),
            )
        ],
        classes=[CLASS_A, CLASS_B],
        slices=tainted(("device-1", [TAINT_NO_SCHEDULE])),
        expect=None,
    ),
    "tainted-admin-access": Case(
        claims=[claim("claim-0", request("req-0", "class-a", admin_access=True))],
        allocated=[DeviceID(A, "pool-1", "device-1"), DeviceID(A, "pool-1", "device-2")],
        classes=[CLASS_A],
        slices=tainted(("device-1", [TAINT_NO_SCHEDULE])),
        expect=None,
    ),
    "tainted-all-devices-single": Case(
        claims=[claim("claim-0", all_request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=tainted(("device-1", [TAINT_NO_SCHEDULE])),
        expect=None,
    ),
    "device-taint-rule-taints-device": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=tainted(("device-1", []), ("device-2", [])),
        taint_rules=[
            {
                "metadata": {"name": "rule"},
                "spec": {
                    "deviceSelector": {"driver": A, "pool": "pool-1", "device": "device-1"},
                    "taint": TAINT_NO_SCHEDULE,
                },
            },
            {"metadata": {"name": "no-selector"}, "spec": {"taint": TAINT_NO_SCHEDULE}},
        ],
        expect=[allocation(LOCAL1, result("req-0", A, "pool-1", "device-2"))],
    ),
    "partitionable-devices-per-device-node-selection-nodename": Case(
        claims=[
            claim(
                "claim-0",
                prioritized(
                    "req-0",
                    sub_request("subReq-0", "class-a", 1, mem("6Gi")),
                    sub_request("subReq-1", "class-a", 1, mem("4Gi")),
                ),
            )
        ],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                NODE_SELECTION_PER_DEVICE,
                pool("pool-1", 2),
                A,
                partition("device-1", "counter-set-1", "4Gi", "node-1"),
                partition("device-2", "counter-set-1", "6Gi", "node-2"),
            ),
            slice_(
                "slice-2",
                NODE_SELECTION_PER_DEVICE,
                pool("pool-1", 2),
                A,
                shared_counters=[counter_set("counter-set-1", {"memory": "18Gi"})],
            ),
        ],
        expect=[allocation(LOCAL1, result("req-0/subReq-1", A, "pool-1", "device-1"))],
    ),
    "partitionable-devices-per-device-node-selection-node-selector": Case(
        claims=[claim("claim-0", request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                NODE_SELECTION_PER_DEVICE,
                pool("pool-1", 2),
                A,
                partition(
                    "device-1", "counter-set-1", "4Gi", node_label_selector("region", "region-1")
                ),
            ),
            slice_(
                "slice-2",
                NODE_SELECTION_PER_DEVICE,
                pool("pool-1", 2),
                A,
                shared_counters=[counter_set("counter-set-1", {"memory": "18Gi"})],
            ),
        ],
        expect=[
            allocation(
                node_label_selector("region", "region-1"), result("req-0", A, "pool-1", "device-1")
            )
        ],
    ),
    "partitionable-devices-per-device-node-selection-node-selector-multiple-devices": Case(
        claims=[claim("claim-0", request("req-0", "class-a", 3), request("req-1", "class-b", 3))],
        classes=[CLASS_A, CLASS_B],
        slices=[
            slice_(
                "slice-1",
                NODE_SELECTION_PER_DEVICE,
                pool("pool-1", 2),
                A,
                partition(
                    "device-1", "counter-set-1", "4Gi", node_label_selector("region", "region-1")
                ),
                partition("device-2", "counter-set-1", "4Gi", "node-1"),
                partition("device-3", "counter-set-1", "4Gi", NODE_SELECTION_ALL),
            ),
            slice_(
                "slice-2",
                NODE_SELECTION_PER_DEVICE,
                pool("pool-1", 2),
                A,
                shared_counters=[counter_set("counter-set-1", {"memory": "18Gi"})],
            ),
            slice_(
                "slice-3",
                "node-1",
                pool("pool-2", 2),
                B,
                *(
                    device(
                        f"device-{i}",
                        FROM_COUNTERS,
                        consumes=[consumption("counter-set-2", {"memory": "4Gi"})],
                    )
                    for i in (1, 2, 3)
                ),
            ),
            slice_(
                "slice-4",
                "node-1",
                pool("pool-2", 2),
                B,
                shared_counters=[counter_set("counter-set-2", {"memory": "12Gi"})],
            ),
        ],
        expect=[
            allocation(
                LOCAL1,
                *(result("req-0", A, "pool-1", f"device-{i}") for i in (1, 2, 3)),
                *(result("req-1", B, "pool-2", f"device-{i}") for i in (1, 2, 3)),
            )
        ],
    ),
}


@params(CASES)
def test_allocator(case: Case) -> None:
    run_case(case)
