"""PersistentVolume, PersistentVolumeClaim, StorageClass and CSINode events → volume store."""

from __future__ import annotations

from typing import Any

import kopf
import structlog

from podium.scheduling.scheduler import PodiumScheduler

log = structlog.get_logger("podium.handlers.volumes")

# Store kind -> (API group, version).
_RESOURCES = {
    "persistentvolumes": ("", "v1"),
    "persistentvolumeclaims": ("", "v1"),
    "storageclasses": ("storage.k8s.io", "v1"),
    "csinodes": ("storage.k8s.io", "v1"),
}


def register_volumes(registry: kopf.OperatorRegistry, scheduler: PodiumScheduler) -> None:
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
    async def volume_event(event: kopf.RawEvent, **_: Any) -> None:
        try:
            scheduler.on_volume(kind, event.get("type"), event.get("object") or {})
            if event.get("type") is None:  # kopf is (re)listing: reconcile once it is over
                scheduler.resync.listed(kind)
        except Exception:  # a poison object must never stop the watch
            log.exception("volume_event_failed", kind=kind)
