"""Scheduling gates: gated pods wait without spending cycles and enter the queue at once."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.devcluster.objects import wait_for
from podium.kube.manifests import make_node, make_pod

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]


async def test_gated_pod_waits_then_binds_when_last_gate_is_removed(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any
) -> None:
    core = client.CoreV1Api(api_client)
    await node_factory([make_node(f"{namespace}-n0")])
    proc = await podium()
    body = make_pod("gated", cpu="100m")
    body["spec"]["schedulingGates"] = [{"name": "example.com/a"}, {"name": "example.com/b"}]
    await core.create_namespaced_pod(namespace, cast(Any, body))

    async def gauge(queue: str) -> float:
        for line in (await proc.metrics()).splitlines():
            if line.startswith(f'scheduler_pending_pods{{queue="{queue}"}}'):
                return float(line.split()[-1])
        return -1.0

    async def gated() -> bool:
        return await gauge("gated") == 1.0

    await wait_for(gated, timeout=15, message="pod counted as gated")
    attempts_before = await proc.metrics()

    async def node_name() -> str:
        raw = await core.read_namespaced_pod("gated", namespace, _preload_content=False)
        return str((await raw.json())["spec"].get("nodeName") or "")

    # JSON patches: a strategic merge cannot shrink a list merged by name.
    drop_first = [{"op": "remove", "path": "/spec/schedulingGates/0"}]
    await core.patch_namespaced_pod("gated", namespace, cast(Any, drop_first))
    await asyncio.sleep(1.5)
    assert await node_name() == ""
    # The gated pod has cost no scheduling attempt at all.
    assert "scheduler_schedule_attempts_total{" not in attempts_before
    drop_all = [{"op": "remove", "path": "/spec/schedulingGates"}]
    await core.patch_namespaced_pod("gated", namespace, cast(Any, drop_all))
    assert (
        await wait_for(node_name, timeout=10, message="bound after last gate") == f"{namespace}-n0"
    )

    async def ungated() -> bool:
        return await gauge("gated") == 0.0

    await wait_for(ungated, timeout=5, message="gated gauge back to 0")
