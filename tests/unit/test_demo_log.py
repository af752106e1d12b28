"""The demo prints one line per record, at most 100 columns."""

from __future__ import annotations

from typing import Any

import pytest

from podium.runtime.logs import DEMO_WIDTH, demo_line

STAMP = "2026-12-04T10:45:43.783960Z"
LONG = (
    "0/300 nodes are available: 120 Insufficient cpu, 100 node(s) had untolerated taint "
    "{dedicated: gpu}, 80 node(s) didn't match Pod's node affinity/selector. preemption: "
    "0/300 nodes are available: 300 Preemption is not helpful for scheduling."
)


def decision(**fields: Any) -> dict[str, Any]:
    return {
        "event": "decision",
        "timestamp": STAMP,
        "level": "info",
        "logger": "podium.scheduler",
        "schema": "podium.dev/decision-record/v1",
        "pod": "web-0",
        "namespace": "shop",
        "nodes": {"total": 3, "evaluated": 3, "feasible": 2},
        "rejections": {"by_reason": {"Insufficient cpu": 1}, "by_plugin": {}},
        "duration_ms": 24.26,
        **fields,
    }


@pytest.mark.parametrize(
    ("record", "line"),
    [
        (
            decision(result="scheduled", node="node-0", message=""),
            "10:45:43  shop/web-0 -> node-0  (2/3 nodes fit, 24.3 ms)",
        ),
        (
            decision(result="unschedulable", node=None, message="0/3 nodes: 3 Insufficient cpu."),
            "10:45:43  shop/web-0 unschedulable: 0/3 nodes: 3 Insufficient cpu.",
        ),
        (
            decision(result="unschedulable", node=None, message=LONG),
            # cut after the last whole sentence that fits
            "10:45:43  shop/web-0 unschedulable: 0/300 nodes are available: 120 Insufficient "
            "cpu, 100 node(s) ...",
        ),
        (
            decision(
                result="unschedulable",
                node=None,
                message="0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are "
                "available: 3 Preemption is not helpful for scheduling.",
            ),
            "10:45:43  shop/web-0 unschedulable: 0/3 nodes are available: 3 Insufficient cpu. ...",
        ),
        (
            decision(result="dry_run", node="node-2", message=""),
            "10:45:43  shop/web-0 would go to node-2 (dry run)",
        ),
        (
            {"event": "cache_primed", "timestamp": STAMP, "level": "info", "nodes": 3},
            "10:45:43  cache_primed nodes=3",
        ),
        (
            {"event": "lease_renew_failed", "timestamp": STAMP, "level": "warning", "error": "x y"},
            "10:45:43  WARNING lease_renew_failed error='x y'",
        ),
    ],
    ids=["scheduled", "unschedulable", "clipped", "sentence", "dry-run", "other", "warning"],
)
def test_demo_lines(record: dict[str, Any], line: str) -> None:
    rendered = demo_line(None, "info", dict(record))
    assert rendered == line
    assert len(rendered) <= DEMO_WIDTH


def test_demo_finds_the_chart_crd_in_a_checkout() -> None:
    from podium.devcluster.demo import CRD

    assert CRD.is_file(), CRD
