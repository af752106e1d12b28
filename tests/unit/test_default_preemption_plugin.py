"""DefaultPreemption as the profile's PostFilter plugin, driven by the scheduling loop: a
live profile counts, nominates and evicts through the handle; a dry-run profile counts
and words the same message and writes nothing; ``--disable-preemption`` takes the plugin
out of the PostFilter list."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from podium.kube.objects import PodInfo
from podium.policy import build_profile
from podium.scheduling.binder import Binder
from podium.scheduling.nominator import Nominator
from podium.scheduling.scheduler import PodiumScheduler
from tests.unit.builders import node, pod

FOUND = "preemption: found a potential placement for pod on node n1, preempting 1 victims"


@dataclass
class _Client:
    calls: list[tuple[str, str]] = field(default_factory=list)

    async def patch(self, path: str, body: Any, kind: str = "strategic-merge-patch") -> Any:
        self.calls.append(("PATCH", path))
        return {}

    async def post(self, path: str, body: Any) -> Any:
        self.calls.append(("POST", path))
        return {}

    async def delete(self, path: str, body: Any = None) -> Any:
        self.calls.append(("DELETE", path))
        return {}


@dataclass
class _Binder:
    client: _Client = field(default_factory=_Client)
    instance: str = "test"
    conditions: list[str] = field(default_factory=list)

    async def set_condition(
        self, p: PodInfo, reason: str, message: str, nominator: Nominator | None = None
    ) -> None:
        self.conditions.append(message)

    async def event(self, *args: Any, **kwargs: Any) -> None:
        return None


async def _preempt(mode: str, preemption: bool) -> tuple[PodiumScheduler, _Binder]:
    """One full node with a low-priority pod, one pending higher-priority pod, one cycle."""
    binder = _Binder()
    profile = build_profile({"schedulerName": "podium", "mode": mode})
    sched = PodiumScheduler(cast(Binder, binder), {"podium": profile}, preemption=preemption)
    sched.on_node("ADDED", node("n1", cpu="1"))
    sched.on_pod("ADDED", pod("low", cpu="1", node_name="n1", priority=0))
    sched.on_pod("ADDED", pod("high", cpu="1", priority=100))
    sched.schedule_one(await asyncio.wait_for(sched.queue.pop(), 1))
    await sched.settle()
    return sched, binder


def _sample(sched: PodiumScheduler, name: str, labels: dict[str, str] | None = None) -> float:
    return sched.metrics.registry.get_sample_value(name, labels or {}) or 0.0


@pytest.mark.parametrize(
    ("mode", "preemption", "attempts", "victims", "writes", "nominated"),
    [
        pytest.param("Active", True, 1, 1, 3, "n1", id="live"),
        pytest.param("DryRun", True, 1, 0, 0, "", id="dry-run"),
        pytest.param("Active", False, 0, 0, 0, "", id="disabled"),
    ],
)
async def test_default_preemption_runs_as_the_post_filter_plugin(
    mode: str, preemption: bool, attempts: int, victims: int, writes: int, nominated: str
) -> None:
    sched, binder = await _preempt(mode, preemption)
    assert _sample(sched, "scheduler_preemption_attempts_total") == attempts
    assert _sample(sched, "scheduler_preemption_victims_count") == victims
    evaluated = {"preemptor": "pod", "result": "Success"}
    count = "scheduler_preemption_evaluation_duration_seconds_count"
    assert _sample(sched, count, evaluated) == attempts
    # The victim's DisruptionTarget condition, its deletion and the Preempted Event.
    assert [method for method, _ in binder.client.calls] == ["PATCH", "DELETE", "POST"][:writes]
    assert sched.nominator.node_of(next(iter(sched.queue.entries))) == nominated
    # The pod's message, a dry run's included: the plugin's reason after the filters'.
    (message,) = binder.conditions
    assert message.startswith("0/1 nodes are available: 1 Insufficient cpu.")
    assert message.endswith(FOUND if preemption else "Insufficient cpu.")
