"""The kinds Podium watches, one row each, and the kopf event handler every row gets.

A handler only turns an event into a call on the scheduler (cache, stores,
queue); it writes nothing onto the object, and a poison object is logged and
skipped, never allowed to stop the watch. Every kopf-watched row tells the
resyncer when kopf has finished a (re)list, so objects deleted while the watch
was down are dropped (see ``podium.scheduling.resync``). Rows marked ``direct``
are not watched through kopf's per-object machinery but by a ``ListWatch``
(``podium.kube.listwatch``) that the runtime adds to kopf's root tasks; it
feeds the same handler, and synthesises its own deletes after a relist.

To watch a new kind: declare it (``podium.kube.kinds.Kind``) in the store that holds
it, add a row here, an ``on_*`` method on ``PodiumScheduler``, the store to the
scheduler's ``_object_stores`` (prime and resync read it there) and to the resyncer's
kinds, and list/watch for it to the chart's ClusterRole (a test compares the two).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import kopf
import structlog

from podium.kube.client import KubeClient
from podium.kube.kinds import NAMESPACES, NODES, PODDISRUPTIONBUDGETS, PODS, Kind
from podium.kube.listwatch import Deliver, ListWatch, ListWatchSettings
from podium.scheduling.scheduler import PodiumScheduler
from podium.state import dra, podgroups, selectors, volumes

__all__ = ["WATCHED", "Watched", "direct_watches", "handler", "register_watches"]

log = structlog.get_logger("podium.handlers")

Apply = Callable[[PodiumScheduler, "str | None", Mapping[str, Any]], None]


@dataclass(frozen=True, slots=True)
class Watched:
    kind: Kind
    apply: Apply
    # Watched by a direct ListWatch instead of kopf: the pod firehose (docs/architecture.md).
    direct: bool = False
    # Watched only when discovery showed the kind served (the beta Workload API).
    optional: bool = False


def _store(method: str, kind: str) -> Apply:
    """A call to ``scheduler.<method>(kind, event type, body)`` for the stores keyed by kind."""

    def apply(scheduler: PodiumScheduler, event_type: str | None, body: Mapping[str, Any]) -> None:
        getattr(scheduler, method)(kind, event_type, body)

    return apply


WATCHED: tuple[Watched, ...] = (
    Watched(PODS, PodiumScheduler.on_pod, direct=True),
    Watched(NODES, PodiumScheduler.on_node),
    Watched(NAMESPACES, PodiumScheduler.on_namespace),
    Watched(PODDISRUPTIONBUDGETS, PodiumScheduler.on_pdb),
    # Storage, for the volume plugins.
    *(Watched(k, _store("on_volume", k.plural)) for k in volumes.RESOURCES),
    # DRA objects, for DynamicResources.
    *(Watched(k, _store("on_dra", k.plural)) for k in dra.RESOURCES),
    # The Services and controllers whose selectors make system default spreading.
    *(Watched(k, _store("on_selector", k.plural)) for k in selectors.RESOURCES),
    # Workload and PodGroup, for gang scheduling, when the GenericWorkload gate is on.
    *(Watched(k, _store("on_pod_group", k.plural), optional=True) for k in podgroups.RESOURCES),
)


def handler(scheduler: PodiumScheduler, row: Watched) -> Deliver:
    """The one place where an event of ``row``'s kind becomes cache and queue updates."""
    resync = not row.direct  # a direct stream reconciles its own relists

    first_listing = None if row.direct else scheduler.first_listing

    def handle(event_type: str | None, body: Mapping[str, Any]) -> None:
        try:
            row.apply(scheduler, event_type, body)
            if first_listing is not None:
                first_listing.seen(row.kind.plural, body)
            if resync and event_type is None:  # a (re)list: reconcile once over
                relist = scheduler.first_listing.synced.is_set()
                scheduler.resync.listed(row.kind.plural, relist=relist)
        except Exception:  # a poison object must never stop the watch
            log.exception("event_failed", kind=row.kind.plural)

    return handle


def _register(registry: kopf.OperatorRegistry, scheduler: PodiumScheduler, row: Watched) -> None:
    handle = handler(scheduler, row)
    kind = row.kind

    @kopf.on.event(
        kind.group, kind.version, kind.plural, registry=registry, id=f"{kind.plural}_event"
    )
    async def event_handler(event: kopf.RawEvent, **_: Any) -> None:
        handle(event.get("type"), event.get("object") or {})


def register_watches(registry: kopf.OperatorRegistry, scheduler: PodiumScheduler) -> None:
    """One ``kopf.on.event`` handler per kopf-watched kind; ``async`` so it runs on the loop."""
    for row in WATCHED:
        if not row.direct and (not row.optional or scheduler.pod_groups.served):
            _register(registry, scheduler, row)


def direct_watches(
    scheduler: PodiumScheduler, client: KubeClient, settings: ListWatchSettings | None = None
) -> list[ListWatch]:
    """A ``ListWatch`` per ``direct`` row, for the runtime to start among kopf's root tasks."""
    streams = []

    def cached(plural: str) -> Callable[[], Mapping[str, str]]:
        return lambda: scheduler.cached_versions(plural)

    for row in WATCHED:
        if row.direct:
            streams.append(
                ListWatch(
                    client,
                    row.kind.path,
                    handler(scheduler, row),
                    cached(row.kind.plural),
                    settings,
                )
            )
    return streams
