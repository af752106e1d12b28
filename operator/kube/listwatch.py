"""A paginated list-and-watch of one collection: client-go's reflector, on ``KubeClient``.

The runtime watches the pod firehose with it among kopf's root tasks (kopf spends
about 0.9 CPU ms per pod event around Podium's handler; this stream costs an
``orjson`` decode and one call of the same handler: docs/benchmark.md, "The direct
pod stream"), and the fault tests feed an in-process scheduler with it. It behaves as
kopf's watcher and client-go's reflector do:

- a paginated LIST (``limit``/``continue``) delivers every object as a
  ``type=None`` event, then a WATCH resumes from the list's resourceVersion,
  with bookmarks keeping that version fresh;
- a closed stream resumes from the last version seen; a 410 Gone (compacted
  version, expired ``continue``) lists again;
- after each (re)list, every cached object absent from it and no newer than
  it gets a synthesised ``DELETED`` event: deletions hidden by a watch gap
  reach the handler like any other.

Objects are keyed by ``metadata.uid``, as the scheduler caches pods, or by name for a
cluster-scoped kind. Authentication, 401 handling and the read budget are the client's
(``KubeClient.watch``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import structlog

from podium.kube.client import LIST_PAGE, ApiError, KubeClient, list_pages

__all__ = ["Deliver", "ListWatch", "ListWatchSettings", "stale_keys"]

log = structlog.get_logger("podium.kube.listwatch")

# (event type or None for a listed object, body): the watched kind's handler.
Deliver = Callable[["str | None", Mapping[str, Any]], None]


@dataclass(frozen=True, slots=True)
class ListWatchSettings:
    # Objects per LIST page, as client-go's reflector pages (500).
    page: int = LIST_PAGE
    # The server ends a watch after this long; the stream then resumes (kopf's server_timeout).
    server_timeout: float = 300.0
    # A stream silent this much longer than server_timeout is dropped and resumed.
    client_margin: float = 30.0
    # A watch the server ends sooner than this is followed by a pause this long.
    min_watch: float = 1.0
    # Pauses after consecutive failures; the last one repeats (an outage is waited out).
    backoffs: tuple[float, ...] = (1.0, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0, 30.0)


def _version(value: str) -> int | None:
    """etcd-backed resourceVersions are integers; anything else is not compared."""
    return int(value) if value.isdigit() else None


def stale_keys(cached: Mapping[str, str], listed: set[str], list_version: str) -> list[str]:
    """Keys cached at a version no newer than the list, yet absent from it.

    ``cached`` maps key to the resourceVersion the cache last saw. An entry
    without a comparable version is kept: dropping a live object is worse
    than keeping a gone one until its DELETED event.
    """
    limit = _version(list_version)
    if limit is None:
        return []
    stale = []
    for key, version in cached.items():
        if key in listed:
            continue
        seen = _version(version)
        if seen is not None and seen <= limit:
            stale.append(key)
    return stale


class _Gone(Exception):
    """410: the resourceVersion or continue token is too old; list again."""


class ListWatch:
    """LIST then WATCH one collection, delivering each event to ``deliver``.

    ``cached()`` returns key -> resourceVersion of what the handler's side
    holds, for the deletes synthesised after a relist; the key is the uid, or the
    name with ``by_name``. ``params`` narrow the collection (a label selector).
    """

    def __init__(
        self,
        client: KubeClient,
        path: str,
        deliver: Deliver,
        cached: Callable[[], Mapping[str, str]],
        settings: ListWatchSettings | None = None,
        *,
        params: Mapping[str, str] | None = None,
        by_name: bool = False,
    ) -> None:
        self.client = client
        self.path = path
        self.deliver = deliver
        self.cached = cached
        self.settings = settings or ListWatchSettings()
        self.params = dict(params or {})
        self.key = "name" if by_name else "uid"
        self.resource_version = ""
        self.lists = 0  # completed (re)lists, for tests and logs
        self.synced = asyncio.Event()  # set once the first list was delivered

    async def run(self) -> None:
        failures = 0
        while True:
            try:
                if not self.resource_version:
                    await self.relist()
                began = time.monotonic()
                await self.watch()
                failures = 0
                if time.monotonic() - began < self.settings.min_watch:
                    await asyncio.sleep(self.settings.min_watch)  # never a tight re-watch loop
            except _Gone:
                log.info("watch_version_gone", path=self.path)
                self.resource_version = ""
            except (ApiError, aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
                if isinstance(exc, ApiError) and exc.status == 410:
                    self.resource_version = ""
                    continue
                backoffs = self.settings.backoffs
                delay = backoffs[min(failures, len(backoffs) - 1)]
                failures += 1
                log.warning("watch_failed", path=self.path, error=repr(exc), retry_in=delay)
                await asyncio.sleep(delay)

    async def relist(self) -> None:
        """A full paginated LIST, then deletes for what it no longer holds."""
        listed: set[str] = set()
        version = ""
        pages = list_pages(self.client, self.path, self.settings.page, params=self.params)
        async for page in pages:
            if page.first:  # a (re)started list: only its own snapshot counts
                listed.clear()
                version = page.version
            for item in page.items:
                key = (item.get("metadata") or {}).get(self.key)
                if key:
                    listed.add(str(key))
                self.deliver(None, item)
            await asyncio.sleep(0)  # let the scheduling loop and other watches run between pages
        for key in stale_keys(self.cached(), listed, version):
            self.deliver("DELETED", {"metadata": {self.key: key}})
        self.resource_version = version
        self.lists += 1
        self.synced.set()

    async def watch(self) -> None:
        """One WATCH request from ``resource_version`` until the server ends it."""
        settings = self.settings
        params = {
            **self.params,
            "watch": "1",
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(int(settings.server_timeout)),
        }
        read_timeout = settings.server_timeout + settings.client_margin
        async for event in self.client.watch(self.path, params, read_timeout):
            kind = event.get("type")
            body = event.get("object") or {}
            if kind == "ERROR":
                code = body.get("code")
                if code == 410:
                    raise _Gone()
                raise ApiError(int(code or 0), body)
            version = (body.get("metadata") or {}).get("resourceVersion")
            if kind != "BOOKMARK":
                self.deliver(kind, body)
            if version:
                self.resource_version = str(version)
