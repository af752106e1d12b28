"""InterPodAffinity's terms: a pod's four term lists, parsed from its spec.

Below both the plugin and the per-pair tallies its PodIndex keeps
(``affinity_tallies``), which file pods by these terms, so that neither of those
modules imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from podium.kube.labels import NOTHING, Selector, parse_label_selector

if TYPE_CHECKING:
    from podium.kube.objects import PodInfo
    from podium.state.snapshot import Snapshot

__all__ = [
    "AffinityTerm",
    "PodAffinity",
    "WeightedTerm",
    "has_pod_affinity",
    "merge_namespaces",
    "parse_pod_affinity",
    "parse_term",
]


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """fwk.AffinityTerm: which pods (namespaces x selector) and the topology key."""

    namespaces: frozenset[str]
    selector: Selector
    topology_key: str
    ns_selector: Selector = NOTHING

    def matches(self, pod: PodInfo, ns_labels: Mapping[str, str]) -> bool:
        if pod.namespace in self.namespaces or self.ns_selector.matches(ns_labels):
            return self.selector.matches(pod.labels)
        return False

    def describe(self) -> str:
        if self.ns_selector.empty:
            where = "all namespaces"
        else:
            where = (
                "namespace " + ",".join(sorted(self.namespaces))
                if self.namespaces
                else "no namespace"
            )
        return f"[{self.selector.describe()}] ({where})"


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    weight: int
    term: AffinityTerm


@dataclass(frozen=True, slots=True)
class PodAffinity:
    """A pod's four term lists; ``error`` names the lists that did not parse."""

    required: tuple[AffinityTerm, ...] = ()
    required_anti: tuple[AffinityTerm, ...] = ()
    preferred: tuple[WeightedTerm, ...] = ()
    preferred_anti: tuple[WeightedTerm, ...] = ()
    error: str = ""


def parse_term(raw: object, namespace: str) -> AffinityTerm | str:
    """newAffinityTerm: the selector, the namespaces and the namespace selector."""
    if not isinstance(raw, Mapping):
        return f"affinity term must be an object, got {raw!r}"
    selector = parse_label_selector(raw.get("labelSelector"))
    if isinstance(selector, str):
        return selector
    names = raw.get("namespaces") or []
    if not isinstance(names, list):
        return "namespaces must be a list"
    raw_ns_selector = raw.get("namespaceSelector")
    namespaces = frozenset(str(n) for n in names)
    if not names and raw_ns_selector is None:
        namespaces = frozenset((namespace,))
    ns_selector = parse_label_selector(raw_ns_selector)
    if isinstance(ns_selector, str):
        return ns_selector
    return AffinityTerm(namespaces, selector, str(raw.get("topologyKey") or ""), ns_selector)


def _terms(raw: object, namespace: str) -> tuple[tuple[AffinityTerm, ...], str]:
    """GetAffinityTerms: one bad term loses the whole list."""
    out = []
    for item in raw if isinstance(raw, list) else []:
        term = parse_term(item, namespace)
        if isinstance(term, str):
            return (), term
        out.append(term)
    return tuple(out), ""


def _weighted(raw: object, namespace: str) -> tuple[tuple[WeightedTerm, ...], str]:
    out = []
    for item in raw if isinstance(raw, list) else []:
        item = item if isinstance(item, Mapping) else {}
        weight = item.get("weight")
        term = parse_term(item.get("podAffinityTerm"), namespace)
        if isinstance(term, str):
            return (), term
        if isinstance(weight, bool) or not isinstance(weight, int):
            weight = 0
        out.append(WeightedTerm(weight, term))
    return tuple(out), ""


def has_pod_affinity(pod: PodInfo) -> bool:
    return bool(pod.affinity.get("podAffinity") or pod.affinity.get("podAntiAffinity"))


def parse_pod_affinity(pod: PodInfo) -> PodAffinity:
    """framework.NewPodInfo's term lists for one pod."""
    if not has_pod_affinity(pod):
        return PodAffinity()
    ns = pod.namespace

    def part(kind: str, when: str) -> object:
        section = pod.affinity.get(kind)
        return section.get(when) if isinstance(section, Mapping) else None

    required, e1 = _terms(part("podAffinity", "requiredDuringSchedulingIgnoredDuringExecution"), ns)
    anti, e2 = _terms(part("podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution"), ns)
    preferred, e3 = _weighted(
        part("podAffinity", "preferredDuringSchedulingIgnoredDuringExecution"), ns
    )
    preferred_anti, e4 = _weighted(
        part("podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution"), ns
    )
    errors = [
        f"{what}: {err}"
        for what, err in (
            ("requiredAffinityTerms", e1),
            ("requiredAntiAffinityTerms", e2),
            ("preferredAffinityTerms", e3),
            ("preferredAntiAffinityTerms", e4),
        )
        if err
    ]
    error = errors[0] if len(errors) == 1 else ("[" + ", ".join(errors) + "]" if errors else "")
    return PodAffinity(required, anti, preferred, preferred_anti, error)


def merge_namespaces(term: AffinityTerm, snapshot: Snapshot) -> AffinityTerm:
    """mergeAffinityTermNamespacesIfNotEmpty: resolve a namespace selector to names."""
    if term.ns_selector.empty:
        return term
    chosen = {
        ns for ns, labels in snapshot.namespace_labels.items() if term.ns_selector.matches(labels)
    }
    return replace(term, namespaces=term.namespaces | chosen, ns_selector=NOTHING)
