"""PodDisruptionBudgets as preemption reads them: selector, disruptions allowed, disrupted pods."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from podium.kube.labels import Selector, parse_label_selector
from podium.kube.objects import PodInfo

__all__ = ["Pdb", "parse_pdb"]


@dataclass(frozen=True, slots=True)
class Pdb:
    """The parts of a PodDisruptionBudget preemption reads."""

    namespace: str
    name: str
    selector: Selector | None  # None: invalid, matches nothing
    disruptions_allowed: int
    disrupted_pods: frozenset[str] = frozenset()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def matches(self, pod: PodInfo) -> bool:
        """A nil or empty selector matches nothing (FilterVictimsWithPDBViolation)."""
        if pod.namespace != self.namespace or self.selector is None or self.selector.empty:
            return False
        return self.selector.matches(pod.labels)


def parse_pdb(body: Mapping[str, Any]) -> Pdb | None:
    meta = body.get("metadata") or {}
    name = str(meta.get("name") or "")
    if not name:
        return None
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    selector = parse_label_selector(spec.get("selector"))
    allowed = status.get("disruptionsAllowed")
    disrupted = status.get("disruptedPods") or {}
    return Pdb(
        namespace=str(meta.get("namespace") or "default"),
        name=name,
        selector=selector if isinstance(selector, Selector) else None,
        disruptions_allowed=allowed if isinstance(allowed, int) else 0,
        disrupted_pods=frozenset(str(k) for k in disrupted)
        if isinstance(disrupted, Mapping)
        else frozenset(),
    )
