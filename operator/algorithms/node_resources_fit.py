"""NodeResourcesFit: requests must fit in free allocatable; scoring strategies.

Requests come from ``podium.kube.resources`` (pod-level resources, sidecars,
overhead, and for bound pods the resize status). Scoring follows
``resourceAllocationScorer``. The node's pods count as NodeInfo's
(non-zero) requested has them, pod level included. The pod being scored
counts as its containers alone, cpu and memory at 100m / 200Mi for a
container without a request, even when it sets pod-level requests: Go's
``NewFit`` never sets its scorer's ``enablePodLevelResources`` (only
BalancedAllocation's does), so ``calculatePodResourceRequest`` skips them.
Scalar resources the pod does not ask for are left out of the score.

DRA-backed extended resources (``shouldDelegateResourceToDRA``): on a node whose
allocatable for the resource is zero, a resource some DeviceClass backs is left to
DynamicResources, which allocates devices for it; device-plugin capacity is counted
here as before. A DeviceClass added or changed wakes the pods Fit rejected.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from podium.algorithms.dynamic_resources.extended import (
    delegated,
    is_dra_extended_name,
    resolver,
)
from podium.framework import signers
from podium.framework.plugin import (
    MAX_NODE_SCORE,
    ClusterEvent,
    Cycle,
    FilterPlugin,
    IndexArray,
    IntArray,
    Rejection,
    ScorePlugin,
    SignFragments,
)
from podium.framework.registry import register
from podium.kube.resource_names import is_extended_resource, is_scalar_resource

TOO_MANY_PODS = "Too many pods"
DEFAULT_RESOURCES: tuple[tuple[str, int], ...] = (("cpu", 1), ("memory", 1))
DEFAULT_SHAPE: tuple[tuple[int, int], ...] = ((0, 10), (100, 0))
# Keeps (allocatable - requested) * 100 inside int64 for absurd node sizes.
_CLIP = 2**56


def sign_requests(cycle: Cycle) -> SignFragments | None:
    """The SignPod of Fit and BalancedAllocation: the pod's requests; a pod asking a
    resource that a DeviceClass backs is unsignable (shouldDelegateResourceToDRA with no
    node: the class alone decides), so DRA-backed extended resources never batch."""
    pod = cycle.pod
    asked = [name for name, amount in pod.requests.items() if amount and is_dra_extended_name(name)]
    if asked:
        classes = resolver(cycle.snapshot.dra.classes)
        if any(name in classes for name in asked):
            return None
    return {signers.RESOURCES: pod.requests}


def requested_and_allocatable(
    cycle: Cycle, nodes: IndexArray, resource: str, use_requested: bool
) -> tuple[IntArray, IntArray]:
    """calculateResourceAllocatableRequest: what the node would have requested with this pod.

    ``use_requested`` is BalancedAllocation's view (requests, pod level); without it, the
    Fit score's (non-zero node totals plus the pod's container-only ``score_*`` view).
    """
    snap, pod = cycle.snapshot, cycle.pod
    col = snap.resource_column(resource)
    if col is None:
        zeros = np.zeros(len(nodes), dtype=np.int64)
        return zeros, zeros
    # Column first, then rows: the same values, gathered faster than [nodes, col].
    if resource == "cpu" and not use_requested:
        requested = snap.nonzero_cpu[nodes] + pod.score_cpu
    elif resource == "memory" and not use_requested:
        requested = snap.nonzero_memory[nodes] + pod.score_memory
    else:
        view = pod.requests if use_requested or pod.score_requests is None else pod.score_requests
        amount = view.get(resource, 0)
        if amount == 0 and is_scalar_resource(resource):
            zeros = np.zeros(len(nodes), dtype=np.int64)
            return zeros, zeros
        requested = snap.requested[:, col][nodes] + amount
    allocatable = np.minimum(snap.allocatable[:, col][nodes], _CLIP)
    return np.minimum(requested, _CLIP, out=requested), allocatable


def resource_weights(args: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    raw: Sequence[Mapping[str, Any]] = args.get("resources") or ()
    if not raw:
        return DEFAULT_RESOURCES
    return tuple((str(r["name"]), int(r.get("weight") or 1)) for r in raw)


def _broken_linear(shape: Sequence[tuple[int, int]], p: IntArray) -> IntArray:
    """helper.BuildBrokenLinearFunction over an array, with scores scaled to 0..100."""
    scale = MAX_NODE_SCORE // 10
    points = [(u, s * scale) for u, s in shape]
    out = np.full(p.shape, points[-1][1], dtype=np.int64)
    done = np.zeros(p.shape, dtype=bool)
    for i, (u, s) in enumerate(points):
        hit = (p <= u) & ~done
        if i == 0:
            out[hit] = s
        else:
            u0, s0 = points[i - 1]
            out[hit] = s0 + (s - s0) * (p[hit] - u0) // (u - u0)
        done |= hit
    return out


def _go_div(a: IntArray, b: IntArray) -> IntArray:
    """Go's truncating integer division (numpy floors)."""
    q = np.abs(a) // np.maximum(np.abs(b), 1)
    return np.where((a < 0) ^ (b < 0), -q, q)


