"""The chart's PrometheusRule and dashboard ConfigMap, rendered by the real helm.

promtool (Debian's prometheus package, installed by `make testtools`) checks the
rendered rules and runs their unit tests (tests/prometheus/podium-rules.test.yaml).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from podium.devcluster import Binaries
from tests.prometheus.chart import (
    DASHBOARD_FILE,
    MISSING_TOOL,
    RULE_UNIT_TESTS,
    alerts,
    dashboard,
    render,
    rule_file,
    tool,
)

ENABLED = ("metrics.prometheusRule.enabled=true", "metrics.grafanaDashboard.enabled=true")


@pytest.fixture
def promtool() -> str:
    found = tool("promtool")
    if found is None:
        pytest.skip(MISSING_TOOL.format(name="promtool"))
    return found


def test_monitoring_objects_render_only_when_enabled(binaries: Binaries, tmp_path: Path) -> None:
    kinds = {d["kind"] for d in render(binaries.helm, tmp_path, "podium-system")}
    assert "PrometheusRule" not in kinds and "ConfigMap" not in kinds
    docs = render(binaries.helm, tmp_path, "podium-system", *ENABLED)
    (configmap,) = (d for d in docs if d["kind"] == "ConfigMap")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboard(docs) == json.loads(DASHBOARD_FILE.read_text())
    rule = next(d for d in docs if d["kind"] == "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["namespace"] == "podium-system"


def test_for_durations_come_from_values(binaries: Binaries, tmp_path: Path) -> None:
    docs = render(
        binaries.helm, tmp_path, "ns", *ENABLED,
        "metrics.prometheusRule.pendingPodsFor=3m", "metrics.prometheusRule.noLeaderFor=45s",
        "metrics.prometheusRule.bindErrorsFor=7m", "metrics.prometheusRule.authFailuresFor=0s",
    )  # fmt: skip
    got = {r["alert"]: r["for"] for g in rule_file(docs)["groups"] for r in g["rules"]}
    assert got == {
        "PodiumPodsPendingTooLong": "3m",
        "PodiumNoLeader": "45s",
        "PodiumBindErrors": "7m",
        "PodiumAuthFailures": "0s",
    }
    for expr in alerts(rule_file(docs)).values():
        assert 'namespace="ns", job="podium-metrics"' in expr


def test_no_leader_alert_only_with_leader_election(binaries: Binaries, tmp_path: Path) -> None:
    """A single replica without election reports podium_leader 0 all along."""
    docs = render(
        binaries.helm, tmp_path, "ns", *ENABLED, "replicaCount=1", "leaderElection.enabled=false"
    )
    assert set(alerts(rule_file(docs))) == {
        "PodiumPodsPendingTooLong",
        "PodiumBindErrors",
        "PodiumAuthFailures",
    }


def test_promtool_checks_and_unit_tests_the_rendered_rules(
    binaries: Binaries, tmp_path: Path, promtool: str
) -> None:
    docs = render(binaries.helm, tmp_path, "podium-system", *ENABLED)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule_file(docs)))
    shutil.copy(RULE_UNIT_TESTS, tmp_path / RULE_UNIT_TESTS.name)
    check = subprocess.run(
        [promtool, "check", "rules", str(tmp_path / "rules.yaml")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS: 4 rules found" in check.stdout
    unit = subprocess.run(
        [promtool, "test", "rules", str(tmp_path / RULE_UNIT_TESTS.name)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert unit.returncode == 0, unit.stdout + unit.stderr
    assert "SUCCESS" in unit.stdout
