"""Event series on the real API server: repeats PATCH one Event, never POST new ones."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from podium.devcluster import ControlPlane
from podium.devcluster.objects import create_pod
from podium.kube.client import KubeClient
from podium.kube.credentials import load_credentials
from podium.kube.manifests import make_pod
from podium.kube.objects import parse_pod
from podium.scheduling.binder import EventRecorder

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_repeated_failed_scheduling_is_one_event_with_a_growing_series(
    api_client: ApiClient, control_plane: ControlPlane, namespace: str
) -> None:
    created = await create_pod(api_client, namespace, make_pod("stuck", cpu="1000"))
    raw = api_client.sanitize_for_serialization(created)
    pod = parse_pod(raw)
    client = KubeClient(await load_credentials(str(control_plane.kubeconfig)))
    clock = Clock()
    events = EventRecorder(client, "podium-e2e", clock=clock)
    note = "0/3 nodes are available: 3 Insufficient cpu."
    try:
        for _ in range(4):
            clock.now += 5
            await events.record(pod, "FailedScheduling", note, "podium", "Warning")
        listed = await _events(client, namespace)
        assert len(listed) == 1
        assert listed[0]["series"]["count"] == 2  # PATCHed once; 3 and 4 only counted
        clock.now += 361  # idle for 6 minutes: the series is written a last time
        await events.finish()
        listed = await _events(client, namespace)
        assert [e["series"]["count"] for e in listed] == [4]
        assert listed[0]["note"] == note
        assert listed[0]["regarding"]["uid"] == pod.uid
    finally:
        await client.close()


async def _events(client: KubeClient, namespace: str) -> list[dict[str, Any]]:
    answer = await client.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
    return [e for e in answer["items"] if e["reason"] == "FailedScheduling"]
