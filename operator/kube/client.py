"""A small async REST client for the few calls the scheduler makes itself.

kopf owns most watches. Binding, status patches, Events and reads go through
one pool of keep-alive connections (``podium.kube.http``) with orjson bodies,
which is much cheaper per call than aiohttp or the generated kubernetes-asyncio
models; a watch (``watch``) streams through ``session`` (aiohttp). A 401 is answered by one
re-authentication (``podium.kube.credentials``), never a loop.

The client is also a polite one: it waits as long as a 429 or 5xx answer's
``Retry-After`` asks, and an optional client-side rate limit gives Bindings a
budget of their own, so that status patches and Events can never starve
them (kube-scheduler #135900).
"""

from __future__ import annotations

import asyncio
import enum
import math
import ssl
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlencode, urlsplit

import aiohttp
import orjson
import structlog

from podium.kube.credentials import Credentials, ssl_context
from podium.kube.http import ConnectionPool

if TYPE_CHECKING:
    from podium.metrics import Metrics

__all__ = [
    "LIST_PAGE",
    "ApiError",
    "Budget",
    "KubeClient",
    "ListPage",
    "TokenBucket",
    "budget_of",
    "list_pages",
]


log = structlog.get_logger("podium.kube.client")


Clock = Callable[[], float]


MAX_RETRIES = 10


# A Retry-After longer than this is shortened to it; one bad answer must not park a
# Binding for an hour.
MAX_RETRY_WAIT = 30.0


class ApiError(Exception):
    """A non-2xx answer; ``status`` 0 means the request never got one."""

    def __init__(self, status: int, body: Any, retry_after: float | None = None) -> None:
        message = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.body = body
        self.retry_after = retry_after

    @property
    def message(self) -> str:
        """The API server's message, as client-go's error prints it."""
        body = self.body
        if isinstance(body, dict) and body.get("message"):
            return str(body["message"])
        return str(self)


class Budget(enum.Enum):
    """Separate client-side rate budgets, as kube-scheduler keeps separate clients."""

    BINDINGS = "bindings"  # POST pods/binding: the scheduler's purpose
    REPORTS = "reports"  # pod status patches and Events
    DEFAULT = "default"  # reads, leases, preemption, everything else


def budget_of(method: str, path: str) -> Budget:
    if method == "POST" and path.endswith("/binding"):
        return Budget.BINDINGS
    if "/events" in path or (method == "PATCH" and path.endswith("/status")):
        return Budget.REPORTS
    return Budget.DEFAULT


