from __future__ import annotations

import pytest

from podium.framework.plugin import ClusterEvent
from podium.kube.objects import parse_pod
from podium.scheduling.queue import QueueSettings, SchedulingQueue
from tests.unit.builders import gates, pod


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("attempts", "seconds"), [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (9, 10.0)]
)
def test_backoff_doubles_to_max(attempts: int, seconds: float) -> None:
    queue = SchedulingQueue(QueueSettings(initial_backoff=1, max_backoff=10))
    assert queue.backoff_duration(parse_pod(pod("p")), attempts) == seconds


def test_backoff_follows_the_pods_own_profile() -> None:
    """Each SchedulerPolicy's backoff applies to its own pods, not the last one loaded."""
    queue = SchedulingQueue(QueueSettings(initial_backoff=1, max_backoff=10))
    queue.profile_settings["slow"] = QueueSettings(initial_backoff=5, max_backoff=60)
    fast = parse_pod(pod("a"))
    slow = parse_pod({**pod("b"), "spec": {**pod("b")["spec"], "schedulerName": "slow"}})
    assert queue.backoff_duration(fast, 3) == 4.0
    assert queue.backoff_duration(slow, 3) == 20.0


async def test_priority_then_creation_order() -> None:
    queue = SchedulingQueue()
    for name, prio, created in [
        ("late-low", 0, "2026-01-01T00:00:05Z"),
        ("early-low", 0, "2026-01-01T00:00:01Z"),
        ("high", 100, "2026-01-01T00:00:09Z"),
    ]:
        queue.add(parse_pod(pod(name, priority=prio, created=created)))
    order = [(await queue.pop()).pod.name for _ in range(3)]
    assert order == ["high", "early-low", "late-low"]


async def test_unschedulable_pod_moves_only_on_relevant_event() -> None:
    clock = Clock()
    queue = SchedulingQueue(QueueSettings(initial_backoff=1, max_backoff=10), clock=clock)
    queue.interest = {"NodeResourcesFit": ClusterEvent.NODE_ALLOCATABLE}
    queue.add(parse_pod(pod("p")))
    entry = await queue.pop()
    queue.requeue(entry, rejected_by=frozenset({"NodeResourcesFit"}))
    assert entry.where == "unschedulable"
    # the in-flight pod failed before this event; a later event must move it
    assert queue.on_event(ClusterEvent.NODE_LABEL) == 0
    assert entry.where == "unschedulable"
    assert queue.on_event(ClusterEvent.NODE_ALLOCATABLE) == 1
    assert entry.where == "backoff"
    clock.now += 1.0
    queue.flush_backoff()
    assert entry.where == "active"


async def test_queue_time_is_when_the_pod_came_back() -> None:
    """Go's Timestamp: set as the pod is added, refreshed as it is re-added after an
    attempt (AddUnschedulableIfNotPresent); a pod group's members are ordered by it."""
    clock = Clock()
    queue = SchedulingQueue(clock=clock)
    queue.add(parse_pod(pod("p")))
    entry = await queue.pop()
    assert entry.added == 1000.0
    clock.now += 7
    queue.requeue(entry, rejected_by=frozenset({"NodeResourcesFit"}))
    assert entry.added == 1007.0


async def test_event_during_attempt_sends_pod_to_backoff() -> None:
    queue = SchedulingQueue()
    queue.add(parse_pod(pod("p")))
    entry = await queue.pop()
    queue.on_event(ClusterEvent.NODE_ADD)  # arrives while the pod is in flight
    queue.requeue(entry, rejected_by=frozenset({"NodeResourcesFit"}))
    assert entry.where == "backoff"


async def test_errors_always_back_off_and_flush_rescues_unschedulable() -> None:
    clock = Clock()
    queue = SchedulingQueue(QueueSettings(unschedulable_flush=300), clock=clock)
    queue.add(parse_pod(pod("err")))
    queue.add(parse_pod(pod("stuck")))
    first, second = await queue.pop(), await queue.pop()
    queue.requeue(first, error=True)
    queue.requeue(second, rejected_by=frozenset({"TaintToleration"}))
    assert (first.where, second.where) == ("backoff", "unschedulable")
    clock.now += 301
    assert queue.flush_unschedulable() == 1
    # A pod the flush moved is counted by scheduler_pod_scheduled_after_flush_total if it
    # binds; failing again clears the mark, as kube-scheduler's WasFlushedFromUnschedulable.
    assert (first.flushed, second.flushed) == (False, True)
    clock.now += 60
    queue.flush_backoff()
    again = await queue.pop()
    assert again is second
    queue.requeue(again, rejected_by=frozenset({"TaintToleration"}))
    assert not again.flushed
    assert queue.flush_unschedulable() == 0


async def test_gated_pods_wait_until_last_gate_removed() -> None:
    queue = SchedulingQueue(pre_enqueue=gates)
    gated = pod("g", schedulingGates=[{"name": "a"}, {"name": "b"}])
    queue.add(parse_pod(gated))
    assert queue.counts()["gated"] == 1
    assert queue.rejections() == {("SchedulingGates", "podium"): 1}
    one = {**gated, "spec": {**gated["spec"], "schedulingGates": [{"name": "b"}]}}
    queue.add(parse_pod(one))
    assert queue.counts()["gated"] == 1
    ungated = {**gated, "spec": {**gated["spec"], "schedulingGates": []}}
    queue.add(parse_pod(ungated))
    entry = await queue.pop()
    assert (entry.pod.name, entry.attempts, queue.rejections()) == ("g", 1, {})


async def test_deleted_pod_is_never_popped() -> None:
    queue = SchedulingQueue()
    a, b = parse_pod(pod("a")), parse_pod(pod("b"))
    queue.add(a)
    queue.add(b)
    queue.delete(a.uid)
    assert (await queue.pop()).pod.name == "b"
    assert len(queue) == 1


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("unschedulable", "active"),  # a preemptor whose victims' deletion was refused
        ("backoff", "active"),
        ("gated", "gated"),  # PreEnqueue still holds it
        ("in flight", "in flight"),  # its attempt's own requeue decides
    ],
)
async def test_activate_moves_waiting_pods_to_active_now(where: str, expected: str) -> None:
    clock = Clock()
    settings = QueueSettings(initial_backoff=5, max_backoff=10)
    queue = SchedulingQueue(settings, clock=clock, pre_enqueue=gates)
    names = [{"name": "wait"}] if where == "gated" else []
    queue.add(parse_pod(pod("p", schedulingGates=names)))
    entry = queue.entries[next(iter(queue.entries))]
    if where != "gated":
        entry = await queue.pop()
    if where == "unschedulable":
        queue.requeue(entry, rejected_by=frozenset({"NodeResourcesFit"}))
    elif where == "backoff":
        queue.requeue(entry, error=True)
    before = entry.where
    queue.activate([entry.pod.uid, "no-such-pod"])
    assert entry.where == (before if expected == "in flight" else expected)
    if expected == "active":
        assert await queue.pop() is entry  # no backoff waited out
