"""Who Podium is to the API server: kubeconfig or in-cluster credentials, and tokens that rotate.

Credentials come from kubernetes-asyncio's loaders, so kopf and Podium's own
client authenticate the same way. A token that rotates (a projected
ServiceAccount token, a kubeconfig ``tokenFile``, an exec plugin) is read
again as client-go does: a file every minute less some leeway, an exec
plugin at its ``expirationTimestamp``, and either at once after a 401.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import structlog
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client import Configuration

__all__ = [
    "CredentialError",
    "Credentials",
    "ExecToken",
    "FileToken",
    "TokenSource",
    "load_credentials",
    "ssl_context",
]


log = structlog.get_logger("podium.kube.credentials")


Clock = Callable[[], float]


# client-go's defaults: a token file is re-read after a minute less 10 s of leeway,
# and a request answered with Retry-After is retried at most 10 times.
TOKEN_FILE_PERIOD = 60.0


TOKEN_FILE_LEEWAY = 10.0


EXEC_TIMEOUT = 60.0


_SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


class CredentialError(OSError):
    """No token could be had (the token file is unreadable, the exec plugin failed).

    An OSError, so callers treat it as a request that never reached the server.
    """


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
