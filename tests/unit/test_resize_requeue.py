"""A bound pod that shrinks wakes the pods NodeResourcesFit turned away (UpdatePodScaleDown)."""

from __future__ import annotations

from typing import Any

import pytest

from podium.scheduling.scheduler import PodiumScheduler
from tests.unit.test_fuzz_parsers import make_scheduler


def bound_pod(cpu: str, *, labels: dict[str, str] | None = None, rv: str = "1") -> dict[str, Any]:
    """A pod on n1 whose pod-level request is ``cpu``; its containers ask for 10m."""
    return {
        "metadata": {
            "name": "big",
            "namespace": "ns",
            "uid": "big",
            "resourceVersion": rv,
            "labels": labels or {},
        },
        "spec": {
            "schedulerName": "podium",
            "nodeName": "n1",
            "resources": {"requests": {"cpu": cpu}},
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "10m"}}}],
        },
        "status": {"phase": "Running"},
    }


async def parked(scheduler: PodiumScheduler) -> None:
    """Create n1 (2 cpu) and a 1-cpu pod, and park the pod as NodeResourcesFit's reject."""
    scheduler.on_node(
        "ADDED",
        {
            "metadata": {"name": "n1", "uid": "n1"},
            "status": {
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
    )
    scheduler.on_pod("ADDED", bound_pod("1500m"))
    scheduler.on_pod(
        "ADDED",
        {
            "metadata": {"name": "small", "namespace": "ns", "uid": "small"},
            "spec": {
                "schedulerName": "podium",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            },
            "status": {"phase": "Pending"},
        },
    )
    entry = await scheduler.queue.pop()
    scheduler.queue.requeue(entry, rejected_by=frozenset({"NodeResourcesFit"}))
    assert entry.where == "unschedulable"


@pytest.mark.parametrize(
    ("update", "moved", "node_cpu"),
    [
        pytest.param(bound_pod("500m", rv="2"), True, 500, id="pod-level request shrinks"),
        pytest.param(bound_pod("1800m", rv="2"), False, 1800, id="pod-level request grows"),
        pytest.param(bound_pod("1500m", labels={"a": "b"}, rv="2"), False, 1500, id="labels only"),
    ],
)
async def test_scale_down_of_a_bound_pod_moves_fit_rejects(
    update: dict[str, Any], moved: bool, node_cpu: int
) -> None:
    scheduler = make_scheduler()
    await parked(scheduler)
    scheduler.on_pod("MODIFIED", update)
    where = scheduler.queue.entries["small"].where
    assert (where != "unschedulable") is moved, where
    assert scheduler.cache.nodes["n1"].requested["cpu"] == node_cpu
