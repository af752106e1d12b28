"""DynamicResources on the real API server: claims from templates, allocated before binding."""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.devcluster.objects import create_pod, pod_events, wait_for
from podium.kube.manifests import make_node, make_pod

from .dra import (
    Dra,
    allocated_devices,
    claim_spec,
    claim_template,
    device,
    device_class,
    exactly,
    resource_claim,
    resource_slice,
    with_claims,
)
from .queues import all_parked

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

FINALIZER = "resource.kubernetes.io/delete-protection"


async def read_pod(api: ApiClient, namespace: str, name: str) -> dict[str, Any]:
    raw = await client.CoreV1Api(api).read_namespaced_pod(name, namespace, _preload_content=False)
    pod: dict[str, Any] = await raw.json()
    return pod


async def setup_gpus(dra: Dra, namespace: str, nodes: list[str], per_node: int) -> str:
    """A DeviceClass, and ``per_node`` devices on each node (model a on the first node)."""
    klass = f"{namespace}-gpu"
    await dra.create("deviceclasses", device_class(klass))
    for index, node in enumerate(nodes):
        model = "a" if index == 0 else "b"
        devices = [device(f"gpu-{i}", model=model, index=i) for i in range(per_node)]
        await dra.create("resourceslices", resource_slice(f"{node}-gpus", node, devices))
    return klass


async def test_claim_from_template_is_allocated_then_the_pod_bound(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any, dra: Dra
) -> None:
    a, b = await node_factory([make_node(f"{namespace}-a"), make_node(f"{namespace}-b")])
    klass = await setup_gpus(dra, namespace, [a, b], 1)
    selector = 'device.attributes["gpu.example.com"].model == "b"'
    await dra.create(
        "resourceclaimtemplates",
        claim_template("one-b", claim_spec(exactly("gpu", klass, 1, selector))),
    )
    proc = await podium()
    await create_pod(api_client, namespace, with_claims(make_pod("p"), {"gpu": "one-b"}))

    async def parked() -> bool:  # tried, and set aside until its claim exists
        return (await proc.pending()).get("gated") == 1.0

    await wait_for(parked, timeout=15, message="the pod parked without its claim")
    pod = await read_pod(api_client, namespace, "p")
    assert not pod["spec"].get("nodeName"), "bound before its claim existed"
    assert "scheduler_schedule_attempts_total{" not in await proc.metrics()
    (claim_name,) = await dra.instantiate("p")

    async def bound() -> str:
        return str((await read_pod(api_client, namespace, "p"))["spec"].get("nodeName") or "")

    assert await wait_for(bound, timeout=30, message="pod bound") == b
    (claim,) = [c for c in await dra.claims() if c["metadata"]["name"] == claim_name]
    allocation = claim["status"]["allocation"]
    assert [(r["request"], r["pool"], r["device"]) for r in allocation["devices"]["results"]] == [
        ("gpu", b, "gpu-0")
    ]
    assert allocation["allocationTimestamp"]
    terms = allocation["nodeSelector"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [b]}]}]
    assert [r["uid"] for r in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]
    assert FINALIZER in claim["metadata"]["finalizers"]


