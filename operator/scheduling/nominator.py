"""Which pending pod waits for which node after preempting there (PodNominator)."""

from __future__ import annotations

from podium.kube.objects import PodInfo

__all__ = ["Nominator"]


class Nominator:
    """In-memory nominations (PodNominator): which pending pod waits for which node."""

    def __init__(self) -> None:
        self.by_uid: dict[str, tuple[PodInfo, str]] = {}
        self.by_node: dict[str, dict[str, PodInfo]] = {}

    def __len__(self) -> int:
        return len(self.by_uid)

    def node_of(self, uid: str) -> str:
        entry = self.by_uid.get(uid)
        return entry[1] if entry else ""

    def add(self, pod: PodInfo, node: str) -> None:
        self.remove(pod.uid)
        if not node:
            return
        self.by_uid[pod.uid] = (pod, node)
        self.by_node.setdefault(node, {})[pod.uid] = pod

    def update(self, pod: PodInfo) -> None:
        """A pending pod's new version: keep an in-memory nomination the API has not echoed yet."""
        node = pod.nominated_node or self.node_of(pod.uid)
        if node:
            self.add(pod, node)

    def remove(self, uid: str) -> None:
        entry = self.by_uid.pop(uid, None)
        if entry is None:
            return
        pods = self.by_node.get(entry[1])
        if pods is not None:
            pods.pop(uid, None)
            if not pods:
                del self.by_node[entry[1]]

    def restore(self, pod: PodInfo) -> None:
        """unreserveAndForget: the node the pod's status names, if any (ModeOverride)."""
        if pod.nominated_node:
            self.add(pod, pod.nominated_node)

    def lower_priority_on(self, node: str, priority: int) -> list[PodInfo]:
        """getLowerPriorityNominatedPods."""
        return [p for p in self.by_node.get(node, {}).values() if p.priority < priority]
