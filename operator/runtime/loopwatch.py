"""How long the event loop went without running its callbacks: the loop-stall probe.

Everything Podium does shares one event loop: watch streams, Lease renewal,
Bindings and the scheduling cycle, which is synchronous. A callback that runs
too long (a cycle over many nodes, a large relist page, a garbage collection)
delays all the others. A probe task sleeps ``interval`` and measures how late
it wakes: a stall of length L that begins while the probe sleeps makes it wake
up to L late, so the lateness is a lower bound of each stall and the largest one
seen is the longest stall to within ``interval``. Each wake-up costs a few
microseconds.

Lateness also grows when the operating system does not run the process at all (a
busy machine, a CPU limit's throttling): the histogram keeps that, since whoever
waits on the loop waits either way. The longest stall counts only what Podium's own
code held: the lateness, capped at the CPU time the loop's thread used meanwhile.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog

from podium.metrics import Metrics

__all__ = ["watch_loop"]

log = structlog.get_logger("podium.runtime.loopwatch")

INTERVAL = 0.05  # seconds between probes


async def watch_loop(
    metrics: Metrics,
    interval: float = INTERVAL,
    clock: Callable[[], float] = time.perf_counter,
    cpu_clock: Callable[[], float] = time.thread_time,
) -> None:
    """Observe each probe's lateness in ``podium_event_loop_lag_seconds`` and keep the
    largest held by the loop's own work in ``podium_event_loop_max_stall_seconds``, until
    cancelled."""
    longest = 0.0
    try:
        while True:
            due = clock() + interval
            cpu = cpu_clock()
            await asyncio.sleep(interval)
            late = max(0.0, clock() - due)
            metrics.loop_lag.observe(late)
            held = min(late, cpu_clock() - cpu)
            if held > longest:
                longest = held
                metrics.loop_max_stall.set(held)
    finally:  # on stop, for logs without a metrics scrape (the benchmark's)
        log.info("event_loop_max_stall", seconds=round(longest, 4))
