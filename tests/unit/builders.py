"""Plain Node and Pod dicts for unit tests of pure code (no API server)."""

from __future__ import annotations

import itertools
from typing import Any, cast

from podium.algorithms.scheduling_gates import SchedulingGates
from podium.kube.objects import PodInfo

_uids = itertools.count()


def node(
    name: str,
    cpu: str = "4",
    memory: str = "32Gi",
    pods: int = 110,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    conditions: dict[str, str] | None = None,
    extra: dict[str, str] | None = None,
) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, "pods": str(pods), **(extra or {})}
    conds = {"Ready": "True", **(conditions or {})}
    return {
        "metadata": {"name": name, "uid": f"node-{name}", "labels": labels or {}},
        "spec": {"taints": taints or [], "unschedulable": unschedulable},
        "status": {
            "allocatable": allocatable,
            "capacity": allocatable,
            "conditions": [{"type": k, "status": v} for k, v in conds.items()],
        },
    }


def pod(
    name: str,
    cpu: str | None = None,
    memory: str | None = None,
    node_name: str = "",
    priority: int | None = None,
    tolerations: list[dict[str, str]] | None = None,
    labels: dict[str, str] | None = None,
    scheduler_name: str = "podium",
    created: str = "2026-01-01T00:00:00Z",
    extra_requests: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    requests: dict[str, str] = {**(extra_requests or {})}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    container: dict[str, Any] = {"name": "c", "image": "pause"}
    if requests:
        container["resources"] = {"requests": requests}
    body: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}-{next(_uids)}",
            "labels": labels or {},
            "creationTimestamp": created,
        },
        "spec": {
            "schedulerName": scheduler_name,
            "containers": [container],
            "tolerations": tolerations or [],
            **spec,
        },
        "status": {"phase": "Pending"},
    }
    if node_name:
        body["spec"]["nodeName"] = node_name
    if priority is not None:
        body["spec"]["priority"] = priority
    return body


def gates(pod: PodInfo) -> str | None:
    """A queue's PreEnqueue with SchedulingGates alone (the plugin needs no handle)."""
    status = SchedulingGates().pre_enqueue(cast(Any, None), pod)
    return None if status.ok else SchedulingGates.name
