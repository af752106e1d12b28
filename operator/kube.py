"""A small async REST client for the few calls the scheduler makes itself.

kopf owns the watches. Binding, status patches and Events go through one
shared aiohttp connection pool with orjson bodies, which is much cheaper per
call than the generated kubernetes-asyncio models. Credentials come from
kubernetes-asyncio's loaders (kubeconfig or in-cluster), so both clients
authenticate the same way; a token that rotates (a projected ServiceAccount
token, a kubeconfig ``tokenFile``, an exec plugin) is read again as client-go
does, and a 401 is answered by one re-authentication, never a loop.

The client is also a polite one: it waits as long as a 429 or 5xx answer's
``Retry-After`` asks, and an optional client-side rate limit gives Bindings a
budget of their own, so that status patches and Events can never starve
them (kube-scheduler #135900).
"""

from __future__ import annotations

import asyncio
import enum
import json
import math
import os
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import aiohttp
import orjson
import structlog
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client import Configuration

if TYPE_CHECKING:
    from podium.metrics import Metrics

__all__ = [
    "ApiError",
    "Budget",
    "CredentialError",
    "Credentials",
    "ExecToken",
    "FileToken",
    "KubeClient",
    "TokenBucket",
    "TokenSource",
    "load_credentials",
]

log = structlog.get_logger("podium.kube")

Clock = Callable[[], float]

# client-go's defaults: a token file is re-read after a minute less 10 s of leeway,
# and a request answered with Retry-After is retried at most 10 times.
TOKEN_FILE_PERIOD = 60.0
TOKEN_FILE_LEEWAY = 10.0
MAX_RETRIES = 10
# A Retry-After longer than this is shortened to it; one bad answer must not park a
# Binding for an hour.
MAX_RETRY_WAIT = 30.0
EXEC_TIMEOUT = 60.0
_SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


class ApiError(Exception):
    """A non-2xx answer; ``status`` 0 means the request never got one."""

    def __init__(self, status: int, body: Any, retry_after: float | None = None) -> None:
        message = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.body = body
        self.retry_after = retry_after


class CredentialError(OSError):
    """No token could be had (the token file is unreadable, the exec plugin failed).

    An OSError, so callers treat it as a request that never reached the server.
    """


# -- tokens ------------------------------------------------------------------------------------


class TokenSource(Protocol):
    """Where the bearer token comes from, and when it is read again."""

    async def token(self) -> str: ...

    def reset(self, older_than: float) -> None:
        """Forget the token if it was fetched at or before ``older_than`` (monotonic):
        a request that started then was answered 401 (client-go's ResetTokenOlderThan)."""

    @property
    def expires_at(self) -> datetime | None:
        """When the current token stops being valid, if the source knows (exec plugins)."""


class _CachedToken:
    """One fetch at a time; the token is kept until it is due or reset."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self._token: str | None = None
        self._fetched = -math.inf
        self._due = -math.inf  # monotonic time after which the token is fetched again
        self._lock = asyncio.Lock()
        self.fetches = 0

    async def _fetch(self) -> tuple[str, float]:
        """A fresh token and how many seconds it may be used."""
        raise NotImplementedError

    def _fresh(self) -> bool:
        return self._token is not None and self.clock() < self._due

    async def token(self) -> str:
        if self._fresh():
            assert self._token is not None
            return self._token
        async with self._lock:
            if self._fresh():
                assert self._token is not None
                return self._token
            try:
                token, lifetime = await self._fetch()
            except CredentialError as exc:
                if self._token is None or not self._keeps_stale():
                    raise
                log.warning("token_refresh_failed", error=str(exc))
                return self._token
            self.fetches += 1
            self._token, self._fetched = token, self.clock()
            self._due = self._fetched + lifetime
            return token

    def _keeps_stale(self) -> bool:
        """Whether a failed refresh may keep serving the old token."""
        return True

    def reset(self, older_than: float) -> None:
        if self._fetched <= older_than:
            self._due = -math.inf

    @property
    def expires_at(self) -> datetime | None:
        return None


class FileToken(_CachedToken):
    """A token file read again every minute and at once after a 401.

    This is client-go's cached file token source, used for kubeconfig
    ``tokenFile`` and the in-cluster ServiceAccount token, which the kubelet
    rotates on disk. If a read fails, the last token is kept, as client-go does.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        period: float = TOKEN_FILE_PERIOD,
        leeway: float = TOKEN_FILE_LEEWAY,
        clock: Clock = time.monotonic,
    ) -> None:
        super().__init__(clock)
        self.path = Path(path)
        self.lifetime = period - leeway

    async def _fetch(self) -> tuple[str, float]:
        try:
            token = self.path.read_text().strip()
        except OSError as exc:
            raise CredentialError(f"failed to read token file {self.path}: {exc}") from exc
        if not token:
            raise CredentialError(f"read empty token from file {self.path}")
        return token, self.lifetime


