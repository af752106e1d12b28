"""The benchmark instrument end to end, at a tiny size, on the session's control plane.

This checks that `python -m bench` produces what it promises (both schedulers'
rows, bound pods, results.json, a PNG) and never how fast anything is: speed on a
shared CI machine says nothing, and the real numbers come from `make bench`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from bench import BenchConfig, run_bench
from podium.devcluster import ControlPlane

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


async def test_bench_runs_both_schedulers_and_writes_results(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    # SchedulingBasic/1000Nodes_3000Pods at 1%: 10 nodes, 10 init pods, 30 measured pods.
    config = BenchConfig(
        cases=["SchedulingBasic/1000Nodes_3000Pods"],
        scale=0.01,
        out=tmp_path,
        timeout=120.0,
        progress=None,
        report=None,
    )
    results = await run_bench(config, control_plane)

    assert [run.scheduler for run in results.runs] == ["kube-scheduler", "podium"]
    for run in results.runs:
        assert (run.nodes, run.init_pods, run.measure_pods) == (10, 10, 30)
        assert run.status == "ok", run.status
        assert run.bound == 30
        assert run.correctness.ok, run.correctness.summary()
        assert run.requests.get("POST pods/binding", 0) >= 30, run.requests

    written = json.loads((tmp_path / "results.json").read_text())
    rows = {row["scheduler"]: row for row in written["runs"]}
    assert set(rows) == {"kube-scheduler", "podium"}
    for row in rows.values():
        assert row["ok"] is True
        assert row["throughput"] > 0
        assert row["latency_ms"]["p99"] is not None

    assert (tmp_path / "bound_over_time.png").read_bytes().startswith(_PNG_SIGNATURE)

    # Everything the benchmark created is gone, so later tests see a clean cluster.
    api = await control_plane.api_client()
    try:
        left = await client.CoreV1Api(api).list_node(label_selector="podium.bench/managed=true")
    finally:
        await api.close()
    assert left.items == []
