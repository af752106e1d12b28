"""Ported rows of Go's allocatortesting table: "All" in prioritized lists, the 32-result
limit (with Go's count of search steps) and binding conditions."""

from __future__ import annotations

from podium.algorithms.dynamic_resources.allocator import DeviceID
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
    multiple_results,
    node_label_selector,
    pool,
    prioritized,
    result,
    slice_,
    slice_with_multiple_devices,
    sub_request,
)
from tests.unit.dra.builders import (
    request as device_request,
)
from tests.unit.dra.harness import Case, params, run_case

A, B = "driver-a", "driver-b"
CLASS_A, CLASS_B = class_("class-a", A), class_("class-b", B)
LOCAL1 = local_node_selector("node-1")
TOLERATE_KEY1 = {"operator": "Exists", "key": "key1", "effect": "NoSchedule"}


def generation(value: str) -> Json:
    return cel(f'device.attributes["{A}"].generation == "{value}"')


def gen_device(name: str, value: str, **extra: bool) -> Json:
    attributes: dict[str, Json] = {"generation": {"string": value}}
    attributes.update({k: {"bool": v} for k, v in extra.items()})
    return device(name, None, attributes)


ALL_BY_GENERATION = prioritized(
    "req-0",
    sub_request("subReq-0", "class-a", 0, generation("v6"), mode="All"),
    sub_request("subReq-1", "class-a", 0, generation("v5"), mode="All"),
)


def bound(
    name: str,
    conditions: list[str],
    failures: list[str],
    *,
    request: str = "req-0",
    tolerations: tuple[Json, ...] = (),
) -> Json:
    return result(
        request,
        A,
        "pool-1",
        name,
        False,
        *tolerations,
        bindingConditions=conditions,
        bindingFailureConditions=failures,
    )


def counted(
    name: str,
    counter_set_name: str,
    size: str,
    conditions: tuple[list[str], list[str]] | None = None,
    taints: list[Json] | None = None,
) -> Json:
    return device(
        name,
        FROM_COUNTERS,
        consumes=[consumption(counter_set_name, {"memory": size})],
        binding_conditions=conditions[0] if conditions else None,
        binding_failure_conditions=conditions[1] if conditions else None,
        taints=taints,
    )


def counters(name: str, pool_: Json | str, *sets: Json) -> Json:
    return slice_(name, "node-1", pool_, A, shared_counters=list(sets))