@register
class NodeResourcesFit(FilterPlugin, ScorePlugin):
    name = "NodeResourcesFit"
    description = (
        "Filter: requests fit in allocatable minus requested, and the pod-count limit. "
        "Score: LeastAllocated (default), MostAllocated or RequestedToCapacityRatio."
    )
    default_weight = 1
    events = (
        ClusterEvent.NODE_ADD
        | ClusterEvent.NODE_ALLOCATABLE
        | ClusterEvent.ASSIGNED_POD_DELETE
        | ClusterEvent.ASSIGNED_POD_SCALE_DOWN
        | ClusterEvent.DEVICE_CLASS
    )

    def sign_pod(self, cycle: Cycle) -> SignFragments | None:
        """Fit.SignPod: the pod's requests (computePodResourceRequest), unless it asks a
        DRA-backed extended resource (``sign_requests``)."""
        return sign_requests(cycle)

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.strategy = str(self.args.get("strategy") or "LeastAllocated")
        self.resources = resource_weights(self.args)
        shape = self.args.get("shape") or ()
        self.shape = (
            tuple((int(p["utilization"]), int(p["score"])) for p in shape)
            if shape
            else DEFAULT_SHAPE
        )
        self.ignored = frozenset(self.args.get("ignoredResources") or ())
        self.ignored_groups = frozenset(self.args.get("ignoredResourceGroups") or ())

    def _ignored(self, resource: str) -> bool:
        if not is_extended_resource(resource):
            return False
        return resource in self.ignored or resource.split("/", 1)[0] in self.ignored_groups

    def filter(self, cycle: Cycle, nodes: IndexArray) -> list[Rejection]:
        snap = cycle.snapshot
        out: list[Rejection] = []
        full = snap.pod_count[nodes] >= snap.max_pods[nodes]
        if np.count_nonzero(full):
            out.append(Rejection(TOO_MANY_PODS, full))
        classes: dict[str, str] | None = None
        for resource, amount in cycle.pod.requests.items():
            if amount <= 0 or self._ignored(resource):
                continue
            col = snap.resource_column(resource)
            if col is None:
                mask = over = np.ones(len(nodes), dtype=bool)
                allocatable = np.zeros(len(nodes), dtype=np.int64)
            else:
                allocatable = snap.allocatable[:, col][nodes]
                mask = amount > allocatable - snap.requested[:, col][nodes]
                if not np.count_nonzero(mask):
                    # Fits everywhere: the common case, decided without the masks below.
                    continue
                over = amount > allocatable
            if is_dra_extended_name(resource):
                if classes is None:
                    classes = resolver(snap.dra.classes)
                if resource in classes:
                    # Delegated to DynamicResources where no device plugin offers it.
                    mask = mask & (allocatable > 0)
                    if not mask.any():
                        continue
            # More than the node's whole allocatable: evicting pods cannot help.
            reason = f"Insufficient {resource}"
            if (mask & over).any():
                out.append(Rejection(reason, mask & over, unresolvable=True))
            if (mask & ~over).any():
                out.append(Rejection(reason, mask & ~over))
        return out

    def explain(self, cycle: Cycle, node: int) -> str:
        snap, pod = cycle.snapshot, cycle.pod
        parts = []
        if snap.pod_count[node] + 1 > snap.max_pods[node]:
            parts.append(f"{snap.pod_count[node]} of {snap.max_pods[node]} pods already")
        for resource, amount in pod.requests.items():
            col = snap.resource_column(resource)
            free = (
                0 if col is None else int(snap.allocatable[node, col] - snap.requested[node, col])
            )
            have = 0 if col is None else int(snap.allocatable[node, col])
            to_dra = is_dra_extended_name(resource) and delegated(
                resource, have, resolver(snap.dra.classes)
            )
            if amount > 0 and amount > free and not self._ignored(resource) and not to_dra:
                parts.append(
                    f"needs {format_amount(resource, amount)} {resource}, "
                    f"{format_amount(resource, max(free, 0))} free"
                )
        return "; ".join(parts)

    def score(self, cycle: Cycle, nodes: IndexArray) -> IntArray:
        if self.strategy == "RequestedToCapacityRatio":
            return self._score_general(cycle, nodes)
        # Resources every node has (allocatable > 0) add a constant weight and need no
        # per-node masks; any other mix takes the general path.
        total: IntArray | None = None
        weights = 0
        for resource, weight in self.resources:
            requested, allocatable = requested_and_allocatable(cycle, nodes, resource, False)
            if not allocatable.size or allocatable.min() <= 0 or weight <= 0:
                if allocatable.any():
                    return self._score_general(cycle, nodes)
                continue
            if self.strategy == "MostAllocated":
                part = np.minimum(requested, allocatable) * MAX_NODE_SCORE // allocatable
            else:
                # max(free, 0) is 0 exactly where requested > allocatable.
                part = np.subtract(allocatable, requested, out=requested)
                np.maximum(part, 0, out=part)
                part *= MAX_NODE_SCORE
                part //= allocatable
            if weight != 1:
                part *= weight
            if total is None:
                total = part
            else:
                total += part
            weights += weight
        if total is None:
            return np.zeros(len(nodes), dtype=np.int64)
        if total.min() >= 0:
            # Go's truncation equals floor division for non-negative operands.
            quotient: IntArray = total // weights
            return quotient
        return _go_div(total, np.full(total.shape, weights, dtype=np.int64))

    def _score_general(self, cycle: Cycle, nodes: IndexArray) -> IntArray:
        total = np.zeros(len(nodes), dtype=np.int64)
        weights = np.zeros(len(nodes), dtype=np.int64)
        for resource, weight in self.resources:
            requested, allocatable = requested_and_allocatable(cycle, nodes, resource, False)
            present = allocatable != 0
            safe = np.where(present, allocatable, 1)
            if self.strategy == "MostAllocated":
                part = np.minimum(requested, allocatable) * MAX_NODE_SCORE // safe
            elif self.strategy == "RequestedToCapacityRatio":
                over = requested > allocatable
                utilization = np.where(over, 100, requested * 100 // safe)
                part = _broken_linear(self.shape, utilization)
                present &= part > 0
            else:
                part = np.where(
                    requested > allocatable, 0, (allocatable - requested) * MAX_NODE_SCORE // safe
                )
            total += np.where(present, part * weight, 0)
            weights += np.where(present, weight, 0)
        if self.strategy == "RequestedToCapacityRatio":
            ratio = total / np.maximum(weights, 1)
            rounded = np.floor(ratio + 0.5).astype(np.int64)
            return np.where(weights == 0, 0, rounded)
        return np.where(weights == 0, 0, _go_div(total, np.maximum(weights, 1)))


def format_amount(resource: str, amount: int) -> str:
    """Human units: cpu from millicores, byte resources in Gi/Mi/Ki."""
    if resource == "cpu":
        return f"{amount / 1000:g}"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        for unit, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount >= size:
                return f"{amount / size:.4g}{unit}"
    return str(amount)
