"""Shadow mode: DryRun profiles that decide again, off the live path, for live pods.

A DryRun SchedulerPolicy with ``spec.shadowOf: <live schedulerName>`` decides
for every pod that the live profile attempts and logs a decision record with
``shadow: true``; it never binds, nominates, evicts or writes to the pod. The
live worker only appends the pod to a bounded queue; a separate task takes
the jobs while no live pod is waiting and no live Binding is out, so a shadow
never sits between a live pop and its bind. The price: under sustained load
the shadow lags, and past ``limit`` pending jobs the oldest are dropped
(counted and logged).

Each shadow decision sees the cluster as it is when the shadow runs, with the
pod's own live placement taken out, so both profiles judge the pod against
the same other pods.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import structlog

from podium.framework.cycle import Nominated, Scheduler
from podium.framework.decision import EVENT, build_record
from podium.framework.profile import Profile
from podium.kube.objects import PodInfo
from podium.state.cache import Cache
from podium.state.snapshot import Snapshot

__all__ = ["ShadowJob", "ShadowRunner", "shadows_by_target"]

log = structlog.get_logger("podium.scheduling.shadow")

# How often the shadow task looks whether the live profile is busy, and how long it
# must have been idle before a shadow cycle runs.
BUSY_POLL_SECONDS = 0.002
QUIET_SECONDS = 0.010


def shadows_by_target(profiles: Iterable[Profile]) -> dict[str, list[Profile]]:
    """Live schedulerName -> the DryRun profiles shadowing it."""
    out: dict[str, list[Profile]] = {}
    for profile in profiles:
        if profile.dry_run and profile.shadow_of:
            out.setdefault(profile.shadow_of, []).append(profile)
    return out


@dataclass(slots=True)
class ShadowJob:
    pod: PodInfo
    attempt: int
    profiles: list[Profile]


class ShadowRunner:
    def __init__(
        self,
        limit: int = 10_000,
        rng: random.Random | None = None,
        quiet: float = QUIET_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.quiet = quiet
        self.clock = clock  # the quiet period's; a test passes its own to control it
        self.profiles: dict[str, list[Profile]] = {}
        self.jobs: deque[ShadowJob] = deque()
        self.limit = limit
        self.dropped = 0
        self.algorithm = Scheduler(rng)  # its own round-robin start: the live one is untouched
        self._wakeup = asyncio.Event()

    def submit(self, pod: PodInfo, attempt: int, scheduler_name: str) -> None:
        """Called on the live path: O(1), no decision made here."""
        profiles = self.profiles.get(scheduler_name)
        if not profiles:
            return
        if len(self.jobs) >= self.limit:
            old = self.jobs.popleft()
            self.dropped += 1
            log.warning(
                "shadow_dropped", pod=old.pod.name, namespace=old.pod.namespace, total=self.dropped
            )
        self.jobs.append(ShadowJob(pod, attempt, profiles))
        self._wakeup.set()

    async def run(self, busy: Callable[[], bool], decide: Callable[[ShadowJob], None]) -> None:
        """Take jobs one at a time, once ``busy()`` (live work pending) has been false a while.

        A quiet period, not just a false ``busy()``: in a burst the live loop also
        has watch events and Binding responses to get through between pods, and a
        shadow cycle run in every momentary gap measurably delayed those.
        """
        quiet_since: float | None = None
        while True:
            if not self.jobs:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            now = self.clock()
            if busy():
                quiet_since = None
            elif quiet_since is None:
                quiet_since = now
            if quiet_since is None or now - quiet_since < self.quiet:
                await asyncio.sleep(BUSY_POLL_SECONDS)
                continue
            job = self.jobs.popleft()
            try:
                decide(job)
            except Exception:  # a shadow must never take anything down
                log.exception("shadow_error", pod=job.pod.name, namespace=job.pod.namespace)
            await asyncio.sleep(0)

    def decide(
        self, job: ShadowJob, cache: Cache, snapshot: Snapshot, nominated: Nominated
    ) -> None:
        """One shadow decision per shadowing profile, each logged as a decision record."""
        pod = job.pod
        snapshot.update(cache)
        if len(snapshot) == 0:
            return
        state = cache.pods.get(pod.uid)
        row = snapshot.index.get(state.node) if state is not None else None
        backup = (
            snapshot.edit_row(row, remove=[state.pod], framework=False)
            if row is not None and state
            else None
        )
        try:
            for profile in job.profiles:
                started = time.perf_counter()
                top = profile.record_top_nodes
                placement = self.algorithm.schedule(
                    profile, snapshot, pod, record=top > 0, nominated=nominated
                )
                message = ""
                if not placement.node and placement.diagnosis is not None:
                    message = placement.diagnosis.message()
                record = build_record(
                    profile,
                    snapshot,
                    pod,
                    job.attempt,
                    placement,
                    top=top,
                    result="dry_run" if placement.node else "unschedulable",
                    message=message,
                    duration_ms=round((time.perf_counter() - started) * 1000, 3),
                    shadow_of=profile.shadow_of,
                )
                log.info(EVENT, **record)
        finally:
            if row is not None and backup is not None:
                snapshot.restore_row(row, backup)
