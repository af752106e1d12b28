"""``podium explain`` for a pod of a PodGroup, on fetched objects (no API server)."""

from __future__ import annotations

from typing import Any

import pytest

from podium.framework.podgroup import MIN_COUNT_WAIT, NO_VICTIMS
from podium.tools.explain.cluster import ClusterState, explain_state
from podium.tools.explain.output import format_table
from tests.unit.builders import node, pod


def _member(name: str, cpu: str, **extra: Any) -> dict[str, Any]:
    return pod(name, cpu=cpu, schedulingGroup={"podGroupName": "g"}, **extra)


def _group(min_count: int) -> dict[str, Any]:
    return {
        "metadata": {"name": "g", "namespace": "default", "generation": 1},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }


NODES = [node("n0", cpu="4"), node("n1", cpu="4")]


@pytest.mark.parametrize(
    ("group", "cpus", "expected"),
    [
        (
            _group(2),
            ["1", "1"],
            {"fits": True, "waiting": None, "breaks": None, "suggestions": []},
        ),
        (
            _group(3),
            ["3", "3", "3"],
            {
                "fits": False,
                "message": "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, "
                + NO_VICTIMS,
                "breaks": "m2: 0/2 nodes are available: 2 Insufficient cpu.",
                "suggestions": [
                    "2 of 3 members fit now: a minCount of 2 or less would place the group"
                ],
            },
        ),
        (
            _group(3),
            ["1", "1"],
            {
                "fits": False,
                "waiting": MIN_COUNT_WAIT,
                "suggestions": ["1 more member(s), or a minCount of 2"],
            },
        ),
        (
            None,
            ["1"],
            {
                "policy": "missing",
                "waiting": 'waiting for pods\'s pod group "g" to appear in scheduling queue',
                "suggestions": ["create the PodGroup g in this namespace"],
            },
        ),
    ],
    ids=["fits", "two-of-three", "fewer-than-min-count", "missing-group"],
)
def test_explain_a_group_member(
    group: dict[str, Any] | None, cpus: list[str], expected: dict[str, Any]
) -> None:
    members = [_member(f"m{i}", cpu) for i, cpu in enumerate(cpus)]
    state = ClusterState(pod=members[0], nodes=NODES, pods=members, policies=None, pod_group=group)
    exp = explain_state(state)
    assert exp.group is not None
    got = exp.to_dict()["group"]
    assert {k: got[k] for k in expected} == expected
    if got["fits"]:
        assert sorted(got["members"]) == ["m0", "m1"]
        assert set(got["members"].values()) <= {"n0", "n1"}
    assert "GROUP: g" in format_table(exp)


@pytest.mark.parametrize(
    ("mode", "victims"),
    [("all", ["default/v0", "default/v1"]), ("single", ["default/v1"])],
)
def test_explain_names_the_victims_of_group_preemption(mode: str, victims: list[str]) -> None:
    """A group that fits only by preempting: explain says whom the live cycle would evict."""
    victim_group = {
        "metadata": {"name": "low", "namespace": "default"},
        "spec": {
            "priority": 1,
            "schedulingPolicy": {"gang": {"minCount": 2}},
            "disruptionMode": {mode: {}},
        },
    }
    group = _group(1)
    group["spec"]["priority"] = 100
    bound = [
        pod(f"v{i}", cpu="2", node_name="n0", priority=1, schedulingGroup={"podGroupName": "low"})
        for i in range(2)
    ]
    for i, body in enumerate(bound):
        body["status"] = {"phase": "Running", "startTime": f"2026-01-01T00:0{i}:00Z"}
    member = _member("m0", "2", priority=100)
    state = ClusterState(
        pod=member,
        nodes=[node("n0", cpu="4")],
        pods=[member, *bound],
        policies=None,
        pod_group=group,
        pod_groups=[group, victim_group],
    )
    exp = explain_state(state)
    got = exp.to_dict()["group"]
    assert got["victims"] == victims
    assert got["nominated"] == {"m0": "n0"}
    assert got["message"] == (
        "minCount (1) cannot be satisfied: 0 scheduled, 0 remaining, pod group preemption: "
        f"found a placement for podgroup, preempting {len(victims)} victims"
    )
    assert "preemption would evict: " + ", ".join(victims) in format_table(exp)
