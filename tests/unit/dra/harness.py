"""Run one allocator table case the way Go's allocatortesting.TestAllocator does."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from podium.algorithms.dynamic_resources.allocator import (
    AllocatedState,
    AllocationError,
    Allocator,
    DeviceID,
    SharedDeviceID,
)
from podium.kube.quantity import parse_quantity
from tests.unit.dra.builders import Json, node

FIXED_SHARE_ID = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"


@dataclass
class Case:
    """One row of the table: inputs, and either results (None: no allocation) or an error."""

    claims: list[Json] = field(default_factory=list)
    classes: list[Json] = field(default_factory=list)
    slices: list[Json] = field(default_factory=list)
    node: Json | None = None
    allocated: list[DeviceID] = field(default_factory=list)
    allocated_shared: list[SharedDeviceID] = field(default_factory=list)
    allocated_capacity: dict[DeviceID, dict[str, str]] = field(default_factory=dict)
    taint_rules: list[Json] = field(default_factory=list)
    expect: list[Json] | None = None
    error: str = ""
    reason: str = ""
    allocate_one_calls: int = 0


def _canonical(allocation: Json) -> str:
    out = copy.deepcopy(allocation)
    results = out.get("devices", {}).get("results", [])
    for r in results:
        if "shareID" in r:
            r["shareID"] = FIXED_SHARE_ID
    results.sort(key=lambda r: json.dumps(r, sort_keys=True))
    for term in (out.get("nodeSelector") or {}).get("nodeSelectorTerms", []):
        for key in ("matchExpressions", "matchFields"):
            reqs = term.get(key) or []
            for req in reqs:
                req["values"] = sorted(req.get("values") or [])
            reqs.sort(key=lambda r: json.dumps(r, sort_keys=True))
    return json.dumps(out, sort_keys=True)


def run_case(case: Case) -> None:
    inputs = copy.deepcopy((case.claims, case.classes, case.slices))
    state = AllocatedState(
        devices=set(case.allocated),
        shared_device_ids=set(case.allocated_shared),
        aggregated_capacity={
            d: {k: parse_quantity(v) for k, v in caps.items()}
            for d, caps in case.allocated_capacity.items()
        },
    )
    allocator = Allocator(
        state,
        {c["metadata"]["name"]: c for c in case.classes},
        case.slices,
        taint_rules=case.taint_rules,
    )
    target = case.node or node("node-1", "region-1")
    if case.error:
        with pytest.raises(AllocationError) as info:
            allocator.allocate(target, case.claims)
        assert case.error in str(info.value)
        return
    got = allocator.allocate(target, case.claims)
    if case.expect is None:
        assert got is None
        assert allocator.last_reason == case.reason
    else:
        assert got is not None, "expected an allocation"
        assert sorted(_canonical(a) for a in got) == sorted(_canonical(a) for a in case.expect)
    if case.allocate_one_calls:
        assert allocator.allocate_one_calls == case.allocate_one_calls
    # The allocator never modifies its inputs.
    assert (case.claims, case.classes, case.slices) == inputs


def params(cases: dict[str, Case]) -> Any:
    return pytest.mark.parametrize("case", list(cases.values()), ids=list(cases))
