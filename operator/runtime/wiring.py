"""Wiring: credentials, the scheduler, kopf handlers, and the HTTP endpoints."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import kopf
import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from podium.algorithms import load_entry_points
from podium.handlers import (
    direct_watches,
    register_policies,
    register_watches,
)
from podium.kube.client import LIST_PAGE, ApiError, KubeClient
from podium.kube.credentials import load_credentials
from podium.kube.leader import LeaderElector, LeaseSettings, LostLeadership
from podium.kube.listwatch import ListWatchSettings
from podium.metrics import Metrics
from podium.policy import default_profile
from podium.runtime.loopwatch import watch_loop
from podium.scheduling.binder import Binder
from podium.scheduling.scheduler import PodiumScheduler

__all__ = ["RunOptions", "build_registry", "run_operator"]

log = structlog.get_logger("podium.runtime.wiring")


@dataclass(slots=True)
class RunOptions:
    kubeconfig: str | None = None
    context: str | None = None
    scheduler_name: str = "podium"
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 0  # 0 disables the endpoint
    watch_timeout: float = 300.0
    max_binds_in_flight: int = 256
    # The Lease holder identity: the pod name in a cluster, else host plus a nonce.
    instance: str = field(
        default_factory=lambda: (
            os.environ.get("POD_NAME") or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        )
    )
    preemption: bool = True
    leader_election: LeaseSettings | None = None
    # Client-side rate limit per budget (Bindings; status and Events; the rest); 0: none.
    kube_api_qps: float = 0.0
    kube_api_burst: int = 0


class _NoDiffBase(kopf.DiffBaseStorage):
    """Podium has no change-detecting handlers, so there is nothing to diff or store.

    kopf otherwise deep-copies every watched body on every event to build a
    diff base (about 3% of the benchmark profile), and would keep it in an
    annotation on the object if a change handler ever existed.
    """

    def build(self, *, body: Any, extra_fields: Any = None) -> Any:
        return None

    def fetch(self, *, body: Any) -> Any:
        return None

    def store(self, *, body: Any, patch: Any, essence: Any) -> None:
        return None


class _RetryForever:
    """kopf's request backoffs, never exhausted: an API outage of any length is
    waited out, as client-go's reflectors do, instead of ending the operator
    after kopf's default ~90 s of retries."""

    def __iter__(self) -> Iterator[float]:
        yield from (1, 1, 2, 3, 5, 8, 13, 21)
        yield from itertools.repeat(30.0)


class _NoProgress(kopf.ProgressStorage):
    """Handler progress is never written onto user objects."""

    def fetch(self, *, key: Any, body: Any) -> Any:
        return None

    def store(self, *, key: Any, record: Any, body: Any, patch: Any) -> None:
        return None

    def purge(self, *, key: Any, body: Any, patch: Any) -> None:
        return None

    def touch(self, *, body: Any, patch: Any, value: Any) -> None:
        return None

    def clear(self, *, essence: Any) -> Any:
        return essence


# Connections to the API server. Each HTTP/1.1 connection carries one request at a time,
# and each costs a TLS handshake and about 0.3 MiB while it stays open: 256 (one per
# bind in flight) cost 20-50 MiB more peak RSS than 64 in the 500-node benchmark with
# no gain in throughput or CPU. Binds beyond 64 wait for a connection.
API_CONNECTIONS = 64

# Seconds an idle kopf per-object worker waits for its object's next event (kopf: 5).
KOPF_WORKER_IDLE = 0.5

# /readyz waits for kopf's first listing to bring back every primed object, but not
# for one deleted in between, which never comes back: it gives up after this many
# seconds without progress, or after the longer limit (podium.scheduling.first_listing).
WATCH_SYNC_STALL = 5.0
WATCH_SYNC_LIMIT = 60.0


# Seconds between checks of a token the server keeps refusing.
_LOGIN_PACE = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)


