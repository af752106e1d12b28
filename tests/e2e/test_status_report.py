"""The failure report on the real API server: condition and nomination in one write,
conditional on the pod's version, written again after a conflict unless the pod was bound."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.devcluster import ControlPlane
from podium.devcluster.objects import create_pod
from podium.kube.client import KubeClient
from podium.kube.credentials import load_credentials
from podium.kube.manifests import make_pod
from podium.kube.objects import PodInfo, parse_pod
from podium.scheduling.binder import Binder
from podium.scheduling.nominator import Nominator

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

MESSAGE = (
    "0/1 nodes are available: 1 Insufficient cpu. preemption: found a potential "
    "placement for pod on node n1, preempting 1 victims"
)


async def stale_pod(api: ApiClient, namespace: str) -> PodInfo:
    """A pending pod no scheduler serves, as read before someone else changed it."""
    created = await create_pod(api, namespace, make_pod("p", cpu="1", scheduler_name="nobody"))
    stale = parse_pod(api.sanitize_for_serialization(created))
    await client.CoreV1Api(api).patch_namespaced_pod(
        "p", namespace, {"metadata": {"labels": {"touched": "yes"}}}
    )
    return stale


async def stored(client_: KubeClient, namespace: str) -> dict[str, Any]:
    pod: dict[str, Any] = await client_.get(f"/api/v1/namespaces/{namespace}/pods/p")
    return pod


async def test_a_conflict_is_written_again_against_the_current_version(
    api_client: ApiClient, control_plane: ControlPlane, namespace: str
) -> None:
    pod = await stale_pod(api_client, namespace)
    kube = KubeClient(await load_credentials(str(control_plane.kubeconfig)))
    nominator = Nominator()
    nominator.add(pod, "n1")
    try:
        await Binder(kube, "podium-e2e").set_condition(pod, "Unschedulable", MESSAGE, nominator)
        status = (await stored(kube, namespace))["status"]
    finally:
        await kube.close()
    assert status["nominatedNodeName"] == "n1"
    [cond] = [c for c in status["conditions"] if c["type"] == "PodScheduled"]
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Unschedulable", MESSAGE)


async def test_a_conflict_with_a_binding_is_not_written_again(
    api_client: ApiClient, control_plane: ControlPlane, namespace: str
) -> None:
    pod = await stale_pod(api_client, namespace)
    kube = KubeClient(await load_credentials(str(control_plane.kubeconfig)))
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p", "namespace": namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"},
    }
    try:
        await kube.post(f"/api/v1/namespaces/{namespace}/pods/p/binding", binding)
        await Binder(kube, "podium-e2e").set_condition(pod, "Unschedulable", MESSAGE, Nominator())
        status = (await stored(kube, namespace))["status"]
    finally:
        await kube.close()
    [cond] = [c for c in status["conditions"] if c["type"] == "PodScheduled"]
    assert cond["status"] == "True"
