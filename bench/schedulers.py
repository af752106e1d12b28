"""The two schedulers under test, started the same way each run, and an optional profiler.

Both run as separate processes, with leader election off and no client-side rate
limit (kube-scheduler: QPS and burst 5000 as in scheduler_perf; Podium has no
limiter), so the numbers compare the schedulers rather than their throttles.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import ssl
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from podium.devcluster import ControlPlane, KubeScheduler
from podium.devcluster.process import ComponentError, ManagedProcess, free_ports, http_get

from .measure import find_pid

__all__ = [
    "KUBE",
    "PODIUM",
    "SCHEDULERS",
    "BenchScheduler",
    "KubeSchedulerUnderTest",
    "PodiumUnderTest",
    "PySpy",
    "profile_top",
]

KUBE = "kube-scheduler"
PODIUM = "podium"
SCHEDULERS = (KUBE, PODIUM)


class BenchScheduler(Protocol):
    label: str
    """kube-scheduler or podium, as in --schedulers."""
    scheduler_name: str
    """The schedulerName the run's pods ask for."""
    log_path: Path

    @property
    def pid(self) -> int: ...

    async def astart(self) -> None: ...

    async def astop(self) -> None: ...

    def alive(self) -> bool: ...

    def metrics_text(self) -> str:
        """Its /metrics, as text."""
        ...


def _scrape(url: str, context: ssl.SSLContext | None) -> str:
    status, body = http_get(url, None, context)
    if status != 200:
        raise ComponentError(f"{url} answered {status}")
    return body.decode()


_NO_VERIFY = ssl.create_default_context()
_NO_VERIFY.check_hostname = False
_NO_VERIFY.verify_mode = ssl.CERT_NONE


class KubeSchedulerUnderTest:
    """The real kube-scheduler with its default profile under the name bench-kube."""

    label = KUBE

    def __init__(
        self,
        control_plane: ControlPlane,
        scheduler_name: str = "bench-kube",
        feature_gates: Mapping[str, bool] | None = None,
        plugin_config: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        self.scheduler_name = scheduler_name
        self._scheduler = KubeScheduler(
            control_plane, scheduler_name, feature_gates=feature_gates, plugin_config=plugin_config
        )
        self.log_path = control_plane.workdir / "logs" / f"kube-scheduler-{scheduler_name}.log"
        self._pid: int | None = None

    @property
    def pid(self) -> int:
        if self._pid is None:
            raise ComponentError("kube-scheduler is not running")
        return self._pid

    async def astart(self) -> None:
        await self._scheduler.astart()
        self._pid = find_pid(f"--config={self._scheduler.config_path}")
        if self._pid is None:
            raise ComponentError("kube-scheduler started but its process was not found in /proc")

    async def astop(self) -> None:
        await self._scheduler.astop()
        self._pid = None

    def metrics_text(self) -> str:
        return _scrape(self._scheduler.metrics_url, _NO_VERIFY)

    def alive(self) -> bool:
        return self._pid is not None and Path(f"/proc/{self._pid}").exists()


class PodiumUnderTest:
    """`python -m podium run` as a child process that dies with the benchmark."""

    label = PODIUM

    def __init__(
        self,
        control_plane: ControlPlane,
        log_path: Path,
        scheduler_name: str = "bench-podium",
        extra_args: Sequence[str] = (),
        startup_timeout: float = 120.0,
        policy_name: str | None = None,
    ) -> None:
        # The schedulerName the measured pods name: the built-in profile's, or that of a
        # SchedulerPolicy the harness creates (``policy_name``).
        self.scheduler_name = policy_name or scheduler_name
        self.log_path = log_path
        self.startup_timeout = startup_timeout
        (self.port,) = free_ports(1)
        self._proc = ManagedProcess(
            "podium",
            [
                sys.executable, "-m", "podium", "run",
                "--kubeconfig", str(control_plane.kubeconfig),
                "--metrics-host", "127.0.0.1",
                "--metrics-port", str(self.port),
                "--scheduler-name", scheduler_name,
                *extra_args,
            ],
            log_path,
        )  # fmt: skip

    @property
    def pid(self) -> int:
        pid = self._proc.pid
        if pid is None:
            raise ComponentError("podium is not running")
        return pid

    async def astart(self) -> None:
        self._proc.spawn()  # in the loop's thread: see ManagedProcess
        url = f"http://127.0.0.1:{self.port}/readyz"
        try:
            await asyncio.to_thread(
                self._proc.wait_ready,
                lambda: http_get(url, None, None)[0] == 200,
                self.startup_timeout,
                "ready (/readyz)",
            )
        except BaseException:
            await self.astop()
            raise

    async def astop(self) -> None:
        await asyncio.to_thread(self._proc.stop)

    def alive(self) -> bool:
        return self._proc.running

    def metrics_text(self) -> str:
        return _scrape(f"http://127.0.0.1:{self.port}/metrics", None)


def py_spy_path() -> str | None:
    """py-spy next to this interpreter (a venv install) or on PATH."""
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


class PySpy:
    """Sampling profile of a running Python process over the measured phase.

    py-spy reads the target's memory from outside and never pauses it
    (--nonblocking), so the profile costs the scheduler almost nothing, unlike
    cProfile, whose per-call hooks would slow a Python scheduler several-fold and
    distort what is hot. Output is py-spy's raw format: one collapsed stack per line.
    """

    def __init__(self, pid: int, output: Path, rate: int = 100) -> None:
        executable = py_spy_path()
        if executable is None:
            raise ComponentError("--profile needs py-spy (pip install py-spy)")
        self.output = output
        output.parent.mkdir(parents=True, exist_ok=True)
        self._log = output.with_suffix(".log")
        with self._log.open("wb") as log:
            self._proc = subprocess.Popen(
                [
                    executable, "record", "--pid", str(pid), "--format", "raw",
                    "--rate", str(rate), "--nonblocking", "--output", str(output),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )  # fmt: skip

    def stop(self) -> None:
        """SIGINT makes py-spy write its output and exit."""
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def profile_top(raw: Path, limit: int = 25) -> str:
    """The hottest functions of a py-spy raw profile, by own time and by inclusive time."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    if total == 0:
        return "no samples (py-spy could not attach, or the phase was too short)\n"
    lines = [f"{total} samples"]
    for title, counter in (("own time", own), ("inclusive time", inclusive)):
        lines.append(f"\n-- top {limit} by {title} --")
        for frame, count in counter.most_common(limit):
            lines.append(f"{100 * count / total:6.1f}%  {frame}")
    return "\n".join(lines) + "\n"
