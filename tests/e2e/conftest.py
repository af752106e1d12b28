"""Podium as a real subprocess (`python -m podium run`) against the session cluster."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest_asyncio

from podium.devcluster import ControlPlane


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PodiumProcess:
    process: subprocess.Popen[bytes]
    metrics_port: int
    log: Path

    async def metrics(self) -> str:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{self.metrics_port}/metrics") as resp,
        ):
            return await resp.text()

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        self.process.wait(timeout=30)

    def log_lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()


async def _wait_ready(proc: PodiumProcess, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    url = f"http://127.0.0.1:{proc.metrics_port}/readyz"
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if proc.process.poll() is not None:
                tail = "\n".join(proc.log_lines()[-30:])
                raise RuntimeError(f"podium exited with {proc.process.returncode}:\n{tail}")
            try:
                async with session.get(url) as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise TimeoutError("podium did not become ready")


@pytest_asyncio.fixture(loop_scope="session")
async def podium(
    control_plane: ControlPlane, tmp_path: Path
) -> AsyncIterator[Callable[..., Awaitable[PodiumProcess]]]:
    """`await podium(*extra_args)` starts Podium; every process is stopped after the test."""
    started: list[PodiumProcess] = []

    async def start(*args: str) -> PodiumProcess:
        port = _free_port()
        log = tmp_path / f"podium-{len(started)}.log"
        with log.open("wb") as out:
            # Popen returns at once; the process is awaited through /readyz.
            process = subprocess.Popen(  # noqa: ASYNC220
                [
                    sys.executable,
                    "-m",
                    "podium",
                    "run",
                    "--kubeconfig",
                    str(control_plane.kubeconfig),
                    "--metrics-host",
                    "127.0.0.1",
                    "--metrics-port",
                    str(port),
                    *args,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        proc = PodiumProcess(process, port, log)
        started.append(proc)
        await _wait_ready(proc)
        return proc

    yield start
    for proc in started:
        if proc.process.poll() is None:
            proc.kill(signal.SIGTERM)
