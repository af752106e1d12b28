"""Ported rows of Go's allocatortesting table: consumable capacity (on by default in v1.37).

The "-disabled-feature" rows are left out (the feature is on); fractional ranges are off,
so ranges use whole units.
"""

from __future__ import annotations

from podium.algorithms.dynamic_resources.allocator import DeviceID
from tests.unit.dra.builders import (
    Json,
    all_request,
    allocation,
    claim,
    class_,
    device,
    local_node_selector,
    prioritized,
    request,
    result,
    slice_,
    sub_request,
)
from tests.unit.dra.harness import FIXED_SHARE_ID, Case, params, run_case

A = "driver-a"
CLASS_A = class_("class-a", A)
MULTI, DEDICATED = class_("class-a", A, multi_alloc=True), class_("class-a", A, multi_alloc=False)
LOCAL1 = local_node_selector("node-1")
DEV1 = DeviceID(A, "pool-1", "device-1")


def ranged(value: str) -> Json:
    """withCapacityRequestPolicyRange: default 2, min 2, step 2, max 4."""
    return {
        "capacity-0": {
            "value": value,
            "requestPolicy": {"default": "2", "validRange": {"min": "2", "step": "2", "max": "4"}},
        }
    }


def valid_values(default: str, value: str, *more: str) -> Json:
    return {
        "capacity-0": {
            "value": value,
            "requestPolicy": {"default": default, "validValues": [default, *more]},
        }
    }


def shared(name: str, capacity: Json | None = None, attributes: Json | None = None) -> Json:
    return device(name, capacity, attributes, allow_multiple=True)


def share(request_name: str, name: str, consumed: str | None) -> Json:
    extra: Json = {"shareID": FIXED_SHARE_ID}
    if consumed is not None:
        extra["consumedCapacity"] = {"capacity-0": consumed}
    return result(request_name, A, "pool-1", name, **extra)


def one_slice(*devices: Json) -> list[Json]:
    return [slice_("slice-1", "node-1", "pool-1", A, *devices)]


def two_claims(capacity: str | None = None, class_name: str = "class-a") -> list[Json]:
    return [
        claim("claim-0", request("req-0", class_name, capacity=capacity)),
        claim("claim-1", request("req-0", class_name, capacity=capacity)),
    ]


