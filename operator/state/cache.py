"""The scheduler's view of node usage: bound pods plus in-flight assumptions.

Follows kube-scheduler's Cache: a pod chosen for a node is *assumed* there at
once, so the next cycle already sees the space taken, and stays assumed until
the watch confirms the binding (``add_pod``) or the bind definitively fails
(``forget_pod``). There is no timer that expires an assumption: kube-scheduler
#106361 showed that such a timer double-books nodes when binds are slow.

Every change bumps a global generation and stamps the touched node with it,
so ``Snapshot.update`` copies only the nodes that changed
(UpdateNodeNameToInfoMap).
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import dataclass, field

from podium.kube.objects import HostPort, NodeInfo, PodInfo, usage_changed

__all__ = ["Cache", "CacheError", "NodeState", "PodState"]


class CacheError(RuntimeError):
    """An impossible transition, such as assuming a pod twice."""


@dataclass(slots=True)
class NodeState:
    """Usage of one node; ``node`` is None after a delete while pods still point at it."""

    name: str
    node: NodeInfo | None = None
    pods: dict[str, PodInfo] = field(default_factory=dict)
    requested: Counter[str] = field(default_factory=Counter)
    nonzero_cpu: int = 0
    nonzero_memory: int = 0
    ports: Counter[HostPort] = field(default_factory=Counter)
    generation: int = 0

    def add(self, pod: PodInfo) -> None:
        self.pods[pod.uid] = pod
        self.requested.update(pod.requests)
        self.nonzero_cpu += pod.nonzero_cpu
        self.nonzero_memory += pod.nonzero_memory
        self.ports.update(pod.host_ports)

    def remove(self, pod: PodInfo) -> None:
        del self.pods[pod.uid]
        self.requested.subtract(pod.requests)
        self.nonzero_cpu -= pod.nonzero_cpu
        self.nonzero_memory -= pod.nonzero_memory
        self.ports.subtract(pod.host_ports)
        self.ports = +self.ports
        self.requested = +self.requested


@dataclass(slots=True)
class PodState:
    pod: PodInfo
    node: str
    assumed: bool


class Cache:
    def __init__(self) -> None:
        self.nodes: dict[str, NodeState] = {}
        self.pods: dict[str, PodState] = {}
        self.generation = 0
        # Bumped when the set of nodes changes, so snapshots know to rebuild.
        self.membership = 0
        # Most recently changed node last; Snapshot.update walks it backwards.
        self.changed: OrderedDict[str, int] = OrderedDict()

    # -- bookkeeping -------------------------------------------------------
    def _touch(self, state: NodeState) -> None:
        self.generation += 1
        state.generation = self.generation
        self.changed[state.name] = self.generation
        self.changed.move_to_end(state.name)

    def _state(self, name: str) -> NodeState:
        state = self.nodes.get(name)
        if state is None:
            state = self.nodes[name] = NodeState(name)
        return state

    def _drop_if_empty(self, state: NodeState) -> None:
        if state.node is None and not state.pods:
            self.nodes.pop(state.name, None)
            self.changed.pop(state.name, None)

    # -- nodes -------------------------------------------------------------
    def add_node(self, node: NodeInfo) -> None:
        state = self._state(node.name)
        if state.node is None:
            self.membership += 1
        state.node = node
        self._touch(state)

    update_node = add_node

    def remove_node(self, name: str) -> list[PodInfo]:
        """Forget a node; returns the pods still assumed there so they can be requeued."""
        state = self.nodes.get(name)
        if state is None or state.node is None:
            return []
        state.node = None
        self.membership += 1
        self._touch(state)
        orphans = [p for p in list(state.pods.values()) if self.pods[p.uid].assumed]
        for pod in orphans:
            self._remove(pod.uid)
        self._drop_if_empty(state)
        return orphans

    # -- pods --------------------------------------------------------------
    def _place(self, pod: PodInfo, node: str, assumed: bool) -> None:
        state = self._state(node)
        state.add(pod)
        self.pods[pod.uid] = PodState(pod, node, assumed)
        self._touch(state)

    def _remove(self, uid: str) -> PodState | None:
        current = self.pods.pop(uid, None)
        if current is None:
            return None
        state = self.nodes[current.node]
        state.remove(current.pod)
        self._touch(state)
        self._drop_if_empty(state)
        return current

    def assume_pod(self, pod: PodInfo, node: str) -> None:
        if pod.uid in self.pods:
            raise CacheError(f"pod {pod.key} is already in the cache")
        self._place(pod, node, assumed=True)

    def forget_pod(self, pod: PodInfo) -> None:
        """Release an assumption after a bind that certainly did not happen."""
        current = self.pods.get(pod.uid)
        if current is not None and current.assumed:
            self._remove(pod.uid)

    def is_assumed(self, uid: str) -> bool:
        current = self.pods.get(uid)
        return current is not None and current.assumed

    def add_pod(self, pod: PodInfo) -> None:
        """A bound, non-terminal pod seen by the watch; confirms an assumption."""
        current = self.pods.get(pod.uid)
        if current is not None:
            if current.node == pod.node_name and not usage_changed(current.pod, pod):
                current.pod = pod
                current.assumed = False
                self.nodes[current.node].pods[pod.uid] = pod
                return
            self._remove(pod.uid)
        self._place(pod, pod.node_name, assumed=False)

    def remove_pod(self, uid: str) -> PodInfo | None:
        current = self._remove(uid)
        return current.pod if current is not None else None

    # -- views -------------------------------------------------------------
    def assumed_pods(self) -> list[PodState]:
        return [s for s in self.pods.values() if s.assumed]

    def requested_on(self, node: str) -> Counter[str]:
        state = self.nodes.get(node)
        return Counter(state.requested) if state is not None else Counter()
