"""A scheduler's queues as its /metrics reports them (Podium's and kube-scheduler's alike)."""

from __future__ import annotations

import asyncio
import re
import ssl

from podium.devcluster import KubeScheduler
from podium.devcluster.process import http_get

_PENDING = re.compile(r'^scheduler_pending_pods\{queue="(\w+)"\} (\S+)$', re.MULTILINE)


async def scrape_kube(kube: KubeScheduler) -> str:
    """kube-scheduler's /metrics: its secure port lets anyone read /metrics in the harness
    (--authorization-always-allow-paths), over its self-signed certificate."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    status, body = await asyncio.to_thread(http_get, kube.metrics_url, None, context)
    assert status == 200, body[:200]
    return body.decode()


def pending_pods(metrics: str) -> dict[str, float]:
    """``scheduler_pending_pods`` by queue (active, backoff, unschedulable, gated)."""
    return {queue: float(value) for queue, value in _PENDING.findall(metrics)}


def all_parked(pending: dict[str, float], waiting: int) -> bool:
    """Every pending pod was tried and waits for a cluster event: none is active (being
    scheduled or bound) or backing off, and ``waiting`` pods are parked."""
    parked = pending.get("unschedulable", 0.0) + pending.get("gated", 0.0)
    return idle(pending) and parked == waiting


def idle(pending: dict[str, float]) -> bool:
    """No pod is active (being scheduled) or backing off: none is tried again before a
    cluster event moves it."""
    return bool(pending) and pending.get("active", 0.0) + pending.get("backoff", 0.0) == 0