class KopfLogin:
    """kopf's login handler: fresh credentials on every call, checked before use.

    kopf calls it at start, again after any 401, and when the token it holds
    expires (an exec plugin's ``expirationTimestamp``). It never takes back a
    ConnectionInfo it has seen refused, and re-calls login at once when it runs
    out, so the handler re-reads the token (client-go's ResetTokenOlderThan:
    unless it was read since kopf got it) and asks the server whether it is
    accepted. While it is refused, the KubeClient reports it (readiness,
    ``podium_client_auth_failures_total``, a ``credentials_rejected`` log line)
    and the check is repeated at a slowing pace instead of kopf looping on 401s.
    """

    def __init__(self, client: KubeClient, pace: tuple[float, ...] = _LOGIN_PACE) -> None:
        self.client = client
        self.pace = pace
        self.handed_at: float | None = None

    async def __call__(self, **_: Any) -> kopf.ConnectionInfo:
        creds = self.client.creds
        if creds.tokens is not None and self.handed_at is not None:
            creds.tokens.reset(self.handed_at)
        for delay in itertools.chain(self.pace, itertools.repeat(self.pace[-1])):
            try:
                await self.client.get("/version")
                break
            except ApiError as exc:
                if exc.status != 401:
                    break
            except (TimeoutError, OSError):
                break  # not an answer about credentials: kopf retries connections itself
            await asyncio.sleep(delay)
        self.handed_at = time.monotonic()
        return kopf.ConnectionInfo(
            server=creds.server,
            ca_path=creds.ca_path,
            insecure=creds.insecure,
            token=await creds.current_token(),
            certificate_path=creds.cert_path,
            private_key_path=creds.key_path,
            expiration=creds.tokens.expires_at if creds.tokens is not None else None,
        )


def build_registry(
    scheduler: PodiumScheduler, client: KubeClient, options: RunOptions
) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    fresh = KopfLogin(client)

    @kopf.on.login(registry=registry, id="login")
    async def login(**kwargs: Any) -> kopf.ConnectionInfo:
        return await fresh(**kwargs)

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        # No kopf Events or state on objects; the scheduler reports for itself.
        settings.posting.enabled = False
        settings.scanning.disabled = True
        # A silently stalled watch stream is dropped and re-established (kopf #585, #810).
        settings.watching.server_timeout = int(options.watch_timeout)
        settings.watching.client_timeout = int(options.watch_timeout) + 30
        settings.watching.connect_timeout = 30
        # kopf lists a kind in one answer unless told otherwise; pages keep the peak down.
        settings.watching.chunk_size = LIST_PAGE
        # kopf keeps a worker per object for this long after its last event: after the
        # first listing of 5,000 nodes that is 5,000 idle workers for 5 s by default.
        settings.queueing.idle_timeout = KOPF_WORKER_IDLE
        settings.networking.request_timeout = 60
        settings.networking.error_backoffs = _RetryForever()
        settings.persistence.diffbase_storage = _NoDiffBase()
        settings.persistence.progress_storage = _NoProgress()

    register_watches(registry, scheduler)
    register_policies(registry, scheduler, client, options.scheduler_name)
    return registry


async def _serve_http(
    options: RunOptions,
    scheduler: PodiumScheduler,
    ready: asyncio.Event,
    synced: asyncio.Event,
    client: KubeClient,
) -> web.AppRunner | None:
    if not options.metrics_port:
        return None
    metrics = scheduler.metrics

    async def metrics_view(_: web.Request) -> web.Response:
        scheduler.update_gauges()
        scheduler.count_objects()
        body = generate_latest(metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        if not ready.is_set():
            return web.Response(status=503, text="starting")
        if not synced.is_set():
            return web.Response(status=503, text="watches syncing")
        if client.unauthenticated:
            return web.Response(status=503, text="credentials rejected (401)")
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/metrics", metrics_view)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, options.metrics_host, options.metrics_port).start()
    return runner


async def _lead(scheduler: PodiumScheduler, client: KubeClient, options: RunOptions) -> None:
    assert options.leader_election is not None
    elector = LeaderElector(client, options.instance, options.leader_election)
    try:
        await elector.acquire()
        scheduler.metrics.leader.set(1)
        scheduler.active.set()
        await elector.hold()
    except LostLeadership:
        scheduler.active.clear()
        scheduler.metrics.leader.set(0)
        log.error("leadership_lost", lease=options.leader_election.name)
        raise
    except asyncio.CancelledError:  # a clean stop: hand the Lease over at once
        scheduler.active.clear()
        scheduler.metrics.leader.set(0)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(options.leader_election.renew_deadline):
                await elector.release()
        raise


def _own_signals(stop: asyncio.Event) -> None:
    """SIGINT and SIGTERM set ``stop``, replacing the handlers kopf installs, so that
    a signal ends Podium the same way as a caller's stop: cleanly, with exit code 0."""
    if threading.current_thread() is not threading.main_thread():
        return
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)


