"""Small async helpers for tests, the demo and the benchmark.

They send the plain dicts that ``podium.kube.manifests`` builds, through a
kubernetes_asyncio ApiClient, which sends such dicts as-is (its stubs ask for
model objects, hence the casts).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar, cast, overload

from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient, CoreV1Event, V1Pod
from kubernetes_asyncio.client.exceptions import ApiException

T = TypeVar("T")


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
