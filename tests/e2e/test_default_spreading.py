"""System default spreading of a pod that only a Service selects, against kube-scheduler.

Three equal nodes (4 cpu, 8Gi): web pods (500m, 512Mi) bound on n1 and n2, a
non-web pod (1 cpu, 512Mi) on n3. The incoming web pod (500m, 512Mi) has no
owner. Every score plugin but two is equal on all three nodes (no taints,
affinity, images or zones), so the totals differ only in:

- NodeResourcesFit (LeastAllocated, weight 1): n1, n2 (75+87)/2 = 81; n3 (62+87)/2 = 74.
- NodeResourcesBalancedAllocation (weight 1): n1, n2 93; n3 87.
- PodTopologySpread (weight 2), only once a Service selects app=web: the
  hostname default (maxSkew 3) scores round(1*log 5 + 2) = 4 on n1, n2 and 2
  on n3, normalized to 50, 50 and 100.

Before the Service: n1 and n2 lead n3 by 13 and tie, so either may be chosen.
With it: n3 leads by 200 - 100 - 13 = 87, the unique best node, so
kube-scheduler's pick is deterministic and Podium (live, and `podium explain`)
must make the same one.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from podium.devcluster import ControlPlane
from podium.devcluster.objects import create_pod, wait_for
from podium.kube.manifests import make_node, make_pod
from podium.tools.explain import explain_cluster

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

WEB = {"app": "web"}
SETTLE = 1.0  # seconds for both schedulers' watches to see a change


async def _decide(
    core: client.CoreV1Api, namespace: str, name: str, scheduler: str, suite: dict[str, str]
) -> str:
    """The node ``scheduler`` binds a fresh incoming web pod to; the pod is then deleted."""
    body = make_pod(
        name,
        cpu="500m",
        memory="512Mi",
        labels=WEB,
        scheduler_name=scheduler,
        node_selector=suite,
    )
    await core.create_namespaced_pod(namespace, cast(Any, body))

    async def bound() -> str:
        raw = await core.read_namespaced_pod(name, namespace, _preload_content=False)
        return str((await raw.json())["spec"].get("nodeName") or "")

    node = await wait_for(bound, timeout=30, interval=0.05, message=f"{name} bound")
    await core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)

    async def gone() -> bool:
        try:
            await core.read_namespaced_pod(name, namespace)
        except ApiException as exc:
            return exc.status == 404
        return False

    await wait_for(gone, timeout=30, message=f"{name} deleted")
    await asyncio.sleep(SETTLE)
    return node


async def test_service_selected_pod_spreads_like_kube_scheduler(
    api_client: ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    node_factory: Any,
    kube_scheduler: Any,
    podium: Any,
) -> None:
    core = client.CoreV1Api(api_client)
    suite = {"suite": namespace}
    n1, n2, n3 = (f"{namespace}-n{i}" for i in (1, 2, 3))
    await node_factory(make_node(n, cpu="4", memory="8Gi", labels=suite) for n in (n1, n2, n3))
    for name, node, labels, cpu in (
        ("web-1", n1, WEB, "500m"),
        ("web-2", n2, WEB, "500m"),
        ("other", n3, {"app": "other"}, "1"),
    ):
        await create_pod(
            api_client,
            namespace,
            make_pod(name, cpu=cpu, memory="512Mi", labels=labels, node_name=node),
        )
    kube, mine = f"{namespace}-kube"[:63], f"{namespace}-podium"[:63]
    await kube_scheduler(kube, percentage_of_nodes_to_score=100)
    await podium("--scheduler-name", mine)
    await asyncio.sleep(SETTLE)

    # No Service yet: no default constraint, resources prefer n1 or n2.
    before = {
        s: await _decide(core, namespace, f"before-{i}", s, suite)
        for i, s in enumerate((kube, mine))
    }
    assert set(before.values()) <= {n1, n2}, before

    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"selector": WEB, "clusterIP": "None", "ports": [{"port": 80}]},
    }
    await core.create_namespaced_service(namespace, cast(Any, service))
    await asyncio.sleep(SETTLE)

    # `podium explain` reads the Service too and predicts n3, alone at the top.
    probe = make_pod(
        "probe",
        cpu="500m",
        memory="512Mi",
        labels=WEB,
        scheduler_name="nobody",
        node_selector=suite,
    )
    await create_pod(api_client, namespace, probe)
    exp = await explain_cluster(namespace, "probe", kubeconfig=str(control_plane.kubeconfig))
    assert (exp.winner, exp.ties) == (n3, [n3])
    rows = {r.node: r for r in exp.rows}
    assert rows[n3].scores["PodTopologySpread"] == 100
    assert rows[n1].scores["PodTopologySpread"] == rows[n2].scores["PodTopologySpread"] == 50
    await core.delete_namespaced_pod("probe", namespace, grace_period_seconds=0)

    after = {
        s: await _decide(core, namespace, f"after-{i}", s, suite)
        for i, s in enumerate((kube, mine))
    }
    assert after == {kube: n3, mine: n3}
