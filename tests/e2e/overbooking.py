"""No node over allocatable by kube-scheduler's accounting, read from the real API server.

``assert_no_overbooking`` is the plain function; tests/e2e/conftest.py runs it
after every e2e test that uses the cluster. The rule is ``overbookings`` in
tests/kube_accounting.py, a port of kube-scheduler's accounting that shares no
code with Podium.
"""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from tests.kube_accounting import Overbooking, overbookings


async def _items(response: Any) -> list[dict[str, Any]]:
    return list((await response.json())["items"])


async def find_overbookings(api: ApiClient) -> list[Overbooking]:
    """Every Node and Pod of the cluster, judged as kube-scheduler would count them.

    Raw JSON, not the client's models: those drop fields newer than the client
    (pod-level resources, status.allocatedResources).
    """
    core = client.CoreV1Api(api)
    pods = await _items(await core.list_pod_for_all_namespaces(_preload_content=False))
    nodes = await _items(await core.list_node(_preload_content=False))
    return overbookings(nodes, pods)


async def assert_no_overbooking(api: ApiClient) -> None:
    """Fail when a scheduler placed a pod on a node past its allocatable."""
    found = await find_overbookings(api)
    assert not found, "overbooked by a scheduler (kube-scheduler's accounting):\n" + "\n".join(
        str(o) for o in found
    )
