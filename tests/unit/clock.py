"""A clock that moves only when a test moves it, for code that takes ``clock`` and ``sleep``."""

from __future__ import annotations

import asyncio

from podium.devcluster.objects import wait_for


class ManualClock:
    """``clock()`` reads ``now``; ``sleep`` returns once ``advance`` has moved it far enough."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []  # every sleep asked for, in order
        self._waiting: list[tuple[float, asyncio.Future[None]]] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
        for until, done in self._waiting:
            if until <= self.now and not done.done():
                done.set_result(None)

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        entry = (self.now + seconds, asyncio.get_running_loop().create_future())
        if seconds <= 0:
            return
        self._waiting.append(entry)
        try:
            await entry[1]
        finally:
            self._waiting.remove(entry)

    @property
    def sleeping(self) -> bool:
        """Whether a sleep is waiting for the clock to move."""
        return any(not done.done() for _, done in self._waiting)

    async def asleep(self, count: int) -> None:
        """Until ``count`` sleeps have begun: the code waits for time to move."""
        await wait_for(lambda: len(self.sleeps) >= count, 5, 0.001, f"sleep {count}")
