"""The preemption goroutine, one host method for a pod's and a PodGroup's preemption:
counted and timed under the preemptor's type, the preemptor's pods activated after a
refusal (Go's prepareCandidateAsync)."""

from __future__ import annotations

from typing import cast

import pytest

from podium.kube.objects import parse_pod
from podium.policy import default_profile
from podium.scheduling.binder import Binder
from podium.scheduling.scheduler import PodiumScheduler
from tests.unit.builders import pod


async def _evicted(result: bool) -> bool:
    return result


@pytest.mark.parametrize(
    ("preemptor", "evicted", "result", "activated"),
    [
        ("pod", True, "success", False),
        ("pod", False, "error", True),
        ("podgroup", True, "success", False),
        ("podgroup", False, "error", True),
    ],
)
async def test_preempting_counts_times_and_activates_after_a_refusal(
    preemptor: str, evicted: bool, result: str, activated: bool
) -> None:
    binder = cast(Binder, type("NoBinder", (), {"client": None, "instance": ""})())
    scheduler = PodiumScheduler(binder, {"podium": default_profile("podium")})
    waiting = [parse_pod(pod(f"m{i}", cpu="100m")) for i in range(2)]
    for member in waiting:
        scheduler.queue.add(member)
        entry = scheduler.queue.take(member.uid)
        assert entry is not None
        scheduler.queue.requeue(entry, rejected_by=frozenset({"NodeResourcesFit"}))
    uids = [p.uid for p in waiting]
    assert {scheduler.queue.entries[u].where for u in uids} == {"unschedulable"}

    await scheduler.preempting(preemptor, uids, _evicted(evicted))

    metrics = scheduler.metrics.registry
    total = "scheduler_preemption_goroutines_execution_total"
    assert metrics.get_sample_value(total, {"result": result}) == 1.0
    duration = "scheduler_preemption_execution_duration_seconds_count"
    labels = {"preemptor": preemptor, "result": result}
    assert metrics.get_sample_value(duration, labels) == 1.0
    where = {scheduler.queue.entries[u].where for u in uids}
    assert where == ({"active"} if activated else {"unschedulable"})
