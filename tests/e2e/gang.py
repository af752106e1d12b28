"""PodGroups and their member pods, for the gang e2e tests and the gang differential."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.kube.manifests import make_pod

GROUP, VERSION = "scheduling.k8s.io", "v1beta1"
INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"


def pod_group(name: str, min_count: int | None, topology_key: str = "") -> dict[str, Any]:
    """A PodGroup with the gang policy (minCount), or the basic one when min_count is None,
    kept in one domain of ``topology_key`` when given."""
    policy: dict[str, Any] = (
        {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    )
    spec: dict[str, Any] = {"schedulingPolicy": policy}
    if topology_key:
        spec["schedulingConstraints"] = {"topology": [{"key": topology_key}]}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": spec,
    }


def member(
    name: str,
    group: str,
    scheduler: str,
    cpu: str,
    node_selector: Mapping[str, str] | None = None,
    priority: int | None = None,
) -> dict[str, Any]:
    body = make_pod(
        name, cpu=cpu, scheduler_name=scheduler, node_selector=node_selector, priority=priority
    )
    body["spec"]["schedulingGroup"] = {"podGroupName": group}
    return body


async def create_group(api: ApiClient, namespace: str, body: Mapping[str, Any]) -> None:
    await client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, "podgroups", dict(body)
    )


async def group_condition(api: ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    """The PodGroup's PodGroupInitiallyScheduled condition, or None."""
    body = await client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, namespace, "podgroups", name
    )
    for cond in (body.get("status") or {}).get("conditions") or []:
        if cond.get("type") == INITIALLY_SCHEDULED:
            return dict(cond)
    return None


async def bound_by_group(api: ApiClient, namespace: str) -> dict[str, list[str]]:
    """The nodes of each group's bound members, from the API server's own pods."""
    raw: Any = await client.CoreV1Api(api).list_namespaced_pod(namespace, _preload_content=False)
    pods = (await raw.json())["items"]
    out: dict[str, list[str]] = {}
    for pod in pods:
        group = (pod["spec"].get("schedulingGroup") or {}).get("podGroupName", "")
        node = pod["spec"].get("nodeName") or ""
        out.setdefault(group, [])
        if node:
            out[group].append(node)
    return out


async def pod_messages(api: ApiClient, namespace: str) -> dict[str, str]:
    """Each pending pod's PodScheduled=False message ('' when it has none)."""
    raw: Any = await client.CoreV1Api(api).list_namespaced_pod(namespace, _preload_content=False)
    out = {}
    for pod in (await raw.json())["items"]:
        if pod["spec"].get("nodeName"):
            continue
        message = ""
        for cond in pod["status"].get("conditions") or []:
            if cond["type"] == "PodScheduled" and cond.get("status") == "False":
                message = cond.get("message", "")
        out[pod["metadata"]["name"]] = message
    return out
