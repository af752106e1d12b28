"""TaintToleration: NoSchedule/NoExecute taints filter, PreferNoSchedule taints score."""

from __future__ import annotations

import numpy as np

from podium.framework import signers
from podium.framework.plugin import (
    ClusterEvent,
    Cycle,
    FilterPlugin,
    IndexArray,
    IntArray,
    Rejection,
    ScorePlugin,
    SignFragments,
    default_normalize,
)
from podium.framework.registry import register
from podium.kube.objects import Taint, Toleration

REASON = "node(s) had untolerated taint(s)"
_HARD_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def untolerated(
    taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...], effects: frozenset[str]
) -> list[Taint]:
    return [
        t for t in taints if t.effect in effects and not any(x.tolerates(t) for x in tolerations)
    ]


@register
class TaintToleration(FilterPlugin, ScorePlugin):
    name = "TaintToleration"
    description = (
        "Filter: the pod must tolerate every NoSchedule and NoExecute taint. "
        "Score: fewer untolerated PreferNoSchedule taints is better."
    )
    default_weight = 3
    events = ClusterEvent.NODE_ADD | ClusterEvent.NODE_TAINT

    def sign_pod(self, cycle: Cycle) -> SignFragments | None:
        """TaintToleration.SignPod: the tolerations."""
        pod = cycle.pod
        return {signers.TOLERATIONS: signers.tolerations_signer(pod)}

    def filter(self, cycle: Cycle, nodes: IndexArray) -> list[Rejection]:
        snap = cycle.snapshot
        tainted = snap.tainted[nodes].nonzero()[0]
        if tainted.size == 0:
            return []
        tolerations = cycle.pod.tolerations
        verdicts: dict[tuple[Taint, ...], bool] = {}
        mask = np.zeros(len(nodes), dtype=bool)
        for pos in tainted:
            taints = snap.nodes[nodes[pos]].taints
            bad = verdicts.get(taints)
            if bad is None:
                bad = verdicts[taints] = bool(untolerated(taints, tolerations, _HARD_EFFECTS))
            mask[pos] = bad
        return [Rejection(REASON, mask, unresolvable=True)] if mask.any() else []

    def explain(self, cycle: Cycle, node: int) -> str:
        bad = untolerated(cycle.snapshot.nodes[node].taints, cycle.pod.tolerations, _HARD_EFFECTS)
        return ", ".join(f"taint {t.key}={t.value}:{t.effect} not tolerated" for t in bad)

    def score(self, cycle: Cycle, nodes: IndexArray) -> IntArray:
        snap = cycle.snapshot
        out = np.zeros(len(nodes), dtype=np.int64)
        tolerations = tuple(
            t for t in cycle.pod.tolerations if t.effect in ("", "PreferNoSchedule")
        )
        soft = frozenset({"PreferNoSchedule"})
        for pos in snap.tainted[nodes].nonzero()[0]:
            out[pos] = len(untolerated(snap.nodes[nodes[pos]].taints, tolerations, soft))
        return out

    def normalize(self, cycle: Cycle, nodes: IndexArray, scores: IntArray) -> IntArray:
        return default_normalize(scores, reverse=True)
