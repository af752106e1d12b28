"""The chart's monitoring files as the tests read them: one source, the chart.

The PrometheusRule and the dashboard ConfigMap are rendered by the real helm, then
turned into what Prometheus and the tests consume: a rule file (``groups:``) for
promtool and ``prometheus --config.file``, and the list of panel queries with
Grafana's variables filled in.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import CollectorRegistry

from podium.metrics import Metrics

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "podium"
DASHBOARD_FILE = CHART / "dashboards" / "podium.json"
RULE_TEMPLATE = CHART / "templates" / "prometheusrule.yaml"
RULE_UNIT_TESTS = Path(__file__).with_name("podium-rules.test.yaml")

# kube-scheduler's names for what the dashboard shows and Podium does not export yet
# (pkg/scheduler/metrics/metrics.go, and client-go's rest_client_requests_total).
# A query that reads one of them is evaluated but not required to return series
# until operator/metrics.py defines it; from then on it is required like any other.
KUBE_SCHEDULER_ONLY = frozenset(
    {
        "scheduler_unschedulable_pods",
        "scheduler_preemption_attempts_total",
        "scheduler_preemption_victims_sum",
        "rest_client_requests_total",
    }
)

MISSING_TOOL = (
    "{name} not found on PATH: `make testtools` (hack/test-tools.sh) installs Debian's "
    "prometheus package, which brings prometheus and promtool"
)

_METRIC = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{")


def tool(name: str) -> str | None:
    """prometheus or promtool from PATH (Debian puts both in /usr/bin)."""
    return shutil.which(name)


def render(helm: Path, home: Path, namespace: str, *sets: str) -> list[dict[str, Any]]:
    """`helm template podium charts/podium -n NAMESPACE --set ...`, as documents."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HELM_", "KUBE"))}
    for name in ("CACHE", "CONFIG", "DATA"):
        env[f"HELM_{name}_HOME"] = str(home / name.lower())
    args = [str(helm), "template", "podium", str(CHART), "-n", namespace]
    for item in sets:
        args += ["--set", item]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (doc,) = (d for d in docs if d["kind"] == kind and d["metadata"]["name"].startswith("podium"))
    return doc


def rule_file(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The PrometheusRule's spec is a Prometheus rule file as it stands."""
    spec = one(docs, "PrometheusRule")["spec"]
    return {"groups": spec["groups"]}


def alerts(rules: dict[str, Any]) -> dict[str, str]:
    """Alert name -> expression."""
    return {r["alert"]: r["expr"] for g in rules["groups"] for r in g["rules"] if "alert" in r}


def dashboard(docs: list[dict[str, Any]]) -> dict[str, Any]:
    configmap = next(
        d
        for d in docs
        if d["kind"] == "ConfigMap" and (d["metadata"].get("labels") or {}).get("grafana_dashboard")
    )
    parsed: dict[str, Any] = json.loads(configmap["data"]["podium.json"])
    return parsed


@dataclass(frozen=True)
class PanelQuery:
    panel: str
    legend: str
    expr: str


def panel_queries(dash: dict[str, Any]) -> list[PanelQuery]:
    return [
        PanelQuery(panel["title"], target.get("legendFormat", ""), target["expr"])
        for panel in dash["panels"]
        for target in panel["targets"]
    ]


def concrete(expr: str, namespace: str, job: str, rate_interval: str) -> str:
    """A panel query with Grafana's variables as Grafana would fill them in."""
    return (
        expr.replace("$namespace", namespace)
        .replace("$job", job)
        .replace("$__rate_interval", rate_interval)
    )


def metric_names(expr: str) -> set[str]:
    """The metric names an expression reads (every selector here has label matchers)."""
    return set(_METRIC.findall(expr))


def exported_names() -> set[str]:
    """Every series name `podium run` can expose, from operator/metrics.py itself."""
    registry = CollectorRegistry()
    Metrics(registry)
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}
    return {
        family.name + suffix
        for family in registry.collect()
        for suffix in suffixes.get(family.type, ("",))
    }
