"""The loop-stall probe sees a callback that holds the event loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from podium.metrics import Metrics
from podium.runtime.loopwatch import watch_loop


def _sample(metrics: Metrics, name: str) -> float:
    value = metrics.registry.get_sample_value(name)
    assert value is not None
    return value


def _spin(seconds: float) -> None:
    """A synchronous cycle holding the loop: ``seconds`` of this thread's CPU time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


async def _held(metrics: Metrics, hold: Callable[[], None]) -> None:
    probe = asyncio.create_task(watch_loop(metrics, interval=0.01))
    await asyncio.sleep(0.05)
    hold()
    await asyncio.sleep(0.05)
    probe.cancel()
    await asyncio.gather(probe, return_exceptions=True)


@pytest.mark.parametrize("stall", [0.0, 0.15, 0.3])
async def test_longest_stall_held_by_own_work_is_reported(stall: float) -> None:
    metrics = Metrics()
    await _held(metrics, lambda: _spin(stall))

    longest = _sample(metrics, "podium_event_loop_max_stall_seconds")
    assert stall - 0.02 <= longest < stall + 0.1
    assert _sample(metrics, "podium_event_loop_lag_seconds_count") >= 5


async def test_time_the_process_did_not_run_is_lag_but_no_stall() -> None:
    # A blocking sleep uses no CPU, as when the operating system does not run the process.
    metrics = Metrics()
    await _held(metrics, lambda: time.sleep(0.3))

    assert _sample(metrics, "podium_event_loop_lag_seconds_sum") >= 0.28
    assert _sample(metrics, "podium_event_loop_max_stall_seconds") < 0.05
