"""DRA's binding cycle on the real API server: the nomination written before PreBind
(NominatedNodeNameForExpectation) and devices' binding conditions (DRADeviceBindingConditions):
met, failed and never reported, with the claim status patched as a driver would."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client import ApiClient

from podium.devcluster.objects import create_pod, pod_events, wait_for
from podium.kube.manifests import make_node, make_pod

from .dra import (
    ATTACH_FAILED,
    ATTACHED,
    DRIVER,
    GROUP,
    VERSION,
    Dra,
    claim_spec,
    claim_template,
    device,
    device_class,
    exactly,
    gated_device,
    resource_slice,
    with_claims,
)
from .test_policy import crd  # noqa: F401
from .test_volumes import accepted, scheduler_policy

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]


async def record(api: ApiClient, namespace: str, seen: list[dict[str, Any]], plural: str) -> None:
    """Every version of the namespace's pods (or resource claims) the watch delivers."""
    if plural == "pods":
        stream = watch.Watch().stream(
            client.CoreV1Api(api).list_namespaced_pod, namespace, timeout_seconds=120
        )
    else:
        stream = watch.Watch().stream(
            client.CustomObjectsApi(api).list_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            plural,
            timeout_seconds=120,
        )
    async for event in stream:
        seen.append(event["raw_object"])


