"""Volume-aware scheduling on the real API server: PVs, PVCs, StorageClasses, CSINodes."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.devcluster.objects import create_pod, pod_events, wait_for
from podium.kube.manifests import make_node, make_pod

from .faults import deny_admission
from .storage import (
    HOSTNAME,
    ZONE,
    Storage,
    claim_volume,
    make_csinode,
    make_pv,
    make_pvc,
    make_storage_class,
    node_affinity,
)
from .test_policy import GROUP, PLURAL, VERSION, _condition, _policy, crd  # noqa: F401

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]


@pytest_asyncio.fixture(loop_scope="session")
async def storage(api_client: ApiClient, namespace: str) -> AsyncIterator[Storage]:
    made = Storage(api_client, namespace)
    yield made
    await made.cleanup()


def pod_with(name: str, *claims: str, node_name: str | None = None) -> dict[str, Any]:
    body = make_pod(name, cpu="100m", node_name=node_name)
    body["spec"]["volumes"] = [claim_volume(c, f"v{i}") for i, c in enumerate(claims)]
    return body


async def node_of(api: ApiClient, namespace: str, name: str) -> str:
    pod = await client.CoreV1Api(api).read_namespaced_pod(name, namespace)
    return str(pod.spec.node_name or "")


async def failure(api: ApiClient, namespace: str, name: str) -> str:
    async def first() -> str:
        events = await pod_events(api, namespace, name, "FailedScheduling")
        return str(events[-1].message) if events else ""

    return await wait_for(first, timeout=30, interval=0.2, message=f"FailedScheduling for {name}")


async def test_wait_for_first_consumer_binds_the_local_pv_on_its_node(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any, storage: Storage
) -> None:
    _, b = await node_factory([make_node(f"{namespace}-a"), make_node(f"{namespace}-b")])
    sc = f"{namespace}-local"
    await storage.storage_class(make_storage_class(sc))
    await storage.pv(
        make_pv(f"{namespace}-pv-small", sc, "1Gi", affinity=node_affinity(HOSTNAME, [b]))
    )
    await storage.pv(
        make_pv(f"{namespace}-pv-big", sc, "5Gi", affinity=node_affinity(HOSTNAME, [b]))
    )
    await storage.pvc(make_pvc("data", sc, "1Gi"))
    await podium()
    await create_pod(api_client, namespace, pod_with("p", "data"))

    placed = await wait_for(
        lambda: node_of(api_client, namespace, "p"), timeout=30, message="pod bound"
    )
    assert placed == b
    claim = await storage.read_pvc("data")
    pv = await storage.read_pv(f"{namespace}-pv-small")
    assert (claim["spec"]["volumeName"], claim["status"]["phase"]) == (
        pv["metadata"]["name"],
        "Bound",
    )
    assert claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
    assert (pv["spec"]["claimRef"]["name"], pv["spec"]["claimRef"]["uid"]) == (
        "data",
        claim["metadata"]["uid"],
    )
    assert pv["status"]["phase"] == "Bound"
    big = await storage.read_pv(f"{namespace}-pv-big")
    assert "claimRef" not in big["spec"]


async def test_two_pods_never_take_the_same_pv(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any, storage: Storage
) -> None:
    await node_factory([make_node(f"{namespace}-a")])
    sc = f"{namespace}-local"
    await storage.storage_class(make_storage_class(sc))
    await storage.pv(make_pv(f"{namespace}-pv", sc, "1Gi"))
    await storage.pvc(make_pvc("c1", sc))
    await storage.pvc(make_pvc("c2", sc))
    await podium()
    await create_pod(api_client, namespace, pod_with("p1", "c1"))
    await create_pod(api_client, namespace, pod_with("p2", "c2"))

    async def one_bound() -> list[str]:
        nodes = [await node_of(api_client, namespace, p) for p in ("p1", "p2")]
        return [n for n in nodes if n]

    await wait_for(one_bound, timeout=30, message="one pod bound")
    loser = "p2" if await node_of(api_client, namespace, "p1") else "p1"
    assert await failure(api_client, namespace, loser) == (
        "0/1 nodes are available: 1 node(s) didn't find available persistent volumes to bind. "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )
    assert len(await one_bound()) == 1


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        pytest.param(
            "node-affinity",
            "0/2 nodes are available: 2 node(s) didn't match PersistentVolume's node affinity. "
            "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
            id="bound-pv-node-affinity",
        ),
        pytest.param(
            "zone",
            "0/2 nodes are available: 2 node(s) had no available volume zone. "
            "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
            id="bound-pv-zone-label",
        ),
        pytest.param(
            "immediate",
            "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims. not found",
            id="unbound-immediate-claim",
        ),
        pytest.param(
            "missing",
            '0/2 nodes are available: persistentvolumeclaim "data" not found. not found',
            id="missing-claim",
        ),
    ],
)
async def test_volume_rejections_name_kube_scheduler_reasons(
    api_client: ApiClient,
    namespace: str,
    node_factory: Any,
    podium: Any,
    storage: Storage,
    case: str,
    expected: str,
) -> None:
    labels = {ZONE: "z1"}
    await node_factory(
        [make_node(f"{namespace}-a", labels=labels), make_node(f"{namespace}-b", labels=labels)]
    )
    sc = f"{namespace}-sc"
    pv = f"{namespace}-pv"
    if case == "node-affinity":
        await storage.storage_class(make_storage_class(sc))
        await storage.pv(
            make_pv(pv, sc, affinity=node_affinity(ZONE, ["z9"]), claim=(namespace, "data")),
            "Bound",
        )
        await storage.pvc(make_pvc("data", sc, volume_name=pv))
    elif case == "zone":
        await storage.storage_class(make_storage_class(sc))
        await storage.pv(make_pv(pv, sc, labels={ZONE: "z2"}, claim=(namespace, "data")), "Bound")
        await storage.pvc(make_pvc("data", sc, volume_name=pv))
    elif case == "immediate":
        await storage.storage_class(make_storage_class(sc, mode="Immediate"))
        await storage.pvc(make_pvc("data", sc))
    await podium()
    await create_pod(api_client, namespace, pod_with("p", "data"))
    assert await failure(api_client, namespace, "p") == expected


async def test_csi_volume_limit_counts_volumes_already_on_the_node(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any, storage: Storage
) -> None:
    (a,) = await node_factory([make_node(f"{namespace}-a")])
    sc = f"{namespace}-csi"
    driver = "csi.podium.dev"
    await storage.storage_class(make_storage_class(sc, mode="Immediate", provisioner=driver))
    await storage.csinode(make_csinode(a, {driver: 1}))
    for i in (1, 2):
        name = f"{namespace}-pv{i}"
        await storage.pv(
            make_pv(name, sc, csi=(driver, f"h{i}"), claim=(namespace, f"c{i}")), "Bound"
        )
        await storage.pvc(make_pvc(f"c{i}", sc, volume_name=name))
    await create_pod(api_client, namespace, pod_with("running", "c1", node_name=a))
    await podium()
    await create_pod(api_client, namespace, pod_with("p", "c2"))
    message = await failure(api_client, namespace, "p")
    assert message.startswith("0/1 nodes are available: 1 node(s) exceed max volume count.")
    # A second pod on the same claim shares the attached volume and fits.
    await create_pod(api_client, namespace, pod_with("same", "c1"))
    placed = await wait_for(
        lambda: node_of(api_client, namespace, "same"), timeout=30, message="pod bound"
    )
    assert placed == a


async def test_read_write_once_pod_claim_in_use_rejects_every_node(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any, storage: Storage
) -> None:
    a, _ = await node_factory([make_node(f"{namespace}-a"), make_node(f"{namespace}-b")])
    sc = f"{namespace}-sc"
    pv = f"{namespace}-pv"
    await storage.storage_class(make_storage_class(sc))
    await storage.pv(
        make_pv(pv, sc, modes=["ReadWriteOncePod"], claim=(namespace, "data")), "Bound"
    )
    await storage.pvc(make_pvc("data", sc, modes=["ReadWriteOncePod"], volume_name=pv))
    await create_pod(api_client, namespace, pod_with("holder", "data", node_name=a))
    await podium()
    await create_pod(api_client, namespace, pod_with("p", "data"))
    message = await failure(api_client, namespace, "p")
    assert message.startswith(
        "0/2 nodes are available: 2 node(s) unavailable due to PersistentVolumeClaim with "
        "ReadWriteOncePod access mode already in-use by another pod."
    )


DENY = "podium.dev/deny-bind"


async def test_a_failed_pv_write_is_rolled_back_and_retried(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any, storage: Storage
) -> None:
    (a,) = await node_factory([make_node(f"{namespace}-a")])
    sc = f"{namespace}-local"
    pv_name = f"{namespace}-pv"
    await storage.storage_class(make_storage_class(sc))
    await storage.pv(make_pv(pv_name, sc, labels={DENY: "yes"}))
    await storage.pvc(make_pvc("data", sc))
    admission = client.AdmissionregistrationV1Api(api_client)
    policy, binding = deny_admission(
        f"{namespace}-deny",
        resource="persistentvolumes",
        operation="UPDATE",
        validation="!has(object.spec.claimRef)",
        message="binding denied by test",
        match_condition=f"has(object.metadata.labels) && '{DENY}' in object.metadata.labels",
    )
    await admission.create_validating_admission_policy(policy)
    await admission.create_validating_admission_policy_binding(binding)
    try:

        async def denied() -> bool:
            body = {"spec": {"claimRef": {"namespace": namespace, "name": "data"}}}
            try:
                await storage.core.patch_persistent_volume(pv_name, body, dry_run="All")
            except client.ApiException:
                return True
            return False

        await wait_for(denied, timeout=30, interval=0.5, message="admission policy active")
        await podium()
        await create_pod(api_client, namespace, pod_with("p", "data"))

        async def write_failed() -> str:
            events = await pod_events(api_client, namespace, "p", "FailedScheduling")
            prefix = 'running PreBind plugin "VolumeBinding": '
            return next((e.message for e in events if e.message.startswith(prefix)), "")

        message = await wait_for(write_failed, timeout=30, message="failed PV write reported")
        assert "binding denied by test" in message
        assert await node_of(api_client, namespace, "p") == ""
        assert "claimRef" not in (await storage.read_pv(pv_name))["spec"]
        # Lift the refusal: the PV event requeues the pod and the bind goes through.
        await storage.core.patch_persistent_volume(pv_name, {"metadata": {"labels": {DENY: None}}})
        placed = await wait_for(
            lambda: node_of(api_client, namespace, "p"), timeout=30, message="pod bound"
        )
        assert placed == a
        assert (await storage.read_pvc("data"))["spec"]["volumeName"] == pv_name
    finally:
        await admission.delete_validating_admission_policy_binding(binding["metadata"]["name"])
        await admission.delete_validating_admission_policy(policy["metadata"]["name"])


@contextlib.asynccontextmanager
async def scheduler_policy(api: ApiClient, name: str, spec: dict[str, Any]) -> AsyncIterator[None]:
    """A SchedulerPolicy for schedulerName ``name``, deleted on exit."""
    custom = client.CustomObjectsApi(api)
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SchedulerPolicy",
        "metadata": {"name": name},
        "spec": {"schedulerName": name, **spec},
    }
    await custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)
    try:
        yield
    finally:
        await custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)


async def accepted(api: ApiClient, name: str) -> None:
    async def done() -> bool:
        return _condition(await _policy(api, name), "Accepted").get("status") == "True"

    await wait_for(done, timeout=20, message=f"policy {name} accepted")


@contextlib.asynccontextmanager
async def pod_with_unprovisioned_claim(
    api: ApiClient, namespace: str, podium: Any, storage: Storage, spec: dict[str, Any]
) -> AsyncIterator[dict[str, Any]]:
    """Pod ``p`` with claim ``data``, left to a provisioner that never acts, scheduled
    by Podium under a SchedulerPolicy with ``spec``; yields the claim as first written."""
    sched = f"{namespace}-v"[:63]
    sc = f"{namespace}-dyn"
    await storage.storage_class(make_storage_class(sc, provisioner="example.com/never"))
    await storage.pvc(make_pvc("data", sc))
    written = await storage.read_pvc("data")
    async with scheduler_policy(api, sched, spec):
        await podium()
        await accepted(api, sched)
        body = pod_with("p", "data")
        body["spec"]["schedulerName"] = sched
        await create_pod(api, namespace, body)
        yield written


@pytest.mark.usefixtures("crd")
async def test_a_claim_left_to_a_provisioner_times_out_after_bind_timeout(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any, storage: Storage
) -> None:
    """No provisioner acts: PreBind marks the selected node, waits bindTimeoutSeconds, fails."""
    (a,) = await node_factory([make_node(f"{namespace}-a")])
    spec = {"pluginArgs": {"volumeBinding": {"bindTimeoutSeconds": 2}}}
    async with pod_with_unprovisioned_claim(api_client, namespace, podium, storage, spec):

        async def timed_out() -> str:
            events = await pod_events(api_client, namespace, "p", "FailedScheduling")
            return next((e.message for e in events if "binding volumes" in e.message), "")

        message = await wait_for(timed_out, timeout=30, message="bind timeout reported")
        # VolumeBinding's error as kube-scheduler's RunPreBindPlugins words it.
        assert message == (
            'running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded'
        )
        claim = await storage.read_pvc("data")
        assert claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == a
        assert await node_of(api_client, namespace, "p") == ""


@pytest.mark.usefixtures("crd")
async def test_a_policy_without_volume_binding_binds_the_pod_and_leaves_its_claim_alone(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any, storage: Storage
) -> None:
    """As kube-scheduler with VolumeBinding disabled: no PV or PVC writes, no PreBind wait;
    the pod binds at once even though its claim waits for a provisioner that never acts."""
    (a,) = await node_factory([make_node(f"{namespace}-a")])
    spec = {"filters": [{"name": "NodeResourcesFit"}]}
    async with pod_with_unprovisioned_claim(
        api_client, namespace, podium, storage, spec
    ) as written:

        async def bound() -> str:
            return await node_of(api_client, namespace, "p")

        assert await wait_for(bound, timeout=30, message="pod bound") == a
        claim = await storage.read_pvc("data")
        assert claim["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]
        assert claim["status"].get("phase") == "Pending"
