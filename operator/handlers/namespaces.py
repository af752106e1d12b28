"""Namespace events → namespace labels, for namespaceSelector in pod affinity terms."""

from __future__ import annotations

from typing import Any

import kopf
import structlog

from podium.scheduling.scheduler import PodiumScheduler

log = structlog.get_logger("podium.handlers.namespaces")


def register_namespaces(registry: kopf.OperatorRegistry, scheduler: PodiumScheduler) -> None:
    @kopf.on.event("", "v1", "namespaces", registry=registry)
    async def namespace_event(event: kopf.RawEvent, **_: Any) -> None:
        try:
            scheduler.on_namespace(event.get("type"), event.get("object") or {})
        except Exception:  # a poison object must never stop the watch
            log.exception("namespace_event_failed")