class TokenBucket:
    """client-go's token bucket: ``qps`` tokens a second, at most ``burst`` saved.

    Each caller reserves its token at once and sleeps until it is due, so
    callers are served in arrival order. ``qps`` 0 means no limit.
    """

    def __init__(
        self,
        qps: float,
        burst: int,
        clock: Clock = time.monotonic,
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self.clock = clock
        self.sleep = sleep
        self._tokens = float(self.burst)
        self._last = clock()

    async def take(self) -> float:
        """Wait for one token; returns the seconds waited."""
        if self.qps <= 0:
            return 0.0
        now = self.clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        if self._tokens >= 0:
            return 0.0
        wait = -self._tokens / self.qps
        try:
            await self.sleep(wait)
        except asyncio.CancelledError:
            self._tokens += 1.0  # give the reservation back
            raise
        return wait


class KubeClient:
    def __init__(
        self,
        creds: Credentials,
        pool_size: int = 64,
        timeout: float = 30.0,
        *,
        qps: float = 0.0,
        burst: int = 0,
        metrics: Metrics | None = None,
        sleep: Callable[[float], Any] = asyncio.sleep,
    ) -> None:
        self.creds = creds
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        context = ssl_context(creds)
        self._connector_args = {"limit": pool_size, "ssl": context}
        self._session: aiohttp.ClientSession | None = None
        self._pool = ConnectionPool(
            creds.server, context if isinstance(context, ssl.SSLContext) else None, pool_size
        )
        self._request_timeout = timeout
        self._headers = {"Accept": "application/json", "User-Agent": "podium"}
        burst = burst or max(1, math.ceil(2 * qps))
        self.limits = {budget: TokenBucket(qps, burst, sleep=sleep) for budget in Budget}
        self.metrics = metrics
        self.sleep = sleep
        # The last answer was 401 even after re-authenticating: readiness turns false.
        self.unauthenticated = False

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(**self._connector_args),  # type: ignore[arg-type]
                headers=self._headers,
                timeout=self.timeout,
                json_serialize=lambda o: orjson.dumps(o).decode(),
            )
        return self._session

    async def close(self) -> None:
        await self._pool.close()
        if self._session is not None:
            await self._session.close()

    async def _send(
        self,
        method: str,
        path: str,
        data: bytes | None,
        headers: dict[str, str],
        params: dict[str, str] | None,
    ) -> tuple[int, str | None, Any]:
        target = f"{path}?{urlencode(params)}" if params else path
        answer = await self._pool.request(method, target, headers, data, self._request_timeout)
        raw = answer.body
        try:
            payload = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            payload = raw.decode(errors="replace")
        return answer.status, answer.headers.get("retry-after"), payload

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
        accept: str | None = None,
    ) -> Any:
        data = orjson.dumps(body) if body is not None else None
        budget = budget_of(method, path)
        tokens = self.creds.tokens
        reauthenticated = False
        retries = 0
        while True:
            waited = await self.limits[budget].take()
            if waited and self.metrics is not None:
                self.metrics.rate_limited.labels(budget.value).observe(waited)
            headers = {"Content-Type": content_type} if data is not None else {}
            if accept is not None:
                headers["Accept"] = accept
            token = await self.creds.current_token()
            if token:
                headers["Authorization"] = f"Bearer {token}"
            started = time.monotonic()
            status, retry_header, payload = await self._send(method, path, data, headers, params)
            if self.metrics is not None:
                host = urlsplit(self.creds.server).netloc
                self.metrics.rest_requests.labels(str(status), host, method).inc()
                self.metrics.rest_duration.labels(host, method).observe(time.monotonic() - started)
            if status == 401 and tokens is not None and not reauthenticated:
                # Re-authenticate once: a rotated file or a re-run plugin may hold a new token.
                reauthenticated = True
                tokens.reset(started)
                if await tokens.token() != token:
                    if self.metrics is not None:
                        self.metrics.reauthentications.inc()
                    continue
            self._auth_seen(status, method, path)
            if status < 400:
                return payload
            retry_after = _retry_after(status, retry_header)
            if retry_after is not None:
                # Capped once here, so no caller can wait longer than the client would.
                retry_after = min(retry_after, MAX_RETRY_WAIT)
            if retry_after is not None and retries < MAX_RETRIES:
                retries += 1
                if self.metrics is not None:
                    self.metrics.retry_after.labels(str(status)).inc()
                await self.sleep(retry_after)
                continue
            raise ApiError(status, payload, retry_after)

    async def watch(
        self, path: str, params: Mapping[str, str], read_timeout: float
    ) -> AsyncIterator[dict[str, Any]]:
        """One WATCH request: its events, decoded, until the server ends the stream.

        A watch is one answer read for minutes, so it streams through ``session``
        (aiohttp) instead of the pooled connections. The rest is the client's, as
        client-go's rest client throttles and authenticates a watch like any request: a
        token from the read budget, the current credentials, 401/403 counted, and after
        a 401 the next call reads the token afresh (the caller retries). An answer of
        400 or more is an ``ApiError``; a stream silent for ``read_timeout`` a
        ``TimeoutError``.
        """
        await self.limits[budget_of("GET", path)].take()
        headers = {}
        started = time.monotonic()
        token = await self.creds.current_token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        timeout = aiohttp.ClientTimeout(total=None, connect=30.0, sock_read=read_timeout)
        url = self.creds.server + path
        async with self.session.get(
            url, params=dict(params), headers=headers, timeout=timeout
        ) as resp:
            self._auth_seen(resp.status, "GET", path)
            if self.metrics is not None:
                host = urlsplit(self.creds.server).netloc
                self.metrics.rest_requests.labels(str(resp.status), host, "GET").inc()
            if resp.status >= 400:
                raw = await resp.read()
                try:
                    payload: Any = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    payload = raw.decode(errors="replace")
                if resp.status == 401 and self.creds.tokens is not None:
                    self.creds.tokens.reset(started)
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

    def _auth_seen(self, status: int, method: str, path: str) -> None:
        """Report 401/403 through a metric and a log line, and 401 through readiness."""
        if status in (401, 403) and self.metrics is not None:
            self.metrics.auth_failures.labels(str(status)).inc()
        if status == 401:
            if not self.unauthenticated:
                log.error("credentials_rejected", status=status, method=method, path=path)
            self.unauthenticated = True
        elif self.unauthenticated:
            log.info("credentials_accepted", status=status, method=method, path=path)
            self.unauthenticated = False
        if status == 403:
            log.warning("request_forbidden", method=method, path=path)

    async def get(
        self, path: str, params: dict[str, str] | None = None, accept: str | None = None
    ) -> Any:
        return await self.request("GET", path, params=params, accept=accept)

    async def post(self, path: str, body: Any) -> Any:
        return await self.request("POST", path, body)

    async def patch(self, path: str, body: Any, kind: str = "strategic-merge-patch") -> Any:
        return await self.request("PATCH", path, body, content_type=f"application/{kind}+json")

    async def delete(self, path: str, body: Any = None) -> Any:
        return await self.request("DELETE", path, body)


# Objects per page of a LIST: a 5,000-node cluster listed in one answer costs its whole
# JSON and the parsed copy at once, which sets the process's peak memory.
LIST_PAGE = 500


class _Getter(Protocol):
    async def get(
        self, path: str, params: dict[str, str] | None = None, accept: str | None = None
    ) -> Any: ...


@dataclass(frozen=True, slots=True)
class ListPage:
    """One page of a LIST; ``first`` marks the first page of a (re)started list, whose
    ``version`` (the resourceVersion every later page of it shares) is the list's."""

    items: list[Any]
    version: str
    first: bool


async def list_pages(
    client: _Getter,
    path: str,
    page: int = LIST_PAGE,
    accept: str | None = None,
    params: Mapping[str, str] | None = None,
) -> AsyncIterator[ListPage]:
    """A LIST, one page (``limit``/``continue``) at a time.

    An expired continue token (410) starts the list again from the first page: the
    callers apply items idempotently, so items seen twice do no harm.
    """
    token = ""
    while True:
        query = {**(params or {}), "limit": str(page)}
        if token:
            query["continue"] = token
        try:
            listed = await client.get(path, query, accept=accept)
        except ApiError as exc:
            if exc.status != 410 or not token:
                raise
            token = ""
            continue
        meta = listed.get("metadata") or {}
        yield ListPage(
            list(listed.get("items") or []), str(meta.get("resourceVersion") or ""), not token
        )
        token = str(meta.get("continue") or "")
        if not token:
            return


def _retry_after(status: int, header: str | None) -> float | None:
    """client-go's checkWait: 429 or 5xx with Retry-After in whole seconds."""
    if status != 429 and status < 500:
        return None
    if header is None or not header.strip().isdigit():
        return None
    return float(header.strip())