CASES: dict[str, Case] = {
    "prioritized-list-allocation-mode-all": Case(
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
        allocated=[DeviceID(A, "pool-1", "device-2")],
        expect=[allocation(LOCAL1, result("req-0/subReq-1", A, "pool-1", "device-1"))],
    ),
    "prioritized-list-allocation-mode-all-with-selectors": Case(
        claims=[claim("claim-0", ALL_BY_GENERATION)],
        classes=[CLASS_A],
        slices=[slice_("slice-1", "node-1", "pool-1", A, gen_device("device-1", "v5"))],
        expect=[allocation(LOCAL1, result("req-0/subReq-1", A, "pool-1", "device-1"))],
    ),
    "prioritized-list-allocation-mode-all-with-selectors-multiple-pools": Case(
        claims=[claim("claim-0", ALL_BY_GENERATION)],
        classes=[CLASS_A],
        slices=[
            slice_("slice-1", "node-1", "pool-1", A, gen_device("device-1", "v5")),
            slice_("slice-2", "node-1", "pool-2", A, gen_device("device-1", "v5")),
        ],
        expect=[
            allocation(
                LOCAL1,
                result("req-0/subReq-1", A, "pool-1", "device-1"),
                result("req-0/subReq-1", A, "pool-2", "device-1"),
            )
        ],
    ),
    "prioritized-list-allocation-mode-all-with-selectors-multiple-pools-across-nodes": Case(
        claims=[claim("claim-0", ALL_BY_GENERATION)],
        classes=[CLASS_A],
        slices=[
            slice_("slice-1", "node-1", "pool-1", A, gen_device("device-1", "v5")),
            slice_(
                "slice-2",
                "node-2",
                "pool-2",
                A,
                gen_device("device-1", "v5"),
                gen_device("device-2", "v6"),
            ),
        ],
        expect=[allocation(LOCAL1, result("req-0/subReq-1", A, "pool-1", "device-1"))],
    ),
    "prioritized-list-allocation-mode-all-with-selectors-deviceclass-subset": Case(
        claims=[claim("claim-0", ALL_BY_GENERATION)],
        classes=[
            {
                "metadata": {"name": "class-a"},
                "spec": {
                    "selectors": [
                        cel(f'device.driver == "{A}" && device.attributes["{A}"].selected')
                    ]
                },
            }
        ],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                "pool-1",
                A,
                gen_device("device-1", "v6", selected=False),
                gen_device("device-2", "v5", selected=False),
                gen_device("device-3", "v5", selected=True),
            )
        ],
        expect=[allocation(LOCAL1, result("req-0/subReq-1", A, "pool-1", "device-3"))],
    ),
    "max-number-devices": Case(
        claims=[claim("claim-0", device_request("req-0", "class-a", 32))],
        classes=[CLASS_A],
        slices=[slice_with_multiple_devices("slice-1", "node-1", "pool-1", A, 32)],
        expect=[allocation(LOCAL1, *multiple_results("req-0", A, "pool-1", 32, 0))],
    ),
    "partitionable-devices-with-attribute-selector": Case(
        claims=[
            claim(
                "claim-0",
                device_request("req-0", "class-a", 2),
                device_request("req-1", "class-a", 1, cel(f'device.attributes["{A}"].special')),
            )
        ],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                pool("pool-1", 2),
                A,
                *(
                    device(
                        f"device-{i}",
                        None,
                        {"special": {"bool": i == 1}},
                        consumes=[
                            consumption("counter-set-1", {f"cpu{i}": "1"}),
                            consumption("counter-set-2", {"mem": "10Gi"}),
                        ],
                    )
                    for i in (1, 2, 3)
                ),
            ),
            counters(
                "slice-2",
                pool("pool-1", 2),
                counter_set("counter-set-1", {"cpu1": "1", "cpu2": "1", "cpu3": "1"}),
                counter_set("counter-set-2", {"mem": "30Gi"}),
            ),
        ],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-2"),
                result("req-0", A, "pool-1", "device-3"),
                result("req-1", A, "pool-1", "device-1"),
            )
        ],
    ),
    "prioritized-list-max-allocation-limit-request": Case(
        claims=[
            claim(
                "claim-0",
                prioritized(
                    "req-0",
                    sub_request("subReq-0", "class-a", 32),
                    sub_request("subReq-1", "class-a", 16),
                ),
                prioritized(
                    "req-1",
                    sub_request("subReq-0", "class-a", 32),
                    sub_request("subReq-1", "class-a", 16),
                ),
            )
        ],
        classes=[CLASS_A],
        slices=[slice_with_multiple_devices("slice-1", "node-1", "pool-1", A, 64)],
        expect=[
            allocation(
                LOCAL1,
                *multiple_results("req-0/subReq-1", A, "pool-1", 16, 0),
                *multiple_results("req-1/subReq-1", A, "pool-1", 16, 16),
            )
        ],
        allocate_one_calls=75,
    ),
    "prioritized-list-max-allocation-allocation-mode-all": Case(
        claims=[
            claim(
                "claim-0",
                prioritized(
                    "req-0",
                    sub_request("subReq-0", "class-a", mode="All"),
                    sub_request("subReq-1", "class-a", 2),
                ),
                device_request("req-1", "class-b", 2),
            )
        ],
        classes=[CLASS_A, CLASS_B],
        slices=[
            slice_with_multiple_devices("slice-1", "node-1", "pool-1", A, 31),
            slice_with_multiple_devices("slice-2", "node-1", "pool-2", B, 2),
        ],
        expect=[
            allocation(
                LOCAL1,
                *multiple_results("req-0/subReq-1", A, "pool-1", 2, 0),
                *multiple_results("req-1", B, "pool-2", 2, 0),
            )
        ],
        allocate_one_calls=42,
    ),
    "device-binding-conditions": Case(
        claims=[claim("claim-0", device_request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                "pool-1",
                A,
                device(
                    "device-1",
                    binding_conditions=["IsPrepare"],
                    binding_failure_conditions=["BindingFailed"],
                ),
            )
        ],
        expect=[allocation(LOCAL1, bound("device-1", ["IsPrepare"], ["BindingFailed"]))],
    ),
    "binding-conditions-multiple-devices": Case(
        claims=[
            claim(
                "claim-0", device_request("req-0", "class-a", 2), device_request("req-1", "class-a")
            )
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
                    binding_conditions=["IsPrepare"],
                    binding_failure_conditions=["BindingFailed"],
                ),
                device(
                    "device-2",
                    binding_conditions=["IsPrepare2"],
                    binding_failure_conditions=["BindingFailed2"],
                ),
                device(
                    "device-3",
                    binding_conditions=["IsPrepare3"],
                    binding_failure_conditions=["BindingFailed3"],
                ),
            )
        ],
        expect=[
            allocation(
                LOCAL1,
                bound("device-1", ["IsPrepare"], ["BindingFailed"]),
                bound("device-2", ["IsPrepare2"], ["BindingFailed2"]),
                bound("device-3", ["IsPrepare3"], ["BindingFailed3"], request="req-1"),
            )
        ],
    ),
    "binding-conditions-with-and-without": Case(
        claims=[
            claim("claim-0", device_request("req-0", "class-a"), device_request("req-1", "class-a"))
        ],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                "pool-1",
                A,
                device("device-1"),
                device(
                    "device-2",
                    binding_conditions=["IsPrepare"],
                    binding_failure_conditions=["BindingFailed"],
                ),
            )
        ],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-1"),
                bound("device-2", ["IsPrepare"], ["BindingFailed"], request="req-1"),
            )
        ],
    ),
    "node-restriction": Case(
        claims=[claim("claim-0", device_request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                node_label_selector("planet", "earth"),
                "pool-1",
                A,
                device("device-1", binds_to_node=True),
            )
        ],
        expect=[allocation(LOCAL1, result("req-0", A, "pool-1", "device-1"))],
    ),
    "partitionable-devices-with-binding-conditions": Case(
        claims=[claim("claim-0", device_request("req-0", "class-a"))],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                pool("pool-1", 2),
                A,
                counted("device-1", "counter-set-1", "4Gi", (["IsPrepare"], ["BindingFailed"])),
            ),
            counters("slice-2", pool("pool-1", 2), counter_set("counter-set-1", {"memory": "8Gi"})),
        ],
        expect=[allocation(LOCAL1, bound("device-1", ["IsPrepare"], ["BindingFailed"]))],
    ),
    "partitionable-devices-with-binding-conditions-some-devices-no-conditions": Case(
        claims=[claim("claim-0", device_request("req-0", "class-a", 3))],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                pool("pool-1", 2),
                A,
                counted("device-1", "counter-set-1", "2Gi", (["IsPrepare"], ["BindingFailed"])),
                counted("device-2", "counter-set-1", "2Gi"),
                counted("device-3", "counter-set-1", "4Gi", (["IsReady"], ["BindingTimeout"])),
            ),
            counters("slice-2", pool("pool-1", 2), counter_set("counter-set-1", {"memory": "8Gi"})),
        ],
        expect=[
            allocation(
                LOCAL1,
                bound("device-1", ["IsPrepare"], ["BindingFailed"]),
                result("req-0", A, "pool-1", "device-2"),
                bound("device-3", ["IsReady"], ["BindingTimeout"]),
            )
        ],
    ),
    "partitionable-devices-with-binding-conditions-multi-slices": Case(
        claims=[claim("claim-0", device_request("req-0", "class-a", 2))],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-4",
                "node-1",
                pool("pool-1", 4),
                A,
                counted("device-1", "counter-set-1", "4Gi", (["IsPrepare"], ["BindingFailed"])),
            ),
            counters("slice-3", pool("pool-1", 4), counter_set("counter-set-1", {"memory": "8Gi"})),
            slice_(
                "slice-2",
                "node-1",
                pool("pool-1", 4),
                A,
                counted("device-2", "counter-set-2", "4Gi"),
            ),
            counters("slice-1", pool("pool-1", 4), counter_set("counter-set-2", {"memory": "8Gi"})),
        ],
        expect=[
            allocation(
                LOCAL1,
                result("req-0", A, "pool-1", "device-2"),
                bound("device-1", ["IsPrepare"], ["BindingFailed"]),
            )
        ],
    ),
    "partitionable-devices-with-binding-conditions-and-taints-tolerated": Case(
        claims=[
            claim("claim-0", device_request("req-0", "class-a", 2, tolerations=[TOLERATE_KEY1]))
        ],
        classes=[CLASS_A],
        slices=[
            slice_(
                "slice-1",
                "node-1",
                pool("pool-1", 2),
                A,
                counted(
                    "device-1",
                    "counter-set-1",
                    "4Gi",
                    (["IsPrepare"], ["BindingFailed"]),
                    taints=[{"key": "key1", "value": "value1", "effect": "NoSchedule"}],
                ),
                counted("device-2", "counter-set-1", "4Gi"),
            ),
            counters("slice-2", pool("pool-1", 2), counter_set("counter-set-1", {"memory": "8Gi"})),
        ],
        expect=[
            allocation(
                LOCAL1,
                bound("device-1", ["IsPrepare"], ["BindingFailed"], tolerations=(TOLERATE_KEY1,)),
                result("req-0", A, "pool-1", "device-2", False, TOLERATE_KEY1),
            )
        ],
    ),
}


@params(CASES)
def test_allocator(case: Case) -> None:
    run_case(case)
