"""PodDisruptionBudget events → the budgets preemption counts violations against."""

from __future__ import annotations

from typing import Any

import kopf
import structlog

from podium.scheduling.scheduler import PodiumScheduler

log = structlog.get_logger("podium.handlers.pdbs")


def register_pdbs(registry: kopf.OperatorRegistry, scheduler: PodiumScheduler) -> None:
    @kopf.on.event("policy", "v1", "poddisruptionbudgets", registry=registry)
    async def pdb_event(event: kopf.RawEvent, **_: Any) -> None:
        try:
            scheduler.on_pdb(event.get("type"), event.get("object") or {})
        except Exception:  # a poison object must never stop the watch
            log.exception("pdb_event_failed")
