"""The Helm chart on a real kubelet: Podium's image, built here, running as a Deployment.

Everything is real except the worker nodes Podium schedules onto (kwok): etcd,
kube-apiserver, kube-controller-manager (ServiceAccount tokens, Deployments,
ReplicaSets, garbage collection), kube-scheduler (places Podium's own pods), and a
kubelet on a private containerd (devcluster.RealNode) running the image that
devcluster.image builds from Debian's packages and Podium's wheel. The chart goes
into a namespace that enforces Pod Security "restricted", with the image's
pullPolicy Never, as docs/helm.md and the README describe.

Skips only for the environment (not root, no cgroup v1, no apt); see
devcluster.node.unsupported_reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client import ApiClient

from podium.devcluster import KWOK_NODE_ANNOTATION, Binaries, ControlPlane, KubeScheduler, Kwok
from podium.devcluster.image import BuiltImage, RootfsUnavailable, build_podium_image
from podium.devcluster.node import RealNode, node_tools, unsupported_reason
from podium.devcluster.objects import create_nodes, create_pod
from podium.kube.manifests import make_node, make_pod

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "podium"
NAMESPACE = "podium-system"
WORK = "work"
RELEASE = "podium"
KWOK_NODES = [f"kwok-{i}" for i in range(3)]


@dataclass
class RealCluster:
    control_plane: ControlPlane
    node: RealNode
    image: BuiltImage
    api: ApiClient
    helm: Path
    helm_home: Path
    timings: dict[str, float] = field(default_factory=dict)

    async def run_helm(self, *args: str, limit_s: float = 180) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HELM_", "KUBE"))}
        for name in ("CACHE", "CONFIG", "DATA"):
            env[f"HELM_{name}_HOME"] = str(self.helm_home / name.lower())
        proc = await asyncio.create_subprocess_exec(
            str(self.helm),
            *args,
            "--kubeconfig",
            str(self.control_plane.kubeconfig),
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await asyncio.wait_for(proc.communicate(), limit_s)
        assert proc.returncode == 0, out.decode()
        return out.decode()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def real(
    binaries: Binaries, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[RealCluster]:
    reason = unsupported_reason()
    if reason is not None:
        pytest.skip(f"no real node on this machine: {reason}")
    tools = node_tools()
    assert tools is not None
    started = time.monotonic()
    try:
        image = await asyncio.to_thread(build_podium_image, tools)
    except RootfsUnavailable as exc:
        pytest.skip(f"no root filesystem for Podium's image: {exc}")
    image_s = time.monotonic() - started
    workdir = tmp_path_factory.mktemp("real-node")
    plane = ControlPlane(binaries, workdir=workdir / "cluster", real_nodes=True)
    node = RealNode(plane, images=[image.tar])
    scheduler = KubeScheduler(plane)
    kwok = Kwok(plane)
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(plane)
        started = time.monotonic()
        await stack.enter_async_context(node)
        node_s = time.monotonic() - started
        await stack.enter_async_context(scheduler)
        await stack.enter_async_context(kwok)
        api = await plane.api_client()
        stack.push_async_callback(api.close)
        cluster = RealCluster(plane, node, image, api, binaries.helm, workdir / "helm-home")
        cluster.timings.update(image_build_s=image_s, node_up_s=node_s)
        yield cluster
        # Leaving the stack stops kwok, kube-scheduler, the node, then the control plane.
    assert node.leftovers() == [], "the real node left things behind"


async def _wait(what: str, check: Any, limit: float = 180.0, every: float = 0.25) -> Any:
    deadline = time.monotonic() + limit
    while True:
        result = await check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {limit:.0f}s waiting for {what}")
        await asyncio.sleep(every)


@dataclass
class ExitWatch:
    """Exit codes of Podium containers, read from pod status as each pod terminates."""

    codes: dict[str, int] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)

    async def run(self, api: ApiClient) -> None:
        core = client.CoreV1Api(api)
        while True:
            stream = watch.Watch()
            with contextlib.suppress(asyncio.TimeoutError, client.ApiException):
                async for event in stream.stream(
                    core.list_namespaced_pod, NAMESPACE, timeout_seconds=60
                ):
                    pod = event["object"]
                    for status in (pod.status.container_statuses or []) if pod.status else []:
                        terminated = status.state.terminated if status.state else None
                        if terminated is not None:
                            self.codes[pod.metadata.name] = terminated.exit_code
                            self.reasons[pod.metadata.name] = terminated.reason or ""


async def _podium_pods(api: ApiClient) -> list[Any]:
    pods = await client.CoreV1Api(api).list_namespaced_pod(
        NAMESPACE, label_selector="app.kubernetes.io/name=podium"
    )
    return list(pods.items)


def _ready(pod: Any) -> bool:
    conditions = pod.status.conditions or []
    return pod.status.phase == "Running" and any(
        c.type == "Ready" and c.status == "True" for c in conditions
    )


async def _holder(api: ApiClient) -> str | None:
    try:
        lease = await client.CoordinationV1Api(api).read_namespaced_lease(RELEASE, NAMESPACE)
    except client.ApiException:
        return None
    holder: str | None = lease.spec.holder_identity
    return holder


async def _bound_to_kwok(api: ApiClient, names: list[str]) -> bool:
    core = client.CoreV1Api(api)
    for name in names:
        pod = await core.read_namespaced_pod(name, WORK)
        if pod.spec.node_name not in KWOK_NODES:
            return False
    return True


async def _create_work(api: ApiClient, prefix: str, count: int) -> list[str]:
    names = [f"{prefix}-{i}" for i in range(count)]
    for name in names:
        pod = make_pod(name, cpu="100m", node_selector={"type": "kwok"})
        await create_pod(api, WORK, pod)
    return names


async def test_chart_runs_on_a_real_node(real: RealCluster, tmp_path: Path) -> None:
    api = real.api
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    labels = {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/warn": "restricted",
    }
    await core.create_namespace({"metadata": {"name": NAMESPACE, "labels": labels}})
    await core.create_namespace({"metadata": {"name": WORK}})
    await create_nodes(
        api,
        [
            make_node(n, labels={"type": "kwok"}, annotations={KWOK_NODE_ANNOTATION: "fake"})
            for n in KWOK_NODES
        ],
    )
    values = tmp_path / "values.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "image": {"tag": real.image.version, "pullPolicy": "Never"},
                "nodeSelector": {"podium.dev/real-node": "true"},
            }
        )
    )
    exits = ExitWatch()
    watcher = asyncio.create_task(exits.run(api))
    try:
        await _story(real, core, apps, values, exits)
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


async def _story(
    real: RealCluster,
    core: client.CoreV1Api,
    apps: client.AppsV1Api,
    values: Path,
    exits: ExitWatch,
) -> None:
    api = real.api
    # 1. Install: both replicas Running and Ready through the real probes.
    started = time.monotonic()
    await real.run_helm("install", RELEASE, str(CHART), "-n", NAMESPACE, "-f", str(values))

    async def both_ready() -> list[Any] | None:
        pods = await _podium_pods(api)
        return pods if len(pods) == 2 and all(_ready(p) for p in pods) else None

    pods = await _wait("both Podium replicas Ready", both_ready)
    real.timings["install_to_ready_s"] = time.monotonic() - started
    assert {p.spec.node_name for p in pods} == {real.node.name}
    assert all(p.spec.containers[0].image == f"podium:{real.image.version}" for p in pods)

    # 2. One of them holds the Lease.
    names = {p.metadata.name for p in pods}
    leader = await _wait("a Lease holder", lambda: _holder(api))
    assert leader in names, leader
    (standby,) = names - {leader}

    # 3. Pods with schedulerName podium are bound to kwok nodes.
    first = await _create_work(api, "before", 5)
    await _wait("pods bound by Podium", lambda: _bound_to_kwok(api, first), limit=60)

    # 4. Delete the leader pod: the standby takes over and no pod is lost.
    started = time.monotonic()
    await core.delete_namespaced_pod(leader, NAMESPACE)
    during = await _create_work(api, "during", 5)

    holders: list[str] = []

    async def taken_over() -> bool:
        # The standby normally wins; the Deployment's replacement pod competes for the
        # Lease once it expires, so either live replica counts as a handover.
        holder = await _holder(api)
        if holder and (not holders or holders[-1] != holder):
            holders.append(holder)
        # A Lease the old leader released on SIGTERM has no holder: not yet a handover.
        return bool(holder) and holder != leader

    try:
        await _wait("another replica to take the Lease", taken_over, limit=90, every=0.1)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; Lease holders seen: {holders}") from None
    real.timings["handover_s"] = time.monotonic() - started
    real.timings["handover_to_standby"] = float(holders[-1] == standby)
    await _wait("pods bound after handover", lambda: _bound_to_kwok(api, during), limit=90)
    real.timings["handover_to_all_bound_s"] = time.monotonic() - started
    work = await core.list_namespaced_pod(WORK)
    assert sorted(p.metadata.name for p in work.items) == sorted(first + during)
    assert all(p.spec.node_name in KWOK_NODES for p in work.items)

    async def replaced() -> list[Any] | None:
        pods = await _podium_pods(api)
        fresh = [p for p in pods if p.metadata.name != leader]
        return fresh if len(fresh) == 2 and all(_ready(p) for p in fresh) else None

    await _wait("the Deployment to replace the deleted pod", replaced)

    # 5. helm upgrade of a value rolls the Deployment.
    before = {p.metadata.name for p in await _podium_pods(api)}
    started = time.monotonic()
    await real.run_helm(
        "upgrade", RELEASE, str(CHART), "-n", NAMESPACE, "-f", str(values),
        "--set", "podAnnotations.rollout=second",
    )  # fmt: skip

    async def rolled() -> bool:
        deployment = await apps.read_namespaced_deployment(f"{RELEASE}", NAMESPACE)
        status = deployment.status
        pods = await _podium_pods(api)
        return (
            status.updated_replicas == 2
            and status.ready_replicas == 2
            and (status.replicas or 0) == 2
            and len(pods) == 2
            and not ({p.metadata.name for p in pods} & before)
            and all(_ready(p) for p in pods)
        )

    await _wait("the rollout to finish", rolled, limit=240)
    real.timings["rollout_s"] = time.monotonic() - started
    rolled_out = await _podium_pods(api)
    after = await core.list_namespaced_pod(WORK)
    assert len(after.items) == len(first) + len(during)

    # 6. helm uninstall leaves only what docs/helm.md says it leaves.
    await real.run_helm("uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout", "120s")

    async def pods_gone() -> bool:
        return not await _podium_pods(api)

    await _wait("Podium's pods to go", pods_gone, limit=120)
    await _assert_uninstalled(api)

    print(f"\nreal-node figures: {real.timings}")
    # Every SIGTERM ended in exit 0: the deleted leader and the pods the rollout replaced.
    terminated = {leader} | before
    await _wait("terminated pods' exit codes", lambda: _all_in(exits.codes, terminated), limit=30)
    assert {p: exits.codes[p] for p in terminated} == dict.fromkeys(terminated, 0), (
        exits.codes,
        exits.reasons,
    )
    uninstalled = {p.metadata.name for p in rolled_out}
    assert {p: exits.codes.get(p) for p in uninstalled} == dict.fromkeys(uninstalled, 0)


async def _all_in(codes: dict[str, int], names: set[str]) -> bool:
    return names <= codes.keys()


async def _assert_uninstalled(api: ApiClient) -> None:
    """What helm uninstall leaves, exactly: the CRD (crds/ is never deleted by Helm) and
    the leader-election Lease, which Podium creates at run time; plus what the cluster
    itself puts in every namespace (kube-root-ca.crt, the default ServiceAccount)."""
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    rbac, coord = client.RbacAuthorizationV1Api(api), client.CoordinationV1Api(api)
    policy, ext = client.PolicyV1Api(api), client.ApiextensionsV1Api(api)
    custom = client.CustomObjectsApi(api)
    release = f"app.kubernetes.io/instance={RELEASE}"

    async def left() -> dict[str, list[str]]:
        found = {
            "deployments": (await apps.list_namespaced_deployment(NAMESPACE)).items,
            "replicasets": (await apps.list_namespaced_replica_set(NAMESPACE)).items,
            "pods": (await core.list_namespaced_pod(NAMESPACE)).items,
            "services": (await core.list_namespaced_service(NAMESPACE)).items,
            "serviceaccounts": (await core.list_namespaced_service_account(NAMESPACE)).items,
            "configmaps": (await core.list_namespaced_config_map(NAMESPACE)).items,
            "secrets": (await core.list_namespaced_secret(NAMESPACE)).items,
            "roles": (await rbac.list_namespaced_role(NAMESPACE)).items,
            "rolebindings": (await rbac.list_namespaced_role_binding(NAMESPACE)).items,
            "pdbs": (await policy.list_namespaced_pod_disruption_budget(NAMESPACE)).items,
            "leases": (await coord.list_namespaced_lease(NAMESPACE)).items,
            "clusterroles": (await rbac.list_cluster_role(label_selector=release)).items,
            "clusterrolebindings": (
                await rbac.list_cluster_role_binding(label_selector=release)
            ).items,
        }
        names = {kind: sorted(o.metadata.name for o in items) for kind, items in found.items()}
        policies = await custom.list_cluster_custom_object(
            "podium.dev", "v1alpha1", "schedulerpolicies"
        )
        names["schedulerpolicies"] = sorted(p["metadata"]["name"] for p in policies["items"])
        return names

    expected = {
        "deployments": [],
        "replicasets": [],
        "pods": [],
        "services": [],
        "serviceaccounts": ["default"],
        "configmaps": ["kube-root-ca.crt"],
        "secrets": [],
        "roles": [],
        "rolebindings": [],
        "pdbs": [],
        "leases": [RELEASE],
        "clusterroles": [],
        "clusterrolebindings": [],
        "schedulerpolicies": [],
    }

    async def settled() -> bool:
        return await left() == expected

    with contextlib.suppress(AssertionError):
        await _wait("garbage collection after uninstall", settled, limit=60)
    assert await left() == expected
    crd = await ext.read_custom_resource_definition("schedulerpolicies.podium.dev")
    assert crd.metadata.name == "schedulerpolicies.podium.dev"
