"""The chart's dashboard queries and alert rules on a real Prometheus scraping Podium.

Debian's prometheus (installed by `make testtools`) runs here as our own process on a
free port with a temporary TSDB, scraping `podium run` every second and evaluating
the chart's PrometheusRule, rendered by helm with short ``for:`` durations, every
second. The workload: pods that fit, pods that fit nowhere, and one pod whose
Binding an admission policy refuses with 403 (so bind retries and auth failures
happen for real). Every dashboard query must return series, every alert must fire:
three while Podium runs, and after Podium is stopped PodiumNoLeader fires while
PodiumPodsPendingTooLong stays firing. The same panels are then drawn with
matplotlib from Prometheus' data (set PODIUM_DASHBOARD_PNG to keep the picture;
docs/operations-dashboard.png was made so).
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.devcluster import Binaries
from podium.devcluster.objects import create_pod, wait_for
from podium.kube.manifests import make_node, make_pod
from tests.e2e.faults import deny_admission
from tests.prometheus.chart import (
    KUBE_SCHEDULER_ONLY,
    MISSING_TOOL,
    PanelQuery,
    alerts,
    concrete,
    dashboard,
    exported_names,
    metric_names,
    panel_queries,
    render,
    rule_file,
    tool,
)

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

JOB = "podium-metrics"  # the release "podium": job = the metrics Service's name
RATE_INTERVAL = "10s"  # Grafana's $__rate_interval for a 1 s scrape, with room to spare
SHORT = (
    "metrics.prometheusRule.enabled=true",
    "metrics.grafanaDashboard.enabled=true",
    "metrics.prometheusRule.pendingPodsFor=5s",
    "metrics.prometheusRule.noLeaderFor=3s",
    "metrics.prometheusRule.bindErrorsFor=1s",
    "metrics.prometheusRule.authFailuresFor=1s",
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Prometheus:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    async def _get(self, path: str, **params: str) -> Any:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{self.url}{path}", params=params) as resp,
        ):
            body = await resp.json()
        assert body["status"] == "success", (path, params, body)
        return body["data"]

    async def query(self, expr: str) -> list[dict[str, Any]]:
        data = await self._get("/api/v1/query", query=expr)
        result: list[dict[str, Any]] = data["result"]
        return result

    async def query_range(
        self, expr: str, start: float, end: float, step: str
    ) -> list[dict[str, Any]]:
        data = await self._get(
            "/api/v1/query_range", query=expr, start=str(start), end=str(end), step=step
        )
        result: list[dict[str, Any]] = data["result"]
        return result

    async def firing(self) -> set[str]:
        data = await self._get("/api/v1/alerts")
        return {a["labels"]["alertname"] for a in data["alerts"] if a["state"] == "firing"}


@pytest_asyncio.fixture(loop_scope="session")
async def prometheus(
    tmp_path: Path,
) -> AsyncIterator[Callable[[dict[str, Any]], Awaitable[Prometheus]]]:
    """`await prometheus(config)` runs our own Prometheus; it is stopped after the test."""
    binary = tool("prometheus")
    if binary is None:
        pytest.skip(MISSING_TOOL.format(name="prometheus"))
    started: list[Prometheus] = []

    async def start(config: dict[str, Any]) -> Prometheus:
        config_file = tmp_path / "prometheus.yml"
        config_file.write_text(yaml.safe_dump(config))
        port = _free_port()
        log = tmp_path / "prometheus.log"
        with log.open("wb") as out:
            process = subprocess.Popen(  # noqa: ASYNC220
                [
                    str(binary),
                    f"--config.file={config_file}",
                    f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=tmp_path,
            )
        prom = Prometheus(f"http://127.0.0.1:{port}", process, log)
        started.append(prom)

        async def ready() -> bool:
            assert process.poll() is None, log.read_text(errors="replace")[-3000:]
            try:
                async with (
                    aiohttp.ClientSession() as session,
                    session.get(f"{prom.url}/-/ready") as resp,
                ):
                    return resp.status == 200
            except aiohttp.ClientError:
                return False

        await wait_for(ready, timeout=60, interval=0.2, message="prometheus ready")
        return prom

    yield start
    for prom in started:
        prom.process.terminate()
        prom.process.wait(timeout=30)


async def _series_everywhere(
    prom: Prometheus, queries: dict[str, str]
) -> dict[str, list[dict[str, Any]]] | None:
    """Every query's result, or None while one of them is still empty."""
    results = {name: await prom.query(expr) for name, expr in queries.items()}
    return results if all(results.values()) else None


