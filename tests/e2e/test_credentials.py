"""Credentials that rotate, on the real API server.

Podium runs as a ServiceAccount with short-lived bound tokens (TokenRequest,
bound to a Secret, so deleting the Secret invalidates the token at once, as
the kubelet's rotation and a revoked credential do). A kubeconfig hands the
token over through ``tokenFile`` or an exec plugin. The old token is replaced
and then invalidated while Podium runs: it must keep binding, kopf must be
given the new token (watches are re-established every 5 s here), and while
no valid token exists it must say so through /readyz, a metric and a log
line without looping on 401s, then recover by itself.
"""

from __future__ import annotations

import asyncio
import os
import re
import ssl
import stat
import sys
import time
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.devcluster import ControlPlane
from podium.devcluster.objects import wait_for
from podium.devcluster.process import http_get
from podium.kube.manifests import make_node, make_pod
from tests.e2e.test_scheduling import create_pods, pods_in

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]


class Identity:
    """A ServiceAccount with cluster-admin and tokens bound to Secrets of its own."""

    def __init__(self, api: ApiClient, plane: ControlPlane, namespace: str) -> None:
        self.core = client.CoreV1Api(api)
        self.rbac = client.RbacAuthorizationV1Api(api)
        self.plane = plane
        self.namespace = namespace
        self.name = "podium-rotating"
        self.ssl = ssl.create_default_context(cafile=str(plane.ca_cert))
        self.issued: dict[str, str] = {}

    async def create(self) -> None:
        await self.core.create_namespaced_service_account(
            self.namespace, cast(Any, {"metadata": {"name": self.name}})
        )
        binding = {
            "metadata": {"name": f"{self.namespace}-rotating"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": self.name, "namespace": self.namespace}
            ],
        }
        await self.rbac.create_cluster_role_binding(cast(Any, binding))

    async def delete(self) -> None:
        await self.rbac.delete_cluster_role_binding(f"{self.namespace}-rotating")

    async def token(self, secret: str) -> str:
        """A 10-minute token (the shortest TokenRequest allows) bound to Secret ``secret``."""
        created = await self.core.create_namespaced_secret(
            self.namespace, cast(Any, {"metadata": {"name": secret}})
        )
        ref = {"kind": "Secret", "apiVersion": "v1", "name": secret, "uid": created.metadata.uid}
        request = {"spec": {"expirationSeconds": 600, "boundObjectRef": ref}}
        answer = await self.core.create_namespaced_service_account_token(
            self.name, self.namespace, cast(Any, request)
        )
        self.issued[secret] = str(answer.status.token)
        return self.issued[secret]

    async def invalidate(self, secret: str) -> None:
        """Delete the Secret a token is bound to; wait until the server refuses the
        token (its authenticator caches a success for up to 10 s)."""
        await self.core.delete_namespaced_secret(secret, self.namespace)
        url = self.plane.server + "/version"

        async def refused() -> bool:
            status, _ = await asyncio.to_thread(http_get, url, self.issued[secret], self.ssl)
            return status == 401

        await wait_for(refused, timeout=30, interval=0.5, message=f"token of {secret} refused")

    def kubeconfig(self, path: Path, user: dict[str, Any]) -> Path:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "c",
                    "cluster": {
                        "server": self.plane.server,
                        "certificate-authority": str(self.plane.ca_cert),
                    },
                }
            ],
            "users": [{"name": "sa", "user": user}],
            "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa"}}],
            "current-context": "sa",
        }
        path.write_text(yaml.safe_dump(config))
        return path


def write_atomically(path: Path, text: str) -> None:
    """As the kubelet swaps a projected token: a rename, never a half-written file."""
    staged = path.with_suffix(".new")
    staged.write_text(text)
    os.replace(staged, path)


def sample(metrics: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} ([0-9.e+]+)$", metrics, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


