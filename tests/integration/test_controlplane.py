"""The local control plane is real: the real kube-scheduler binds and explains failures on it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from podium.devcluster import Binaries, ControlPlane, KubeScheduler
from podium.devcluster.objects import create_pod, pod_events, wait_for
from podium.kube.manifests import make_node, make_pod

NodeFactory = Callable[..., Awaitable[list[str]]]
SchedulerFactory = Callable[..., Awaitable[KubeScheduler]]


async def _three_nodes(namespace: str, node_factory: NodeFactory) -> list[str]:
    """Two nodes too small for a 4-CPU pod and one that fits it."""
    return await node_factory(
        [
            make_node(f"{namespace}-small-a", cpu="2"),
            make_node(f"{namespace}-small-b", cpu="2"),
            make_node(f"{namespace}-big", cpu="8"),
        ]
    )


async def test_kube_scheduler_binds_pod_to_the_only_feasible_node(
    control_plane: ControlPlane,
    api_client: Any,
    namespace: str,
    node_factory: NodeFactory,
    kube_scheduler: SchedulerFactory,
) -> None:
    *_, big = await _three_nodes(namespace, node_factory)
    scheduler = await kube_scheduler(f"ks-{namespace}")
    await create_pod(
        api_client,
        namespace,
        make_pod("fits-one", cpu="4", scheduler_name=scheduler.scheduler_name),
    )
    core = client.CoreV1Api(api_client)

    async def bound_node() -> str | None:
        pod = await core.read_namespaced_pod("fits-one", namespace)
        node: str | None = pod.spec.node_name
        return node

    assert await wait_for(bound_node, timeout=30, message="fits-one to be bound") == big
    bindings = [
        event
        for event in control_plane.audit_events()
        if event["objectRef"].get("subresource") == "binding"
        and event["objectRef"].get("namespace") == namespace
    ]
    assert [(b["verb"], b["objectRef"]["name"]) for b in bindings] == [("create", "fits-one")]


async def test_pod_that_fits_nowhere_gets_failed_scheduling_event(
    api_client: Any,
    namespace: str,
    node_factory: NodeFactory,
    kube_scheduler: SchedulerFactory,
) -> None:
    await _three_nodes(namespace, node_factory)
    # Started after the nodes exist: its informer sync then includes all of them.
    scheduler = await kube_scheduler(f"ks-{namespace}")
    await create_pod(
        api_client,
        namespace,
        make_pod("fits-nowhere", cpu="1000", scheduler_name=scheduler.scheduler_name),
    )
    events = await wait_for(
        lambda: pod_events(api_client, namespace, "fits-nowhere", reason="FailedScheduling"),
        timeout=30,
        message="a FailedScheduling event",
    )
    # kube-scheduler counts every node in the cluster; with no leftovers from other tests
    # that is exactly this test's three.
    total = len((await client.CoreV1Api(api_client).list_node()).items)
    message: str = events[-1].message
    assert message.startswith(f"0/{total} nodes are available:"), message
    assert "Insufficient cpu" in message, message


async def test_apiserver_restarts_on_the_same_port_and_keeps_state(
    binaries: Binaries, tmp_path: Path
) -> None:
    async with ControlPlane(binaries, workdir=tmp_path, perf=True) as plane:
        api = await plane.api_client()
        try:
            core = client.CoreV1Api(api)
            await core.create_namespace(
                client.V1Namespace(metadata=client.V1ObjectMeta(name="survives-restart"))
            )
            await plane.arestart_apiserver(kill=True)
            assert plane.request("/readyz")[0] == 200
            ns = await core.read_namespace("survives-restart")
            assert ns.metadata.name == "survives-restart"
        finally:
            await api.close()
