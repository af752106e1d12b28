"""A one-line live status (phase, bound/target, elapsed) while a run is in progress.

Runs take minutes; without a heartbeat a slow scheduler and a hung harness look the
same. On a terminal the line is redrawn in place every second; in a log (or under
pytest) a line is written every ten seconds and at each phase change. A whole
benchmark takes from ten minutes to hours (--upstream, --repeat), so the line and
each run's header also say which run of how many this is and how long it has all
taken so far.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream
        self._tty = bool(stream is not None and stream.isatty())
        self._title = ""
        self._phase = ""
        self._count: Callable[[], int] = lambda: 0
        self._target = 0
        self._started = time.monotonic()
        self._phase_started = self._started
        self._last_line = 0.0
        self._bench_started = self._started
        self._runs = 0
        self._total = 0

    def plan(self, total: int) -> None:
        """The number of runs the benchmark will make; starts its clock."""
        self._total, self._runs = total, 0
        self._bench_started = time.monotonic()

    def position(self) -> str:
        """The current run's place, as [run/total, time since the benchmark started]."""
        return f"[{self._runs}/{self._total}, {_duration(time.monotonic() - self._bench_started)}]"

    def note(self, text: str) -> None:
        """A line that stays (run headers, warnings)."""
        if self._stream is None:
            return
        prefix = "\r\033[K" if self._tty else ""
        self._stream.write(f"{prefix}{text}\n")
        self._stream.flush()

    def run(self, title: str) -> None:
        self._title = title
        self._started = time.monotonic()
        self._runs += 1

    def phase(self, name: str, target: int = 0, count: Callable[[], int] | None = None) -> None:
        """Start a phase; with a target, the line shows count()/target."""
        self._phase, self._target, self._count = name, target, count or (lambda: 0)
        self._phase_started = time.monotonic()
        self._draw(force=True)

    def _draw(self, force: bool = False) -> None:
        if self._stream is None or not self._phase:
            return
        now = time.monotonic()
        if not self._tty and not force and now - self._last_line < 10.0:
            return
        self._last_line = now
        counts = f": {self._count()}/{self._target}" if self._target else ""
        line = (
            f"  [{self._title}] {self._phase}{counts} "
            f"({now - self._phase_started:.0f}s in phase, {now - self._started:.0f}s in run; "
            f"run {self._runs}/{self._total}, {_duration(now - self._bench_started)} in all)"
        )
        if self._tty:
            self._stream.write(f"\r\033[K{line}")
        else:
            self._stream.write(line + "\n")
        self._stream.flush()

    def done(self) -> None:
        """End the run's status line (on a terminal, leave its last state visible)."""
        if self._tty and self._stream is not None:
            self._draw(force=True)
            self._stream.write("\n")
        self._phase = ""

    @contextlib.asynccontextmanager
    async def ticking(self) -> AsyncIterator[None]:
        """Redraw once a second for the duration of the block."""

        async def tick() -> None:
            while True:
                await asyncio.sleep(1.0)
                self._draw()

        task = asyncio.create_task(tick())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _duration(seconds: float) -> str:
    """12s, 3m05s, 1h02m."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
