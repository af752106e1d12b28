"""The kinds Podium watches, one row each, and the kopf event handler every row gets.

A handler only turns an event into a call on the scheduler (cache, stores,
queue); it writes nothing onto the object, and a poison object is logged and
skipped, never allowed to stop the watch. Rows marked ``relisted`` tell the
resyncer when kopf has finished a (re)list, so objects deleted while the watch
was down are dropped (see ``podium.scheduling.resync``).

To watch a new kind: add a row here, an ``on_*`` method on ``PodiumScheduler``,
the kind to the scheduler's ``prime`` and (if relisted) to the resyncer, and
list/watch for it to the chart's ClusterRole.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import kopf
import structlog

from podium.scheduling.scheduler import PodiumScheduler

__all__ = ["WATCHED", "Watched", "register_watches"]

log = structlog.get_logger("podium.handlers")

Apply = Callable[[PodiumScheduler, "str | None", Mapping[str, Any]], None]


@dataclass(frozen=True, slots=True)
class Watched:
    group: str
    version: str
    plural: str
    apply: Apply
    relisted: bool = True


def _store(method: str, kind: str) -> Apply:
    """A call to ``scheduler.<method>(kind, event type, body)`` for the stores keyed by kind."""

    def apply(scheduler: PodiumScheduler, event_type: str | None, body: Mapping[str, Any]) -> None:
        getattr(scheduler, method)(kind, event_type, body)

    return apply


WATCHED: tuple[Watched, ...] = (
    Watched("", "v1", "pods", PodiumScheduler.on_pod),
    Watched("", "v1", "nodes", PodiumScheduler.on_node),
    Watched("", "v1", "namespaces", PodiumScheduler.on_namespace, relisted=False),
    Watched("policy", "v1", "poddisruptionbudgets", PodiumScheduler.on_pdb, relisted=False),
    # Storage, for the volume plugins.
    *(
        Watched(group, "v1", plural, _store("on_volume", plural))
        for group, plural in (
            ("", "persistentvolumes"),
            ("", "persistentvolumeclaims"),
            ("storage.k8s.io", "storageclasses"),
            ("storage.k8s.io", "csinodes"),
        )
    ),
    # DRA objects, for DynamicResources.
    *(
        Watched("resource.k8s.io", "v1", plural, _store("on_dra", plural))
        for plural in (
            "deviceclasses",
            "resourceslices",
            "resourceclaims",
            "resourceclaimtemplates",
            "devicetaintrules",
        )
    ),
    # The Services and controllers whose selectors make system default spreading.
    *(
        Watched(group, "v1", plural, _store("on_selector", plural))
        for group, plural in (
            ("", "services"),
            ("", "replicationcontrollers"),
            ("apps", "replicasets"),
            ("apps", "statefulsets"),
        )
    ),
)


def _register(registry: kopf.OperatorRegistry, scheduler: PodiumScheduler, row: Watched) -> None:
    @kopf.on.event(row.group, row.version, row.plural, registry=registry, id=f"{row.plural}_event")
    async def event_handler(event: kopf.RawEvent, **_: Any) -> None:
        try:
            row.apply(scheduler, event.get("type"), event.get("object") or {})
            if row.relisted and event.get("type") is None:  # a (re)list: reconcile once over
                scheduler.resync.listed(row.plural)
        except Exception:  # a poison object must never stop the watch
            log.exception("event_failed", kind=row.plural)


def register_watches(registry: kopf.OperatorRegistry, scheduler: PodiumScheduler) -> None:
    """One ``kopf.on.event`` handler per watched kind; ``async`` so it runs on the loop."""
    for row in WATCHED:
        _register(registry, scheduler, row)