def _rfc3339(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


class ExecToken(_CachedToken):
    """A client.authentication.k8s.io exec plugin, run again when its token expires.

    As client-go's exec authenticator: the token is kept until
    ``status.expirationTimestamp`` (for ever without one) and the plugin is run
    again at once after a 401. Plugins that answer with a client certificate
    instead of a token are not supported here.
    """

    def __init__(
        self,
        spec: Mapping[str, Any],
        clock: Clock = time.monotonic,
        wall: Clock = time.time,
        timeout: float = EXEC_TIMEOUT,
    ) -> None:
        super().__init__(clock)
        command = str(spec.get("command") or "")
        if not command:
            raise CredentialError("exec plugin: no command")
        self.argv = [command, *(str(a) for a in spec.get("args") or [])]
        self.api_version = str(spec.get("apiVersion") or "client.authentication.k8s.io/v1")
        self.env = {str(e["name"]): str(e["value"]) for e in spec.get("env") or []}
        self.wall = wall
        self.timeout = timeout
        self._expires: datetime | None = None

    def _keeps_stale(self) -> bool:
        return False  # client-go fails the request when the plugin fails

    async def _fetch(self) -> tuple[str, float]:
        info = {
            "apiVersion": self.api_version,
            "kind": "ExecCredential",
            "spec": {"interactive": False},
        }
        env = {**os.environ, **self.env, "KUBERNETES_EXEC_INFO": json.dumps(info)}
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            raise CredentialError(f"exec plugin {self.argv[0]}: {exc}") from exc
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self.timeout)
        except TimeoutError as exc:
            proc.kill()
            await proc.wait()
            raise CredentialError(f"exec plugin {self.argv[0]}: timed out") from exc
        if proc.returncode != 0:
            detail = err.decode(errors="replace").strip()
            raise CredentialError(f"exec plugin {self.argv[0]} exited {proc.returncode}: {detail}")
        try:
            cred = json.loads(out)
            status = cred["status"]
            version, kind = cred["apiVersion"], cred["kind"]
        except (ValueError, KeyError, TypeError) as exc:
            raise CredentialError(f"exec plugin {self.argv[0]}: bad output: {exc}") from exc
        if version != self.api_version or kind != "ExecCredential":
            raise CredentialError(
                f"exec plugin {self.argv[0]}: answered {kind} {version}, not {self.api_version}"
            )
        token = status.get("token") if isinstance(status, dict) else None
        if not token:
            raise CredentialError(f"exec plugin {self.argv[0]}: no status.token")
        expires = status.get("expirationTimestamp")
        if not expires:
            self._expires = None
            return str(token), math.inf
        try:
            self._expires = _rfc3339(str(expires))
        except ValueError as exc:
            raise CredentialError(f"exec plugin {self.argv[0]}: bad expirationTimestamp") from exc
        return str(token), self._expires.timestamp() - self.wall()

    def seed(self, token: str, expires: datetime | None) -> None:
        """Start from a token the kubeconfig loader already got from the plugin."""
        self._token, self._fetched, self._expires = token, self.clock(), expires
        lifetime = math.inf if expires is None else expires.timestamp() - self.wall()
        self._due = self._fetched + lifetime

    @property
    def expires_at(self) -> datetime | None:
        return self._expires


@dataclass(frozen=True, slots=True)
class Credentials:
    server: str
    ca_path: str | None = None
    insecure: bool = False
    # The token as first read; ``tokens`` (when set) hands out the current one.
    token: str | None = None
    cert_path: str | None = None
    key_path: str | None = None
    tokens: TokenSource | None = None

    async def current_token(self) -> str | None:
        return await self.tokens.token() if self.tokens is not None else self.token


