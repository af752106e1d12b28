"""NodeResourcesBalancedAllocation: prefer nodes whose resource fractions stay even."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from podium.algorithms.node_resources_fit import (
    requested_and_allocatable,
    resource_weights,
    sign_requests,
)
from podium.framework.plugin import (
    MAX_NODE_SCORE,
    ClusterEvent,
    Cycle,
    IndexArray,
    IntArray,
    ScorePlugin,
    SignFragments,
)
from podium.framework.registry import register


@register
class NodeResourcesBalancedAllocation(ScorePlugin):
    name = "NodeResourcesBalancedAllocation"
    description = "Prefers nodes where cpu and memory would be used in equal fractions."
    default_weight = 1
    events = ClusterEvent.NODE_ADD | ClusterEvent.NODE_ALLOCATABLE

    def sign_pod(self, cycle: Cycle) -> SignFragments | None:
        """BalancedAllocation.SignPod: Fit's (``sign_requests``), DRA-backed extended
        resources refused the same way."""
        return sign_requests(cycle)

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.resources = tuple(name for name, _ in resource_weights(self.args))

    def pre_score(self, cycle: Cycle, nodes: IndexArray) -> bool:
        # Best-effort pods are not scored, so they do not all pile onto one node (#129138).
        return any(cycle.pod.requests.get(r, 0) > 0 for r in self.resources)

    def score(self, cycle: Cycle, nodes: IndexArray) -> IntArray:
        """v1.37 scores the change in balance: 50 + (50 + with_pod - without_pod) / 2."""
        requested, allocated, allocatable = [], [], []
        for resource in self.resources:
            with_pod, capacity = requested_and_allocatable(cycle, nodes, resource, True)
            requested.append(with_pod)
            allocatable.append(capacity)
        half = MAX_NODE_SCORE // 2
        n = len(nodes)
        if (
            len(allocatable) == 2
            and np.count_nonzero(allocatable[0]) == n
            and np.count_nonzero(allocatable[1]) == n
        ):
            # Two resources on every node: both balances from one (2, 2, n) array.
            pods = cycle.pod.requests
            used = np.empty((2, 2, n), dtype=np.float64)
            used[0, 0] = requested[0]
            used[0, 1] = requested[1]
            used[1, 0] = requested[0] - pods.get(self.resources[0], 0)
            used[1, 1] = requested[1] - pods.get(self.resources[1], 0)
            fractions = np.minimum(np.divide(used, allocatable, out=used), 1.0, out=used)
            spread = fractions[:, 0] - fractions[:, 1]
            spread /= 2
            balance = ((1 - np.abs(spread, out=spread)) * MAX_NODE_SCORE).astype(np.int64)
            delta: IntArray = half + (half + balance[0] - balance[1]) // 2
            return delta
        for resource, with_pod, capacity in zip(
            self.resources, requested, allocatable, strict=True
        ):
            pod_amount = cycle.pod.requests.get(resource, 0)
            allocated.append(np.where(capacity != 0, with_pod - pod_amount, 0))
        cap = np.array(allocatable)
        with_pod_score = _balance(np.array(requested), cap)
        without_pod_score = _balance(np.array(allocated), cap)
        return half + (half + with_pod_score - without_pod_score) // 2


def _balance(requested: IntArray, allocatable: IntArray) -> IntArray:
    """balancedResourceScore: (1 - std of the used fractions) * 100, truncated.

    Rows are resources, columns nodes; resources a node lacks are skipped.
    The two-resource case uses |f0 - f1| / 2 exactly as Go does, so that
    float rounding cannot move a truncated score.
    """
    valid = allocatable != 0
    fractions = np.minimum(requested.astype(np.float64) / np.where(valid, allocatable, 1), 1.0)
    count = valid.sum(axis=0)
    std = np.zeros(requested.shape[1], dtype=np.float64)
    for k in range(2, requested.shape[0] + 1):
        rows = count == k
        if not rows.any():
            continue
        f, v = fractions[:, rows], valid[:, rows]
        if k == 2:
            order = np.argsort(~v, axis=0, kind="stable")[:2]
            cols = np.arange(f.shape[1])
            std[rows] = np.abs((f[order[0], cols] - f[order[1], cols]) / 2)
        else:
            mean = np.where(v, f, 0).sum(axis=0) / k
            std[rows] = np.sqrt(np.where(v, (f - mean) ** 2, 0).sum(axis=0) / k)
    return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
