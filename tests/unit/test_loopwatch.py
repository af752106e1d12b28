"""The loop-stall probe sees a callback that holds the event loop."""

from __future__ import annotations

import asyncio
import time

import pytest

from podium.metrics import Metrics
from podium.runtime.loopwatch import watch_loop


def _sample(metrics: Metrics, name: str) -> float:
    value = metrics.registry.get_sample_value(name)
    assert value is not None
    return value


@pytest.mark.parametrize("stall", [0.0, 0.15, 0.3])
async def test_longest_stall_is_reported(stall: float) -> None:
    metrics = Metrics()
    probe = asyncio.create_task(watch_loop(metrics, interval=0.01))
    await asyncio.sleep(0.05)
    time.sleep(stall)  # noqa: ASYNC251 - a synchronous cycle holding the loop
    await asyncio.sleep(0.05)
    probe.cancel()
    await asyncio.gather(probe, return_exceptions=True)

    longest = _sample(metrics, "podium_event_loop_max_stall_seconds")
    assert stall - 0.02 <= longest < stall + 0.1
    assert _sample(metrics, "podium_event_loop_lag_seconds_count") >= 5
