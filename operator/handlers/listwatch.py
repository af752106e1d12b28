"""A direct, paginated list-and-watch for the pod firehose, run as one of kopf's root tasks.

kopf spends about 0.9 CPU ms per pod event around Podium's own handler (a
worker task per object, cause detection, handler kwargs, stdlib ``json``);
this stream costs an ``orjson`` decode and one call of the same handler (see
docs/architecture.md for the measurement). It behaves as kopf's watcher and
client-go's reflector do:

- a paginated LIST (``limit``/``continue``) delivers every object as a
  ``type=None`` event, then a WATCH resumes from the list's resourceVersion,
  with bookmarks keeping that version fresh;
- a closed stream resumes from the last version seen; a 410 Gone (compacted
  version, expired ``continue``) lists again;
- after each (re)list, every cached object absent from it and no newer than
  it gets a synthesised ``DELETED`` event: deletions hidden by a watch gap
  reach the handler like any other.

Objects are keyed by ``metadata.uid``, as the scheduler caches pods.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
import structlog

from podium.kube.client import LIST_PAGE, ApiError, KubeClient, list_pages
from podium.scheduling.resync import stale_keys

__all__ = ["Deliver", "ListWatch", "ListWatchSettings"]

log = structlog.get_logger("podium.handlers.listwatch")

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


class _Gone(Exception):
    """410: the resourceVersion or continue token is too old; list again."""


class ListWatch:
    """LIST then WATCH one collection, delivering each event to ``deliver``.

    ``cached()`` returns uid -> resourceVersion of what the handler's side
    holds, for the deletes synthesised after a relist.
    """

    def __init__(
        self,
        client: KubeClient,
        path: str,
        deliver: Deliver,
        cached: Callable[[], Mapping[str, str]],
        settings: ListWatchSettings | None = None,
    ) -> None:
        self.client = client
        self.path = path
        self.deliver = deliver
        self.cached = cached
        self.settings = settings or ListWatchSettings()
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
        async for page in list_pages(self.client, self.path, self.settings.page):
            if page.first:  # a (re)started list: only its own snapshot counts
                listed.clear()
                version = page.version
            for item in page.items:
                uid = (item.get("metadata") or {}).get("uid")
                if uid:
                    listed.add(str(uid))
                self.deliver(None, item)
            await asyncio.sleep(0)  # let the scheduling loop and other watches run between pages
        for uid in stale_keys(self.cached(), listed, version):
            self.deliver("DELETED", {"metadata": {"uid": uid}})
        self.resource_version = version
        self.lists += 1
        self.synced.set()

    async def watch(self) -> None:
        """One WATCH request from ``resource_version`` until the server ends it."""
        settings = self.settings
        params = {
            "watch": "1",
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(int(settings.server_timeout)),
        }
        async for event in self._events(params):
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

    async def _events(self, params: dict[str, str]) -> AsyncIterator[dict[str, Any]]:
        headers = {}
        started = time.monotonic()
        token = await self.client.creds.current_token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        timeout = aiohttp.ClientTimeout(
            total=None,
            connect=30.0,
            sock_read=self.settings.server_timeout + self.settings.client_margin,
        )
        async with self.client.session.get(
            self.client.creds.server + self.path, params=params, headers=headers, timeout=timeout
        ) as resp:
            if resp.status >= 400:
                raw = await resp.read()
                try:
                    payload: Any = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    payload = raw.decode(errors="replace")
                if resp.status == 410:
                    raise _Gone()
                tokens = self.client.creds.tokens
                if resp.status == 401 and tokens is not None:
                    tokens.reset(started)  # the next attempt reads the token afresh
                raise ApiError(resp.status, payload)
            buffer = b""
            async for chunk in resp.content.iter_any():
                buffer += chunk
                if b"\n" not in chunk:
                    continue
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield orjson.loads(line)
            if buffer.strip():
                yield orjson.loads(buffer)
