"""Builders for plugin tests: raw Node/Pod dicts, snapshots, and one-plugin runs.

Plain functions (not fixtures) so that parametrize tables can call them at
collection time; test modules import them with ``from .conftest import ...``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from podium.framework.plugin import Cycle, FilterPlugin, ScorePlugin
from podium.kube.objects import parse_node, parse_pod
from podium.state.cache import Cache
from podium.state.snapshot import Snapshot

_uids = itertools.count()
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
PREFILTER_EXCLUDED = "<excluded by PreFilter>"


def node(
    name: str,
    labels: Mapping[str, str] | None = None,
    *,
    zone: str | None = None,
    hostname: bool = False,
    taints: Sequence[Mapping[str, str]] = (),
    cpu: str = "4",
    memory: str = "32Gi",
    pods: int = 110,
    images: Mapping[str, int] | Sequence[tuple[Sequence[str], int]] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    all_labels = dict(labels or {})
    if zone is not None:
        all_labels[ZONE] = zone
    if hostname:
        all_labels[HOST] = name
    allocatable = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    if isinstance(images, Mapping):
        image_list = [{"names": [k], "sizeBytes": v} for k, v in images.items()]
    else:
        image_list = [{"names": list(names), "sizeBytes": size} for names, size in images or ()]
    return {
        "metadata": {
            "name": name,
            "uid": f"node-{name}",
            "labels": all_labels,
            "annotations": dict(annotations or {}),
        },
        "spec": {"taints": [dict(t) for t in taints]},
        "status": {
            "allocatable": allocatable,
            "capacity": allocatable,
            "conditions": [{"type": "Ready", "status": "True"}],
            "images": image_list,
        },
    }


def pod(
    name: str,
    labels: Mapping[str, str] | None = None,
    *,
    namespace: str = "default",
    node_name: str = "",
    cpu: str | None = None,
    memory: str | None = None,
    affinity: Mapping[str, Any] | None = None,
    node_selector: Mapping[str, str] | None = None,
    spread: Sequence[Mapping[str, Any]] | None = None,
    ports: Sequence[Mapping[str, Any]] = (),
    sidecar_ports: Sequence[Mapping[str, Any]] = (),
    volumes: Sequence[Mapping[str, Any]] = (),
    image: str | None = "pause",
    init_images: Sequence[str] = (),
    extra_images: Sequence[str] = (),
    owner: tuple[str, str] | None = None,
    owner_api: str | None = None,
    deleting: bool = False,
    tolerations: Sequence[Mapping[str, str]] = (),
    priority: int | None = None,
    preemption_policy: str | None = None,
) -> dict[str, Any]:
    """A pod; ``owner`` is (kind, uid) of its controller, ``ports`` go on its first container."""
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    container: dict[str, Any] = {"name": "c"}
    if image is not None:
        container["image"] = image
    if requests:
        container["resources"] = {"requests": requests}
    if ports:
        container["ports"] = [dict(p) for p in ports]
    containers = [container] + [{"name": f"x{i}", "image": im} for i, im in enumerate(extra_images)]
    inits: list[dict[str, Any]] = [
        {"name": f"i{i}", "image": im} for i, im in enumerate(init_images)
    ]
    if sidecar_ports:
        inits.append(
            {
                "name": "sidecar",
                "image": "sidecar",
                "restartPolicy": "Always",
                "ports": [dict(p) for p in sidecar_ports],
            }
        )
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}-{next(_uids)}",
        "labels": dict(labels or {}),
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    if owner is not None:
        kind, uid = owner
        api = owner_api or ("v1" if kind == "ReplicationController" else "apps/v1")
        meta["ownerReferences"] = [
            {"apiVersion": api, "kind": kind, "name": uid, "uid": uid, "controller": True}
        ]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    spec: dict[str, Any] = {"schedulerName": "podium", "containers": containers}
    if inits:
        spec["initContainers"] = inits
    if affinity is not None:
        spec["affinity"] = dict(affinity)
    if node_selector is not None:
        spec["nodeSelector"] = dict(node_selector)
    if spread is not None:
        spec["topologySpreadConstraints"] = [dict(c) for c in spread]
    if volumes:
        spec["volumes"] = [dict(v) for v in volumes]
    if node_name:
        spec["nodeName"] = node_name
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if priority is not None:
        spec["priority"] = priority
    if preemption_policy is not None:
        spec["preemptionPolicy"] = preemption_policy
    return {
        "metadata": meta,
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def on(node_name: str, body: dict[str, Any]) -> dict[str, Any]:
    """The same pod, bound to ``node_name``."""
    body["spec"]["nodeName"] = node_name
    body["status"]["phase"] = "Running"
    return body


def selecting(kind: str, name: str, selector: Any, namespace: str = "default") -> dict[str, Any]:
    """A Service, ReplicationController, ReplicaSet or StatefulSet with ``spec.selector``.

    ``selector`` is the raw field: a label map for Services and RCs, a
    LabelSelector for RSs and STSs; None leaves the field out.
    """
    spec = {} if selector is None else {"selector": selector}
    meta = {"name": name, "namespace": namespace, "resourceVersion": "1"}
    return {"kind": kind, "metadata": meta, "spec": spec}


def snapshot(
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]] = (),
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
    selectors: Iterable[Mapping[str, Any]] = (),
) -> Snapshot:
    """``selectors``: objects made by ``selecting``, for default topology spreading."""
    cache = Cache()
    for body in nodes:
        cache.add_node(parse_node(body))
    for body in pods:
        cache.add_pod(parse_pod(body))
    snap = Snapshot()
    snap.update(cache)
    snap.namespace_labels = {k: dict(v) for k, v in (namespaces or {}).items()}
    snap.selectors.load(selectors)
    return snap


def cycle(snap: Snapshot, incoming: Mapping[str, Any]) -> Cycle:
    return Cycle(parse_pod(incoming), snap)


def run_filter(plugin: FilterPlugin, snap: Snapshot, incoming: Mapping[str, Any]) -> dict[str, str]:
    """Node name -> the reason the plugin rejects it ("" when it passes), like algorithm.py."""
    c = cycle(snap, incoming)
    result = plugin.pre_filter(c)
    if result is not None and result.reject:
        return {name: result.reject for name in snap.names}
    out = dict.fromkeys(snap.names, "")
    nodes = snap.all_nodes()
    if result is not None and result.node_names is not None:
        keep = np.array([snap.names[i] in result.node_names for i in nodes], dtype=bool)
        for i in nodes[~keep]:
            out[snap.names[i]] = PREFILTER_EXCLUDED
        nodes = nodes[keep]
    for rejection in plugin.filter(c, nodes):
        for i in nodes[rejection.mask]:
            assert not out[snap.names[i]], "two reasons for one node"
            out[snap.names[i]] = rejection.reason
    return out


def unresolvable(plugin: FilterPlugin, snap: Snapshot, incoming: Mapping[str, Any]) -> set[str]:
    c = cycle(snap, incoming)
    plugin.pre_filter(c)
    nodes = snap.all_nodes()
    found: set[str] = set()
    for rejection in plugin.filter(c, nodes):
        if rejection.unresolvable:
            found.update(snap.names[i] for i in nodes[rejection.mask])
    return found


def run_score(
    plugin: ScorePlugin,
    snap: Snapshot,
    incoming: Mapping[str, Any],
    candidates: Sequence[str] | None = None,
) -> tuple[dict[str, int], dict[str, int]] | None:
    """(raw, normalized) scores by node name over ``candidates``; None when PreScore skips."""
    c = cycle(snap, incoming)
    names = list(candidates) if candidates is not None else list(snap.names)
    nodes = np.array([snap.index[n] for n in names], dtype=np.intp)
    if not plugin.pre_score(c, nodes):
        return None
    raw = plugin.score(c, nodes)
    normalized = plugin.normalize(c, nodes, raw.copy())
    return (
        {n: int(v) for n, v in zip(names, raw, strict=True)},
        {n: int(v) for n, v in zip(names, normalized, strict=True)},
    )


def explain(plugin: FilterPlugin, snap: Snapshot, incoming: Mapping[str, Any], name: str) -> str:
    c = cycle(snap, incoming)
    plugin.pre_filter(c)
    plugin.filter(c, snap.all_nodes())
    return plugin.explain(c, snap.index[name])
