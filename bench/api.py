"""The harness's own API client, which counts every request it makes.

apiserver_request_total has no label for the client, so the benchmark learns
what a scheduler asked for by taking the apiserver's counts over the measured
phase and subtracting the harness's own requests, counted here under the same
(verb, resource) names the apiserver uses. It is plain aiohttp with orjson
rather than kubernetes_asyncio because on two cores the harness competes with
the scheduler under test for CPU, and model (de)serialisation per pod would
cost more than the scheduler's own work.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp
import orjson

from podium.kube.credentials import Credentials, load_credentials, ssl_context

__all__ = ["Api", "ApiFailure", "request_key"]

WatchHandler = Callable[[str, dict[str, Any]], None]


# DELETE collection calls answered 504 (the server's 60 s request timeout) before the
# harness gives up: enough for 30,000 pods at the slowest deletion rate seen here.
_DELETE_TRIES = 10


class ApiFailure(RuntimeError):
    """A harness request the API server refused; the benchmark cannot go on without it."""

    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        message = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"{method} {path}: HTTP {status}: {message}")
        self.status = status


def request_key(verb: str, resource: str, subresource: str = "", group: str = "") -> str:
    """`VERB group/resource/subresource` as both the harness and the scrape spell it.

    verb is the apiserver's reported verb: POST, GET, LIST, WATCH, PUT, PATCH, DELETE.
    """
    name = f"{group}/{resource}" if group else resource
    return f"{verb} {name}/{subresource}" if subresource else f"{verb} {name}"


class Api:
    """aiohttp session for the admin user; `counts` holds every request sent so far."""

    def __init__(self, creds: Credentials, concurrency: int = 64) -> None:
        self.server = creds.server
        self.counts: Counter[str] = Counter()
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        if creds.token:
            headers["Authorization"] = f"Bearer {creds.token}"
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=concurrency + 8, ssl=ssl_context(creds)),
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
            read_bufsize=1 << 20,
        )

    @classmethod
    async def connect(cls, kubeconfig: str, concurrency: int = 64) -> Api:
        return cls(await load_credentials(kubeconfig), concurrency)

    async def close(self) -> None:
        await self._session.close()

    async def call(
        self,
        method: str,
        path: str,
        key: str,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        allow: tuple[int, ...] = (),
        content_type: str | None = None,
    ) -> Any:
        """One request; statuses in allow (e.g. 404 on delete) return None instead of raising."""
        self.counts[key] += 1
        data = orjson.dumps(body) if body is not None else None
        headers = {"Content-Type": content_type} if content_type else None
        async with self._session.request(
            method,
            self.server + path,
            data=data,
            params=params,
            headers=headers,
            timeout=_REQUEST_TIMEOUT,
        ) as resp:
            raw = await resp.read()
            if resp.status in allow:
                return None
            payload = orjson.loads(raw) if raw else None
            if resp.status >= 400:
                raise ApiFailure(method, path, resp.status, payload)
            return payload

    # -- the calls the harness makes, named as the apiserver counts them: by HTTP method,
    # except that a GET is LIST or WATCH on a collection; a delete of a collection is DELETE.

    async def create(self, path: str, resource: str, body: Any) -> Any:
        return await self.call("POST", path, request_key("POST", resource), body)

    async def patch(self, path: str, resource: str, body: Any, subresource: str = "") -> Any:
        """A JSON merge patch of path (or of its subresource)."""
        key = request_key("PATCH", resource, subresource)
        target = f"{path}/{subresource}" if subresource else path
        return await self.call("PATCH", target, key, body, content_type=_MERGE_PATCH)

    async def delete(self, path: str, resource: str, grace_zero: bool = True) -> None:
        params = {"gracePeriodSeconds": "0"} if grace_zero else None
        await self.call(
            "DELETE", path, request_key("DELETE", resource), params=params, allow=(404,)
        )

    async def delete_collection(
        self, path: str, resource: str, selector: str, allow: tuple[int, ...] = ()
    ) -> None:
        """DELETE a collection. One the API server cannot delete within its request
        timeout (30,000 pods on two cores) is answered 504 while the server goes on
        deleting; the call is made again, up to ``_DELETE_TRIES`` times, each time on what
        is left."""
        params = {"labelSelector": selector, "gracePeriodSeconds": "0"}
        key = request_key("DELETE", resource)
        for attempt in range(1, _DELETE_TRIES + 1):
            try:
                await self.call("DELETE", path, key, params=params, allow=allow)
                return
            except ApiFailure as exc:
                if exc.status != 504 or attempt == _DELETE_TRIES:
                    raise

    async def list(
        self, path: str, resource: str, params: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        result: dict[str, Any] = await self.call(
            "GET", path, request_key("LIST", resource), params=params
        )
        return result

    async def watch(
        self,
        path: str,
        resource: str,
        resource_version: str,
        handle: WatchHandler,
        relist: Callable[[], Awaitable[str]],
    ) -> None:
        """Feed (type, object) events to handle until cancelled, resuming after drops.

        A watch is counted when it ends, as the apiserver does. After a 410 (the
        resourceVersion was compacted) relist() resynchronises and returns a new one.
        """
        version = resource_version
        while True:
            params = {
                "watch": "true",
                "resourceVersion": version,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": "3600",
            }
            try:
                async with self._session.get(self.server + path, params=params) as resp:
                    if resp.status >= 400:
                        raise ApiFailure("WATCH", path, resp.status, await resp.text())
                    async for line in resp.content:
                        event = orjson.loads(line)
                        kind = event.get("type")
                        obj = event.get("object") or {}
                        if kind == "ERROR":
                            if obj.get("code") == 410:
                                version = await relist()
                                break
                            raise ApiFailure("WATCH", path, int(obj.get("code") or 0), obj)
                        version = (obj.get("metadata") or {}).get("resourceVersion") or version
                        if kind != "BOOKMARK":
                            handle(str(kind), obj)
            except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError):
                await asyncio.sleep(0.2)
            finally:
                self.counts[request_key("WATCH", resource)] += 1


_REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=120)
_MERGE_PATCH = "application/merge-patch+json"
