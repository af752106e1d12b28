"""Service, ReplicationController, ReplicaSet and StatefulSet events → selector store."""

from __future__ import annotations

from typing import Any

import kopf
import structlog

from podium.scheduling.scheduler import PodiumScheduler

log = structlog.get_logger("podium.handlers.selectors")

# Store kind -> (API group, version).
_RESOURCES = {
    "services": ("", "v1"),
    "replicationcontrollers": ("", "v1"),
    "replicasets": ("apps", "v1"),
    "statefulsets": ("apps", "v1"),
}


def register_selectors(registry: kopf.OperatorRegistry, scheduler: PodiumScheduler) -> None:
    for kind, (group, version) in _RESOURCES.items():
        _register(registry, scheduler, kind, group, version)


def _register(
    registry: kopf.OperatorRegistry,
    scheduler: PodiumScheduler,
    kind: str,
    group: str,
    version: str,
) -> None:
    @kopf.on.event(group, version, kind, registry=registry, id=f"{kind}_event")
    async def selector_event(event: kopf.RawEvent, **_: Any) -> None:
        try:
            scheduler.on_selector(kind, event.get("type"), event.get("object") or {})
            if event.get("type") is None:  # kopf is (re)listing: reconcile once it is over
                scheduler.resync.listed(kind)
        except Exception:  # a poison object must never stop the watch
            log.exception("selector_event_failed", kind=kind)