async def run_operator(options: RunOptions, stop: asyncio.Event | None = None) -> int:
    """Run until ``stop`` is set, SIGINT or SIGTERM (exit code 0) or a fatal error (1)."""
    creds = await load_credentials(options.kubeconfig, options.context)
    metrics = Metrics()
    client = KubeClient(
        creds,
        pool_size=API_CONNECTIONS,
        qps=options.kube_api_qps,
        burst=options.kube_api_burst,
        metrics=metrics,
    )
    binder = Binder(client, options.instance, max_in_flight=options.max_binds_in_flight)
    loaded = load_entry_points()
    if loaded:
        log.info("plugins_loaded", plugins=loaded)
    scheduler = PodiumScheduler(
        binder,
        {options.scheduler_name: default_profile(options.scheduler_name)},
        metrics,
        preemption=options.preemption,
    )
    await scheduler.discover(client)
    registry = build_registry(scheduler, client, options)
    await scheduler.prime(client)
    ready = asyncio.Event()
    stop_flag = stop or asyncio.Event()
    synced = scheduler.first_listing.synced
    runner = await _serve_http(options, scheduler, ready, synced, client)
    logging.getLogger("kopf.activities.startup").setLevel(logging.WARNING)
    core = asyncio.create_task(scheduler.run(), name="scheduler")
    tasks = {core}
    if options.leader_election is not None:
        scheduler.active.clear()  # a standby keeps its cache warm but never binds
        tasks.add(asyncio.create_task(_lead(scheduler, client, options), name="leader-election"))
    events = asyncio.create_task(binder.events.run())
    probe = asyncio.create_task(watch_loop(metrics), name="loop-probe")
    syncing = asyncio.create_task(scheduler.first_listing.wait(WATCH_SYNC_LIMIT, WATCH_SYNC_STALL))
    stopping = asyncio.create_task(stop_flag.wait())
    # kopf cancels, on its way out, every task created after it started; Podium's
    # own tasks are stopped here instead, in order, before kopf finishes.
    ours = asyncio.all_tasks()
    operator_tasks = await kopf.spawn_tasks(
        registry=registry,
        clusterwide=True,
        standalone=True,
        stop_flag=stop_flag,
        ready_flag=ready,
    )
    # The pod firehose bypasses kopf's per-object workers (docs/architecture.md) but
    # runs as one of kopf's root tasks: kopf starts it, stops it, and ends if it fails.
    operator_tasks = [
        *operator_tasks,
        *(
            asyncio.create_task(stream.run(), name=f"watch:{stream.path}")
            for stream in direct_watches(
                scheduler, client, ListWatchSettings(server_timeout=options.watch_timeout)
            )
        ),
    ]
    _own_signals(stop_flag)
    operator = asyncio.create_task(kopf.run_tasks(operator_tasks, ignored=ours), name="kopf")
    log.info(
        "podium_started",
        scheduler_name=options.scheduler_name,
        server=creds.server,
        event_loop=type(asyncio.get_running_loop()).__module__,
    )
    try:
        done, _ = await asyncio.wait(
            {*tasks, operator, stopping}, return_when=asyncio.FIRST_COMPLETED
        )
        if stop_flag.is_set():
            log.info("podium_stopping")
            return 0
        for task in done:
            error = "cancelled" if task.cancelled() else repr(task.exception())
            log.error("podium_stopped", task=task.get_name(), error=error)
        return 1
    finally:
        stop_flag.set()
        for task in (*tasks, events, stopping, probe, syncing):
            task.cancel()
        # The Lease is released (a clean stop) before kopf and the client go.
        await asyncio.wait({*tasks, events, stopping, probe, syncing}, timeout=15)
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(operator, timeout=10)
        await client.close()
        if runner is not None:
            await runner.cleanup()
