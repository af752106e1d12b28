"""Node events → cache."""

from __future__ import annotations

from typing import Any

import kopf
import structlog

from podium.scheduling.scheduler import PodiumScheduler

log = structlog.get_logger("podium.handlers.nodes")


def register_nodes(registry: kopf.OperatorRegistry, scheduler: PodiumScheduler) -> None:
    @kopf.on.event("", "v1", "nodes", registry=registry)
    async def node_event(event: kopf.RawEvent, **_: Any) -> None:
        try:
            scheduler.on_node(event.get("type"), event.get("object") or {})
            if event.get("type") is None:  # kopf is (re)listing: reconcile once it is over
                scheduler.resync.listed("nodes")
        except Exception:  # a poison object must never stop the watch
            log.exception("node_event_failed")
