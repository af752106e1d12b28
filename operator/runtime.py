"""Wiring: credentials, the scheduler, kopf handlers, and the HTTP endpoints."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import kopf
import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from podium.algorithms import load_entry_points
from podium.binder import Binder
from podium.handlers import (
    register_policies,
    register_watches,
)
from podium.kube import Credentials, KubeClient, load_credentials
from podium.leader import LeaderElector, LeaseSettings, LostLeadership
from podium.metrics import Metrics
from podium.policy import default_profile
from podium.scheduling.scheduler import PodiumScheduler

__all__ = ["RunOptions", "build_registry", "run_operator"]

log = structlog.get_logger("podium.runtime")


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


def build_registry(
    scheduler: PodiumScheduler, client: KubeClient, creds: Credentials, options: RunOptions
) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(
            server=creds.server,
            ca_path=creds.ca_path,
            insecure=creds.insecure,
            token=creds.token,
            certificate_path=creds.cert_path,
            private_key_path=creds.key_path,
        )

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        # No kopf Events or state on objects; the scheduler reports for itself.
        settings.posting.enabled = False
        settings.scanning.disabled = True
        # A silently stalled watch stream is dropped and re-established (kopf #585, #810).
        settings.watching.server_timeout = int(options.watch_timeout)
        settings.watching.client_timeout = int(options.watch_timeout) + 30
        settings.watching.connect_timeout = 30
        settings.networking.request_timeout = 60
        settings.networking.error_backoffs = _RetryForever()
        settings.persistence.diffbase_storage = _NoDiffBase()
        settings.persistence.progress_storage = _NoProgress()

    register_watches(registry, scheduler)
    register_policies(registry, scheduler, client, options.scheduler_name)
    return registry


async def _serve_http(
    options: RunOptions, metrics: Metrics, ready: asyncio.Event
) -> web.AppRunner | None:
    if not options.metrics_port:
        return None

    async def metrics_view(_: web.Request) -> web.Response:
        body = generate_latest(metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        return (
            web.Response(text="ok") if ready.is_set() else web.Response(status=503, text="starting")
        )

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
    await elector.acquire()
    scheduler.metrics.leader.set(1)
    scheduler.active.set()
    try:
        await elector.hold()
    except LostLeadership:
        scheduler.active.clear()
        scheduler.metrics.leader.set(0)
        log.error("leadership_lost", lease=options.leader_election.name)
        raise


async def run_operator(options: RunOptions, stop: asyncio.Event | None = None) -> int:
    """Run until ``stop`` is set or a fatal error; returns the process exit code."""
    creds = await load_credentials(options.kubeconfig, options.context)
    client = KubeClient(creds, pool_size=max(16, options.max_binds_in_flight))
    metrics = Metrics()
    binder = Binder(client, options.instance, max_in_flight=options.max_binds_in_flight)
    loaded = load_entry_points()
    if loaded:
        log.info("plugins_loaded", plugins=loaded)
    builtin = default_profile(options.scheduler_name)
    builtin.preemption = options.preemption
    scheduler = PodiumScheduler(
        binder,
        {options.scheduler_name: builtin},
        metrics,
    )
    registry = build_registry(scheduler, client, creds, options)
    await scheduler.prime(client)
    ready = asyncio.Event()
    stop_flag = stop or asyncio.Event()
    runner = await _serve_http(options, metrics, ready)
    logging.getLogger("kopf.activities.startup").setLevel(logging.WARNING)
    operator = asyncio.create_task(
        kopf.operator(
            registry=registry,
            clusterwide=True,
            standalone=True,
            stop_flag=stop_flag,
            ready_flag=ready,
        )
    )
    core = asyncio.create_task(scheduler.run())
    tasks = {operator, core}
    if options.leader_election is not None:
        scheduler.active.clear()  # a standby keeps its cache warm but never binds
        tasks.add(asyncio.create_task(_lead(scheduler, client, options)))
    log.info("podium_started", scheduler_name=options.scheduler_name, server=creds.server)
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task.exception() is not None:
                log.error("podium_stopped", error=repr(task.exception()))
                return 1
        return 0
    finally:
        stop_flag.set()
        for task in tasks - {operator}:
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(operator, timeout=10)
        with contextlib.suppress(BaseException):
            await core
        await client.close()
        if runner is not None:
            await runner.cleanup()
