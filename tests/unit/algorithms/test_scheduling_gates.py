from __future__ import annotations

from typing import Any, cast

import pytest

from podium.algorithms.scheduling_gates import SchedulingGates
from podium.kube.objects import parse_pod
from tests.unit.builders import pod


@pytest.mark.parametrize(
    ("gates", "code", "reason"),
    [
        ([], "Success", ""),
        (["a"], "Unschedulable", "waiting for scheduling gates: [a]"),
        (
            ["a", "example.com/b"],
            "Unschedulable",
            "waiting for scheduling gates: [a example.com/b]",
        ),
    ],
)
def test_pre_enqueue_holds_a_pod_while_it_has_gates(
    gates: list[str], code: str, reason: str
) -> None:
    """Go's SchedulingGates.PreEnqueue: its message prints the names as %v of a slice."""
    body = pod("p", schedulingGates=[{"name": g} for g in gates])
    status = SchedulingGates().pre_enqueue(cast(Any, None), parse_pod(body))
    assert (status.code, status.reason) == (code, reason)
