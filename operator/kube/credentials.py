"""Who Podium is to the API server: kubeconfig or in-cluster credentials, and tokens that rotate.

Podium reads the in-cluster configuration and kubeconfig files itself, by
client-go's rules (``load_credentials``), and hands the same credentials to
kopf and to its own client. A token that rotates (a projected
ServiceAccount token, a kubeconfig ``tokenFile``, an exec plugin) is read
again as client-go does: a file every minute less some leeway, an exec
plugin at its ``expirationTimestamp``, and either at once after a 401.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import hashlib
import json
import math
import os
import shutil
import ssl
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import structlog
import yaml

__all__ = [
    "ConfigError",
    "CredentialError",
    "Credentials",
    "ExecToken",
    "FileToken",
    "Kubeconfig",
    "TokenSource",
    "kubeconfig_files",
    "load_credentials",
    "read_kubeconfig",
    "ssl_context",
]


log = structlog.get_logger("podium.kube.credentials")


Clock = Callable[[], float]


# client-go's defaults: a token file is re-read after a minute less 10 s of leeway,
# and a request answered with Retry-After is retried at most 10 times.
TOKEN_FILE_PERIOD = 60.0


TOKEN_FILE_LEEWAY = 10.0


EXEC_TIMEOUT = 60.0


_SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


_YamlLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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
        try:
            self.env = {str(e["name"]): str(e["value"]) for e in spec.get("env") or []}
        except (KeyError, TypeError) as exc:
            raise CredentialError(
                f"exec plugin {command}: env entries need a name and a value"
            ) from exc
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


class ConfigError(CredentialError):
    """The configuration cannot be used: a missing kubeconfig, context, cluster or user,
    a malformed entry, or a way to authenticate that Podium does not support."""


# -- in-cluster --------------------------------------------------------------------------------


def _in_cluster(environ: Mapping[str, str], account: Path) -> tuple[str, Path, Path] | None:
    """(server, token file, CA file) when running in a pod, as client-go's InClusterConfig.

    Without the service's host and port, or without a mounted token (the pod
    opted out of it), Podium is not in a cluster and reads a kubeconfig instead.
    """
    host = environ.get("KUBERNETES_SERVICE_HOST", "")
    port = environ.get("KUBERNETES_SERVICE_PORT", "")
    token = account / "token"
    if not host or not port or not token.exists():
        return None
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 address, as Go's net.JoinHostPort writes it
    return f"https://{host}:{port}", token, account / "ca.crt"


# -- kubeconfig --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Entry:
    """A named cluster, user or context, and the kubeconfig file it came from."""

    value: Mapping[str, Any]
    origin: Path

    def resolve(self, path: str) -> str:
        """A relative path is taken from the folder of the entry's own file (client-go's
        ResolveLocalPaths)."""
        return str(self.origin.parent / path)

    def path(self, key: str) -> str | None:
        value = self.value.get(key)
        return self.resolve(str(value)) if value else None


@dataclass(slots=True)
class Kubeconfig:
    """Kubeconfig files merged as client-go merges them: the first file to name a
    cluster, user or context wins it whole, and the first ``current-context`` set wins."""

    files: list[Path]
    clusters: dict[str, _Entry]
    users: dict[str, _Entry]
    contexts: dict[str, _Entry]
    current_context: str = ""

    def where(self) -> str:
        return ", ".join(str(f) for f in self.files)


_MAPS = (("clusters", "cluster"), ("users", "user"), ("contexts", "context"))


def kubeconfig_files(explicit: str | None, environ: Mapping[str, str]) -> tuple[list[Path], bool]:
    """The files to read and whether they were named explicitly (then each must exist).

    ``--kubeconfig`` alone; else ``$KUBECONFIG``, a list split on the path
    separator with empty and repeated entries dropped; else ``~/.kube/config``.
    """
    if explicit:
        return [Path(explicit)], True
    listed = environ.get("KUBECONFIG", "")
    if listed:
        return [Path(p) for p in dict.fromkeys(listed.split(os.pathsep)) if p], False
    home = environ.get("HOME") or str(Path.home())
    return [Path(home) / ".kube" / "config"], False


def read_kubeconfig(files: list[Path], explicit: bool = False) -> Kubeconfig:
    """Merge ``files`` in order; a missing file is skipped unless ``explicit``."""
    merged = Kubeconfig([], {}, {}, {})
    for path in files:
        try:
            text = path.read_text()
        except FileNotFoundError as exc:
            if explicit:
                raise ConfigError(f"kubeconfig {path}: no such file") from exc
            continue
        except OSError as exc:
            raise ConfigError(f"kubeconfig {path}: {exc}") from exc
        try:
            data = yaml.load(text, Loader=_YamlLoader) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"kubeconfig {path}: not YAML: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"kubeconfig {path}: not a mapping")
        merged.files.append(path)
        origin = path.absolute()
        for key, inner in _MAPS:
            seen: set[str] = set()
            target: dict[str, _Entry] = getattr(merged, key)
            for item in data.get(key) or []:
                if not isinstance(item, dict) or not isinstance(item.get(inner) or {}, dict):
                    # The entry itself is not quoted: it may hold a token or a key.
                    raise ConfigError(f"kubeconfig {path}: malformed {key} entry")
                name = str(item.get("name") or "")
                if name in seen:
                    raise ConfigError(f"kubeconfig {path}: duplicate name {name!r} in {key}")
                seen.add(name)
                target.setdefault(name, _Entry(item.get(inner) or {}, origin))
        merged.current_context = merged.current_context or str(data.get("current-context") or "")
    if not merged.files:
        raise ConfigError(
            f"no kubeconfig found (looked for {', '.join(str(f) for f in files)}) and not "
            "running in a cluster (KUBERNETES_SERVICE_HOST/PORT and a ServiceAccount token)"
        )
    return merged


_private_dir: str | None = None
_private_files: dict[bytes, str] = {}


def _private_file(data: bytes) -> str:
    """A file only this user can read holding ``data`` (kubeconfig ``*-data`` fields, for the
    TLS and kopf APIs that take paths); one per content, removed when the process exits."""
    global _private_dir
    key = hashlib.sha256(data).digest()
    if key in _private_files:
        return _private_files[key]
    if _private_dir is None:
        _private_dir = tempfile.mkdtemp(prefix="podium-credentials-")  # mode 0700
        atexit.register(shutil.rmtree, _private_dir, True)
    path = os.path.join(_private_dir, f"{len(_private_files)}.pem")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    _private_files[key] = path
    return path


def _file_or_data(entry: _Entry, key: str, what: str) -> str | None:
    """``key`` (a path) or ``key-data`` (base64, written to a private file); data wins,
    as in client-go."""
    data = entry.value.get(f"{key}-data")
    if data:
        try:
            # Go's decoder skips line breaks, so base64 wrapped over lines is accepted.
            text = "".join(str(data).split())
            return _private_file(base64.b64decode(text, validate=True))
        except ValueError as exc:
            raise ConfigError(f"{what}: {key}-data is not base64") from exc
    return entry.path(key)


# Keys of a kubeconfig user that name a way to authenticate Podium does not support.
_UNSUPPORTED = {
    "auth-provider": "auth-provider plugins (use an exec plugin instead)",
    "username": "basic authentication (username/password)",
    "password": "basic authentication (username/password)",
    "as": "impersonation (as)",
    "as-uid": "impersonation (as-uid)",
    "as-groups": "impersonation (as-groups)",
    "as-user-extra": "impersonation (as-user-extra)",
}


def _pick(config: Kubeconfig, context: str | None) -> tuple[str, _Entry, _Entry | None]:
    """The context's name, its cluster and its user (None: anonymous)."""
    name = context or config.current_context
    if not name:
        raise ConfigError(f"kubeconfig {config.where()}: no current-context and no --context")
    chosen = config.contexts.get(name)
    if chosen is None:
        raise ConfigError(f"kubeconfig {config.where()}: context {name!r} not found")
    cluster_name = str(chosen.value.get("cluster") or "")
    cluster = config.clusters.get(cluster_name)
    if cluster is None:
        raise ConfigError(
            f"kubeconfig {config.where()}: cluster {cluster_name!r} of context {name!r} not found"
        )
    user_name = str(chosen.value.get("user") or "")
    if not user_name:
        return name, cluster, None
    user = config.users.get(user_name)
    if user is None:
        raise ConfigError(
            f"kubeconfig {config.where()}: user {user_name!r} of context {name!r} not found"
        )
    return name, cluster, user


