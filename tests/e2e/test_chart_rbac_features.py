"""Every feature's writes under the Helm chart's own RBAC, and not one of them refused.

`helm template` renders the chart's ServiceAccount, ClusterRole, lease Role and their
bindings; they are created on the session's API server, and `podium run` runs with a
token of that ServiceAccount, as the chart's Deployment would (leader election on,
on the lease the Role names). Then it does what each feature writes: a claim pod
(the claim's finalizer, allocation and reservation), a gang (its PodGroup's status),
a pod with a WaitForFirstConsumer volume (the PV and claim binding), a preemption (the
victim's DisruptionTarget condition, its deletion, the Preempted Event), a pod that
fits nowhere (PodScheduled=False, FailedScheduling), and a SchedulerPolicy (its
Accepted condition). The refused requests are counted twice: in the API server's
audit log (writes) and in Podium's ``rest_client_requests_total`` (every request and
watch, reads included).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest
import pytest_asyncio
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from podium.devcluster import Binaries, ControlPlane
from podium.devcluster.objects import create_pod, pod_events, wait_for
from podium.kube.manifests import make_node, make_pod
from tests.e2e.chart_rbac import ChartIdentity, install, refused, uninstall
from tests.e2e.dra import Dra, with_claims
from tests.e2e.faults import wait_bound
from tests.e2e.gang import create_group, group_condition, member, pod_group
from tests.e2e.storage import (
    HOSTNAME,
    Storage,
    claim_volume,
    make_pv,
    make_pvc,
    make_storage_class,
    node_affinity,
)
from tests.e2e.test_leader_election import LEASE
from tests.e2e.test_policy import (  # noqa: F401 (crd: a fixture)
    GROUP,
    PLURAL,
    VERSION,
    _condition,
    _create_policy,
    _policy,
    crd,
)

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]


@pytest_asyncio.fixture(loop_scope="session")
async def chart_identity(
    api_client: ApiClient,
    control_plane: ControlPlane,
    binaries: Binaries,
    namespace: str,
    tmp_path: Path,
) -> AsyncIterator[ChartIdentity]:
    """The chart's RBAC for a release in the test's namespace."""
    release = f"podium-{namespace[-5:]}"
    identity = await install(api_client, control_plane, binaries, release, namespace, tmp_path)
    try:
        yield identity
    finally:
        await uninstall(api_client, identity)


def _client_codes(metrics: str) -> dict[str, float]:
    """``rest_client_requests_total`` summed by code."""
    codes: dict[str, float] = {}
    for line in metrics.splitlines():
        if line.startswith("rest_client_requests_total{"):
            labels, value = line.rsplit(" ", 1)
            code = labels.split('code="', 1)[1].split('"', 1)[0]
            codes[code] = codes.get(code, 0.0) + float(value)
    return codes


@pytest.mark.usefixtures("crd")
async def test_every_feature_runs_under_the_chart_rbac_with_no_request_refused(
    api_client: ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    node_factory: Any,
    podium: Any,
    dra: Dra,
    chart_identity: ChartIdentity,
) -> None:
    """A claim pod, a gang of two, a pod with a local volume, a preemptor, a pod that
    fits nowhere and a SchedulerPolicy, under the chart's ServiceAccount: each lands
    (or is reported), and the API server refused none of Podium's requests."""
    kubeconfig, user, lease = chart_identity.kubeconfig, chart_identity.user, chart_identity.lease
    sched = f"{namespace}-rbac"[:63]
    policy = f"{namespace}-rbac"[:63]
    nodes = await node_factory(
        make_node(f"{namespace}-{n}", cpu="2", memory="8Gi", labels={"suite": namespace})
        for n in ("a", "b", "c")
    )
    a, b, c = nodes
    await dra.gpus([a], 1, template="gpu")
    storage = Storage(api_client, namespace)
    try:
        proc = await podium(
            "--kubeconfig",
            str(kubeconfig),
            *LEASE,
            "--lease-name",
            lease,
            "--lease-namespace",
            namespace,
        )
        await _create_policy(api_client, policy, {"schedulerName": sched})

        async def accepted() -> bool:
            return _condition(await _policy(api_client, policy), "Accepted").get("status") == "True"

        await wait_for(accepted, timeout=60, interval=0.2, message="the policy Accepted")
        core = client.CoreV1Api(api_client)
        on = {"suite": namespace}

        # DRA: finalizer, allocation and reservation, then the Binding.
        body = make_pod("claim", cpu="100m", scheduler_name=sched, node_selector=on)
        await create_pod(api_client, namespace, with_claims(body, {"gpu": "gpu"}))
        await dra.instantiate("claim")
        # A gang of two: the PodGroup's status condition.
        await create_group(api_client, namespace, pod_group("gang", 2))
        for i in range(2):
            await core.create_namespaced_pod(
                namespace, cast(Any, member(f"gang-{i}", "gang", sched, "500m", on))
            )
        # A WaitForFirstConsumer local volume on node b: the PV and claim written.
        sc = f"{namespace}-local"
        await storage.storage_class(make_storage_class(sc))
        await storage.pv(make_pv(f"{namespace}-pv", sc, affinity=node_affinity(HOSTNAME, [b])))
        await storage.pvc(make_pvc("data", sc))
        body = make_pod("volume", cpu="100m", scheduler_name=sched, node_selector=on)
        body["spec"]["volumes"] = [claim_volume("data")]
        await create_pod(api_client, namespace, body)
        await wait_bound(api_client, namespace, 4, 60, 0.2, "4 feature pods bound", watch=proc)

        # Preemption: node c full of a low-priority pod, a preemptor that only fits there.
        victim = make_pod("victim", cpu="2", priority=1)
        victim["spec"]["nodeName"] = c
        await core.create_namespaced_pod(namespace, cast(Any, victim))
        hi = make_pod(
            "preemptor",
            cpu="2",
            priority=100,
            scheduler_name=sched,
            node_selector={"kubernetes.io/hostname": c},
        )
        await create_pod(api_client, namespace, hi)
        # Fits nowhere: PodScheduled=False and a FailedScheduling Event.
        await create_pod(api_client, namespace, make_pod("huge", cpu="100", scheduler_name=sched))

        async def preempted() -> bool:
            pod = await core.read_namespaced_pod("preemptor", namespace)
            return bool(pod.spec.node_name) and bool(
                await pod_events(api_client, namespace, "victim", "Preempted")
            )

        await wait_for(preempted, timeout=60, interval=0.2, message="the preemptor bound")
        await wait_for(
            lambda: pod_events(api_client, namespace, "huge", "FailedScheduling"),
            timeout=60,
            message="FailedScheduling for the pod that fits nowhere",
        )
        assert await group_condition(api_client, namespace, "gang") is not None
        assert (await core.read_namespaced_pod("volume", namespace)).spec.node_name == b
        assert (await core.read_namespaced_pod("claim", namespace)).spec.node_name == a
        assert (await storage.read_pvc("data"))["status"]["phase"] == "Bound"
        assert "podium_leader 1.0" in await proc.metrics()

        codes = _client_codes(await proc.metrics())
        assert codes.get("403", 0.0) == 0.0, codes
        assert codes.get("401", 0.0) == 0.0, codes
        assert refused(control_plane, user) == []
        assert "forbidden" not in "\n".join(proc.log_lines()).lower()
        print(f"\nRBAC chart-role requests by code: {codes}")
    finally:
        await storage.cleanup()
        # SchedulerPolicies are cluster-scoped: a later test's Podium would serve this one.
        with contextlib.suppress(ApiException):
            await client.CustomObjectsApi(api_client).delete_cluster_custom_object(
                GROUP, VERSION, PLURAL, policy
            )
