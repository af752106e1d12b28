"""SchedulerPolicy end to end: admission, live reload, bad policies, deletion, metrics."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from podium.devcluster.objects import pod_events, wait_for
from podium.kube.manifests import make_node, make_pod
from tests.e2e.test_scheduling import create_pods, pods_in

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

CRD = Path(__file__).parents[2] / "charts" / "podium" / "crds" / "schedulerpolicies.podium.dev.yaml"
GROUP, VERSION, PLURAL = "podium.dev", "v1alpha1", "schedulerpolicies"


@pytest.fixture
async def crd(api_client: ApiClient) -> None:
    ext = client.ApiextensionsV1Api(api_client)
    body = yaml.safe_load(CRD.read_text())
    try:
        await ext.create_custom_resource_definition(body)
    except ApiException as exc:
        if exc.status != 409:
            raise

    async def established() -> bool:
        raw = await ext.read_custom_resource_definition(
            body["metadata"]["name"], _preload_content=False
        )
        conds = (await raw.json()).get("status", {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conds)

    await wait_for(established, timeout=30, message="CRD established")


async def _policy(api: ApiClient, name: str) -> dict[str, Any]:
    raw = await client.CustomObjectsApi(api).get_cluster_custom_object(
        GROUP, VERSION, PLURAL, name, _preload_content=False
    )
    return dict(await raw.json())


def _condition(policy: dict[str, Any], kind: str) -> dict[str, Any]:
    for cond in (policy.get("status") or {}).get("conditions") or []:
        if cond["type"] == kind:
            return dict(cond)
    return {}


async def test_policy_lifecycle(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any, crd: None
) -> None:
    objects = client.CustomObjectsApi(api_client)
    sched = f"{namespace}-pack"[:63]
    name = f"{namespace}-policy"[:63]
    await node_factory(
        make_node(f"{namespace}-n{i}", labels={"suite": namespace}) for i in range(4)
    )
    proc = await podium()
    spec = {
        "schedulerName": sched,
        "scores": [{"name": "NodeResourcesFit", "weight": 1}],
        "pluginArgs": {"nodeResourcesFit": {"strategy": "MostAllocated"}},
    }
    await objects.create_cluster_custom_object(
        GROUP,
        VERSION,
        PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "SchedulerPolicy",
            "metadata": {"name": name},
            "spec": spec,
        },
    )

    async def accepted(generation: int) -> dict[str, Any] | None:
        policy = await _policy(api_client, name)
        ok = _condition(policy, "Accepted").get("status") == "True"
        seen = (policy.get("status") or {}).get("observedGeneration") == generation
        return policy if ok and seen else None

    policy = await wait_for(lambda: accepted(1), timeout=20, message="policy accepted")
    assert policy["status"]["enabledPlugins"] >= 1

    selector = {"suite": namespace}
    packed = [
        make_pod(f"pack{i}", cpu="500m", scheduler_name=sched, node_selector=selector)
        for i in range(6)
    ]
    await create_pods(api_client, namespace, packed)

    async def placements() -> Counter[str] | None:
        pods = await pods_in(api_client, namespace)
        nodes = Counter(p["spec"].get("nodeName") for p in pods)
        return None if None in nodes else nodes

    assert len(await wait_for(placements, timeout=30, message="packed pods bound")) == 1

    # Live change: the same schedulerName now spreads, with no restart.
    policy["spec"]["pluginArgs"]["nodeResourcesFit"]["strategy"] = "LeastAllocated"
    await objects.replace_cluster_custom_object(GROUP, VERSION, PLURAL, name, policy)
    await wait_for(lambda: accepted(2), timeout=20, message="generation 2 applied")
    spread = [
        make_pod(f"spread{i}", cpu="500m", scheduler_name=sched, node_selector=selector)
        for i in range(3)
    ]
    await create_pods(api_client, namespace, spread)
    final = await wait_for(placements, timeout=30, message="spread pods bound")
    assert len(final) >= 3

    # Rejected at admission by the CRD schema: a weight out of range.
    bad = {**spec, "scores": [{"name": "NodeResourcesFit", "weight": 1000}]}
    with pytest.raises(ApiException) as info:
        await objects.create_cluster_custom_object(
            GROUP,
            VERSION,
            PLURAL,
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "SchedulerPolicy",
                "metadata": {"name": f"{name}-bad"},
                "spec": bad,
            },
        )
    assert info.value.status == 422

    # Passes admission (custom plugin names are allowed) but Podium has no such plugin:
    # the last good policy stays in force and the status says why.
    policy = await _policy(api_client, name)
    policy["spec"]["scores"] = [{"name": "example.com/Missing", "weight": 1}]
    await objects.replace_cluster_custom_object(GROUP, VERSION, PLURAL, name, policy)

    async def rejected() -> dict[str, Any] | None:
        cond = _condition(await _policy(api_client, name), "Accepted")
        return cond if cond.get("status") == "False" else None

    cond = await wait_for(rejected, timeout=20, message="policy rejected in status")
    assert "example.com/Missing" in cond["message"]
    await create_pods(
        api_client,
        namespace,
        [make_pod("still", cpu="100m", scheduler_name=sched, node_selector=selector)],
    )
    await wait_for(placements, timeout=30, message="still scheduling with the last good policy")

    # Deleted while a pod waits for it: the pod stays Pending with an Event saying why.
    await objects.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    await asyncio.sleep(1)
    await create_pods(api_client, namespace, [make_pod("orphan", scheduler_name=sched)])
    events = await wait_for(
        lambda: pod_events(api_client, namespace, "orphan", "FailedScheduling"),
        timeout=20,
        message="orphan event",
    )
    assert "no SchedulerPolicy serves schedulerName" in events[0].message

    metrics = await proc.metrics()
    assert (
        f'scheduler_schedule_attempts_total{{profile="{sched}",result="scheduled"}} 10.0' in metrics
    )
    assert (
        "scheduler_framework_extension_point_duration_seconds_count"
        f'{{extension_point="Filter",profile="{sched}",status="Success"}} 10.0'
    ) in metrics
    assert 'podium_policy_reloads_total{result="applied"} 2.0' in metrics
    assert 'podium_policy_reloads_total{result="rejected"} 1.0' in metrics
