"""Node and Pod manifests from a few arguments, for tests, the demo, the benchmark and policy tests.

Builders return plain dicts (the JSON the API takes), so a caller can tweak any
field without a model class.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["PAUSE_IMAGE", "make_node", "make_pod"]

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
