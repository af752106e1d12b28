"""The Helm chart's own RBAC on the test cluster, and a kubeconfig for its ServiceAccount.

`helm template` renders the chart's ServiceAccount, ClusterRole, lease Role and their
bindings for a release in ``namespace``; they are created as `helm install` would, and a
token of the ServiceAccount makes a kubeconfig for `podium run`. Used by
``test_chart_rbac_features.py`` and by ``pytest --chart-rbac``, which runs every e2e
test's Podium under it.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.devcluster import Binaries, ControlPlane

CHART = Path(__file__).resolve().parents[2] / "charts" / "podium"
TEMPLATES = ("serviceaccount", "clusterrole", "clusterrolebinding", "role", "rolebinding")


@dataclass(frozen=True)
class ChartIdentity:
    kubeconfig: Path
    user: str  # the ServiceAccount's username, as the audit log names it
    lease: str  # the one Lease name the Role lets it renew
    cluster_role: str  # the ClusterRole and ClusterRoleBinding's name


async def render(binaries: Binaries, release: str, namespace: str, home: Path) -> list[Any]:
    """The chart's RBAC objects, as `helm template` renders them for this release."""
    args = ["template", release, str(CHART), "-n", namespace]
    args += ["--set", f"leaderElection.leaseName={release}"]
    for name in TEMPLATES:
        args += ["--show-only", f"templates/{name}.yaml"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HELM_", "KUBE"))}
    env.update({f"HELM_{d}_HOME": str(home / d.lower()) for d in ("CACHE", "CONFIG", "DATA")})
    proc = await asyncio.create_subprocess_exec(
        str(binaries.helm),
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, out.decode()
    return [doc for doc in yaml.safe_load_all(out.decode()) if doc]


async def install(
    api: ApiClient,
    plane: ControlPlane,
    binaries: Binaries,
    release: str,
    namespace: str,
    workdir: Path,
) -> ChartIdentity:
    """Create the chart's RBAC for ``release`` in ``namespace`` (which must exist)."""
    docs = await render(binaries, release, namespace, workdir / "helm")
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount"]
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    create = {
        "ServiceAccount": lambda d: core.create_namespaced_service_account(namespace, d),
        "ClusterRole": rbac.create_cluster_role,
        "ClusterRoleBinding": rbac.create_cluster_role_binding,
        "Role": lambda d: rbac.create_namespaced_role(namespace, d),
        "RoleBinding": lambda d: rbac.create_namespaced_role_binding(namespace, d),
    }
    for doc in docs:
        await create[doc["kind"]](cast(Any, doc))
    (account,) = (d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount")
    (cluster_role,) = (d["metadata"]["name"] for d in docs if d["kind"] == "ClusterRole")
    token = await core.create_namespaced_service_account_token(
        account, namespace, cast(Any, {"spec": {"expirationSeconds": 7200}})
    )
    kubeconfig = workdir / "chart-sa.kubeconfig"
    cluster = {"server": plane.server, "certificate-authority": str(plane.ca_cert)}
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "sa", "user": {"token": token.status.token}}],
                "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa"}}],
                "current-context": "sa",
            }
        )
    )
    user = f"system:serviceaccount:{namespace}:{account}"
    return ChartIdentity(kubeconfig, user, release, cluster_role)


async def uninstall(api: ApiClient, identity: ChartIdentity) -> None:
    """Delete the cluster-scoped half (the namespaced half goes with its namespace)."""
    rbac = client.RbacAuthorizationV1Api(api)
    await rbac.delete_cluster_role_binding(identity.cluster_role)
    await rbac.delete_cluster_role(identity.cluster_role)


def refused(plane: ControlPlane, user: str) -> list[str]:
    """The user's writes the authorizer refused (reads are not audited): answered 403, or
    refused in another status with the authorizer's words, as 1.37 answers a claim status
    write without ``resourceclaims/binding`` (422, "... is forbidden: User ...")."""
    out = []
    for event in plane.audit_events():
        if (event.get("user") or {}).get("username") != user:
            continue
        answer = event.get("responseStatus") or {}
        if answer.get("code") != 403 and "is forbidden: User" not in str(answer.get("message")):
            continue
        ref = event.get("objectRef") or {}
        sub = f"/{ref['subresource']}" if ref.get("subresource") else ""
        out.append(f"{event['verb']} {ref.get('apiGroup', '')}/{ref.get('resource')}{sub}")
    return out
