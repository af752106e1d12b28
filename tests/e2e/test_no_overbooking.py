"""The no-overbooking invariant on the real API server: its premise, and a pod-level request.

Every e2e test ends with the check (tests/e2e/conftest.py ``no_overbooking``);
these tests pin down what it relies on and a case that needs kube-scheduler's
request model: a pod-level request on a pod created with spec.nodeName.
"""

from __future__ import annotations

from typing import Any, cast

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.devcluster.objects import create_pod, pod_events, wait_for
from podium.kube.manifests import make_node, make_pod
from tests.e2e.overbooking import find_overbookings
from tests.kube_accounting import node_allocatable, pod_resource

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]


async def read_pod(api: ApiClient, namespace: str, name: str) -> dict[str, Any]:
    core = client.CoreV1Api(api)
    raw: Any = await core.read_namespaced_pod(name, namespace, _preload_content=False)
    return dict(await raw.json())


async def read_node(api: ApiClient, name: str) -> dict[str, Any]:
    raw: Any = await client.CoreV1Api(api).read_node(name, _preload_content=False)
    return dict(await raw.json())


def pod_scheduled(pod: dict[str, Any]) -> dict[str, Any] | None:
    for cond in pod["status"].get("conditions") or []:
        if cond["type"] == "PodScheduled":
            return dict(cond)
    return None


async def test_binding_sets_pod_scheduled_and_node_name_does_not(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any
) -> None:
    """The rule tells scheduler-bound pods by PodScheduled=True and spares test-built states."""
    full, free = f"{namespace}-full", f"{namespace}-free"
    await node_factory([make_node(full, cpu="2"), make_node(free, cpu="2")])
    # The test overbooks "full" on purpose, bypassing any scheduler.
    await create_pod(api_client, namespace, make_pod("built", cpu="3", node_name=full))
    await podium()
    await create_pod(api_client, namespace, make_pod("placed", cpu="1", scheduler_name="podium"))

    async def node_of_placed() -> str:
        return str((await read_pod(api_client, namespace, "placed"))["spec"].get("nodeName") or "")

    assert await wait_for(node_of_placed, timeout=30, message="placed bound") == free
    built = await read_pod(api_client, namespace, "built")
    placed = await read_pod(api_client, namespace, "placed")
    assert pod_scheduled(built) is None
    assert (pod_scheduled(placed) or {}).get("status") == "True"
    assert pod_resource(built)["cpu"] > node_allocatable(await read_node(api_client, full))["cpu"]
    assert await find_overbookings(api_client) == []


@pytest.mark.parametrize("scheduler", ["kube-scheduler", "podium"])
async def test_pod_level_request_of_a_bound_pod_is_counted(
    api_client: ApiClient,
    namespace: str,
    node_factory: Any,
    kube_scheduler: Any,
    podium: Any,
    scheduler: str,
) -> None:
    """1500m at pod level (containers ask 10m) leaves no room for a 1-cpu pod on 2 cpus.

    The real kube-scheduler shows the expected outcome; Podium must match it.
    """
    node = f"{namespace}-n"
    await node_factory([make_node(node, cpu="2")])
    big = make_pod("big", cpu="10m", node_name=node)
    big["spec"]["resources"] = {"requests": {"cpu": "1500m"}}
    await create_pod(api_client, namespace, big)
    assert pod_resource(await read_pod(api_client, namespace, "big"))["cpu"] == 1500
    if scheduler == "podium":
        await podium()
    else:
        await kube_scheduler("overbook-kube")
    name = "podium" if scheduler == "podium" else "overbook-kube"
    await create_pod(api_client, namespace, make_pod("incoming", cpu="1", scheduler_name=name))

    async def outcome() -> dict[str, Any] | None:
        pod = await read_pod(api_client, namespace, "incoming")
        cond = pod_scheduled(pod) or {}
        if pod["spec"].get("nodeName") or cond.get("reason") == "Unschedulable":
            return pod
        return None

    pod = cast(dict[str, Any], await wait_for(outcome, timeout=30, message="a decision"))
    assert not pod["spec"].get("nodeName"), f"bound to {pod['spec']['nodeName']}"
    events = await wait_for(
        lambda: pod_events(api_client, namespace, "incoming", "FailedScheduling"),
        message="FailedScheduling event",
    )
    assert "Insufficient cpu" in str(events[-1].message)
