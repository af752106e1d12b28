"""What the benchmark observes: pods from one watch, and the scheduler process from /proc.

Every number comes from outside the scheduler under test, so both schedulers are
measured the same way: a pod counts as bound at the first watch event that shows
spec.nodeName (what scheduler_perf's informer sees), its latency runs from the
moment the harness sent its create request, and CPU and memory are the kernel's
accounting of the scheduler's process.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cases import ROLE_LABEL

__all__ = [
    "PodState",
    "PodTracker",
    "ProcessSample",
    "Sampler",
    "SchedulerExited",
    "busy_cpu_seconds",
    "find_pid",
    "percentile",
    "read_process",
    "scheduler_perf_average",
]


class SchedulerExited(RuntimeError):
    """The scheduler under test died while the harness was waiting on it."""


@dataclass(slots=True)
class PodState:
    role: str
    created_at: float | None = None
    bound_at: float | None = None
    node: str | None = None
    condition: tuple[str, str] | None = None
    """(status, reason) of the PodScheduled condition, as last seen."""
    deleted: bool = False


class PodTracker:
    """The state of every pod in the run's namespace, fed by the watch.

    Times are time.monotonic(); created_at is set by the harness before it sends the
    create request, so an early bind event can never make a latency negative.
    """

    def __init__(self) -> None:
        self.pods: dict[str, PodState] = {}
        self.bound = Counter[str]()
        self._changed = asyncio.Event()

    async def wait(
        self, done: Callable[[], bool], deadline: float, alive: Callable[[], bool]
    ) -> bool:
        """Wait until done() after some watch event; False once time.monotonic() > deadline.

        alive() is checked at least twice a second, so a crashed scheduler ends the
        wait at once instead of at the deadline; it raises to say so.
        """
        while not done():
            if not alive():
                raise SchedulerExited()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(remaining, 0.5)):
                    await self._changed.wait()
        return True

    def creating(self, name: str, role: str) -> None:
        state = self.pods.setdefault(name, PodState(role))
        state.created_at = time.monotonic()

    def on_event(self, kind: str, obj: dict[str, Any]) -> None:
        now = time.monotonic()
        self._changed.set()
        meta = obj.get("metadata") or {}
        name = meta.get("name") or ""
        state = self.pods.get(name)
        if state is None:
            state = self.pods[name] = PodState((meta.get("labels") or {}).get(ROLE_LABEL, "?"))
        if kind == "DELETED":
            state.deleted = True
            return
        node = (obj.get("spec") or {}).get("nodeName")
        if node and state.bound_at is None:
            state.bound_at = now
            state.node = node
            self.bound[state.role] += 1
        for cond in (obj.get("status") or {}).get("conditions") or ():
            if cond.get("type") == "PodScheduled":
                state.condition = (str(cond.get("status")), str(cond.get("reason") or ""))

    def of_role(self, role: str) -> list[PodState]:
        return [state for state in self.pods.values() if state.role == role]

    def latencies(self, role: str) -> list[float]:
        """Create-to-bound seconds of the bound pods of one role, sorted."""
        return sorted(
            s.bound_at - s.created_at
            for s in self.of_role(role)
            if s.bound_at is not None and s.created_at is not None
        )


@dataclass(slots=True)
class Sampler:
    """Bound count of the measured pods once a second, as scheduler_perf's throughput collector.

    started is when the first measured pod was created; samples hold (seconds since
    then, bound so far).
    """

    started: float
    samples: list[tuple[float, int]] = field(default_factory=list)

    def sample(self, bound: int) -> None:
        self.samples.append((time.monotonic() - self.started, bound))


def scheduler_perf_average(samples: Sequence[tuple[float, int]]) -> list[float]:
    """Per-interval pods/s between consecutive samples, like SchedulingThroughput.

    Intervals before the first bind are skipped (the scheduler had not seen a pod
    yet), and so are those after the last pod was bound. The last interval ends at
    the last bind and may be short; intervals under half a second are left out
    unless there is nothing else, since one pod more or less swings them wildly.
    """
    intervals: list[tuple[float, float]] = []
    previous_t, previous_n = 0.0, 0
    final = samples[-1][1] if samples else 0
    for t, n in samples:
        if n > 0 and previous_n < final and t > previous_t:
            intervals.append((t - previous_t, (n - previous_n) / (t - previous_t)))
        previous_t, previous_n = t, n
    long_enough = [rate for dt, rate in intervals if dt >= 0.5]
    return long_enough or [rate for _, rate in intervals]


def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of already sorted values; None if empty."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


@dataclass(frozen=True, slots=True)
class ProcessSample:
    cpu_seconds: float
    """User plus system time since the process started."""
    peak_rss_bytes: int
    """VmHWM: the high-water mark of resident memory."""


_TICKS = os.sysconf("SC_CLK_TCK")


def read_process(pid: int) -> ProcessSample:
    """CPU and peak RSS of a live process from /proc (Linux only, like the control plane)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    # The command name may contain spaces and parentheses; fields follow the last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    utime, stime = int(fields[11]), int(fields[12])
    peak = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            peak = int(line.split()[1]) * 1024
    return ProcessSample((utime + stime) / _TICKS, peak)


def busy_cpu_seconds() -> float:
    """CPU time all processes on the machine have used since boot (/proc/stat, non-idle).

    Its increase over a phase, less what the scheduler, apiserver, etcd and the
    harness used, is CPU that something else on the machine took: a noise gauge.
    """
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    return (user + nice + system + irq + softirq + steal) / _TICKS


def find_pid(*needles: str) -> int | None:
    """The pid of this process's child whose command line contains every needle.

    KubeScheduler does not expose its pid; its command line names its own config
    file, which is unique per scheduler name.
    """
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if ppid == me and all(needle in cmdline for needle in needles):
            return int(entry.name)
    return None
