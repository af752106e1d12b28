"""The chart's dashboard and alert rules read only metrics Podium exports.

No helm and no Prometheus here (tests/integration/test_chart_prometheus.py renders and
checks the rules with promtool; tests/e2e/test_prometheus.py queries a real Prometheus).
"""

from __future__ import annotations

import json

import yaml

from tests.prometheus.chart import (
    CHART,
    DASHBOARD_FILE,
    KUBE_SCHEDULER_ONLY,
    RULE_TEMPLATE,
    exported_names,
    metric_names,
    panel_queries,
)

PANELS = [
    "Scheduling attempts by result",
    "Scheduling attempt latency",
    "Pod scheduling SLI latency",
    "Pending pods by queue",
    "Unschedulable pods by plugin",
    "Preemptions",
    "Bind outcomes",
    "Leader",
    "Event-loop stalls",
    "API client errors",
]
ALERTS = ["PodiumPodsPendingTooLong", "PodiumNoLeader", "PodiumBindErrors", "PodiumAuthFailures"]


def test_dashboard_has_the_panels_and_reads_known_metrics() -> None:
    dash = json.loads(DASHBOARD_FILE.read_text())
    assert [p["title"] for p in dash["panels"]] == PANELS
    assert {v["name"] for v in dash["templating"]["list"]} == {"datasource", "namespace", "job"}
    known = exported_names() | KUBE_SCHEDULER_ONLY
    for query in panel_queries(dash):
        names = metric_names(query.expr)
        assert names, query
        assert names <= known, (query.panel, names - known)
        # Each series is this release's: the dashboard's namespace and job variables.
        assert query.expr.count('{namespace="$namespace", job="$job"') == query.expr.count("{")


def test_alert_rules_read_only_exported_metrics() -> None:
    text = RULE_TEMPLATE.read_text()
    assert [line.split(":", 1)[1].strip() for line in text.splitlines() if "- alert:" in line] == (
        ALERTS
    )
    names = metric_names(text)
    assert names == {
        "scheduler_pending_pods",
        "podium_leader",
        "podium_bind_results_total",
        "podium_client_auth_failures_total",
    }
    assert names <= exported_names()


def test_monitoring_objects_are_off_by_default() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())["metrics"]
    assert values["prometheusRule"]["enabled"] is False
    assert values["grafanaDashboard"]["enabled"] is False
