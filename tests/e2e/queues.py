"""A scheduler's queues as its /metrics reports them (Podium's and kube-scheduler's alike)."""

from __future__ import annotations

import re

_PENDING = re.compile(r'^scheduler_pending_pods\{queue="(\w+)"\} (\S+)$', re.MULTILINE)


def pending_pods(metrics: str) -> dict[str, float]:
    """``scheduler_pending_pods`` by queue (active, backoff, unschedulable, gated)."""
    return {queue: float(value) for queue, value in _PENDING.findall(metrics)}


def all_parked(pending: dict[str, float], waiting: int) -> bool:
    """Every pending pod was tried and waits for a cluster event: none is active (being
    scheduled or bound) or backing off, and ``waiting`` pods are parked."""
    parked = pending.get("unschedulable", 0.0) + pending.get("gated", 0.0)
    busy = pending.get("active", 0.0) + pending.get("backoff", 0.0)
    return bool(pending) and busy == 0 and parked == waiting