def _token_source(loader: Any, token: str | None) -> TokenSource | None:
    """A rotating source for the kubeconfig user's ``tokenFile`` or ``exec``, if any."""
    # kubernetes-asyncio keeps the selected user entry (and the file it came from) here.
    user = getattr(loader, "_user", None)
    spec = getattr(user, "value", None)
    if not isinstance(spec, dict):
        return None
    if "exec" in spec and token:
        return ExecToken(spec["exec"])
    origin = getattr(user, "path", None)
    base = os.path.dirname(os.path.abspath(origin)) if origin else None
    if spec.get("tokenFile"):
        path = str(spec["tokenFile"])
        return FileToken(os.path.join(base, path) if base else path)
    return None


async def load_credentials(
    kubeconfig: str | None = None, context: str | None = None
) -> Credentials:
    """In-cluster service account if present and no kubeconfig is given, else the kubeconfig."""
    cfg = Configuration()
    tokens: TokenSource | None = None
    loader: Any = None
    if kubeconfig is None:
        try:
            k8s_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
            tokens = FileToken(_SERVICE_ACCOUNT_TOKEN)
        except k8s_config.ConfigException:
            loader = await k8s_config.load_kube_config(client_configuration=cfg, context=context)
    else:
        loader = await k8s_config.load_kube_config(
            config_file=kubeconfig, client_configuration=cfg, context=context
        )
    token = None
    auth = cfg.api_key.get("authorization") or cfg.api_key.get("BearerToken")
    if auth:
        token = auth.removeprefix("Bearer ").strip()
    if loader is not None:
        tokens = _token_source(loader, token)
    if isinstance(tokens, ExecToken) and token:
        # The loader has just run the plugin: start from its answer.
        expiry = getattr(loader, "exec_plugin_expiry", None)
        tokens.seed(token, expiry)
    return Credentials(
        server=str(cfg.host or "").rstrip("/"),
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        token=token,
        cert_path=cfg.cert_file,
        key_path=cfg.key_file,
        tokens=tokens,
    )


def ssl_context(creds: Credentials) -> ssl.SSLContext | bool:
    if not creds.server.startswith("https"):
        return False
    context = ssl.create_default_context(cafile=creds.ca_path)
    if creds.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if creds.cert_path and creds.key_path:
        context.load_cert_chain(creds.cert_path, creds.key_path)
    return context


# -- rate limits -------------------------------------------------------------------------------


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


# -- the client --------------------------------------------------------------------------------


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
        self._connector_args = {"limit": pool_size, "ssl": ssl_context(creds)}
        self._session: aiohttp.ClientSession | None = None
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
        async with self.session.request(
            method, self.creds.server + path, data=data, headers=headers, params=params
        ) as resp:
            raw = await resp.read()
            try:
                payload = orjson.loads(raw) if raw else None
            except orjson.JSONDecodeError:
                payload = raw.decode(errors="replace")
            return resp.status, resp.headers.get("Retry-After"), payload

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
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
            token = await self.creds.current_token()
            if token:
                headers["Authorization"] = f"Bearer {token}"
            started = time.monotonic()
            status, retry_header, payload = await self._send(method, path, data, headers, params)
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
            if retry_after is not None and retries < MAX_RETRIES:
                retries += 1
                if self.metrics is not None:
                    self.metrics.retry_after.labels(str(status)).inc()
                await self.sleep(min(retry_after, MAX_RETRY_WAIT))
                continue
            raise ApiError(status, payload, retry_after)

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

    async def get(self, path: str, params: dict[str, str] | None = None) -> Any:
        return await self.request("GET", path, params=params)

    async def post(self, path: str, body: Any) -> Any:
        return await self.request("POST", path, body)

    async def patch(self, path: str, body: Any, kind: str = "strategic-merge-patch") -> Any:
        return await self.request("PATCH", path, body, content_type=f"application/{kind}+json")

    async def delete(self, path: str, body: Any = None) -> Any:
        return await self.request("DELETE", path, body)


def _retry_after(status: int, header: str | None) -> float | None:
    """client-go's checkWait: 429 or 5xx with Retry-After in whole seconds."""
    if status != 429 and status < 500:
        return None
    if header is None or not header.strip().isdigit():
        return None
    return float(header.strip())
