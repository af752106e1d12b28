"""A Binding the API server rejects is retried with backoff until it succeeds."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.devcluster.objects import pod_events, wait_for
from podium.kube.manifests import make_node, make_pod
from tests.e2e.faults import deny_admission

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]


async def test_rejected_bind_is_retried_and_pod_ends_bound(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any
) -> None:
    admission = client.AdmissionregistrationV1Api(api_client)
    core = client.CoreV1Api(api_client)
    policy, binding = deny_admission(
        f"deny-bind-{namespace}",
        resource="pods/binding",
        operation="CREATE",
        validation="false",
        message="injected bind failure",
        namespace=namespace,
    )
    await admission.create_validating_admission_policy(policy)
    await admission.create_validating_admission_policy_binding(binding)
    try:
        await node_factory([make_node(f"{namespace}-n0")])
        await asyncio.sleep(2)  # the apiserver loads new admission policies asynchronously
        proc = await podium()
        await core.create_namespaced_pod(namespace, make_pod("victim", cpu="100m"))
        failures = await wait_for(
            lambda: pod_events(api_client, namespace, "victim", "FailedScheduling"),
            timeout=30,
            message="a FailedScheduling event for the rejected bind",
        )
        assert failures[0].message.startswith('running Bind plugin "DefaultBinder": ')
        assert "injected bind failure" in failures[0].message
    finally:
        await admission.delete_validating_admission_policy_binding(binding["metadata"]["name"])
        await admission.delete_validating_admission_policy(policy["metadata"]["name"])

    async def bound() -> str:
        raw = await core.read_namespaced_pod("victim", namespace, _preload_content=False)
        return str((await raw.json())["spec"].get("nodeName") or "")

    assert await wait_for(bound, timeout=60, message="bound after retries") == f"{namespace}-n0"
    metrics = await proc.metrics()
    assert 'podium_bind_results_total{outcome="retry"}' in metrics
    assert 'podium_bind_results_total{outcome="bound"} 1.0' in metrics
