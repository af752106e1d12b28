"""SchedulerPolicy end to end: admission, live reload, bad policies, deletion, metrics."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from podium.devcluster.objects import pod_events, wait_for
from podium.kube.manifests import make_node, make_pod
from tests.e2e.test_scheduling import create_pods, pods_in
from tests.unit.test_policy import SPECS

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


async def _logged(proc: Any, event: str, **fields: str) -> bool:
    """Whether Podium's JSON log has a record of ``event`` with these fields."""
    for line in proc.log_lines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record.get("event") == event and all(record.get(k) == v for k, v in fields.items()):
            return True
    return False


async def _create_policy(api: ApiClient, name: str, spec: dict[str, Any]) -> None:
    await client.CustomObjectsApi(api).create_cluster_custom_object(
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


async def _replace_spec(api: ApiClient, name: str, spec: dict[str, Any]) -> dict[str, Any] | None:
    """Replace the policy's spec (again on a 409 from Podium's own status write); None when
    the API server refuses the spec."""
    objects = client.CustomObjectsApi(api)
    for _ in range(10):
        policy = await _policy(api, name)
        policy["spec"] = spec
        try:
            return dict(
                await objects.replace_cluster_custom_object(GROUP, VERSION, PLURAL, name, policy)
            )
        except ApiException as exc:
            if exc.status in (400, 422):  # not JSON (NaN, infinity), or against the schema
                return None
            if exc.status != 409:
                raise
    raise AssertionError(f"policy {name} kept conflicting")


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
    await _create_policy(api_client, name, spec)

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
    await wait_for(
        lambda: _logged(proc, "policy_removed", scheduler_name=sched),
        timeout=20,
        message="profile removed",
    )
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


async def test_the_next_oldest_policy_serves_when_the_serving_one_is_deleted(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any, crd: None
) -> None:
    objects = client.CustomObjectsApi(api_client)
    sched = f"{namespace}-f1"[:63]
    first, second = f"{namespace}-f1a"[:63], f"{namespace}-f1b"[:63]
    await node_factory([make_node(f"{namespace}-n0", labels={"suite": namespace})])
    await podium()
    await _create_policy(api_client, first, {"schedulerName": sched})

    async def condition(name: str, status: str, reason: str) -> dict[str, Any] | None:
        cond = _condition(await _policy(api_client, name), "Accepted")
        return cond if (cond.get("status"), cond.get("reason")) == (status, reason) else None

    await wait_for(lambda: condition(first, "True", "Valid"), timeout=20, message="f1a serves")
    await _create_policy(api_client, second, {"schedulerName": sched})
    cond = await wait_for(
        lambda: condition(second, "False", "Conflict"), timeout=20, message="f1b in conflict"
    )
    assert repr(first) in cond["message"]

    await objects.delete_cluster_custom_object(GROUP, VERSION, PLURAL, first)
    deleted = time.monotonic()
    await wait_for(lambda: condition(second, "True", "Valid"), timeout=20, message="f1b takes over")
    print(f"f1b serving {time.monotonic() - deleted:.2f} s after f1a's deletion")
    await create_pods(
        api_client,
        namespace,
        [make_pod("served", scheduler_name=sched, node_selector={"suite": namespace})],
    )

    async def bound() -> bool:
        return all(p["spec"].get("nodeName") for p in await pods_in(api_client, namespace))

    await wait_for(bound, timeout=30, message="f1 pod bound under f1b")
    await objects.delete_cluster_custom_object(GROUP, VERSION, PLURAL, second)


async def test_disable_preemption_holds_under_a_policy(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any, crd: None
) -> None:
    """``--disable-preemption`` (the chart's preemption.enabled=false, which also withholds
    pods delete and pods/eviction) binds every profile, also one a policy defines."""
    sched = f"{namespace}-np"[:63]
    name = f"{namespace}-np"[:63]
    node = f"{namespace}-n0"
    await node_factory([make_node(node, cpu="1", labels={"suite": namespace})])
    low = make_pod("low", cpu="1", priority=1)
    low["spec"]["nodeName"] = node
    await create_pods(api_client, namespace, [low])
    proc = await podium("--scheduler-name", sched, "--disable-preemption")
    await _create_policy(api_client, name, {"schedulerName": sched})
    try:
        await wait_for(
            lambda: _logged(proc, "policy_applied", policy=name),
            timeout=20,
            message="policy applied",
        )
        high = make_pod(
            "high", cpu="1", priority=1000, scheduler_name=sched, node_selector={"suite": namespace}
        )
        await create_pods(api_client, namespace, [high])

        async def decided() -> dict[str, Any] | None:
            pods = {p["metadata"]["name"]: p for p in await pods_in(api_client, namespace)}
            for cond in pods["high"].get("status", {}).get("conditions") or []:
                if cond["type"] == "PodScheduled" and cond.get("reason") == "Unschedulable":
                    return pods
            return None

        pods = await wait_for(decided, timeout=30, message="high pod judged unschedulable")
        message = next(
            c["message"]
            for c in pods["high"]["status"]["conditions"]
            if c["type"] == "PodScheduled"
        )
        assert "Insufficient cpu" in message
        assert "preemption" not in message
        assert not pods["high"]["status"].get("nominatedNodeName")
        assert pods["low"]["metadata"].get("deletionTimestamp") is None
    finally:
        await client.CustomObjectsApi(api_client).delete_cluster_custom_object(
            GROUP, VERSION, PLURAL, name
        )


@dataclass
class _Fuzzed:
    """One policy on the real API server that every example replaces the spec of."""

    proc: Any
    name: str
    sched: str
    served: int = 1  # the last generation Podium accepted
    tally: Counter[str] = field(default_factory=Counter)


@pytest.fixture
async def fuzzed(
    api_client: ApiClient, namespace: str, podium: Any, crd: None
) -> AsyncIterator[_Fuzzed]:
    target = _Fuzzed(await podium(), f"{namespace}-fz"[:63], f"{namespace}-fz"[:63])
    await _create_policy(api_client, target.name, {"schedulerName": target.sched})
    yield target
    print(dict(target.tally))
    await client.CustomObjectsApi(api_client).delete_cluster_custom_object(
        GROUP, VERSION, PLURAL, target.name
    )


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(spec=SPECS)
async def test_fuzzed_policies_always_get_a_status_and_never_stop_podium(
    api_client: ApiClient, fuzzed: _Fuzzed, spec: dict[str, Any]
) -> None:
    """Specs drawn by hypothesis, applied in turn to one policy on the real API server:
    each is refused at admission, or Podium answers its generation with an Accepted
    condition; Podium stays up, and the last generation it accepted is the one serving."""
    raw = await _replace_spec(api_client, fuzzed.name, {**spec, "schedulerName": fuzzed.sched})
    if raw is None:
        fuzzed.tally["refused at admission"] += 1
        return
    generation = raw["metadata"]["generation"]

    async def answered() -> dict[str, Any] | None:
        cond = _condition(await _policy(api_client, fuzzed.name), "Accepted")
        return cond if cond.get("observedGeneration") == generation else None

    cond = await wait_for(answered, timeout=20, message=f"status of generation {generation}")
    assert fuzzed.proc.process.poll() is None, "podium exited"
    if cond["status"] == "True":
        fuzzed.served = generation
        fuzzed.tally["accepted"] += 1
    else:
        assert cond["reason"] == "InvalidPolicy" and cond["message"], cond
        fuzzed.tally["rejected by Podium"] += 1
    applied = [
        json.loads(line)["generation"]
        for line in fuzzed.proc.log_lines()
        if '"policy_applied"' in line and fuzzed.name in line
    ]
    assert applied[-1] == fuzzed.served