def _plot(
    panels: dict[str, list[tuple[str, list[tuple[float, float]]]]], start: float, path: Path
) -> None:
    """The dashboard's panels, two per row as in Grafana, from query_range data."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = math.ceil(len(panels) / 2)
    fig, axes = plt.subplots(rows, 2, figsize=(14, 3.2 * rows), squeeze=False)
    for ax, (title, lines) in zip(axes.flat, panels.items(), strict=False):
        for label, points in lines:
            ax.plot([t - start for t, _ in points], [v for _, v in points], label=label)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("seconds", fontsize=8)
        ax.tick_params(labelsize=8)
        if lines:
            ax.legend(fontsize=7, loc="upper left")
        else:
            ax.text(0.5, 0.5, "not exported yet", ha="center", va="center", transform=ax.transAxes)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.suptitle("Podium scheduler (charts/podium/dashboards/podium.json)")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _legend(query: PanelQuery, labels: dict[str, str]) -> str:
    text = query.legend
    for key, value in labels.items():
        text = text.replace("{{" + key + "}}", value)
    return text or query.panel


async def test_dashboard_queries_and_alerts_on_real_prometheus(
    api_client: ApiClient,
    namespace: str,
    node_factory: Any,
    podium: Any,
    prometheus: Callable[[dict[str, Any]], Awaitable[Prometheus]],
    binaries: Binaries,
    tmp_path: Path,
) -> None:
    docs = render(binaries.helm, tmp_path / "helm", namespace, *SHORT)
    rules = rule_file(docs)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    exported = exported_names()
    required: dict[str, str] = {}
    awaiting: dict[str, str] = {}
    queries = panel_queries(dashboard(docs))
    for query in queries:
        expr = concrete(query.expr, namespace, JOB, RATE_INTERVAL)
        names = metric_names(expr)
        if names <= exported:
            required[f"{query.panel}: {query.legend}"] = expr
        else:
            assert names - exported <= KUBE_SCHEDULER_ONLY, names
            awaiting[f"{query.panel}: {query.legend}"] = expr

    core = client.CoreV1Api(api_client)
    admission = client.AdmissionregistrationV1Api(api_client)
    policy, binding = deny_admission(
        f"{namespace}-deny-bind",
        resource="pods/binding",
        operation="CREATE",
        validation="false",
        message="bindings of denied-* pods are refused",
        match_condition="object.metadata.name.startsWith('denied')",
        namespace=namespace,
    )
    policy["spec"]["validations"][0]["reason"] = "Forbidden"  # answered 403
    await admission.create_validating_admission_policy(policy)
    await admission.create_validating_admission_policy_binding(binding)
    try:

        async def refused() -> bool:
            body = {"metadata": {"name": "denied-probe"}, "target": {"name": "nowhere"}}
            try:
                await core.create_namespaced_pod_binding(
                    "denied-probe", namespace, body, dry_run="All"
                )
            except client.ApiException as exc:
                return exc.status == 403
            return False

        await wait_for(refused, timeout=30, interval=0.5, message="admission policy active")
        await node_factory([make_node(f"{namespace}-n{i}", cpu="4") for i in range(2)])
        proc = await podium("--leader-elect", "--lease-name", f"{namespace}-podium")
        prom = await prometheus(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(tmp_path / "rules.yaml")],
                "scrape_configs": [
                    {
                        "job_name": JOB,
                        "static_configs": [
                            {
                                "targets": [f"127.0.0.1:{proc.metrics_port}"],
                                "labels": {"namespace": namespace},
                            }
                        ],
                    }
                ],
            }
        )
        start = time.time()
        sel = f'namespace="{namespace}", job="{JOB}"'
        await wait_for(
            lambda: prom.query(f"podium_leader{{{sel}}} == 1"),
            timeout=30,
            message="Podium scraped as the leader",
        )
        # Waves of pods that fit, each scraped before the next, so the rates move;
        # pods that fit nowhere and the pod whose Binding is refused after the first.
        for wave in range(3):
            for i in range(2):
                await create_pod(api_client, namespace, make_pod(f"ok-{wave}-{i}", cpu="500m"))
            if wave == 0:
                for i in range(2):
                    await create_pod(api_client, namespace, make_pod(f"big-{i}", cpu="1000"))
                await create_pod(api_client, namespace, make_pod("denied-0", cpu="100m"))
            scheduled = (
                f'sum(scheduler_schedule_attempts_total{{{sel}, result="scheduled"}})'
                f" >= {2 * (wave + 1)}"
            )
            await wait_for(
                lambda q=scheduled: prom.query(q), timeout=60, message=f"wave {wave} scraped"
            )

        async def all_ok_bound() -> bool:
            pods = await core.list_namespaced_pod(namespace)
            ok = [p for p in pods.items if p.metadata.name.startswith("ok-")]
            return len(ok) == 6 and all(p.spec.node_name for p in ok)

        assert await all_ok_bound()

        # Every panel query returns series; those on not-yet-exported names evaluate.
        results = await wait_for(
            lambda: _series_everywhere(prom, required), timeout=60, message="every panel query"
        )
        pending = {r["metric"].get("queue"): float(r["value"][1]) for r in results[
            next(k for k in required if k.startswith("Pending pods"))
        ]}  # fmt: skip
        assert pending.get("unschedulable", 0) + pending.get("backoff", 0) >= 1, pending
        for expr in awaiting.values():
            await prom.query(expr)  # answered "success" (asserted in _get)

        # Every alert's metrics are scraped, and three alerts fire while Podium runs.
        for name, expr in alerts(rules).items():
            for metric in metric_names(expr):
                assert await prom.query(f'{metric}{{namespace="{namespace}", job="{JOB}"}}'), (
                    name,
                    metric,
                )
        running_alerts = {"PodiumPodsPendingTooLong", "PodiumBindErrors", "PodiumAuthFailures"}

        async def fired_while_running() -> set[str] | None:
            firing = await prom.firing()
            return firing if running_alerts <= firing else None

        firing = await wait_for(
            fired_while_running, timeout=60, interval=0.5, message=f"{running_alerts} firing"
        )
        assert "PodiumNoLeader" not in firing

        # Podium stops with pods pending: its series go stale, the Lease has no holder.
        proc.kill(signal.SIGTERM)
        assert proc.process.returncode == 0
        down = f'up{{job="{JOB}"}} == 0'
        await wait_for(lambda: prom.query(down), timeout=30, message="the target down")
        await wait_for(
            lambda: _contains(prom.firing(), "PodiumNoLeader"),
            timeout=60,
            interval=0.5,
            message="PodiumNoLeader firing",
        )
        # Still firing for 5 evaluations in a row with the target down.
        stale_firing = (
            f'count_over_time((ALERTS{{alertname="PodiumPodsPendingTooLong", '
            f'alertstate="firing"}} and on() ({down}))[5s:1s]) >= 5'
        )
        await wait_for(
            lambda: prom.query(stale_firing),
            timeout=60,
            message="PodiumPodsPendingTooLong firing with Podium stopped",
        )
        end = time.time()

        # The same panels, drawn from Prometheus' data.
        panels: dict[str, list[tuple[str, list[tuple[float, float]]]]] = {}
        for query in queries:
            expr = concrete(query.expr, namespace, JOB, RATE_INTERVAL)
            series = await prom.query_range(expr, start, end, "1s")
            lines = panels.setdefault(query.panel, [])
            for s in series:
                points = [(float(t), float(v)) for t, v in s["values"]]
                lines.append((_legend(query, s["metric"]), points))
        # Every query that must return series has a real (not NaN) value at some time.
        for key, expr in required.items():
            series = await prom.query_range(expr, start, end, "1s")
            assert any(math.isfinite(float(v)) for s in series for _, v in s["values"]), key
        png = tmp_path / "dashboard.png"
        _plot(panels, start, png)
        assert png.stat().st_size > 10_000
        keep = os.environ.get("PODIUM_DASHBOARD_PNG")
        if keep:
            shutil.copy(png, keep)
    finally:
        await admission.delete_validating_admission_policy_binding(binding["metadata"]["name"])
        await admission.delete_validating_admission_policy(policy["metadata"]["name"])


async def _contains(names: Awaitable[set[str]], name: str) -> bool:
    return name in await names
