"""NodeResourcesBalancedAllocation: prefer nodes whose resource fractions stay even."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from podium.algorithms import register
from podium.algorithms.node_resources_fit import requested_and_allocatable, resource_weights
from podium.framework import (
    MAX_NODE_SCORE,
    ClusterEvent,
    Cycle,
    IndexArray,
    IntArray,
    ScorePlugin,
)


@register
class NodeResourcesBalancedAllocation(ScorePlugin):
    name = "NodeResourcesBalancedAllocation"
    description = "Prefers nodes where cpu and memory would be used in equal fractions."
    default_weight = 1
    events = ClusterEvent.NODE_ADD | ClusterEvent.NODE_ALLOCATABLE

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.resources = tuple(name for name, _ in resource_weights(self.args))

    def pre_score(self, cycle: Cycle, nodes: IndexArray) -> bool:
        # Best-effort pods are not scored, so they do not all pile onto one node (#129138).
        return any(cycle.pod.requests.get(r, 0) > 0 for r in self.resources)

    def score(self, cycle: Cycle, nodes: IndexArray) -> IntArray:
        fractions = []
        valid = []
        for resource in self.resources:
            requested, allocatable = requested_and_allocatable(cycle, nodes, resource, True)
            present = allocatable != 0
            fraction = requested.astype(np.float64) / np.where(present, allocatable, 1)
            fractions.append(np.minimum(fraction, 1.0))
            valid.append(present)
        f = np.array(fractions)
        v = np.array(valid)
        count = v.sum(axis=0)
        std = np.zeros(len(nodes), dtype=np.float64)
        if len(self.resources) == 2:
            both = count == 2
            std[both] = np.abs((f[0, both] - f[1, both]) / 2)
        else:
            for k in range(3, len(self.resources) + 1):
                rows = count == k
                if not rows.any():
                    continue
                sub_f, sub_v = f[:, rows], v[:, rows]
                mean = np.where(sub_v, sub_f, 0).sum(axis=0) / k
                sq = np.where(sub_v, (sub_f - mean) ** 2, 0).sum(axis=0)
                std[rows] = np.sqrt(sq / k)
            two = count == 2
            if two.any():
                # The two present fractions, in resource order.
                order = np.argsort(~v[:, two], axis=0, kind="stable")[:2]
                cols = np.flatnonzero(two)
                a = f[order[0], cols]
                b = f[order[1], cols]
                std[two] = np.abs((a - b) / 2)
        return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
