"""The kinds Podium watches, one row each, and the kopf event handler every row gets.

A handler only turns an event into a call on the scheduler (cache, stores,
queue); it writes nothing onto the object, and a poison object is logged and
skipped, never allowed to stop the watch. Every kopf-watched row tells the
resyncer when kopf has finished a (re)list, so objects deleted while the watch
was down are dropped (see ``podium.scheduling.resync``). Rows marked ``direct``
are not watched through kopf's per-object machinery but by a ``ListWatch``
(``podium.handlers.listwatch``) that the runtime adds to kopf's root tasks; it
feeds the same handler, and synthesises its own deletes after a relist.

To watch a new kind: add a row here, an ``on_*`` method on ``PodiumScheduler``,
the kind to the scheduler's ``prime`` (``_object_stores``) and to the resyncer, and
list/watch for it to the chart's ClusterRole.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import kopf
import structlog

from podium.handlers.listwatch import Deliver, ListWatch, ListWatchSettings
from podium.kube.client import KubeClient
from podium.scheduling.scheduler import PodiumScheduler

__all__ = ["WATCHED", "Watched", "direct_watches", "handler", "register_watches"]

log = structlog.get_logger("podium.handlers")

Apply = Callable[[PodiumScheduler, "str | None", Mapping[str, Any]], None]


@dataclass(frozen=True, slots=True)
class Watched:
    group: str
    version: str
    plural: str
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
    Watched("", "v1", "pods", PodiumScheduler.on_pod, direct=True),
    Watched("", "v1", "nodes", PodiumScheduler.on_node),
    Watched("", "v1", "namespaces", PodiumScheduler.on_namespace),
    Watched("policy", "v1", "poddisruptionbudgets", PodiumScheduler.on_pdb),
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
    # Workload and PodGroup, for gang scheduling, when the GenericWorkload gate is on.
    *(
        Watched(
            "scheduling.k8s.io",
            "v1beta1",
            plural,
            _store("on_pod_group", plural),
            optional=True,
        )
        for plural in ("workloads", "podgroups")
    ),
)


def handler(scheduler: PodiumScheduler, row: Watched) -> Deliver:
    """The one place where an event of ``row``'s kind becomes cache and queue updates."""
    resync = not row.direct  # a direct stream reconciles its own relists

    first_listing = None if row.direct else scheduler.first_listing

    def handle(event_type: str | None, body: Mapping[str, Any]) -> None:
        try:
            row.apply(scheduler, event_type, body)
            if first_listing is not None:
                first_listing.seen(row.plural, body)
            if resync and event_type is None:  # a (re)list: reconcile once over
                scheduler.resync.listed(row.plural)
        except Exception:  # a poison object must never stop the watch
            log.exception("event_failed", kind=row.plural)

    return handle


def _register(registry: kopf.OperatorRegistry, scheduler: PodiumScheduler, row: Watched) -> None:
    handle = handler(scheduler, row)

    @kopf.on.event(row.group, row.version, row.plural, registry=registry, id=f"{row.plural}_event")
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
            prefix = f"/apis/{row.group}/{row.version}" if row.group else f"/api/{row.version}"
            streams.append(
                ListWatch(
                    client,
                    f"{prefix}/{row.plural}",
                    handler(scheduler, row),
                    cached(row.plural),
                    settings,
                )
            )
    return streams
