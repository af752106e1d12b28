"""Labelled metrics keep their children: the same series whatever the call, until removed."""

from __future__ import annotations

from prometheus_client import generate_latest

from podium.metrics import Metrics


def _lines(metrics: Metrics, prefix: str) -> list[str]:
    text = generate_latest(metrics.registry).decode()
    return [line for line in text.splitlines() if line.startswith(prefix)]


def test_a_child_is_kept_and_exported_once() -> None:
    metrics = Metrics()
    points = metrics.extension_point
    first = points.labels("Filter", "Success", "p")
    assert points.labels("Filter", "Success", "p") is first
    points.labels("Filter", "Success", "p").observe(0.001)
    first.observe(0.002)
    count = "scheduler_framework_extension_point_duration_seconds_count"
    assert _lines(metrics, count) == [
        f'{count}{{extension_point="Filter",profile="p",status="Success"}} 2.0'
    ]


def test_named_labels_and_values_that_are_not_strings_reach_one_series() -> None:
    metrics = Metrics()
    metrics.rest_requests.labels("200", "h", "GET").inc()
    metrics.rest_requests.labels(200, "h", "GET").inc()
    metrics.rest_requests.labels(code="200", host="h", method="GET").inc()
    total = "rest_client_requests_total"
    assert _lines(metrics, total) == [f'{total}{{code="200",host="h",method="GET"}} 3.0']


def test_a_removed_series_starts_again_from_zero() -> None:
    metrics = Metrics()
    gauge = metrics.unschedulable_pods
    gauge.labels("NodeResourcesFit", "p").set(4)
    gauge.remove("NodeResourcesFit", "p")
    assert _lines(metrics, "scheduler_unschedulable_pods{") == []
    gauge.labels("NodeResourcesFit", "p").inc()
    line = 'scheduler_unschedulable_pods{plugin="NodeResourcesFit",profile="p"} 1.0'
    assert _lines(metrics, "scheduler_unschedulable_pods{") == [line]
    gauge.clear()
    assert _lines(metrics, "scheduler_unschedulable_pods{") == []
