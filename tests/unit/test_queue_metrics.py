"""The queue's kube-scheduler metrics: scheduler_queue_incoming_pods_total and the
counts behind scheduler_unschedulable_pods."""

from __future__ import annotations

import pytest

from podium.framework.plugin import ClusterEvent
from podium.kube.objects import parse_pod
from podium.metrics import Metrics
from podium.scheduling.queue import QueueSettings, SchedulingQueue, event_label
from tests.unit.builders import gates, pod


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def incoming(metrics: Metrics) -> dict[tuple[str, str], float]:
    """Non-zero samples of scheduler_queue_incoming_pods_total by (queue, event)."""
    out = {}
    for family in metrics.queue_incoming.collect():
        for s in family.samples:
            if s.name.endswith("_total") and s.value:
                out[s.labels["queue"], s.labels["event"]] = s.value
    return out


@pytest.mark.parametrize(
    ("event", "label"),
    [
        (ClusterEvent.NODE_ADD, "NodeAdd"),
        (ClusterEvent.NODE_TAINT, "NodeUpdateNodeTaint"),
        (ClusterEvent.ASSIGNED_POD_DELETE, "AssignedPodDelete"),
        (ClusterEvent.ASSIGNED_POD_SCALE_DOWN, "AssignedPodUpdatePodScaleDown"),
        (ClusterEvent.RESOURCE_CLAIM, "ResourceClaimUpdate"),
        (ClusterEvent.NODE_ADD | ClusterEvent.NODE_LABEL, "NodeAdd"),
    ],
)
def test_event_labels_are_kube_schedulers(event: ClusterEvent, label: str) -> None:
    assert event_label(event) == label


async def test_every_move_counts_once_under_its_cause() -> None:
    """Add, fail, an event, backoff's end, the flush: Go's labels for the same path."""
    clock, metrics = Clock(), Metrics()
    settings = QueueSettings(initial_backoff=1, max_backoff=10, unschedulable_flush=60)
    queue = SchedulingQueue(settings, clock=clock, metrics=metrics, pre_enqueue=gates)
    queue.interest = {"NodeResourcesFit": ClusterEvent.NODE_ALLOCATABLE}
    queue.add(parse_pod(pod("p")))
    queue.add(parse_pod(pod("gated", schedulingGates=[{"name": "wait"}])))
    entry = await queue.pop()
    queue.requeue(entry, rejected_by=frozenset({"NodeResourcesFit"}))
    queue.on_event(ClusterEvent.NODE_ALLOCATABLE)
    clock.now += 1.0
    queue.flush_backoff()
    entry = await queue.pop()
    queue.requeue(entry, rejected_by=frozenset({"NodeResourcesFit"}))
    clock.now += 60.0
    queue.flush_unschedulable()
    assert incoming(metrics) == {
        ("active", "UnscheduledPodAdd"): 1,
        ("unschedulable", "UnscheduledPodAdd"): 1,  # Go keeps gated pods there
        ("unschedulable", "ScheduleAttemptFailure"): 2,
        ("backoff", "NodeUpdateNodeAllocatable"): 1,
        ("active", "BackoffComplete"): 1,
        ("active", "UnschedulableTimeout"): 1,  # its backoff has long expired
    }


async def test_rejections_count_waiting_pods_per_plugin() -> None:
    queue = SchedulingQueue(pre_enqueue=gates)
    for name in ("a", "b", "c"):
        queue.add(parse_pod(pod(name)))
    queue.add(parse_pod(pod("gated", schedulingGates=[{"name": "wait"}])))
    a, b, c = [await queue.pop() for _ in range(3)]
    queue.requeue(a, rejected_by=frozenset({"NodeAffinity", "TaintToleration"}))
    queue.requeue(b, rejected_by=frozenset({"NodeAffinity"}))
    # c is still in flight: Go decrements on Pop, so it counts for nothing.
    assert c.where == "in_flight"
    assert queue.rejections() == {
        ("NodeAffinity", "podium"): 2,
        ("TaintToleration", "podium"): 1,
        ("SchedulingGates", "podium"): 1,
    }
