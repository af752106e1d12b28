"""Podium end to end on the real API server: the scheduling core (issue 3)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.devcluster.objects import pod_events, wait_for
from podium.kube.manifests import make_node, make_pod
from podium.kube.objects import parse_node, parse_pod

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]


async def create_pods(api: ApiClient, namespace: str, pods: list[dict[str, Any]]) -> None:
    core = client.CoreV1Api(api)
    gate = asyncio.Semaphore(32)

    async def one(body: dict[str, Any]) -> None:
        async with gate:
            await core.create_namespaced_pod(namespace, body=body)

    await asyncio.gather(*(one(p) for p in pods))


async def pods_in(api: ApiClient, namespace: str) -> list[dict[str, Any]]:
    raw = await client.CoreV1Api(api).list_namespaced_pod(namespace, _preload_content=False)
    return list((await raw.json())["items"])


async def all_pods_and_nodes(api: ApiClient) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    core = client.CoreV1Api(api)
    pods = await (await core.list_pod_for_all_namespaces(_preload_content=False)).json()
    nodes = await (await core.list_node(_preload_content=False)).json()
    return pods["items"], nodes["items"]


def overcommitted(pods: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> list[str]:
    """Nodes whose summed pod requests (pod count included) exceed their allocatable."""
    used: dict[str, Counter[str]] = {}
    for body in pods:
        info = parse_pod(body)
        if info.node_name and not info.terminal:
            used.setdefault(info.node_name, Counter()).update(info.requests)
            used[info.node_name]["pods"] += 1
    over = []
    for body in nodes:
        node = parse_node(body)
        for resource, amount in used.get(node.name, Counter()).items():
            if amount > node.allocatable.get(resource, 0):
                over.append(f"{node.name} {resource} {amount}")
    return over


async def assert_no_overcommit(api: ApiClient) -> None:
    """No node's summed requests exceed its allocatable, from the API server's own data."""
    assert overcommitted(*await all_pods_and_nodes(api)) == []


async def test_binds_500_pods_on_20_nodes_without_overcommit(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any
) -> None:
    await node_factory(
        make_node(f"{namespace}-n{i}", cpu="4", memory="8Gi", pods=30) for i in range(20)
    )
    await podium()
    pods = [
        make_pod(f"p{i}", cpu="100m", memory="200Mi", scheduler_name="podium") for i in range(500)
    ]
    await create_pods(api_client, namespace, pods)

    async def all_bound() -> bool:
        return all(p["spec"].get("nodeName") for p in await pods_in(api_client, namespace))

    await wait_for(all_bound, timeout=120, interval=0.5, message="500 pods bound")
    await assert_no_overcommit(api_client)
    final = await pods_in(api_client, namespace)
    placed = Counter(p["spec"]["nodeName"] for p in final)
    assert set(placed) <= {f"{namespace}-n{i}" for i in range(20)}
    assert max(placed.values()) <= 30
    # Nothing of kopf's (or Podium's) is written onto user pods.
    for pod in final:
        meta = pod["metadata"]
        assert not meta.get("finalizers"), meta["name"]
        assert not [a for a in meta.get("annotations") or {} if "kopf" in a], meta["name"]


async def test_unfit_pod_reports_then_binds_when_node_appears(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any
) -> None:
    core = client.CoreV1Api(api_client)
    await node_factory([make_node(f"{namespace}-small", cpu="2", memory="4Gi")])
    await podium()
    await create_pods(api_client, namespace, [make_pod("huge", cpu="64", scheduler_name="podium")])

    async def condition() -> dict[str, Any] | None:
        pod = await (
            await core.read_namespaced_pod("huge", namespace, _preload_content=False)
        ).json()
        for cond in pod["status"].get("conditions") or []:
            if cond["type"] == "PodScheduled" and cond["status"] == "False":
                return dict(cond)
        return None

    cond = await wait_for(condition, timeout=30, message="PodScheduled=False")
    _, nodes = await all_pods_and_nodes(api_client)
    total = len(nodes)
    assert cond["reason"] == "Unschedulable"
    assert cond["message"].startswith(f"0/{total} nodes are available: ")
    assert cond["message"] == (
        f"0/{total} nodes are available: {total} Insufficient cpu. preemption: 0/{total} nodes "
        f"are available: {total} Preemption is not helpful for scheduling."
    )
    events = await wait_for(
        lambda: pod_events(api_client, namespace, "huge", "FailedScheduling"), message="event"
    )
    assert events[0].message == cond["message"]
    assert events[0].type == "Warning"

    await node_factory([make_node(f"{namespace}-big", cpu="128", memory="64Gi")])

    async def bound() -> str:
        pod = await (
            await core.read_namespaced_pod("huge", namespace, _preload_content=False)
        ).json()
        return str(pod["spec"].get("nodeName") or "")

    assert await wait_for(bound, timeout=15, message="bound after node add") == f"{namespace}-big"
    scheduled = await wait_for(
        lambda: pod_events(api_client, namespace, "huge", "Scheduled"), message="Scheduled event"
    )
    assert scheduled[0].message == f"Successfully assigned {namespace}/huge to {namespace}-big"


async def test_other_schedulers_pods_are_left_alone_but_counted(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any
) -> None:
    core = client.CoreV1Api(api_client)
    only = f"{namespace}-only"
    await node_factory([make_node(only, cpu="2", memory="4Gi", labels={"suite": namespace})])
    foreign_bound = make_pod("foreign-bound", cpu="1500m", scheduler_name="someone-else")
    foreign_bound["spec"]["nodeName"] = only
    await create_pods(
        api_client,
        namespace,
        [foreign_bound, make_pod("foreign-pending", scheduler_name="someone-else")],
    )
    await podium()
    mine = make_pod("mine", cpu="1", scheduler_name="podium", node_selector={"suite": namespace})
    await create_pods(api_client, namespace, [mine])

    async def message() -> str:
        pod = await (
            await core.read_namespaced_pod("mine", namespace, _preload_content=False)
        ).json()
        for cond in pod["status"].get("conditions") or []:
            if cond["type"] == "PodScheduled":
                return str(cond.get("message") or "")
        return ""

    text = await wait_for(message, timeout=30, message="mine rejected")
    assert "1 Insufficient cpu" in text
    pending = await (
        await core.read_namespaced_pod("foreign-pending", namespace, _preload_content=False)
    ).json()
    assert not pending["spec"].get("nodeName")
    assert not pending["status"].get("conditions")
