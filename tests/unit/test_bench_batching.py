"""The batching A/B's cases: scheduler_perf's shapes, the batching key, the preset, and
the attempts read back from a scheduler's /metrics."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from bench.cases import CaseError, load_cases, parse_case, select
from bench.runner import batch_attempts


def _case(**workload: Any) -> dict[str, Any]:
    return {
        "name": "X",
        "description": "x",
        "podTemplates": {"p": {"hostPort": 80}},
        "measurePods": "p",
        "workloads": [{"name": "w", "nodes": 2, "measurePods": 2, **workload}],
    }


def test_the_batching_shapes_are_upstreams() -> None:
    cases = load_cases()
    port, saturation = cases["HostPortConflict"], cases["ResourceSaturation"]
    pod = port.measure.manifest("p", "s", "r", "measure")
    container = pod["spec"]["containers"][0]
    assert container["ports"] == [{"containerPort": 80, "hostPort": 80}]
    assert container["resources"]["requests"] == {"cpu": "100m", "memory": "100Mi"}
    requests = saturation.measure.manifest("p", "s", "r", "measure")["spec"]["containers"][0]
    assert requests["resources"]["requests"] == {"cpu": "3", "memory": "1Gi"}
    assert saturation.node.cpu == "4"
    for case in (port, saturation):
        assert [w.batching for w in case.workloads] == [True, False]
        assert {(w.nodes, w.measure_pods) for w in case.workloads} == {(5000, 5000)}


def test_only_the_batching_preset_runs_them() -> None:
    cases = load_cases()
    default = {case.name for case, _ in select(cases, [])}
    batching = {case.name for case, _ in select(cases, [], "batching")}
    assert batching == {"HostPortConflict", "ResourceSaturation"}
    assert not default & batching
    assert all(w.batching is None for case, ws in select(cases, []) for w in ws)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (_case(batching="yes"), "workloads[0].batching: expected true or false"),
        ({**_case(), "podTemplates": {"p": {"hostPort": 0}}}, "hostPort: expected a port"),
        ({**_case(), "podTemplates": {"p": {"hostPort": "80"}}}, "hostPort: expected a port"),
    ],
)
def test_bad_batching_keys_are_named(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(CaseError, match=re.escape(message)):
        parse_case(raw, Path("x.yaml"))


def test_batch_attempts_are_summed_by_result_over_profiles() -> None:
    text = "\n".join(
        [
            "# HELP scheduler_batch_attempts_total x",
            'scheduler_batch_attempts_total{profile="a",result="hint_used"} 99.0',
            'scheduler_batch_attempts_total{profile="b",result="hint_used"} 1',
            'scheduler_batch_attempts_total{profile="a",result="no_hint"} 1.0',
            'scheduler_batch_cache_flushed_total{profile="a",reason="expired"} 3.0',
        ]
    )
    assert batch_attempts(text) == {"hint_used": 100, "no_hint": 1}