async def test_no_device_matches_leaves_the_pod_pending_with_kube_schedulers_message(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any, dra: Dra
) -> None:
    nodes = await node_factory([make_node(f"{namespace}-{i}") for i in range(3)])
    klass = await setup_gpus(dra, namespace, nodes, 2)
    selector = 'device.attributes["gpu.example.com"].model == "z"'
    await dra.create(
        "resourceclaimtemplates",
        claim_template("none", claim_spec(exactly("gpu", klass, 1, selector))),
    )
    await podium()
    await create_pod(api_client, namespace, with_claims(make_pod("p"), {"gpu": "none"}))
    (claim_name,) = await dra.instantiate("p")

    async def failure() -> str:
        events = await pod_events(api_client, namespace, "p", "FailedScheduling")
        return str(events[-1].message) if events else ""

    message = await wait_for(failure, timeout=30, message="FailedScheduling")
    assert message == (
        "0/3 nodes are available: 3 cannot allocate all claims. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )
    (claim,) = [c for c in await dra.claims() if c["metadata"]["name"] == claim_name]
    assert "allocation" not in (claim.get("status") or {})
    assert not claim["metadata"].get("finalizers")


async def test_many_claim_pods_in_flight_never_share_a_device(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any, dra: Dra
) -> None:
    """12 pods race for 8 devices: 8 bind, each with its own device, and 4 wait."""
    nodes = await node_factory([make_node(f"{namespace}-{i}") for i in range(2)])
    klass = await setup_gpus(dra, namespace, nodes, 4)
    await dra.create(
        "resourceclaimtemplates", claim_template("one", claim_spec(exactly("gpu", klass)))
    )
    proc = await podium()
    names = [f"p{i}" for i in range(12)]
    await asyncio.gather(
        *(
            create_pod(api_client, namespace, with_claims(make_pod(n), {"gpu": "one"}))
            for n in names
        )
    )
    await asyncio.gather(*(dra.instantiate(n) for n in names))

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
    devices = allocated_devices(claims)
    assert len(devices) == 8
    assert Counter(devices).most_common(1)[0][1] == 1, "a device was allocated twice"
    for claim in claims:
        status = claim.get("status") or {}
        reserved = [r["uid"] for r in status.get("reservedFor") or []]
        if "allocation" not in status:
            assert not reserved
            continue
        (uid,) = reserved
        (result,) = status["allocation"]["devices"]["results"]
        assert result["pool"] == placed[uid], "the device is not on the pod's node"
    owners = {c["metadata"]["ownerReferences"][0]["uid"] for c in claims if c.get("status")}
    assert set(placed) <= owners


async def test_a_shared_claim_pins_its_node_and_reserves_for_every_pod(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any, dra: Dra
) -> None:
    """Two pods name one claim: the first allocates it, the second joins reservedFor."""
    a, b = await node_factory([make_node(f"{namespace}-a"), make_node(f"{namespace}-b")])
    klass = await setup_gpus(dra, namespace, [a, b], 1)
    selector = 'device.attributes["gpu.example.com"].model == "a"'
    await dra.create(
        "resourceclaims", resource_claim("shared", claim_spec(exactly("gpu", klass, 1, selector)))
    )
    await podium()
    for name in ("p1", "p2"):
        await create_pod(
            api_client, namespace, with_claims(make_pod(name), claims={"gpu": "shared"})
        )

    async def both() -> list[str] | None:
        nodes = [
            (await read_pod(api_client, namespace, n))["spec"].get("nodeName") for n in ("p1", "p2")
        ]
        return [str(n) for n in nodes] if all(nodes) else None

    assert await wait_for(both, timeout=30, message="both pods bound") == [a, a]
    (claim,) = await dra.claims()
    uids = [(await read_pod(api_client, namespace, n))["metadata"]["uid"] for n in ("p1", "p2")]
    assert sorted(r["uid"] for r in claim["status"]["reservedFor"]) == sorted(uids)
    assert allocated_devices([claim]) == [("gpu.example.com", a, "gpu-0")]


async def test_a_claim_allocated_on_a_gone_node_is_deallocated_then_allocated_again(
    api_client: ApiClient,
    namespace: str,
    node_factory: Any,
    podium: Any,
    kube_scheduler: Any,
    dra: Dra,
) -> None:
    """PostFilter frees a stale allocation: both schedulers say so in the same words, and
    the next attempt allocates the claim on a node that exists."""
    nodes = await node_factory([make_node(f"{namespace}-{i}") for i in range(2)])
    klass = await setup_gpus(dra, namespace, nodes, 1)
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gone"]}]}
    result = {"request": "gpu", "driver": "gpu.example.com", "pool": "gone", "device": "gpu-0"}
    stale = {"devices": {"results": [result]}, "nodeSelector": {"nodeSelectorTerms": [term]}}
    await podium()
    await kube_scheduler("dra-kube")
    for name, scheduler in (("p", "podium"), ("k", "dra-kube")):
        await dra.create("resourceclaims", resource_claim(name, claim_spec(exactly("gpu", klass))))
        await dra.allocate(name, stale)
        pod = with_claims(make_pod(name, scheduler_name=scheduler), claims={"gpu": name})
        await create_pod(api_client, namespace, pod)

    async def failure(name: str) -> str:
        """The attempt whose PostFilter freed the claim. A scheduler that saw the pod
        before the stale allocation (another watch stream) fails PreBind first ("got
        allocated elsewhere"), then meets the allocation on its next attempt."""
        events = await pod_events(api_client, namespace, name, "FailedScheduling")
        freed = (str(e.message) for e in events if "deallocation of ResourceClaim" in e.message)
        return next(freed, "")

    async def bound(name: str) -> str:
        return str((await read_pod(api_client, namespace, name))["spec"].get("nodeName") or "")

    expected = (
        "0/2 nodes are available: 2 resourceclaim not available on the node. "
        "deallocation of ResourceClaim completed, "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    for name in ("k", "p"):
        got = await wait_for(functools.partial(failure, name), timeout=30, message=name)
        assert got == expected, name
        node = await wait_for(functools.partial(bound, name), timeout=30, message=name)
        (claim,) = [c for c in await dra.claims() if c["metadata"]["name"] == name]
        assert allocated_devices([claim]) == [("gpu.example.com", node, "gpu-0")]


async def test_a_selector_failing_at_run_time_aborts_the_attempt_cleanly(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any, dra: Dra
) -> None:
    """kube-scheduler's Error status: SchedulerError condition and Event, no claim write,
    and the worker goes on scheduling other pods."""
    a, b = await node_factory([make_node(f"{namespace}-a"), make_node(f"{namespace}-b")])
    klass = await setup_gpus(dra, namespace, [a, b], 1)
    broken = 'device.attributes["gpu.example.com"].missing == 1'
    await dra.create(
        "resourceclaims", resource_claim("broken", claim_spec(exactly("gpu", klass, 1, broken)))
    )
    proc = await podium()
    await create_pod(api_client, namespace, with_claims(make_pod("p"), claims={"gpu": "broken"}))
    await create_pod(api_client, namespace, make_pod("plain"))

    async def condition() -> dict[str, Any] | None:
        pod = await read_pod(api_client, namespace, "p")
        for cond in pod["status"].get("conditions") or []:
            if cond["type"] == "PodScheduled" and cond.get("reason") == "SchedulerError":
                return dict(cond)
        return None

    cond = await wait_for(condition, timeout=30, message="SchedulerError condition")
    assert cond["message"].startswith(
        'running "DynamicResources" filter plugin: claim '
        f"{namespace}/broken: selector #0 on device gpu.example.com/"
    ), cond["message"]
    assert "CEL runtime error" in cond["message"]

    async def event() -> str:
        events = await pod_events(api_client, namespace, "p", "FailedScheduling")
        return str(events[-1].message) if events else ""

    assert await wait_for(event, timeout=30, message="FailedScheduling") == cond["message"]

    async def plain_bound() -> str:
        return str((await read_pod(api_client, namespace, "plain"))["spec"].get("nodeName") or "")

    assert await wait_for(plain_bound, timeout=30, message="plain pod bound") in (a, b)
    (claim,) = await dra.claims()
    assert "status" not in claim or not claim["status"].get("allocation")
    assert not claim["metadata"].get("finalizers")
    assert not any("scheduling_error" in line for line in proc.log_lines())
