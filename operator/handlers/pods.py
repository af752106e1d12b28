"""Pod events → cache (bound pods) and queue (pending pods)."""

from __future__ import annotations

from typing import Any

import kopf
import structlog

from podium.scheduling.scheduler import PodiumScheduler

log = structlog.get_logger("podium.handlers.pods")


def register_pods(registry: kopf.OperatorRegistry, scheduler: PodiumScheduler) -> None:
    @kopf.on.event("", "v1", "pods", registry=registry)
    async def pod_event(event: kopf.RawEvent, **_: Any) -> None:
        try:
            scheduler.on_pod(event.get("type"), event.get("object") or {})
            if event.get("type") is None:  # kopf is (re)listing: reconcile once it is over
                scheduler.resync.listed("pods")
        except Exception:  # a poison object must never stop the watch
            log.exception("pod_event_failed")
