"""DRA-backed extended resources on the real API server: a pod asking an extended
resource that a DeviceClass backs waits with Go's messages until the class and then a
device appear, and is bound only after its claim is created, allocated and named in its
status (kube-scheduler v1.37.2's order); a claim a prior attempt left is deleted first,
with kube-scheduler's message; pods racing for devices never share one."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any, cast

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.devcluster.objects import create_pod, pod_events, wait_for
from podium.kube.manifests import make_node, make_pod

from .dra import (
    DRIVER,
    Dra,
    allocated_devices,
    claim_spec,
    device,
    device_class,
    exactly,
    resource_claim,
    resource_slice,
)
from .queues import all_parked
from .test_dra import FINALIZER, read_pod

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
SIDE = "podium.dev/dra-side"


async def test_class_then_slice_events_wake_the_pod_and_prebind_writes_its_claim(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any, dra: Dra
) -> None:
    (node,) = await node_factory([make_node(f"{namespace}-a")])
    resource = f"example.com/gpu-{namespace.rsplit('-', 1)[-1]}"
    await podium()
    await create_pod(api_client, namespace, make_pod("p", cpu="100m", extended={resource: 1}))

    async def last_failure() -> str:
        events = await pod_events(api_client, namespace, "p", "FailedScheduling")
        return str(events[-1].message) if events else ""

    async def failure(text: str) -> bool:
        return (await last_failure()).startswith(text)

    await wait_for(
        lambda: failure(f"0/1 nodes are available: 1 Insufficient {resource}."),
        timeout=30,
        message="Insufficient while no class backs the resource",
    )
    klass = device_class(f"{namespace}-gpu")
    klass["spec"]["extendedResourceName"] = resource
    await dra.create("deviceclasses", klass)
    await wait_for(
        lambda: failure("0/1 nodes are available: 1 cannot allocate all claims."),
        timeout=30,
        message="the DeviceClass event woke the pod; no device yet",
    )
    await dra.create("resourceslices", resource_slice(f"{node}-gpus", node, [device("gpu-0")]))

    async def bound() -> str:
        return str((await read_pod(api_client, namespace, "p"))["spec"].get("nodeName") or "")

    assert await wait_for(bound, timeout=30, message="the slice event woke the pod") == node
    pod = await read_pod(api_client, namespace, "p")
    status = pod["status"]["extendedResourceClaimStatus"]
    (claim,) = await dra.claims()
    meta = claim["metadata"]
    assert meta["name"] == status["resourceClaimName"]
    assert meta["name"].startswith("p-extended-resources-")
    assert meta["annotations"][ANNOTATION] == "true"
    (owner,) = meta["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (
        "Pod",
        pod["metadata"]["uid"],
        True,
    )
    assert FINALIZER in meta["finalizers"]
    # cpu sorts before the resource in the container's requests: request index 1.
    request = "container-0-request-1"
    assert status["requestMappings"] == [
        {"containerName": "main", "resourceName": resource, "requestName": request}
    ]
    (asked,) = claim["spec"]["devices"]["requests"]
    assert asked["name"] == request and asked["exactly"]["count"] == 1
    results = claim["status"]["allocation"]["devices"]["results"]
    assert [(r["request"], r["pool"], r["device"]) for r in results] == [(request, node, "gpu-0")]
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]


async def test_a_claim_left_by_a_prior_attempt_is_deleted_then_the_pod_bound_as_by_kube(
    api_client: ApiClient,
    namespace: str,
    node_factory: Any,
    kube_scheduler: Any,
    podium: Any,
    dra: Dra,
) -> None:
    """A pod's extended-resource claim made by an earlier attempt (annotated, the pod as
    controller, allocated): Filter turns every node down, PostFilter deletes the claim,
    whose deletion wakes the pod, and the next attempt allocates and binds afresh; the
    failure's message is kube-scheduler's, byte for byte."""
    resource = f"example.com/gpu-{namespace.rsplit('-', 1)[-1]}"
    klass = device_class(f"{namespace}-gpu")
    klass["spec"]["extendedResourceName"] = resource
    await dra.create("deviceclasses", klass)
    sides = {"kube": f"{namespace[:30]}-k", "podium": f"{namespace[:30]}-p"}
    await kube_scheduler(sides["kube"])
    await podium("--scheduler-name", sides["podium"])
    core = client.CoreV1Api(api_client)
    messages: dict[str, str] = {}
    nodes = {}
    for side, scheduler in sides.items():  # both sides' nodes first: both see two nodes
        (nodes[side],) = await node_factory([make_node(f"{scheduler}-n", labels={SIDE: side})])
        name = nodes[side]
        await dra.create("resourceslices", resource_slice(f"{name}-gpus", name, [device("gpu-0")]))
    for side, scheduler in sides.items():
        node = nodes[side]
        pod = make_pod(f"p-{side}", cpu="100m", extended={resource: 1}, scheduler_name=scheduler)
        pod["spec"]["nodeSelector"] = {SIDE: side}
        pod["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
        made = await core.create_namespaced_pod(namespace, cast(Any, pod))
        owner = {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": f"p-{side}",
            "uid": made.metadata.uid,
            "controller": True,
        }
        stale = resource_claim(
            f"p-{side}-extended-resources-old",
            claim_spec(exactly("container-0-request-1", f"{namespace}-gpu")),
        )
        stale["metadata"]["annotations"] = {ANNOTATION: "true"}
        stale["metadata"]["ownerReferences"] = [owner]
        await dra.create("resourceclaims", stale)
        # Allocated, as PreBind left it: its deletion frees the device and wakes the pod.
        result = {"request": "container-0-request-1", "driver": DRIVER, "pool": node}
        allocation = {"devices": {"results": [{**result, "device": "gpu-0"}]}}
        await dra.allocate(stale["metadata"]["name"], allocation)
        ungate = [{"op": "remove", "path": "/spec/schedulingGates"}]
        await core.patch_namespaced_pod(f"p-{side}", namespace, ungate)

        async def first_failure(name: str = f"p-{side}") -> str:
            events = await pod_events(api_client, namespace, name, "FailedScheduling")
            return str(events[0].message) if events else ""

        messages[side] = await wait_for(first_failure, timeout=30, message=f"{side} failed")

        async def bound(name: str = f"p-{side}") -> str:
            return str((await read_pod(api_client, namespace, name))["spec"].get("nodeName") or "")

        assert await wait_for(bound, timeout=30, message=f"{side} bound") == node
        names = {c["metadata"]["name"] for c in await dra.claims()}
        assert f"p-{side}-extended-resources-old" not in names
        status = (await read_pod(api_client, namespace, f"p-{side}"))["status"]
        assert status["extendedResourceClaimStatus"]["resourceClaimName"] in names
    assert messages["kube"] == messages["podium"], messages
    assert "1 cannot schedule extended resource claim" in messages["podium"], messages
    assert "deletion of ResourceClaim completed, preemption: " in messages["podium"], messages


async def test_many_extended_resource_pods_in_flight_never_share_a_device(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any, dra: Dra
) -> None:
    """12 pods asking one device each race for 8 (two nodes of 4) while their claims are
    still being created: 8 bind, each claim with its own device on its pod's node, and 4
    wait with no claim left behind."""
    nodes = await node_factory([make_node(f"{namespace}-{i}") for i in range(2)])
    resource = f"example.com/gpu-{namespace.rsplit('-', 1)[-1]}"
    klass = device_class(f"{namespace}-gpu")
    klass["spec"]["extendedResourceName"] = resource
    await dra.create("deviceclasses", klass)
    for node in nodes:
        devices = [device(f"gpu-{i}") for i in range(4)]
        await dra.create("resourceslices", resource_slice(f"{node}-gpus", node, devices))
    proc = await podium()
    names = [f"p{i}" for i in range(12)]
    await asyncio.gather(
        *(
            create_pod(api_client, namespace, make_pod(n, cpu="10m", extended={resource: 1}))
            for n in names
        )
    )

    async def bound() -> dict[str, str]:
        pods = [await read_pod(api_client, namespace, n) for n in names]
        return {
            p["metadata"]["uid"]: p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")
        }

    async def eight() -> dict[str, str] | None:
        placed = await bound()
        return placed if len(placed) == 8 else None

    placed = await wait_for(eight, timeout=60, message="8 pods bound")

    async def four_wait() -> bool:  # the other 4 were tried and wait for a cluster event
        return all_parked(await proc.pending(), waiting=4)

    await wait_for(four_wait, timeout=30, message="4 pods tried and waiting")
    assert len(await bound()) == 8
    claims = await dra.claims()
    assert len(claims) == 8, [c["metadata"]["name"] for c in claims]
    devices = allocated_devices(claims)
    assert Counter(devices).most_common(1)[0][1] == 1, "a device was allocated twice"
    for claim in claims:
        (uid,) = [r["uid"] for r in claim["status"]["reservedFor"]]
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert result["pool"] == placed[uid], "the device is not on the pod's node"
        assert claim["metadata"]["ownerReferences"][0]["uid"] == uid
