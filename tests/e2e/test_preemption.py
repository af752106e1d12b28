"""Podium end to end on the real API server: DefaultPreemption (issue 8)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client import ApiClient

from podium.devcluster.objects import pod_events, wait_for
from podium.kube.manifests import make_node, make_pod
from tests.e2e.faults import deny_admission

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]


async def read_pod(api: ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        raw = await client.CoreV1Api(api).read_namespaced_pod(
            name, namespace, _preload_content=False
        )
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return dict(await raw.json())


async def names_left(api: ApiClient, namespace: str) -> set[str]:
    raw = await client.CoreV1Api(api).list_namespaced_pod(namespace, _preload_content=False)
    return {p["metadata"]["name"] for p in (await raw.json())["items"]}


async def record_nominations(api: ApiClient, namespace: str, seen: list[str]) -> None:
    """Every status.nominatedNodeName of pod "hi" the watch delivers (binding clears it)."""
    stream = watch.Watch().stream(
        client.CoreV1Api(api).list_namespaced_pod, namespace, timeout_seconds=60
    )
    async for event in stream:
        obj = event["object"]
        if obj.metadata.name == "hi" and obj.status and obj.status.nominated_node_name:
            seen.append(obj.status.nominated_node_name)


async def setup(
    api: ApiClient, namespace: str, node_factory: Any, nodes: dict[str, list[dict[str, Any]]]
) -> dict[str, str]:
    """Nodes labelled for this test (2 cpu each) and their bound low-priority pods."""
    names = {key: f"{namespace}-{key}" for key in nodes}
    await node_factory(
        make_node(name, cpu="2", memory="8Gi", labels={"suite": namespace})
        for name in names.values()
    )
    core = client.CoreV1Api(api)
    for key, pods in nodes.items():
        for body in pods:
            body["spec"]["nodeName"] = names[key]
            await core.create_namespaced_pod(namespace, body=body)
    return names


def preemptor(namespace: str, **kw: Any) -> dict[str, Any]:
    return make_pod("hi", cpu="1", priority=100, node_selector={"suite": namespace}, **kw)


async def test_preempts_lowest_priority_victim_and_binds(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any
) -> None:
    names = await setup(
        api_client,
        namespace,
        node_factory,
        {
            "a": [make_pod("lo1", cpu="1", priority=1), make_pod("lo5", cpu="1", priority=5)],
            "b": [make_pod("mid", cpu="2", priority=1000)],
        },
    )
    await podium()
    seen: list[str] = []
    watcher = asyncio.create_task(record_nominations(api_client, namespace, seen))
    await asyncio.sleep(0.2)
    hi = preemptor(namespace)
    await client.CoreV1Api(api_client).create_namespaced_pod(namespace, body=hi)

    async def bound() -> str:
        pod = await read_pod(api_client, namespace, "hi")
        return str((pod or {}).get("spec", {}).get("nodeName") or "")

    assert await wait_for(bound, timeout=30, message="preemptor bound") == names["a"]
    assert await names_left(api_client, namespace) == {"hi", "lo5", "mid"}
    pod = await read_pod(api_client, namespace, "hi")
    assert pod is not None
    await wait_for(lambda: seen, timeout=5, message="nominatedNodeName")
    watcher.cancel()
    assert set(seen) == {names["a"]}
    failed = await wait_for(
        lambda: pod_events(api_client, namespace, "hi", "FailedScheduling"), message="event"
    )
    assert failed[0].message.endswith(
        f"preemption: found a potential placement for pod on node {names['a']}, "
        "preempting 1 victims"
    )
    preempted = await wait_for(
        lambda: pod_events(api_client, namespace, "lo1", "Preempted"), message="Preempted"
    )
    assert preempted[0].message == f"Preempted by pod {pod['metadata']['uid']} on node {names['a']}"
    assert preempted[0].type == "Normal"


async def record_versions(
    api: ApiClient, namespace: str, name: str, since: str, seen: list[dict[str, Any]]
) -> None:
    """Every version of pod ``name`` the API server stores after resourceVersion ``since``."""
    stream = watch.Watch().stream(
        client.CoreV1Api(api).list_namespaced_pod,
        namespace,
        field_selector=f"metadata.name={name}",
        resource_version=since,
        timeout_seconds=60,
    )
    async for event in stream:
        seen.append(event["raw_object"])


def scheduled_condition(pod: dict[str, Any]) -> dict[str, Any]:
    for cond in pod.get("status", {}).get("conditions") or []:
        if cond["type"] == "PodScheduled":
            return dict(cond)
    return {}


async def test_preemptor_condition_and_nomination_land_in_one_write(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any
) -> None:
    """handleSchedulingFailure's updatePod: PodScheduled=False with Go's message and the
    nominatedNodeName arrive in the same version of the pod (issue 31: the condition was
    lost to a 409 when the nomination was written on its own first)."""
    names = await setup(
        api_client,
        namespace,
        node_factory,
        {"a": [make_pod("lo1", cpu="1", priority=1), make_pod("lo5", cpu="1", priority=5)]},
    )
    await podium()
    core = client.CoreV1Api(api_client)
    listed = await (await core.list_namespaced_pod(namespace, _preload_content=False)).json()
    seen: list[dict[str, Any]] = []
    watcher = asyncio.create_task(
        record_versions(api_client, namespace, "hi", listed["metadata"]["resourceVersion"], seen)
    )
    try:
        nodes = await (await core.list_node(_preload_content=False)).json()
        await core.create_namespaced_pod(namespace, body=preemptor(namespace))

        def nominated() -> dict[str, Any] | None:
            return next((p for p in seen if p["status"].get("nominatedNodeName")), None)

        pod = await wait_for(nominated, timeout=30, message="a version with nominatedNodeName")
    finally:
        watcher.cancel()
    assert pod["status"]["nominatedNodeName"] == names["a"]
    cond = scheduled_condition(pod)
    assert (cond.get("status"), cond.get("reason")) == ("False", "Unschedulable"), pod["status"]
    # Other nodes of the cluster fail the node selector (or an earlier filter): their
    # part of the histogram is not this test's; the preemptor's node and the PostFilter
    # message are.
    message = cond["message"]
    assert message.startswith(f"0/{len(nodes['items'])} nodes are available: "), message
    assert "1 Insufficient cpu" in message.split(". preemption: ")[0].split(": ", 1)[1].split(", ")
    assert message.endswith(
        f". preemption: found a potential placement for pod on node {names['a']}, "
        "preempting 1 victims"
    ), message


async def test_preemption_policy_never_does_not_preempt(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any
) -> None:
    await setup(api_client, namespace, node_factory, {"a": [make_pod("lo", cpu="2", priority=1)]})
    await podium()
    hi = preemptor(namespace, preemption_policy="Never")
    await client.CoreV1Api(api_client).create_namespaced_pod(namespace, body=hi)

    async def condition() -> dict[str, Any] | None:
        pod = await read_pod(api_client, namespace, "hi")
        for cond in (pod or {}).get("status", {}).get("conditions") or []:
            if cond["type"] == "PodScheduled" and cond["status"] == "False":
                return dict(cond)
        return None

    cond = await wait_for(condition, timeout=30, message="PodScheduled=False")
    assert cond["message"].endswith(". preemption: not eligible due to preemptionPolicy=Never."), (
        cond["message"]
    )
    assert "1 Insufficient cpu" in cond["message"]
    # The message is PostFilter's not-eligible answer, which starts no eviction and
    # writes no nomination: nothing is left to happen.
    assert await names_left(api_client, namespace) == {"hi", "lo"}
    pod = await read_pod(api_client, namespace, "hi")
    assert pod is not None and not pod["status"].get("nominatedNodeName")


async def test_pdb_protected_victim_is_avoided(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any
) -> None:
    policy = client.PolicyV1Api(api_client)
    await policy.create_namespaced_pod_disruption_budget(
        namespace,
        body={
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "db"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
        },
    )
    await policy.patch_namespaced_pod_disruption_budget_status(
        "db",
        namespace,
        body={
            "status": {
                "disruptionsAllowed": 0,
                "currentHealthy": 1,
                "desiredHealthy": 1,
                "expectedPods": 1,
                "observedGeneration": 1,
            }
        },
    )
    names = await setup(
        api_client,
        namespace,
        node_factory,
        {
            "a": [make_pod("guarded", cpu="2", priority=1, labels={"app": "db"})],
            "b": [make_pod("free", cpu="2", priority=1)],
        },
    )
    await podium()
    await client.CoreV1Api(api_client).create_namespaced_pod(namespace, body=preemptor(namespace))

    async def bound() -> str:
        pod = await read_pod(api_client, namespace, "hi")
        return str((pod or {}).get("spec", {}).get("nodeName") or "")

    assert await wait_for(bound, timeout=30, message="preemptor bound") == names["b"]
    assert await names_left(api_client, namespace) == {"hi", "guarded"}


async def test_refused_victim_deletion_retries_the_preemptor_as_kube_scheduler_does(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any, kube_scheduler: Any
) -> None:
    """A victim's deletion refused by an admission policy (kube-scheduler's FM-302): the
    evictions stop and each preemptor stays Pending, nominated, with the victim alive.
    Once deletions are allowed again, both schedulers' preemptors bind within seconds and
    their victims are gone: neither waits for the unschedulable pool's 5-minute flush."""
    sides = {"p": "podium", "k": f"{namespace[:40]}-kube"}
    nodes = {side: f"{namespace}-{side}" for side in sides}
    await node_factory(
        make_node(name, cpu="2", memory="8Gi", labels={"suite": namespace, "side": side})
        for side, name in nodes.items()
    )
    core = client.CoreV1Api(api_client)
    for side, node in nodes.items():
        for i in range(2):
            body = make_pod(f"{side}-v{i}", cpu="1", priority=i + 1)
            body["spec"]["nodeName"] = node
            await core.create_namespaced_pod(namespace, body=body)
    admission = client.AdmissionregistrationV1Api(api_client)
    policy, binding = deny_admission(
        f"{namespace}-no-delete",
        resource="pods",
        operation="DELETE",
        validation="false",
        message="deletion refused by the test",
        match_condition="oldObject.metadata.name.endsWith('-v1')",
        namespace=namespace,
    )
    await admission.create_validating_admission_policy(cast(Any, policy))
    await admission.create_validating_admission_policy_binding(cast(Any, binding))
    try:

        async def refused() -> bool:  # a dry run changes nothing, and sends no pod event
            try:
                await core.delete_namespaced_pod("p-v1", namespace, dry_run="All")
            except client.ApiException as exc:
                return "deletion refused by the test" in str(exc.body)
            return False

        await wait_for(refused, timeout=30, interval=0.2, message="deletions refused")
        proc = await podium()
        await kube_scheduler(sides["k"])
        for side, scheduler in sides.items():
            body = make_pod(
                f"{side}-hi",
                cpu="2",
                priority=100,
                scheduler_name=scheduler,
                node_selector={"side": side},
            )
            await core.create_namespaced_pod(namespace, body=body)

        async def tried() -> bool:  # each preemptor nominated, and its evictions refused
            for side in sides:
                pod = await read_pod(api_client, namespace, f"{side}-hi")
                if not (pod or {}).get("status", {}).get("nominatedNodeName"):
                    return False
            return True

        await wait_for(tried, timeout=30, interval=0.2, message="both preemptors nominated")
        for side in sides:
            assert (await read_pod(api_client, namespace, f"{side}-v1")) is not None
            hi = await read_pod(api_client, namespace, f"{side}-hi")
            assert hi is not None and not hi["spec"].get("nodeName")

        def refusals() -> int:
            return sum('"preempt_failed"' in line for line in proc.log_lines())

        async def condition() -> dict[str, Any]:
            victim = await read_pod(api_client, namespace, "p-v1")
            conditions = (victim or {}).get("status", {}).get("conditions") or []
            return next(c for c in conditions if c["type"] == "DisruptionTarget")

        await wait_for(lambda: refusals() >= 1, timeout=30, message="a refused eviction")
        first = await condition()
        await wait_for(lambda: refusals() >= 3, timeout=30, message="two retries refused")
        # Each retry finds the condition in place and writes nothing (UpdatePodCondition).
        assert await condition() == first
    finally:
        await admission.delete_validating_admission_policy_binding(binding["metadata"]["name"])
        await admission.delete_validating_admission_policy(policy["metadata"]["name"])

    async def allowed() -> bool:  # the API server unloads the policy asynchronously too
        return not await refused()

    await wait_for(allowed, timeout=30, interval=0.2, message="deletions allowed again")

    async def both_bound() -> bool:
        for side, node in nodes.items():
            pod = await read_pod(api_client, namespace, f"{side}-hi")
            if (pod or {}).get("spec", {}).get("nodeName") != node:
                return False
        return True

    await wait_for(both_bound, timeout=30, interval=0.5, message="both preemptors bound")
    assert await names_left(api_client, namespace) == {"p-hi", "k-hi"}
