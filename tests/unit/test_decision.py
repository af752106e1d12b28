"""Decision records built from real cycles, and their JSON Schema."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import structlog
from jsonschema import Draft202012Validator

from podium.framework.cycle import Scheduler
from podium.framework.decision import EVENT, build_record
from podium.kube.objects import parse_node, parse_pod
from podium.policy import build_profile
from podium.state.snapshot import build_snapshot
from tests.unit.builders import node, pod

SCHEMA = json.loads(
    (Path(__file__).parents[2] / "docs" / "decision-record.schema.json").read_text()
)
ZONE = "topology.kubernetes.io/zone"
TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def validate(line: str) -> dict[str, Any]:
    """A rendered log line checked against docs/decision-record.schema.json."""
    record: dict[str, Any] = json.loads(line)
    errors = [e.message for e in Draft202012Validator(SCHEMA).iter_errors(record)]
    assert errors == [], errors
    return record


def render(record: dict[str, Any]) -> str:
    """The line structlog's JSON renderer writes, as the live scheduler logs it."""
    line = structlog.processors.JSONRenderer()(None, "info", {"event": EVENT, **record})
    assert isinstance(line, str)
    return line


def decide(
    nodes: list[dict[str, Any]], body: dict[str, Any], top: int, spec: dict[str, Any] | None = None
) -> dict[str, Any]:
    profile = build_profile(spec or {}, policy="live", generation=4)
    _, snapshot = build_snapshot([parse_node(n) for n in nodes], [])
    target = parse_pod(body)
    placement = Scheduler(random.Random(0)).schedule(profile, snapshot, target, record=top > 0)
    result = "scheduled" if placement.node else "unschedulable"
    return build_record(
        profile, snapshot, target, 1, placement, top=top, result=result, duration_ms=0.25
    )


BIG = node("big", cpu="8", labels={ZONE: "z1"})
SMALL = node("small", cpu="4", labels={ZONE: "z2"})
TINY = node("tiny", cpu="1", labels={ZONE: "z3"})
TAINTED = node("tainted", taints=[TAINT])
CORDONED = node("cordoned", unschedulable=True)
# LeastAllocated of a 2-cpu pod (memory counts as the 200Mi default): big cpu 75, memory 99
# -> 87; small cpu 50, memory 99 -> 74 (rounded down); weight 2 doubles the totals.
LEAST = {"scores": [{"name": "NodeResourcesFit", "weight": 2}]}

# name, nodes, pod, topNodes, policy spec, expected subset of the record
CASES: list[
    tuple[str, list[dict[str, Any]], dict[str, Any], int, dict[str, Any], dict[str, Any]]
] = [
    (
        "two-fit-one-too-small",
        [BIG, SMALL, TINY],
        pod("p", cpu="2"),
        2,
        LEAST,
        {
            "node": "big",
            "zone": "z1",
            "result": "scheduled",
            "nodes": {"total": 3, "evaluated": 3, "feasible": 2},
            "rejections": {
                "by_reason": {"Insufficient cpu": 1},
                "by_plugin": {"NodeResourcesFit": 1},
            },
            "weights": {"NodeResourcesFit": 2},
            "top_nodes": [
                {"node": "big", "total": 174, "scores": {"NodeResourcesFit": 87}},
                {"node": "small", "total": 148, "scores": {"NodeResourcesFit": 74}},
            ],
        },
    ),
    (
        "top-nodes-zero-keeps-no-scores",
        [BIG, SMALL],
        pod("p", cpu="2"),
        0,
        LEAST,
        {"node": "big", "top_nodes": [], "rejections": {"by_reason": {}, "by_plugin": {}}},
    ),
    (
        "only-fit-is-still-scored",
        [BIG, TINY],
        pod("p", cpu="2"),
        3,
        LEAST,
        {
            "node": "big",
            "nodes": {"total": 2, "evaluated": 2, "feasible": 1},
            "top_nodes": [{"node": "big", "total": 174, "scores": {"NodeResourcesFit": 87}}],
        },
    ),
    (
        "nowhere",
        [TAINTED, CORDONED],
        pod("p"),
        3,
        {},
        {
            "node": None,
            "zone": None,
            "result": "unschedulable",
            "nodes": {"total": 2, "evaluated": 2, "feasible": 0},
            "rejections": {
                "by_reason": {
                    "node(s) had untolerated taint(s)": 1,
                    "node(s) were unschedulable": 1,
                },
                "by_plugin": {"NodeUnschedulable": 1, "TaintToleration": 1},
            },
            "top_nodes": [],
        },
    ),
]


@pytest.mark.parametrize(
    ("nodes", "body", "top", "spec", "expected"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_record(
    nodes: list[dict[str, Any]],
    body: dict[str, Any],
    top: int,
    spec: dict[str, Any],
    expected: dict[str, Any],
) -> None:
    record = validate(render(decide(nodes, body, top, spec)))
    assert {key: record[key] for key in expected} == expected
    assert record["policy"] == "live"
    assert record["generation"] == 4
    assert record["shadow"] is False
    assert record["attempt"] == 1


def test_top_nodes_off_keeps_no_per_plugin_scores() -> None:
    """topNodes 0 costs the cycle nothing: the algorithm keeps no per-plugin arrays."""
    profile = build_profile(LEAST)
    _, snapshot = build_snapshot([parse_node(n) for n in (BIG, SMALL)], [])
    placement = Scheduler().schedule(profile, snapshot, parse_pod(pod("p", cpu="1")))
    assert placement.plugin_scores == {}


@pytest.mark.parametrize(
    ("change", "error"),
    [
        pytest.param({"result": "bound"}, "'bound' is not one of", id="unknown-result"),
        pytest.param({"schema": "podium.dev/decision-record/v0"}, "was expected", id="old-schema"),
        pytest.param({"extra": 1}, "Additional properties", id="unknown-key"),
    ],
)
def test_schema_rejects(change: dict[str, Any], error: str) -> None:
    record = {"event": EVENT, **decide([BIG], pod("p"), 1), **change}
    errors = [e.message for e in Draft202012Validator(SCHEMA).iter_errors(record)]
    assert any(error in e for e in errors), errors


def test_record_without_a_policy_or_placement() -> None:
    """A pod waiting for a SchedulerPolicy still gets its one record per attempt."""
    _, snapshot = build_snapshot([parse_node(BIG)], [])
    target = parse_pod(pod("p", scheduler_name="nobody"))
    record = validate(
        render(
            build_record(
                None, snapshot, target, 2, None, top=3, result="unschedulable", message="waits"
            )
        )
    )
    assert {k: record[k] for k in ("policy", "scheduler_name", "attempt", "nodes", "node")} == {
        "policy": None,
        "scheduler_name": "nobody",
        "attempt": 2,
        "nodes": {"total": 1, "evaluated": 0, "feasible": 0},
        "node": None,
    }