CASES: dict[str, Case] = {
    "consumable-capacity-multi-allocatable-device-with-missing-capacity-request": Case(
        claims=[claim("claim-0", request("req-0", "class-a", capacity="1"))],
        classes=[CLASS_A],
        slices=one_slice(shared("device-1", {"capacity-1": "1"})),
        expect=None,
    ),
    (
        "consumable-capacity-multi-allocatable-device-allocation-mode-all-with-"
        "missing-capacity-request"
    ): Case(
        claims=[claim("claim-0", all_request("req-0", "class-a", capacity="1"))],
        classes=[MULTI],
        slices=one_slice(shared("device-1", {"capacity-1": "1"})),
        expect=None,
    ),
    "consumable-capacity-multi-allocatable-device-without-capacity-without-capacity-request": Case(
        claims=two_claims(),
        classes=[MULTI],
        slices=one_slice(shared("device-1")),
        expect=[
            allocation(LOCAL1, share("req-0", "device-1", None)),
            allocation(LOCAL1, share("req-0", "device-1", None)),
        ],
    ),
    "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request": Case(
        claims=two_claims(),
        classes=[MULTI],
        slices=one_slice(
            shared("device-1", {"capacity-0": "1"}), shared("device-2", {"capacity-0": "1"})
        ),
        expect=[
            allocation(LOCAL1, share("req-0", "device-1", "1")),
            allocation(LOCAL1, share("req-0", "device-2", "1")),
        ],
    ),
    (
        "consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request-block"
    ): Case(
        claims=two_claims(),
        classes=[MULTI],
        slices=one_slice(shared("device-1", {"capacity-0": "2"})),
        expect=None,
    ),
    "consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request": Case(
        claims=two_claims("1"),
        classes=[MULTI],
        slices=one_slice(shared("device-1", {"capacity-0": "2"})),
        expect=[
            allocation(LOCAL1, share("req-0", "device-1", "1")),
            allocation(LOCAL1, share("req-0", "device-1", "1")),
        ],
    ),
    "consumable-capacity-multi-allocatable-device-with-policy-without-capacity-request": Case(
        claims=two_claims(),
        classes=[MULTI],
        slices=one_slice(shared("device-1", ranged("4"))),
        expect=[
            allocation(LOCAL1, share("req-0", "device-1", "2")),
            allocation(LOCAL1, share("req-0", "device-1", "2")),
        ],
    ),
    "consumable-capacity-multi-allocatable-device-with-zero-request-policy": Case(
        claims=two_claims(),
        classes=[MULTI],
        slices=one_slice(shared("device-1", valid_values("0", "1"))),
        expect=[
            allocation(LOCAL1, share("req-0", "device-1", "0")),
            allocation(LOCAL1, share("req-0", "device-1", "0")),
        ],
    ),
    "consumable-capacity-multi-allocatable-device-violates-zero-request-policy": Case(
        claims=[claim("claim-0", request("req-0", "class-a", capacity="1"))],
        classes=[MULTI],
        slices=one_slice(shared("device-1", valid_values("0", "1"))),
        expect=None,
    ),
    "consumable-capacity-multi-allocatable-device-with-range-policy-with-capacity-request": Case(
        claims=two_claims("1"),
        classes=[MULTI],
        slices=one_slice(shared("device-1", ranged("4"))),
        expect=[
            allocation(LOCAL1, share("req-0", "device-1", "2")),
            allocation(LOCAL1, share("req-0", "device-1", "2")),
        ],
    ),
    "consumable-capacity-multi-allocatable-device-with-range-policy-step": Case(
        claims=[claim("claim-0", request("req-0", "class-a", capacity="3"))],
        classes=[MULTI],
        slices=one_slice(shared("device-1", ranged("4"))),
        expect=[allocation(LOCAL1, share("req-0", "device-1", "4"))],
    ),
    "consumable-capacity-range-policy-request-above-int64-rejected": Case(
        claims=[claim("claim-0", request("req-0", "class-a", capacity="18446744073709551616"))],
        classes=[MULTI],
        slices=one_slice(shared("device-1", ranged("4"))),
        error="cannot be represented",
    ),
    "consumable-capacity-range-policy-rounded-value-overflow-rejected": Case(
        claims=[claim("claim-0", request("req-0", "class-a", capacity="9223372036854775807"))],
        classes=[MULTI],
        slices=one_slice(shared("device-1", ranged("4"))),
        error="cannot be represented",
    ),
    "consumable-capacity-range-policy-overflow-aborts-not-skip": Case(
        claims=[claim("claim-0", request("req-0", "class-a", capacity="18446744073709551616"))],
        classes=[MULTI],
        slices=one_slice(
            shared("device-1", ranged("4")),
            shared("device-2", {"capacity-0": "36893488147419103232"}),
        ),
        error="cannot be represented",
    ),
    "consumable-capacity-range-policy-allocation-mode-all-overflow-aborts": Case(
        claims=[claim("claim-0", all_request("req-0", "class-a", capacity="18446744073709551616"))],
        classes=[MULTI],
        slices=one_slice(shared("device-1", ranged("4"))),
        error="cannot be represented",
    ),
    "consumable-capacity-negative-request-aborts": Case(
        claims=[claim("claim-0", request("req-0", "class-a", capacity="-5"))],
        classes=[MULTI],
        slices=one_slice(shared("device-1", {"capacity-0": "10"})),
        error="negative",
    ),
    "consumable-capacity-multi-allocatable-device-with-valid-values-policy": Case(
        claims=[claim("claim-0", request("req-0", "class-a", capacity="2"))],
        classes=[MULTI],
        slices=one_slice(shared("device-1", valid_values("1", "4", "2"))),
        expect=[allocation(LOCAL1, share("req-0", "device-1", "2"))],
    ),
    "consumable-capacity-multi-allocatable-device-with-valid-values-policy-round-up": Case(
        claims=[claim("claim-0", request("req-0", "class-a", capacity="2"))],
        classes=[MULTI],
        slices=one_slice(shared("device-1", valid_values("1", "3", "3"))),
        expect=[allocation(LOCAL1, share("req-0", "device-1", "3"))],
    ),
    "consumable-capacity-multi-allocatable-device-with-exceeded-consumable-capacity-request": Case(
        claims=[
            claim("claim-0", request("req-0", "class-a", capacity="1")),
            claim("claim-1", request("req-0", "class-a", capacity="2")),
        ],
        classes=[MULTI],
        slices=one_slice(shared("device-1", ranged("2"))),
        expect=None,
    ),
    "consumable-capacity-multi-allocatable-device-with-request-over-max-sharing-policy": Case(
        claims=[claim("claim-0", request("req-0", "class-a", capacity="6"))],
        classes=[MULTI],
        slices=one_slice(shared("device-1", ranged("10"))),
        expect=None,
    ),
    "consumable-capacity-multi-allocatable-device-with-allocated-capacity-use-remaining": Case(
        claims=[claim("claim-0", request("req-0", "class-a", capacity="2"))],
        allocated_capacity={DEV1: {"capacity-0": "2"}},
        classes=[MULTI],
        slices=one_slice(shared("device-1", ranged("4"))),
        expect=[allocation(LOCAL1, share("req-0", "device-1", "2"))],
    ),
    "consumable-capacity-multi-allocatable-device-with-allocated-capacity-next-device": Case(
        claims=[claim("claim-0", request("req-0", "class-a", capacity="2"))],
        allocated_capacity={DEV1: {"capacity-0": "2"}},
        classes=[MULTI],
        slices=one_slice(shared("device-1", ranged("2")), shared("device-2", ranged("2"))),
        expect=[allocation(LOCAL1, share("req-0", "device-2", "2"))],
    ),
    "consumable-capacity-with-multi-allocatable-device-backtrack": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a", capacity="2"),
                request("req-1", "class-a", capacity="2"),
                constraints=[{"matchAttribute": f"{A}/stringAttribute"}],
            ),
            claim("claim-1", request("req-0", "class-a", capacity="2")),
        ],
        classes=[CLASS_A],
        slices=one_slice(
            shared(
                "device-2", ranged("2"), {"stringAttribute": {"string": "stringAttributeValue1"}}
            ),
            shared(
                "device-1", ranged("4"), {"stringAttribute": {"string": "stringAttributeValue2"}}
            ),
        ),
        expect=[
            allocation(LOCAL1, share("req-0", "device-1", "2"), share("req-1", "device-1", "2")),
            allocation(LOCAL1, share("req-0", "device-2", "2")),
        ],
    ),
    "consumable-capacity-multi-allocatable-device-with-subrequest": Case(
        claims=[
            claim(
                "claim-0",
                prioritized(
                    "req-0",
                    sub_request("subReq-0", "class-a", capacity="4"),
                    sub_request("subReq-1", "class-a", capacity="2"),
                    sub_request("subReq-1", "class-a"),
                ),
            )
        ],
        classes=[MULTI],
        slices=one_slice(shared("device-1", ranged("2"))),
        expect=[allocation(LOCAL1, share("req-0/subReq-1", "device-1", "2"))],
    ),
    "consumable-capacity-multi-allocatable-device-with-no-available-consumable-capacity": Case(
        claims=[claim("claim-0", request("req-0", "class-a", capacity="2"))],
        allocated_capacity={DEV1: {"capacity-0": "2"}},
        classes=[MULTI],
        slices=one_slice(shared("device-1", ranged("2"))),
        expect=None,
    ),
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-no-capacity": Case(
        claims=[claim("claim-0", all_request("req-0", "class-a", capacity="2"))],
        classes=[MULTI],
        slices=one_slice(shared("device-1", {"capacity-0": "2"}), shared("device-2")),
        expect=[allocation(LOCAL1, share("req-0", "device-1", "2"))],
    ),
    (
        "consumable-capacity-multi-allocatable-device-allocation-mode-all-"
        "filter-out-insufficient-capacity"
    ): Case(
        claims=[claim("claim-0", all_request("req-0", "class-a", capacity="2"))],
        classes=[MULTI],
        slices=one_slice(
            shared("device-1", {"capacity-0": "2"}), shared("device-2", {"capacity-0": "1"})
        ),
        expect=[allocation(LOCAL1, share("req-0", "device-1", "2"))],
    ),
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-sufficient": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a", capacity="1"),
                all_request("req-1", "class-a", capacity="1"),
            )
        ],
        classes=[CLASS_A],
        slices=one_slice(
            shared("device-1", {"capacity-0": "2"}), shared("device-2", {"capacity-0": "1"})
        ),
        expect=[
            allocation(
                LOCAL1,
                share("req-0", "device-1", "1"),
                share("req-1", "device-1", "1"),
                share("req-1", "device-2", "1"),
            )
        ],
    ),
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-sufficient": Case(
        allocated_capacity={DEV1: {"capacity-0": "1"}},
        claims=[claim("claim-0", all_request("req-0", "class-a", capacity="1"))],
        classes=[CLASS_A],
        slices=one_slice(
            shared("device-1", {"capacity-0": "2"}), shared("device-2", {"capacity-0": "1"})
        ),
        expect=[
            allocation(LOCAL1, share("req-0", "device-1", "1"), share("req-0", "device-2", "1"))
        ],
    ),
    (
        "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-insufficient"
    ): Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a", capacity="1"),
                all_request("req-1", "class-a", capacity="1"),
            )
        ],
        classes=[CLASS_A],
        slices=one_slice(
            shared("device-1", {"capacity-0": "1"}), shared("device-2", {"capacity-0": "1"})
        ),
        expect=None,
    ),
    "consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-insufficient": Case(
        allocated_capacity={DEV1: {"capacity-0": "1"}},
        claims=[claim("claim-0", all_request("req-0", "class-a", capacity="1"))],
        classes=[CLASS_A],
        slices=one_slice(
            shared("device-1", {"capacity-0": "1"}), shared("device-2", {"capacity-0": "1"})
        ),
        expect=None,
    ),
    "consumable-capacity-dedicated-device-with-consumable-capacity-request": Case(
        claims=[claim("claim-0", request("req-0", "class-a", capacity="1"))],
        classes=[DEDICATED],
        slices=one_slice(device("device-1", {"capacity-0": "1"})),
        expect=[allocation(LOCAL1, result("req-0", A, "pool-1", "device-1"))],
    ),
    "consumable-capacity-dedicated-device-with-multiple-consumable-capacity-request": Case(
        claims=two_claims("1"),
        classes=[DEDICATED],
        slices=one_slice(device("device-1", ranged("2"))),
        expect=None,
    ),
    "consumable-capacity-requests-are-not-modified": Case(
        claims=[
            claim(
                "claim-0",
                request("req-0", "class-a", capacity="2"),
                request("req-1", "class-a", capacity="1000000000000000000000"),
            )
        ],
        classes=[CLASS_A],
        slices=one_slice(
            shared(
                "device-1",
                {
                    "capacity-0": {
                        "value": "1000000000000000000002",
                        "requestPolicy": {
                            "default": "1000000000000000000000",
                            "validRange": {"min": "2"},
                        },
                    }
                },
            )
        ),
        expect=[
            allocation(LOCAL1, share("req-0", "device-1", "2"), share("req-1", "device-1", "1000E"))
        ],
    ),
    "allow-multiple-allocations-exclude-multi-allocatable-device-by-class-selector": Case(
        claims=[claim("claim-0", request("req-0", "class-a", capacity="1"))],
        classes=[DEDICATED],
        slices=one_slice(shared("device-1", {"capacity-0": "1"})),
        expect=None,
    ),
    (
        "allow-multiple-allocations-not-allocate-multi-allocatable-device-which-already-dedicated"
    ): Case(
        allocated=[DEV1],
        claims=[claim("claim-0", request("req-0", "class-a", capacity="1"))],
        classes=[MULTI],
        slices=one_slice(shared("device-1", ranged("2"))),
        expect=None,
    ),
    (
        "allow-multiple-allocations-not-allocate-dedicated-device-which-change-"
        "from-multi-allocatable"
    ): Case(
        claims=[claim("claim-0", request("req-0", "class-a", capacity="1"))],
        allocated_capacity={DEV1: {"capacity-0": "1"}},
        classes=[MULTI],
        slices=one_slice(device("device-1", ranged("2"))),
        expect=None,
    ),
}


@params(CASES)
def test_allocator(case: Case) -> None:
    run_case(case)
