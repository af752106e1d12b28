"""The resources Podium lists and watches, each declared once as a ``Kind``.

Each store in ``state/`` declares the kinds it holds; the watches
(``handlers/watched.py``), the prime and the resync, explain's lister and the test of
the chart's ClusterRole all derive from those declarations, so that a kind cannot be
watched without being relisted after a gap, or granted without being watched.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["NAMESPACES", "NODES", "PODDISRUPTIONBUDGETS", "PODS", "Kind", "object_kinds", "paths"]


@dataclass(frozen=True, slots=True)
class Kind:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def path(self) -> str:
        """The cluster-wide collection, as a LIST or a watch reads it."""
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        return f"{root}/{self.plural}"


def paths(kinds: Iterable[Kind]) -> dict[str, str]:
    """plural -> collection path."""
    return {k.plural: k.path for k in kinds}


def object_kinds(kinds: Iterable[Kind]) -> dict[str, str]:
    """Object kind -> plural, for snapshot files (simulate) and listed objects (explain)."""
    return {k.kind: k.plural for k in kinds}


PODS = Kind("", "v1", "pods", "Pod", namespaced=True)
NODES = Kind("", "v1", "nodes", "Node", namespaced=False)
# Namespace labels, for namespaceSelector terms.
NAMESPACES = Kind("", "v1", "namespaces", "Namespace", namespaced=False)
# Which victims preemption prefers.
PODDISRUPTIONBUDGETS = Kind(
    "policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", namespaced=True
)
