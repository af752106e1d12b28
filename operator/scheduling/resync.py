"""Resync after a relist: forget what a watch gap hid.

When a watch resumes from a compacted resourceVersion (410 Gone), kopf lists
the objects again and replays them as ``type=None`` events, but sends no
DELETED event for objects removed while no watch was open. A pod deleted in
the gap would then go on holding its node's resources in the cache forever.

So after every relist quiets down, Podium takes its own consistent LIST and
drops each cached object that is absent from it and no newer than the list.
Objects the watch delivered after the list was taken are newer and are kept.
A relist of an empty collection replays nothing, so the same resync also runs
on a slow period.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from podium.kube.client import KubeClient, list_pages
from podium.kube.kinds import NAMESPACES, NODES, PODDISRUPTIONBUDGETS, PODS, Kind, paths
from podium.kube.listwatch import stale_keys
from podium.state import dra, podgroups, selectors, volumes

__all__ = ["METADATA_LIST", "ResyncSettings", "Resyncer"]

log = structlog.get_logger("podium.scheduling.resync")

# Every kind Podium watches: a relist can leave any of them stale. The Workload API's
# kinds join (``Resyncer.add``) where discovery finds them served.
_ALWAYS = (
    PODS,
    NODES,
    NAMESPACES,
    PODDISRUPTIONBUDGETS,
    *volumes.RESOURCES,
    *selectors.RESOURCES,
    *dra.RESOURCES,
)
_PATHS = paths(_ALWAYS)
# A resync needs each object's name, namespace or uid and the list's resourceVersion:
# the API server's metadata-only list (what client-go's metadata informers ask for)
# leaves out specs and statuses, a 15,000-node list's bulk. Plain JSON if refused.
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
# Namespaced kinds cached by namespace/name (pods are cached by uid).
_BY_NAMESPACE = frozenset(
    k.plural for k in (*_ALWAYS, *podgroups.RESOURCES) if k.namespaced and k is not PODS
)


@dataclass(slots=True)
class ResyncSettings:
    # A relist is over once no listed event has arrived for this long.
    quiet: float = 2.0
    # A failed LIST is retried after this long, doubling up to ``max_retry``.
    retry: float = 1.0
    max_retry: float = 30.0
    # Resync every kind this often even without a relist; 0 disables it.
    period: float = 300.0


@dataclass(slots=True)
class _Kind:
    last_listed: float = 0.0
    task: asyncio.Task[None] | None = None


class Resyncer:
    """Debounces relists per kind and reconciles the cache with one LIST each.

    ``cached(kind)`` returns key -> resourceVersion of what Podium holds;
    ``forget(kind, key)`` drops one entry as if its DELETED event had come. A kind
    held outside the scheduler's cache (SchedulerPolicies) brings its own pair
    (``watch_store``).
    """

    def __init__(
        self,
        client: KubeClient,
        cached: Callable[[str], Mapping[str, str]],
        forget: Callable[[str, str], None],
        settings: ResyncSettings | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.client = client
        self.cached = cached
        self.forget = forget
        self.settings = settings or ResyncSettings()
        # The debounce's and the retries' time; a test passes its own to move it.
        self.clock = clock
        self.sleep = sleep
        self.paths = dict(_PATHS)
        self.kinds: dict[str, _Kind] = {kind: _Kind() for kind in self.paths}
        self.stores: dict[str, tuple[Callable[[], Mapping[str, str]], Callable[[str], None]]] = {}

    def add(self, paths: Mapping[str, str]) -> None:
        """Kinds found served at start-up (the Workload API), resynced like the rest."""
        self.paths.update(paths)
        for kind in paths:
            self.kinds.setdefault(kind, _Kind())

    def watch_store(
        self,
        kind: Kind,
        cached: Callable[[], Mapping[str, str]],
        forget: Callable[[str], None],
    ) -> None:
        """A kind whose holder is not the scheduler's cache, reconciled like the rest:
        ``cached()`` gives its key -> resourceVersion, ``forget(key)`` plays its DELETED."""
        self.add(paths([kind]))
        self.stores[kind.plural] = (cached, forget)

    def listed(self, kind: str, *, relist: bool = False) -> None:
        """A ``type=None`` (listing) event arrived for ``kind``.

        ``relist``: the first listing is over, so this one follows a watch gap (kopf lists
        again only after a lost connection or a 410, never on a watch's routine timeout).
        A gap is the API server's, not one kind's, and kopf's relist of a collection that
        the gap emptied brings no event at all (the last PDB, deleted while the watches
        were down), so every kind is reconciled.
        """
        now = self.clock()
        for name in self.kinds if relist else (kind,):
            self.kinds[name].last_listed = now
            self._start(name)

    def _start(self, kind: str) -> None:
        state = self.kinds[kind]
        if state.task is None or state.task.done():
            state.task = asyncio.get_running_loop().create_task(self._resync(kind))

    async def run_periodic(self) -> None:
        if self.settings.period <= 0:
            return
        while True:
            await self.sleep(self.settings.period)
            for kind in self.kinds:
                self._start(kind)

    async def close(self) -> None:
        for state in self.kinds.values():
            if state.task is not None:
                state.task.cancel()
                with contextlib.suppress(BaseException):
                    await state.task

    async def _resync(self, kind: str) -> None:
        state = self.kinds[kind]
        # A debounce: each listed event pushes the deadline, so there is no event to await.
        while (wait := state.last_listed + self.settings.quiet - self.clock()) > 0:
            await self.sleep(wait)
        delay = self.settings.retry
        while True:
            try:
                listed, version = await self._list_keys(kind)
                break
            except Exception as exc:  # the API may still be down: retry, never give up
                log.warning("resync_list_failed", kind=kind, error=str(exc), retry_s=delay)
                await self.sleep(delay)
                delay = min(delay * 2, self.settings.max_retry)
        self.reconcile(kind, listed, version)

    async def _list_keys(self, kind: str) -> tuple[set[str], str]:
        """The keys a LIST shows and its resourceVersion, read a page at a time: a
        5,000-node list in one answer would set the process's peak memory."""
        listed: set[str] = set()
        version = ""
        async for page in list_pages(self.client, self.paths[kind], accept=METADATA_LIST):
            if page.first:  # a (re)started list: only its own snapshot counts
                listed.clear()
                version = page.version
            listed.update(_key(kind, item) for item in page.items)
        return listed, version

    def reconcile(self, kind: str, listed: set[str], version: str) -> list[str]:
        """Drop what a LIST (its keys and resourceVersion) shows to be gone; returns the keys."""
        store = self.stores.get(kind)
        held = store[0]() if store else self.cached(kind)
        stale = stale_keys(held, listed, version)
        for key in stale:
            if store:
                store[1](key)
            else:
                self.forget(kind, key)
        log.info("resync_done", kind=kind, listed=len(listed), removed=len(stale))
        return stale


def _key(kind: str, item: Mapping[str, Any]) -> str:
    meta = item.get("metadata") or {}
    if kind in _BY_NAMESPACE:
        return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
    return str(meta.get("uid") if kind == "pods" else meta.get("name") or "")
