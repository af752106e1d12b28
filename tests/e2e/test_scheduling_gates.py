"""Scheduling gates: gated pods wait without spending cycles and enter the queue at once."""

from __future__ import annotations

from typing import Any, cast

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.devcluster.objects import wait_for
from podium.framework.decision import read_records
from podium.kube.manifests import make_node, make_pod

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]


async def test_gated_pod_waits_then_binds_when_last_gate_is_removed(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any
) -> None:
    core = client.CoreV1Api(api_client)
    # Room for one of the two pods below: a probe created after the gate patch fits
    # only if the patch did not let the gated pod take the node first.
    (node,) = await node_factory([make_node(f"{namespace}-n0", cpu="1")])
    proc = await podium()
    body = make_pod("gated", cpu="600m")
    body["spec"]["schedulingGates"] = [{"name": "example.com/a"}, {"name": "example.com/b"}]
    await core.create_namespaced_pod(namespace, cast(Any, body))

    async def gated() -> bool:
        return (await proc.pending()).get("gated") == 1.0

    await wait_for(gated, timeout=15, message="pod counted as gated")
    # The gated pod has cost no scheduling attempt at all.
    assert "scheduler_schedule_attempts_total{" not in await proc.metrics()

    async def node_name() -> str:
        raw = await core.read_namespaced_pod("gated", namespace, _preload_content=False)
        return str((await raw.json())["spec"].get("nodeName") or "")

    # JSON patches: a strategic merge cannot shrink a list merged by name.
    drop_first = [{"op": "remove", "path": "/spec/schedulingGates/0"}]
    await core.patch_namespaced_pod("gated", namespace, cast(Any, drop_first))
    # The pod watch delivers in order: by the probe's cycle Podium has seen the patch,
    # and had it queued the gated pod, that pod (queued first) would hold the node.
    await core.create_namespaced_pod(namespace, cast(Any, make_pod("probe", cpu="600m")))

    def probe_decided() -> dict[str, Any] | None:
        records = [r for r in read_records(proc.log_lines()) if r["namespace"] == namespace]
        return next((r for r in records if r["pod"] == "probe" and r["result"]), None)

    record = await wait_for(probe_decided, timeout=15, message="the probe's decision record")
    assert (record["result"], record["node"]) == ("scheduled", node)
    decided = {r["pod"] for r in read_records(proc.log_lines()) if r["namespace"] == namespace}
    assert decided == {"probe"}, "the gated pod was tried with a gate left"
    assert await node_name() == ""
    await core.delete_namespaced_pod("probe", namespace, grace_period_seconds=0)
    drop_all = [{"op": "remove", "path": "/spec/schedulingGates"}]
    await core.patch_namespaced_pod("gated", namespace, cast(Any, drop_all))
    assert await wait_for(node_name, timeout=10, message="bound after last gate") == node

    async def ungated() -> bool:
        return (await proc.pending()).get("gated") == 0.0

    await wait_for(ungated, timeout=5, message="gated gauge back to 0")
