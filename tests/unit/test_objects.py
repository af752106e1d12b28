from __future__ import annotations

from typing import Any

import pytest

from podium.kube.objects import Toleration, parse_node, parse_pod, parse_toleration
from podium.kube.resources import DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST
from tests.unit.builders import node, pod


def _c(cpu: str | None = None, memory: str | None = None, **extra: Any) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    return {"name": "x", "image": "i", "resources": {"requests": requests}, **extra}


@pytest.mark.parametrize(
    ("spec", "cpu", "nonzero_cpu"),
    [
        ({"containers": [_c("100m"), _c("200m")]}, 300, 300),
        ({"containers": [{"name": "x"}]}, 0, DEFAULT_MILLI_CPU_REQUEST),
        # an init container larger than the app containers sets the peak
        ({"containers": [_c("100m")], "initContainers": [_c("1")]}, 1000, 1000),
        # a sidecar runs alongside both later init containers and the app
        (
            {
                "containers": [_c("100m")],
                "initContainers": [_c("200m", restartPolicy="Always"), _c("500m")],
            },
            700,
            700,
        ),
        ({"containers": [_c("100m")], "overhead": {"cpu": "250m"}}, 350, 350),
    ],
    ids=["sum", "no-requests", "init-peak", "sidecar", "overhead"],
)
def test_pod_requests(spec: dict[str, Any], cpu: int, nonzero_cpu: int) -> None:
    info = parse_pod({"metadata": {"name": "p", "uid": "u"}, "spec": spec})
    assert info.requests.get("cpu", 0) == cpu
    assert info.nonzero_cpu == nonzero_cpu


def test_no_memory_request_scores_as_default() -> None:
    info = parse_pod(pod("p", cpu="1"))
    assert info.requests == {"cpu": 1000}
    assert info.nonzero_memory == DEFAULT_MEMORY_REQUEST
    assert not info.best_effort
    assert parse_pod(pod("q")).best_effort


def test_bad_quantities_are_problems_not_exceptions() -> None:
    body = node("n1")
    body["status"]["allocatable"].update(cpu="NaN", memory="-5Gi")
    info = parse_node(body)
    assert info.allocatable.get("cpu") is None
    assert info.allocatable["memory"] == 0
    assert len(info.problems) == 2
    bad = pod("p")
    bad["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "Infinity"}}
    assert "cpu" in parse_pod(bad).problem


def test_garbage_shapes_do_not_raise() -> None:
    for body in ({}, {"metadata": None}, {"spec": {"containers": "x"}}, {"spec": []}):
        parse_pod(body)  # type: ignore[arg-type]
        parse_node(body)  # type: ignore[arg-type]


def test_equal_tolerations_are_one_object_and_keep_their_values() -> None:
    raw = {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}
    first, second = parse_toleration(raw), parse_toleration(dict(raw))
    assert first is second
    assert first == Toleration(key="k", operator="Equal", value="v", effect="NoSchedule")
    other = parse_toleration({**raw, "value": "w"})
    assert other is not first and other.value == "w"
    assert parse_toleration({"operator": "Exists", "tolerationSeconds": 300}) == Toleration(
        key="", operator="Exists", value="", effect=""
    )
