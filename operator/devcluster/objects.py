"""Node and Pod builders and small async helpers for tests, the demo and the benchmark.

Builders return plain dicts (the JSON the API takes), so tests can tweak any field
without a model class. The helpers take a kubernetes_asyncio ApiClient, which
sends such dicts as-is (its stubs ask for model objects, hence the casts).
"""

from __future__ import annotations

import asyncio
import datetime
import inspect
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar, cast, overload

from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient, CoreV1Event, V1Pod
from kubernetes_asyncio.client.exceptions import ApiException

T = TypeVar("T")

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
"""Never pulled (there are no kubelets); any valid image name would do."""

_CONDITION_REASONS = {"Ready": "KubeletReady"}


def make_node(
    name: str,
    cpu: str = "4",
    memory: str = "32Gi",
    pods: int = 110,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] | None = None,
    conditions: Mapping[str, str] | None = None,
    unschedulable: bool = False,
    extended: Mapping[str, str | int] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Node whose capacity equals its allocatable.

    conditions maps condition type to status (default {"Ready": "True"}); extended
    adds extended resources such as {"example.com/gpu": 4}; taints are dicts with
    key, value and effect. The usual well-known labels are set, and labels override.
    """
    resources = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    resources.update({key: str(value) for key, value in (extended or {}).items()})
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status_by_type = conditions if conditions is not None else {"Ready": "True"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                **(labels or {}),
            },
            "annotations": dict(annotations or {}),
        },
        "spec": {"taints": [dict(t) for t in taints or ()], "unschedulable": unschedulable},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [
                {
                    "type": kind,
                    "status": status,
                    "reason": _CONDITION_REASONS.get(kind, kind),
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
                for kind, status in status_by_type.items()
            ],
            "phase": "Running",
        },
    }


def make_pod(
    name: str,
    cpu: str | None = None,
    memory: str | None = None,
    scheduler_name: str = "podium",
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] | None = None,
    affinity: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    priority: int | None = None,
    *,
    extended: Mapping[str, str | int] | None = None,
    annotations: Mapping[str, str] | None = None,
    topology_spread_constraints: Sequence[Mapping[str, Any]] | None = None,
    preemption_policy: str | None = None,
    node_name: str | None = None,
) -> dict[str, Any]:
    """A single-container pause Pod requesting the given resources.

    priority sets spec.priority directly: the Priority admission plugin is off, so no
    PriorityClass is needed. terminationGracePeriodSeconds is 0 so deleting a bound
    pod does not wait for a kubelet that does not exist.
    """
    requests: dict[str, str] = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    # Extended resources cannot be overcommitted, so the API wants them as limits too.
    limits = {key: str(value) for key, value in (extended or {}).items()}
    requests.update(limits)
    container: dict[str, Any] = {"name": "main", "image": PAUSE_IMAGE}
    if requests:
        container["resources"] = {"requests": requests, **({"limits": limits} if limits else {})}
    spec: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "containers": [container],
        "terminationGracePeriodSeconds": 0,
    }
    optional: dict[str, Any] = {
        "nodeSelector": dict(node_selector) if node_selector else None,
        "tolerations": [dict(t) for t in tolerations] if tolerations else None,
        "affinity": dict(affinity) if affinity else None,
        "priority": priority,
        "topologySpreadConstraints": (
            [dict(c) for c in topology_spread_constraints] if topology_spread_constraints else None
        ),
        "preemptionPolicy": preemption_policy,
        "nodeName": node_name,
    }
    spec.update({key: value for key, value in optional.items() if value is not None})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
        },
        "spec": spec,
    }


async def create_nodes(
    api: ApiClient, nodes: Iterable[Mapping[str, Any]], concurrency: int = 32
) -> None:
    """Create Nodes, including their status, a bounded number at a time."""
    core = client.CoreV1Api(api)
    gate = asyncio.Semaphore(concurrency)

    async def one(node: Mapping[str, Any]) -> None:
        async with gate:
            await core.create_node(body=cast(Any, node))

    await asyncio.gather(*(one(node) for node in nodes))


async def delete_nodes(api: ApiClient, names: Iterable[str]) -> None:
    """Delete Nodes by name; already-missing ones are fine."""
    core = client.CoreV1Api(api)
    for name in names:
        try:
            await core.delete_node(name)
        except ApiException as exc:
            if exc.status != 404:
                raise


async def create_pod(api: ApiClient, namespace: str, pod: Mapping[str, Any]) -> V1Pod:
    """Create a Pod and return the V1Pod the server answered with."""
    return await client.CoreV1Api(api).create_namespaced_pod(namespace, body=cast(Any, pod))


async def delete_pods(api: ApiClient, namespace: str) -> None:
    """Delete every Pod in a namespace at once (grace 0: no kubelet will confirm)."""
    await client.CoreV1Api(api).delete_collection_namespaced_pod(namespace, grace_period_seconds=0)


async def pod_events(
    api: ApiClient, namespace: str, pod_name: str, reason: str | None = None
) -> list[CoreV1Event]:
    """Core v1 Events about one Pod (optionally of one reason), oldest first."""
    selector = f"involvedObject.kind=Pod,involvedObject.name={pod_name}"
    if reason is not None:
        selector += f",reason={reason}"
    events = await client.CoreV1Api(api).list_namespaced_event(namespace, field_selector=selector)
    return sorted(events.items, key=lambda e: e.metadata.creation_timestamp)


@overload
async def wait_for(
    predicate: Callable[[], Awaitable[T]],
    timeout: float = ...,  # noqa: ASYNC109
    interval: float = ...,
    message: str = ...,
) -> T: ...


@overload
async def wait_for(
    predicate: Callable[[], T],
    timeout: float = ...,  # noqa: ASYNC109
    interval: float = ...,
    message: str = ...,
) -> T: ...


async def wait_for(
    predicate: Callable[[], Any],
    timeout: float = 30.0,  # noqa: ASYNC109 - the error names what it waited for
    interval: float = 0.1,
    message: str = "condition",
) -> Any:
    """Poll predicate (sync or async) until it returns something truthy, and return that."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.1f}s waiting for {message}")
        await asyncio.sleep(interval)