async def test_token_file_replaced_then_invalidated_podium_keeps_binding(
    api_client: ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    node_factory: Any,
    podium: Any,
    tmp_path: Path,
) -> None:
    sched = f"{namespace}-s"
    who = Identity(api_client, control_plane, namespace)
    await who.create()
    try:
        await node_factory([make_node(f"{namespace}-n{i}") for i in range(2)])
        token_file = tmp_path / "token"
        token_file.write_text(await who.token("a"))
        kubeconfig = who.kubeconfig(tmp_path / "kubeconfig", {"tokenFile": str(token_file)})
        proc = await podium(
            "--kubeconfig", str(kubeconfig), "--scheduler-name", sched, "--watch-timeout", "5"
        )
        await bind_batch(api_client, namespace, sched, "a", 5)

        # 1. Replaced on disk, then the old token invalidated: binding goes on.
        write_atomically(token_file, await who.token("b"))
        await who.invalidate("a")
        started = time.monotonic()
        await bind_batch(api_client, namespace, sched, "b", 10)
        rotated = time.monotonic() - started
        await wait_for(lambda: relogged(proc), timeout=30, message="kopf given the new token")
        assert await readyz(proc) == 200

        # 2. No valid token at all: reported, paced, then recovered from a new one.
        await who.invalidate("b")
        refused_at = time.monotonic()
        await wait_for(lambda: unready(proc), timeout=30, message="/readyz to say 503")
        detected = time.monotonic() - refused_at  # from the first refusal seen by the test
        await asyncio.sleep(8)
        refusals = sample(await proc.metrics(), 'podium_client_auth_failures_total{code="401"}')
        window = time.monotonic() - refused_at
        write_atomically(token_file, await who.token("c"))
        fixed_at = time.monotonic()
        await wait_for(lambda: ready_again(proc), timeout=60, message="/readyz back to 200")
        recovered = time.monotonic() - fixed_at
        await bind_batch(api_client, namespace, sched, "c", 15)
        log = "\n".join(proc.log_lines())
        assert proc.process.poll() is None, log[-3000:]
        assert '"credentials_rejected"' in log and '"credentials_accepted"' in log
        assert "Traceback" not in log, log[-3000:]
        # Paced, not a loop: kopf's login checks at 1, 2, 4, 8 s, and each Binding,
        # re-established watch and their one re-authentication adds an attempt.
        assert 1 <= refusals <= 40, refusals
        print(
            f"RELIABILITY token-file-rotation: old token refused -> 5 more pods bound in "
            f"{rotated:.1f}s; no valid token: /readyz 503 after {detected:.1f}s, "
            f"{refusals:.0f} refused requests in {window:.0f}s; /readyz 200 "
            f"{recovered:.1f}s after a new token was written"
        )
    finally:
        await who.delete()


PLUGIN = """#!{python}
import datetime, json, pathlib
here = pathlib.Path({folder!r})
with open(here / "runs.log", "a") as log:
    log.write("run\\n")
expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds={lifetime})
print(json.dumps({{
    "apiVersion": "client.authentication.k8s.io/v1",
    "kind": "ExecCredential",
    "status": {{
        "token": (here / "token").read_text().strip(),
        "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }},
}}))
"""


async def test_exec_plugin_tokens_expire_and_podium_runs_it_again(
    api_client: ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    node_factory: Any,
    podium: Any,
    tmp_path: Path,
) -> None:
    """An exec-plugin kubeconfig (as EKS and GKE hand out) whose tokens last 15 s."""
    sched = f"{namespace}-s"
    who = Identity(api_client, control_plane, namespace)
    await who.create()
    try:
        await node_factory([make_node(f"{namespace}-n{i}") for i in range(2)])
        (tmp_path / "token").write_text(await who.token("a"))
        script = tmp_path / "plugin.py"
        script.write_text(PLUGIN.format(python=sys.executable, folder=str(tmp_path), lifetime=15))
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
        exec_spec = {"apiVersion": "client.authentication.k8s.io/v1", "command": str(script)}
        kubeconfig = who.kubeconfig(tmp_path / "kubeconfig", {"exec": exec_spec})
        proc = await podium(
            "--kubeconfig", str(kubeconfig), "--scheduler-name", sched, "--watch-timeout", "5"
        )
        await bind_batch(api_client, namespace, sched, "a", 5)
        write_atomically(tmp_path / "token", await who.token("b"))
        await who.invalidate("a")
        started = time.monotonic()
        await bind_batch(api_client, namespace, sched, "b", 10)
        rotated = time.monotonic() - started
        await wait_for(lambda: relogged(proc), timeout=30, message="kopf given the new token")
        runs = len((tmp_path / "runs.log").read_text().splitlines())
        log = "\n".join(proc.log_lines())
        assert proc.process.poll() is None, log[-3000:]
        assert "Traceback" not in log, log[-3000:]
        assert runs >= 2
        print(
            f"RELIABILITY exec-plugin-expiry: 15 s tokens, old one refused -> 5 more "
            f"pods bound in {rotated:.1f}s; plugin ran {runs} times"
        )
    finally:
        await who.delete()


async def bind_batch(api: ApiClient, namespace: str, sched: str, prefix: str, total: int) -> None:
    await create_pods(
        api,
        namespace,
        [make_pod(f"{prefix}{i}", cpu="10m", scheduler_name=sched) for i in range(5)],
    )

    async def bound() -> bool:
        pods = await pods_in(api, namespace)
        return len(pods) == total and all(p["spec"].get("nodeName") for p in pods)

    await wait_for(bound, timeout=60, message=f"batch {prefix} bound")


async def relogged(proc: Any) -> bool:
    return any("Re-authentication has finished" in line for line in proc.log_lines())


async def readyz(proc: Any) -> int:
    url = f"http://127.0.0.1:{proc.metrics_port}/readyz"
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        return resp.status


async def unready(proc: Any) -> bool:
    return await readyz(proc) == 503


async def ready_again(proc: Any) -> bool:
    return await readyz(proc) == 200
