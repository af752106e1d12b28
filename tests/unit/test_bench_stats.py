"""The benchmark's repeat statistics, presets and tables, without a cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import report
from bench.cases import CaseError, load_cases, parse_case, select
from bench.results import BenchResults
from bench.run_result import RunResult
from bench.schedulers import KUBE, PODIUM
from bench.stats import Spread, summarise


def _run(
    scheduler: str, repeat: int, throughput: float | None, cpu: float | None, status: str = "ok"
) -> RunResult:
    return RunResult(
        case="SchedulingBasic",
        workload="tiny",
        scheduler=scheduler,
        scheduler_name=scheduler,
        nodes=10,
        init_pods=10,
        measure_pods=30,
        repeat=repeat,
        status=status,
        bound=30,
        throughput=throughput,
        cpu_ms_per_pod=cpu,
    )


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], None),
        ([None, None], None),
        ([3.0], Spread(3.0, 3.0, 3.0, 1)),
        ([4.0, 1.0], Spread(2.5, 1.0, 4.0, 2)),
        ([5.0, None, 1.0, 2.0], Spread(2.0, 1.0, 5.0, 3)),
    ],
)
def test_spread_is_median_and_range_of_present_values(
    values: list[float | None], expected: Spread | None
) -> None:
    assert Spread.of(values) == expected


def test_ratios_pair_runs_of_the_same_repeat_and_skip_unfinished_ones() -> None:
    runs = [
        _run(KUBE, 1, 100.0, 2.0),
        _run(PODIUM, 1, 50.0, 1.0),
        _run(KUBE, 2, 200.0, 4.0),
        _run(PODIUM, 2, 300.0, 4.0),
        _run(KUBE, 3, 100.0, 2.0),
        _run(PODIUM, 3, 10.0, 9.0, status="timeout"),
    ]
    summary = summarise(runs)
    assert summary.runs == {KUBE: 3, PODIUM: 2}
    assert summary.figures[KUBE]["throughput"] == Spread(100.0, 100.0, 200.0, 3)
    assert summary.figures[PODIUM]["cpu_ms_per_pod"] == Spread(2.5, 1.0, 4.0, 2)
    assert summary.pairs == 2
    # Pair 1: 50/100 and 1/2; pair 2: 300/200 and 4/4. Repeat 3 has no finished Podium run.
    assert summary.ratios["throughput"] == Spread(1.0, 0.5, 1.5, 2)
    assert summary.ratios["cpu_ms_per_pod"] == Spread(0.75, 0.5, 1.0, 2)
    assert "create_rate" not in summary.ratios


@pytest.mark.parametrize(
    ("runs", "present", "absent"),
    [
        (
            [_run(KUBE, 1, 100.0, 2.0), _run(PODIUM, 1, 50.0, 1.0)],
            ["podium/kube", "0.50x", "CPU ms/pod", "apiserver ms/pod", "etcd ms/pod"],
            ["median", "min–max"],
        ),
        (
            [
                _run(KUBE, 1, 100.0, 2.0),
                _run(PODIUM, 1, 50.0, 1.0),
                _run(KUBE, 2, 200.0, 4.0),
                _run(PODIUM, 2, 300.0, 4.0),
            ],
            ["2 runs each", "2 pairs", "median", "100.0–200.0", "0.50–1.50x", "0.50–1.00x"],
            [],
        ),
    ],
)
def test_table_shows_ratio_or_median_and_range(
    runs: list[RunResult], present: list[str], absent: list[str]
) -> None:
    text = report.table(runs)
    for needle in present:
        assert needle in text
    for needle in absent:
        assert needle not in text


def test_results_json_keeps_every_run_and_the_summary() -> None:
    runs = [_run(KUBE, 1, 100.0, 2.0), _run(PODIUM, 1, 50.0, 1.0), _run(KUBE, 2, 300.0, 2.0)]
    body = BenchResults(runs=runs).to_json()
    assert [(r["scheduler"], r["repeat"]) for r in body["runs"]] == [
        (KUBE, 1),
        (PODIUM, 1),
        (KUBE, 2),
    ]
    (summary,) = body["summary"]
    assert summary["figures"][KUBE]["throughput"] == {
        "median": 200.0,
        "min": 100.0,
        "max": 300.0,
        "n": 2,
    }
    assert summary["ratios"]["throughput"]["median"] == 0.5


_SWEEP = ["500Nodes", "1000Nodes", "2000Nodes", "5000Nodes"]


@pytest.mark.parametrize(
    ("names", "preset", "expected"),
    [
        ([], "default", ("SchedulingBasicSweep", _SWEEP)),
        ([], "upstream", ("SchedulingBasicSweep", [*_SWEEP, "15000Nodes"])),
        ([], "default", ("SchedulingBasic", ["1000Nodes_3000Pods", "5000Nodes_10000Pods"])),
        (["SchedulingBasic"], "upstream", ("SchedulingBasic", ["5000Nodes_10000Pods"])),
        (["SchedulingBasicSweep/15000Nodes"], "default", ("SchedulingBasicSweep", ["15000Nodes"])),
    ],
)
def test_presets_choose_the_workloads(
    names: list[str], preset: str, expected: tuple[str, list[str]]
) -> None:
    chosen = {
        case.name: [w.name for w in workloads]
        for case, workloads in select(load_cases(), names, preset)
    }
    name, workloads = expected
    assert chosen[name] == workloads


def test_every_case_has_one_upstream_workload_of_5000_nodes_or_more() -> None:
    for case, workloads in select(load_cases(), [], "upstream"):
        assert workloads, case.name
        assert all(w.nodes >= 5000 for w in workloads if not case.sweep), case.name


@pytest.mark.parametrize(
    ("presets", "message"),
    [
        ([], "non-empty list"),
        (["nightly"], "non-empty list"),
        (["upstream", "upstream"], "distinct"),
        ("upstream", "non-empty list"),
    ],
)
def test_bad_presets_are_rejected(presets: object, message: str) -> None:
    raw = {
        "name": "X",
        "description": "x",
        "workloads": [{"name": "w", "nodes": 1, "presets": presets}],
    }
    with pytest.raises(CaseError, match=message):
        parse_case(raw, Path("x.yaml"))


def test_a_case_without_a_workload_in_the_preset_is_an_error_when_named() -> None:
    case = parse_case(
        {"name": "X", "description": "x", "workloads": [{"name": "w", "nodes": 1}]}, Path("x.yaml")
    )
    with pytest.raises(CaseError, match="no workload in the upstream preset"):
        select({"X": case}, ["X"], "upstream")
    assert select({"X": case}, [], "upstream") == []


@pytest.mark.parametrize(
    ("extra", "workload", "message"),
    [
        ({"backlog": "yes"}, {}, "expected true or false"),
        ({"backlog": True}, {"initPods": 5}, "has no initPods"),
        (
            {"backlog": True, "churn": {"mode": "create", "intervalSeconds": 1}},
            {},
            "has no churn",
        ),
    ],
)
def test_bad_backlog_cases_are_rejected(
    extra: dict[str, object], workload: dict[str, object], message: str
) -> None:
    raw = {
        "name": "X",
        "description": "x",
        "workloads": [{"name": "w", "nodes": 1, "measurePods": 10, **workload}],
        **extra,
    }
    with pytest.raises(CaseError, match=message):
        parse_case(raw, Path("x.yaml"))


def test_the_backlog_case_starts_its_scheduler_with_every_pod_waiting() -> None:
    case = load_cases()["SchedulingBacklog"]
    assert case.backlog and case.churn is None
    assert [(w.name, w.init_pods) for w in case.workloads] == [
        ("1000Nodes_10000Pods", 0),
        ("5000Nodes_30000Pods", 0),
    ]