@contextlib.asynccontextmanager
async def recording(
    api: ApiClient, namespace: str, plural: str = "pods"
) -> AsyncIterator[list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []
    task = asyncio.create_task(record(api, namespace, seen, plural))
    await asyncio.sleep(0.5)  # the watch is open before the pods exist
    try:
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def history(seen: list[dict[str, Any]], name: str) -> list[tuple[str, str]]:
    """(nominatedNodeName, nodeName) of each version of pod ``name``, in watch order."""
    return [
        (
            str((p.get("status") or {}).get("nominatedNodeName") or ""),
            str(p["spec"].get("nodeName") or ""),
        )
        for p in seen
        if p["metadata"]["name"] == name
    ]


async def node_of(api: ApiClient, namespace: str, name: str) -> str:
    pod = await client.CoreV1Api(api).read_namespaced_pod(name, namespace)
    return str(pod.spec.node_name or "")


async def test_the_nomination_precedes_the_binding_for_a_claim_pod_only(
    api_client: ApiClient,
    namespace: str,
    node_factory: Any,
    podium: Any,
    kube_scheduler: Any,
    dra: Dra,
) -> None:
    """bindingCycle: DynamicResources' PreBindPreFlight answers Success for a pod with a
    claim, so status.nominatedNodeName is written before the Binding; a plain pod has no
    PreBind work and no Permit wait, so it is bound without one. The real kube-scheduler,
    on the same shapes, writes the same versions (nomination, then binding)."""
    (a,) = await node_factory([make_node(f"{namespace}-a")])
    klass = f"{namespace}-gpu"
    await dra.create("deviceclasses", device_class(klass))
    await dra.create("resourceslices", resource_slice(f"{a}-gpus", a, [device("gpu-0")]))
    await dra.create(
        "resourceclaimtemplates", claim_template("one", claim_spec(exactly("gpu", klass)))
    )
    await podium()
    kube = f"{namespace}-kube"[:63]
    await kube_scheduler(kube)
    seen_by: dict[str, list[list[tuple[str, str]]]] = {}
    async with recording(api_client, namespace) as seen:
        for scheduler, prefix in (("podium", "p"), (kube, "k")):
            claims = with_claims(
                make_pod(f"{prefix}-claims", scheduler_name=scheduler), {"gpu": "one"}
            )
            await create_pod(api_client, namespace, claims)
            await dra.instantiate(f"{prefix}-claims")
            await create_pod(
                api_client, namespace, make_pod(f"{prefix}-plain", scheduler_name=scheduler)
            )
            for name in (f"{prefix}-claims", f"{prefix}-plain"):

                async def bound(name: str = name) -> bool:
                    return any(node for _, node in history(seen, name))

                await wait_for(bound, timeout=30, message=f"{name} bound")
            seen_by[prefix] = [history(seen, f"{prefix}-{k}") for k in ("claims", "plain")]
            await client.CoreV1Api(api_client).delete_namespaced_pod(
                f"{prefix}-claims", namespace, grace_period_seconds=0
            )

            async def freed(prefix: str = prefix) -> bool:
                return not [
                    c for c in await dra.claims() if c["metadata"]["name"].startswith(prefix)
                ]

            for c in await dra.claims():
                await dra.delete_claim(c["metadata"]["name"])
            await wait_for(freed, timeout=30, message="the device is free again")
    for prefix, (claims, plain) in seen_by.items():
        first_bound = next(i for i, (_, node) in enumerate(claims) if node)
        assert (a, "") in claims[:first_bound], (prefix, claims)
        assert all(nominated == "" for nominated, _ in plain), (prefix, plain)
    assert [sorted(set(v)) for v in seen_by["p"]] == [sorted(set(v)) for v in seen_by["k"]]


async def _claim_of(dra: Dra, pod: str) -> dict[str, Any]:
    (claim,) = [
        c
        for c in await dra.claims()
        if any(o["name"] == pod for o in c["metadata"].get("ownerReferences") or [])
    ]
    return claim


@pytest.mark.usefixtures("crd")
async def test_binding_conditions_met_failed_and_never_reported(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any, dra: Dra
) -> None:
    """PreBind waits for the device's binding condition: reported True, the pod is bound;
    a failure condition, or nothing within bindingTimeoutSeconds, fails the attempt with
    Go's message, the pod leaves reservedFor, and the next attempt's PostFilter
    deallocates the claim; that pod is never bound."""
    nodes = await node_factory([make_node(f"{namespace}-{k}") for k in ("met", "fail", "never")])
    klass = f"{namespace}-gpu"
    await dra.create("deviceclasses", device_class(klass))
    for node, key in zip(nodes, ("met", "fail", "never"), strict=True):
        slice_ = resource_slice(f"{node}-gpus", node, [gated_device("gpu-0", slot=key)])
        await dra.create("resourceslices", slice_)
        selector = f'device.attributes["{DRIVER}"].slot == "{key}"'
        await dra.create(
            "resourceclaimtemplates",
            claim_template(key, claim_spec(exactly("gpu", klass, 1, selector))),
        )
    sched = f"{namespace}-bc"[:63]
    spec = {"pluginArgs": {"dynamicResources": {"bindingTimeoutSeconds": 12}}}
    async with (
        scheduler_policy(api_client, sched, spec),
        recording(api_client, namespace, "resourceclaims") as claim_versions,
    ):
        await podium()
        await accepted(api_client, sched)
        for key in ("met", "fail", "never"):
            body = with_claims(make_pod(key), {"gpu": key})
            body["spec"]["schedulerName"] = sched
            await create_pod(api_client, namespace, body)
            await dra.instantiate(key)

        async def allocated(pod: str) -> bool:
            status = (await _claim_of(dra, pod)).get("status") or {}
            return bool(status.get("allocation") and status.get("reservedFor"))

        for key in ("met", "fail"):
            await wait_for(lambda key=key: allocated(key), timeout=30, message=f"{key} waits")
        await dra.report((await _claim_of(dra, "met"))["metadata"]["name"], ATTACHED)
        await dra.report((await _claim_of(dra, "fail"))["metadata"]["name"], ATTACH_FAILED)

        async def bound() -> str:
            return await node_of(api_client, namespace, "met")

        assert await wait_for(bound, timeout=30, message="met bound") == f"{namespace}-met"
        pending = await pod_events(api_client, namespace, "met", "BindingConditionsPending")
        assert pending[0].message == (
            f"waiting for binding conditions for device on node {namespace}-met"
        )
        assert pending[0].type == "Normal"

        async def failure(pod: str, text: str) -> str:
            events = await pod_events(api_client, namespace, pod, "FailedScheduling")
            return next((e.message for e in events if text in e.message), "")

        failed = await wait_for(
            lambda: failure("fail", "device binding"), timeout=30, message="failure reported"
        )
        fail_claim = (await _claim_of(dra, "fail"))["metadata"]["name"]
        assert failed == (
            'running PreBind plugin "DynamicResources": device binding failed: '
            f'claim={fail_claim}, reason=Driver, message="reported by the test"'
        )
        timed_out = await wait_for(
            lambda: failure("never", "device binding"), timeout=60, message="timeout reported"
        )
        assert timed_out == (
            'running PreBind plugin "DynamicResources": device binding timeout: '
            "context deadline exceeded"
        )
        for pod in ("fail", "never"):
            await wait_for(
                lambda pod=pod: failure(pod, "deallocation of ResourceClaim completed"),
                timeout=60,
                message=f"{pod}'s claim deallocated by PostFilter",
            )
            assert await node_of(api_client, namespace, pod) == ""
            name = (await _claim_of(dra, pod))["metadata"]["name"]
            versions = [
                c.get("status") or {} for c in claim_versions if c["metadata"]["name"] == name
            ]
            held = next(i for i, v in enumerate(versions) if v.get("reservedFor"))
            assert any(
                not v.get("allocation") and not v.get("reservedFor") for v in versions[held:]
            ), f"{pod}'s claim was never seen unreserved and deallocated: {versions}"
