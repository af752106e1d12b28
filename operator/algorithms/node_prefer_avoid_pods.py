"""NodePreferAvoidPods: the 1.8-era priority behind the preferAvoidPods node annotation.

A node annotated ``scheduler.alpha.kubernetes.io/preferAvoidPods`` lists pod
controllers (by kind and uid) it would rather not run. A pod controlled by
one of those ReplicationControllers or ReplicaSets scores 0 there, every
other node scores the maximum; pods with another controller, or none, score
the maximum everywhere, as does a node whose annotation is not valid JSON.
Upstream scored 0..10 with weight 10000 so that it dominated; Podium scores
0..100 and defaults to the largest weight a policy allows, 100. Not a
default plugin (kube-scheduler removed it in v1.24).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from podium.framework.plugin import (
    MAX_NODE_SCORE,
    ClusterEvent,
    Cycle,
    IndexArray,
    IntArray,
    ScorePlugin,
)
from podium.framework.registry import register
from podium.state.rows import RowTracker, same_object, snapshot_cache

if TYPE_CHECKING:
    from podium.kube.objects import NodeInfo, PodInfo
    from podium.state.snapshot import Snapshot

ANNOTATION = "scheduler.alpha.kubernetes.io/preferAvoidPods"
_KINDS = frozenset({"ReplicationController", "ReplicaSet"})


def avoided(node: NodeInfo) -> frozenset[tuple[str, str]]:
    """(kind, uid) of the controllers in the node's preferAvoidPods annotation."""
    meta = node.raw.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    text = annotations.get(ANNOTATION) if isinstance(annotations, Mapping) else None
    if not isinstance(text, str):
        return frozenset()
    try:
        body = json.loads(text)
    except ValueError:
        return frozenset()
    entries = body.get("preferAvoidPods") if isinstance(body, Mapping) else None
    out = set()
    for entry in entries if isinstance(entries, list) else []:
        signature = entry.get("podSignature") if isinstance(entry, Mapping) else None
        controller = signature.get("podController") if isinstance(signature, Mapping) else None
        if isinstance(controller, Mapping):
            out.add((str(controller.get("kind") or ""), str(controller.get("uid") or "")))
    return frozenset(out)


def controller_ref(pod: PodInfo) -> tuple[str, str] | None:
    """GetControllerOf, kept only for ReplicationControllers and ReplicaSets."""
    meta = pod.raw.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    for ref in refs if isinstance(refs, list) else []:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            kind = str(ref.get("kind") or "")
            return (kind, str(ref.get("uid") or "")) if kind in _KINDS else None
    return None


class AvoidIndex:
    """Nodes with a preferAvoidPods annotation; re-read only for changed nodes."""

    def __init__(self) -> None:
        self.tracker: RowTracker[NodeInfo] = RowTracker(same_object)
        self.nodes: dict[str, frozenset[tuple[str, str]]] = {}
        self.stamp: tuple[int, int] | None = None

    def refresh(self, snapshot: Snapshot) -> None:
        stamp = (snapshot.generation, len(snapshot.nodes))
        if stamp == self.stamp:
            return
        self.stamp = stamp
        for name, _, new in self.tracker.changes(snapshot, snapshot.nodes):
            found = avoided(new) if new is not None else frozenset()
            if found:
                self.nodes[name] = found
            else:
                self.nodes.pop(name, None)


@register
class NodePreferAvoidPods(ScorePlugin):
    name = "NodePreferAvoidPods"
    description = (
        "Scores 0 on nodes whose preferAvoidPods annotation names the pod's "
        "ReplicationController or ReplicaSet, the maximum elsewhere."
    )
    default_weight = 100
    events = ClusterEvent(0)  # a score never rejects a node

    def score(self, cycle: Cycle, nodes: IndexArray) -> IntArray:
        out = np.full(len(nodes), MAX_NODE_SCORE, dtype=np.int64)
        ref = controller_ref(cycle.pod)
        if ref is None:
            return out
        cache = snapshot_cache(cycle.snapshot)
        index = cache.get("avoid")
        if not isinstance(index, AvoidIndex):
            index = cache["avoid"] = AvoidIndex()
        index.refresh(cycle.snapshot)
        bad = [cycle.snapshot.index[name] for name, found in index.nodes.items() if ref in found]
        if bad:
            out[np.isin(nodes, np.array(bad, dtype=np.intp))] = 0
        return out
