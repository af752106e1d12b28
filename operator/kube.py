"""A small async REST client for the few calls the scheduler makes itself.

kopf owns the watches. Binding, status patches and Events go through one
shared aiohttp connection pool with orjson bodies, which is much cheaper per
call than the generated kubernetes-asyncio models. Credentials come from
kubernetes-asyncio's loaders (kubeconfig or in-cluster), so both clients
authenticate the same way.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client import Configuration

__all__ = ["ApiError", "Credentials", "KubeClient", "load_credentials"]


@dataclass(frozen=True, slots=True)
class Credentials:
    server: str
    ca_path: str | None = None
    insecure: bool = False
    token: str | None = None
    cert_path: str | None = None
    key_path: str | None = None


class ApiError(Exception):
    """A non-2xx answer; ``status`` 0 means the request never got one."""

    def __init__(self, status: int, body: Any, retry_after: float | None = None) -> None:
        message = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.body = body
        self.retry_after = retry_after

    @property
    def reason(self) -> str:
        return str(self.body.get("reason", "")) if isinstance(self.body, dict) else ""


async def load_credentials(
    kubeconfig: str | None = None, context: str | None = None
) -> Credentials:
    """In-cluster service account if present and no kubeconfig is given, else the kubeconfig."""
    cfg = Configuration()
    if kubeconfig is None:
        try:
            k8s_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        except k8s_config.ConfigException:
            await k8s_config.load_kube_config(client_configuration=cfg, context=context)
    else:
        await k8s_config.load_kube_config(
            config_file=kubeconfig, client_configuration=cfg, context=context
        )
    token = None
    auth = cfg.api_key.get("authorization") or cfg.api_key.get("BearerToken")
    if auth:
        token = auth.removeprefix("Bearer ").strip()
    return Credentials(
        server=str(cfg.host or "").rstrip("/"),
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        token=token,
        cert_path=cfg.cert_file,
        key_path=cfg.key_file,
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


class KubeClient:
    def __init__(self, creds: Credentials, pool_size: int = 64, timeout: float = 30.0) -> None:
        self.creds = creds
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self._connector_args = {"limit": pool_size, "ssl": ssl_context(creds)}
        self._session: aiohttp.ClientSession | None = None
        headers = {"Accept": "application/json", "User-Agent": "podium"}
        if creds.token:
            headers["Authorization"] = f"Bearer {creds.token}"
        self._headers = headers

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

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
    ) -> Any:
        data = orjson.dumps(body) if body is not None else None
        headers = {"Content-Type": content_type} if data is not None else None
        async with self.session.request(
            method, self.creds.server + path, data=data, headers=headers, params=params
        ) as resp:
            raw = await resp.read()
            try:
                payload = orjson.loads(raw) if raw else None
            except orjson.JSONDecodeError:
                payload = raw.decode(errors="replace")
            if resp.status >= 400:
                retry_after = resp.headers.get("Retry-After")
                raise ApiError(
                    resp.status,
                    payload,
                    float(retry_after) if retry_after and retry_after.isdigit() else None,
                )
            return payload

    async def get(self, path: str, params: dict[str, str] | None = None) -> Any:
        return await self.request("GET", path, params=params)

    async def post(self, path: str, body: Any) -> Any:
        return await self.request("POST", path, body)

    async def patch(self, path: str, body: Any, kind: str = "strategic-merge-patch") -> Any:
        return await self.request("PATCH", path, body, content_type=f"application/{kind}+json")

    async def delete(self, path: str, body: Any = None) -> Any:
        return await self.request("DELETE", path, body)
