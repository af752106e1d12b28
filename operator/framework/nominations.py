"""The pods nominated to nodes by earlier preemptions, as plugins and the pod-group cycle
read them (Go's PodNominator): one protocol below both, so neither imports the other."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from podium.kube.objects import PodInfo

__all__ = ["Nominations"]


class Nominations(Protocol):
    """The pods nominated to nodes by earlier preemptions (Go's PodNominator), as
    DefaultPreemption reads and clears them."""

    @property
    def by_node(self) -> Mapping[str, Mapping[str, PodInfo]]:
        """node name -> uid -> pod."""

    def node_of(self, uid: str) -> str:
        """The node the pod is nominated to in memory, "" for none."""

    def lower_priority_on(self, node: str, priority: int) -> list[PodInfo]:
        """getLowerPriorityNominatedPods."""

    def remove(self, uid: str) -> None:
        """DeleteNominatedPodIfExists."""

    def restore(self, pod: PodInfo) -> None:
        """unreserveAndForget's AddNominatedPod for a pod-group assumption undone: the
        nomination ``assume`` removed comes back."""
