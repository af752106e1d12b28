"""The benchmark instrument end to end, at a tiny size, on the session's control plane.

This checks that `python -m bench` produces what it promises (both schedulers'
rows, repeated and alternating, bound pods, the CPU figures, results.json with
every run and the summary, a PNG) and never how fast anything is: speed on a
shared CI machine says nothing, and the real numbers come from `make bench`.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from bench import BenchConfig, run_bench
from podium.devcluster import ControlPlane

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


async def test_bench_runs_both_schedulers_twice_and_writes_results(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    # SchedulingBasic/1000Nodes_3000Pods at 1%: 10 nodes, 10 init pods, 30 measured pods,
    # run twice per scheduler.
    report, progress = io.StringIO(), io.StringIO()
    config = BenchConfig(
        cases=["SchedulingBasic/1000Nodes_3000Pods"],
        scale=0.01,
        repeat=2,
        out=tmp_path,
        timeout=120.0,
        progress=progress,
        report=report,
    )
    results = await run_bench(config, control_plane)

    assert [(run.scheduler, run.repeat) for run in results.runs] == [
        ("kube-scheduler", 1),
        ("podium", 1),
        ("kube-scheduler", 2),
        ("podium", 2),
    ]
    for run in results.runs:
        assert (run.nodes, run.init_pods, run.measure_pods) == (10, 10, 30)
        assert run.status == "ok", run.status
        assert run.bound == 30
        assert run.correctness.ok, run.correctness.summary()
        assert run.requests.get("POST pods/binding", 0) >= 30, run.requests
        # Binding 30 pods and posting their Events takes the scheduler, the apiserver
        # and etcd measurable CPU.
        assert run.cpu_ms_per_pod is not None and run.cpu_ms_per_pod > 0
        assert run.apiserver_cpu_ms_per_pod is not None and run.apiserver_cpu_ms_per_pod > 0
        assert run.etcd_cpu_ms_per_pod is not None and run.etcd_cpu_ms_per_pod >= 0

    written = json.loads((tmp_path / "results.json").read_text())
    assert len(written["runs"]) == 4
    for row in written["runs"]:
        assert row["ok"] is True
        assert row["throughput"] > 0
        assert row["latency_ms"]["p99"] is not None
    (summary,) = written["summary"]
    assert summary["runs"] == {"kube-scheduler": 2, "podium": 2}
    assert summary["pairs"] == 2
    cpu = summary["figures"]["podium"]["cpu_ms_per_pod"]
    assert cpu["n"] == 2 and cpu["min"] <= cpu["median"] <= cpu["max"]
    assert summary["ratios"]["cpu_ms_per_pod"]["n"] == 2

    table = report.getvalue()
    assert "2 runs each" in table and "min–max" in table and "podium/kube" in table
    assert "[4/4, " in progress.getvalue()

    assert (tmp_path / "bound_over_time.png").read_bytes().startswith(_PNG_SIGNATURE)

    # Everything the benchmark created is gone, so later tests see a clean cluster.
    api = await control_plane.api_client()
    try:
        left = await client.CoreV1Api(api).list_node(label_selector="podium.bench/managed=true")
    finally:
        await api.close()
    assert left.items == []


async def test_backlog_case_drains_pods_created_before_the_scheduler_started(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    # SchedulingBacklog/1000Nodes_10000Pods at 0.2%: 2 nodes, 20 pods waiting at the start.
    config = BenchConfig(
        cases=["SchedulingBacklog/1000Nodes_10000Pods"],
        scale=0.002,
        out=tmp_path,
        timeout=120.0,
        progress=io.StringIO(),
        report=io.StringIO(),
    )
    results = await run_bench(config, control_plane)

    assert [run.scheduler for run in results.runs] == ["kube-scheduler", "podium"]
    for run in results.runs:
        assert (run.nodes, run.init_pods, run.measure_pods) == (2, 0, 20)
        assert run.status == "ok", run.status
        assert run.bound == 20 and run.correctness.ok, run.correctness.summary()
        # Nothing is created while the clock runs: pods/s is the drain rate.
        assert run.create_rate is None
        assert run.throughput == run.throughput_overall and run.throughput is not None
        # The scheduler's CPU counts from its start, so it includes its start-up.
        assert run.cpu_seconds is not None and run.cpu_seconds_total is not None
        assert 0 < run.cpu_seconds <= run.cpu_seconds_total
