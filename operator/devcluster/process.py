"""Child processes that cannot outlive the Python process that started them.

A test run that is killed (Ctrl-C twice, SIGKILL from CI, a crashed interpreter)
must not leave etcd or kube-apiserver holding ports and memory. Three layers make
sure of that: PR_SET_PDEATHSIG makes the kernel SIGKILL each child when its parent
dies, even by SIGKILL; an atexit hook stops the children on a normal exit; and
SIGTERM/SIGHUP handlers turn those signals into a normal exit. Children get their
own session, so a Ctrl-C in the terminal reaches only Python, which then stops
them in order.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import os
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import Self

_PR_SET_PDEATHSIG = 1

# Resolved here, in the parent, so the forked child only makes the call.
try:
    _prctl: Callable[..., int] | None = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux
    _prctl = None


class ComponentError(RuntimeError):
    """A control-plane component did not start, or died; the message carries its log tail."""


def free_ports(count: int) -> list[int]:
    """Return distinct TCP ports on 127.0.0.1 that are free right now."""
    with contextlib.ExitStack() as stack:
        ports: list[int] = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
        return ports


def http_get(url: str, token: str | None, context: ssl.SSLContext | None) -> tuple[int, bytes]:
    """GET url; (0, b"") when nothing answers, so readiness probes can simply retry."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=5, context=context) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError:
        return 0, b""


def die_with_parent(parent_pid: int) -> Callable[[], None]:
    """A preexec_fn that makes the kernel SIGKILL the child when parent_pid's thread dies."""

    def preexec() -> None:
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        # The parent may have died between fork and prctl; then nobody would kill us.
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec


class ManagedProcess:
    """One long-running binary whose output goes to a log file.

    PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, so
    spawn() must be called from a thread that lives as long as the child (the
    main thread or the event-loop thread), never from a worker thread.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = dict(env) if env is not None else None
        self._popen: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen is not None else None

    @property
    def running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def spawn(self) -> None:
        """Start the binary, appending to its log so restarts keep earlier output."""
        if self.running:
            raise ComponentError(f"{self.name} is already running (pid {self.pid})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"\n==> {time.strftime('%H:%M:%S')} {' '.join(self.argv)}\n".encode())
            log.flush()
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent(os.getpid()),
                env=self.env,
            )
        _LIVE.add(self)

    def wait_ready(self, probe: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll probe() until it is true; raise with the log tail if the process exits or hangs.

        Blocking, but it starts nothing, so it may run in a worker thread.
        """
        deadline = time.monotonic() + timeout
        while True:
            if not self.running:
                code = self._popen.returncode if self._popen is not None else None
                raise ComponentError(
                    f"{self.name} exited with code {code} before {what}.\n{self.describe_log()}"
                )
            if probe():
                return
            if time.monotonic() > deadline:
                raise ComponentError(
                    f"{self.name} did not become {what} within {timeout:.0f}s.\n"
                    f"{self.describe_log()}"
                )
            time.sleep(0.1)

    def stop(self, timeout: float = 15.0, *, kill: bool = False) -> None:
        """SIGTERM (or SIGKILL when kill=True), then SIGKILL after timeout; idempotent."""
        popen = self._popen
        _LIVE.discard(self)
        if popen is None or popen.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            popen.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            popen.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                popen.kill()
            popen.wait()

    def describe_log(self, lines: int = 40) -> str:
        """The last lines of the log, headed by its path, for error messages."""
        try:
            tail = "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            tail = "(no log written)"
        return f"--- last {lines} lines of {self.log_path} ---\n{tail}"


_LIVE: set[ManagedProcess] = set()
_CLEANUPS: list[Callable[[], None]] = []
_HANDLERS_LOCK = threading.Lock()
_handlers_installed = False


def register_cleanup(cleanup: Callable[[], None]) -> None:
    """Run cleanup at interpreter exit or on SIGTERM/SIGHUP, before the children stop.

    For state that outlives a process: mounts, cgroups, network links. Idempotent
    cleanups only; unregister_cleanup() once it has run normally.
    """
    _CLEANUPS.append(cleanup)


def unregister_cleanup(cleanup: Callable[[], None]) -> None:
    with contextlib.suppress(ValueError):
        _CLEANUPS.remove(cleanup)


def stop_all() -> None:
    """Run registered cleanups, then kill every child still running; used at exit."""
    for cleanup in reversed(list(_CLEANUPS)):
        with contextlib.suppress(Exception):
            cleanup()
    _CLEANUPS.clear()
    for proc in list(_LIVE):
        proc.stop(timeout=5.0)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    stop_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def install_exit_handlers() -> None:
    """Stop children at exit and on SIGTERM/SIGHUP, without replacing anyone else's handler."""
    global _handlers_installed
    with _HANDLERS_LOCK:
        if _handlers_installed:
            return
        _handlers_installed = True
        atexit.register(stop_all)
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(signum) is signal.SIG_DFL:
                signal.signal(signum, _on_signal)


class Service:
    """Start/stop for both sync and async callers, from one description of the steps.

    _start_steps() spawns processes in the caller's thread (see ManagedProcess) and
    yields the blocking readiness waits, which async callers run in a worker thread
    so the event loop keeps running.
    """

    def _start_steps(self) -> Iterator[Callable[[], None]]:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        install_exit_handlers()
        try:
            for wait in self._start_steps():
                wait()
        except BaseException:
            self.stop()
            raise

    async def astart(self) -> None:
        install_exit_handlers()
        try:
            for wait in self._start_steps():
                await asyncio.to_thread(wait)
        except BaseException:
            self.stop()
            raise

    async def astop(self) -> None:
        await asyncio.to_thread(self.stop)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        await self.astart()
        return self

    async def __aexit__(
        self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.astop()