async def _from_kubeconfig(config: Kubeconfig, context: str | None) -> Credentials:
    name, cluster, user = _pick(config, context)
    what = f"kubeconfig context {name!r}"
    server = str(cluster.value.get("server") or "").rstrip("/")
    if not server:
        raise ConfigError(f"{what}: the cluster has no server")
    ca_path = _file_or_data(cluster, "certificate-authority", what)
    insecure = bool(cluster.value.get("insecure-skip-tls-verify"))
    if insecure and ca_path:
        # client-go's validation refuses the pair rather than silently not verifying.
        raise ConfigError(
            f"{what}: specifying a root certificates file with the insecure flag is not allowed"
        )
    if cluster.value.get("tls-server-name"):
        log.warning("tls_server_name_ignored", context=name, server=server)
    token: str | None = None
    tokens: TokenSource | None = None
    cert_path = key_path = None
    if user is not None:
        spec = user.value
        for key, unsupported in _UNSUPPORTED.items():
            if spec.get(key):
                raise ConfigError(f"{what}: {unsupported} is not supported")
        cert_path = _file_or_data(user, "client-certificate", what)
        key_path = _file_or_data(user, "client-key", what)
        if bool(cert_path) != bool(key_path):
            raise ConfigError(f"{what}: a client certificate needs both certificate and key")
        if isinstance(spec.get("exec"), dict):
            plugin = dict(spec["exec"])
            command = str(plugin.get("command") or "")
            if os.sep in command:  # a path, not a name looked up in $PATH
                plugin["command"] = user.resolve(command)
            tokens = ExecToken(plugin)
        elif spec.get("tokenFile"):
            tokens = FileToken(str(user.path("tokenFile")))
        elif spec.get("token"):
            token = str(spec["token"])
    if tokens is not None:
        token = await tokens.token()  # run or read once now, as client-go does at start
    if "://" not in server:
        tls = ca_path or cert_path or insecure
        server = f"{'https' if tls else 'http'}://{server}"
    return Credentials(server, ca_path, insecure, token, cert_path, key_path, tokens)


async def load_credentials(
    kubeconfig: str | None = None,
    context: str | None = None,
    *,
    environ: Mapping[str, str] = os.environ,
    service_account: Path = _SERVICE_ACCOUNT,
) -> Credentials:
    """In-cluster service account if present and no kubeconfig is given, else the kubeconfig.

    Raises ConfigError (a CredentialError) naming what is missing or unsupported.
    """
    found = None if kubeconfig else _in_cluster(environ, service_account)
    if found is not None:
        server, token_path, ca = found
        if not ca.exists():
            log.error("in_cluster_ca_missing", path=str(ca))  # client-go goes on without it
        tokens = FileToken(token_path)
        token = await tokens.token()
        return Credentials(server, str(ca) if ca.exists() else None, token=token, tokens=tokens)
    files, explicit = kubeconfig_files(kubeconfig, environ)
    return await _from_kubeconfig(read_kubeconfig(files, explicit), context)


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
