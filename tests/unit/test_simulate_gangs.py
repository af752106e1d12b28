"""``podium simulate`` with PodGroups: gangs whole or waiting, against one-by-one placement."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from podium.kube.objects import parse_node, parse_pod
from podium.policy import default_profile
from podium.tools.simulation import compare_rows, simulate
from tests.unit.builders import node, pod


def _group(name: str, min_count: int) -> dict[str, Any]:
    return {
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "generation": 1},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }


@pytest.mark.parametrize(
    ("gang", "expected"),
    [
        (
            True,
            {
                "gangs": 3,
                "gangs_placed": 2,
                "gangs_waiting": 1,
                "gangs_partial": 0,
                "cpu_held_by_partial_gangs": 0,
                "pods_placed": 6,
            },
        ),
        (
            False,
            {
                "gangs": 3,
                "gangs_placed": 2,
                "gangs_waiting": 1,
                "gangs_partial": 1,
                "cpu_held_by_partial_gangs": 2000,
                "pods_placed": 8,
            },
        ),
    ],
    ids=["gang-scheduling", "one-by-one"],
)
def test_partial_gangs_hold_nothing_with_gang_scheduling(
    gang: bool, expected: dict[str, Any]
) -> None:
    """8 cpu of room, three gangs of three 1-cpu members: room for two gangs and a part."""
    profile = replace(default_profile("podium"), gang_scheduling=gang)
    nodes = [parse_node(node(f"n{i}", cpu="4")) for i in range(2)]
    pending = [
        parse_pod(pod(f"g{g}-{m}", cpu="1", schedulingGroup={"podGroupName": f"g{g}"}))
        for g in range(3)
        for m in range(3)
    ]
    result = simulate(
        profile, nodes, [], pending, pod_groups=[_group(f"g{g}", 3) for g in range(3)]
    )
    metrics = result.metrics()
    assert {k: metrics[k] for k in expected} == expected
    if gang:
        messages = {f.message for f in result.unschedulable}
        assert messages == {
            "pod group is unschedulable, minCount (3) cannot be satisfied: 2 scheduled, "
            "0 remaining, pod group preemption: No preemption victims found for incoming preemptor",
            "0/2 nodes are available: 2 Insufficient cpu.",
        }


def test_a_group_without_its_podgroup_waits() -> None:
    nodes = [parse_node(node("n0", cpu="4"))]
    pending = [parse_pod(pod("m0", cpu="1", schedulingGroup={"podGroupName": "nowhere"}))]
    result = simulate(default_profile("podium"), nodes, [], pending)
    (failure,) = result.unschedulable
    assert (
        failure.message == 'waiting for pods\'s pod group "nowhere" to appear in scheduling queue'
    )
    assert result.placements == []


def test_compare_shows_the_gang_rows() -> None:
    nodes = [parse_node(node(f"n{i}", cpu="4")) for i in range(2)]
    pending = [
        parse_pod(pod(f"g{g}-{m}", cpu="1", schedulingGroup={"podGroupName": f"g{g}"}))
        for g in range(3)
        for m in range(3)
    ]
    groups = [_group(f"g{g}", 3) for g in range(3)]
    gang, one_by_one = (
        simulate(
            replace(default_profile("podium"), gang_scheduling=on),
            nodes,
            [],
            pending,
            pod_groups=groups,
        )
        for on in (True, False)
    )
    rows = {label: (a, b) for label, a, b in compare_rows(gang, one_by_one)}
    assert rows["gangs partly placed"] == (0, 1)
    assert rows["cpu (m) held idle by partial gangs"] == (0, 2000)
