"""The cache gauges a /metrics scrape sets: scheduler_cache_size and podium_cache_objects
read the state of the moment, so a scrape right after an event already counts it."""

from __future__ import annotations

from typing import Any, cast

import pytest

from podium.metrics import Metrics
from podium.policy import default_profile
from podium.scheduling.binder import Binder
from podium.scheduling.scheduler import PodiumScheduler
from tests.unit.builders import node


def _scheduler() -> PodiumScheduler:
    binder = cast(Binder, type("NoBinder", (), {"client": None, "instance": ""})())
    return PodiumScheduler(binder, {"podium": default_profile("podium")}, Metrics())


def _sample(scheduler: PodiumScheduler, family: str, **labels: str) -> float | None:
    return scheduler.metrics.registry.get_sample_value(family, labels)


def _slice(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": "1"},
        "spec": {"driver": "gpu.example.com", "pool": {"name": name}, "nodeName": "n0"},
    }


def _claim(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": name, "resourceVersion": "1"}}


def _pvc(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": "1"},
        "spec": {"storageClassName": "fast"},
    }


@pytest.mark.parametrize(
    ("apply", "kind", "count"),
    [
        pytest.param(
            lambda s: s.on_dra("resourceslices", "ADDED", _slice("a")), "resourceslices", 1
        ),
        pytest.param(
            lambda s: s.on_dra("resourceclaims", "ADDED", _claim("c")), "resourceclaims", 1
        ),
        pytest.param(
            lambda s: s.on_volume("persistentvolumeclaims", "ADDED", _pvc("d")),
            "persistentvolumeclaims",
            1,
        ),
        pytest.param(lambda s: None, "resourceslices", 0, id="nothing-watched-yet"),
    ],
)
def test_count_objects_reads_the_stores(apply: Any, kind: str, count: int) -> None:
    scheduler = _scheduler()
    apply(scheduler)
    scheduler.count_objects()
    assert _sample(scheduler, "podium_cache_objects", kind=kind) == count


def test_update_gauges_counts_a_node_at_once() -> None:
    scheduler = _scheduler()
    scheduler.update_gauges()
    assert _sample(scheduler, "scheduler_cache_size", type="nodes") == 0
    scheduler.on_node("ADDED", node("n0"))
    scheduler.update_gauges()
    assert _sample(scheduler, "scheduler_cache_size", type="nodes") == 1
