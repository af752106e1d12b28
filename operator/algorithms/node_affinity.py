"""NodeAffinity: nodeSelector and required node affinity filter; preferred terms score.

Matching follows component-helpers ``nodeaffinity`` (``podium.kube.labels``):
nodeSelector entries must all equal the node's labels; required terms are
ORed, the expressions and fields inside a term ANDed; an empty term (no
expressions, no fields) is dropped and so selects nothing; a term that does
not parse never matches and never raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from podium.framework import signers
from podium.framework.plugin import (
    ClusterEvent,
    Cycle,
    FilterPlugin,
    IndexArray,
    IntArray,
    MaskArray,
    PreFilterResult,
    Rejection,
    ScorePlugin,
    SignFragments,
    default_normalize,
)
from podium.framework.registry import register
from podium.kube.labels import (
    IN,
    NAME_FIELD,
    NodeTerm,
    Requirement,
    parse_node_term,
    parse_node_terms,
    parse_preferred,
    selector_from_set,
)
from podium.state.rows import requirement_mask, term_mask, terms_mask

if TYPE_CHECKING:
    from podium.kube.objects import NodeInfo
    from podium.state.snapshot import Snapshot

REASON = "node(s) didn't match Pod's node affinity/selector"
REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
REASON_CONFLICT = "pod affinity terms conflict"


@dataclass(frozen=True, slots=True)
class RequiredNodeAffinity:
    """nodeaffinity.RequiredNodeAffinity: nodeSelector AND (required terms, ORed)."""

    selector: tuple[Requirement, ...] = ()
    terms: tuple[NodeTerm, ...] | None = None

    @property
    def trivial(self) -> bool:
        return not self.selector and self.terms is None

    def selector_matches(self, node: NodeInfo) -> bool:
        return all(r.matches(node.labels) for r in self.selector)

    def matches(self, node: NodeInfo) -> bool:
        if not self.selector_matches(node):
            return False
        return self.terms is None or any(t.matches(node) for t in self.terms)

    def mask(self, snapshot: Snapshot) -> MaskArray:
        mask = np.ones(len(snapshot), dtype=bool)
        for requirement in self.selector:
            mask &= requirement_mask(snapshot, requirement)
        if self.terms is not None:
            mask &= terms_mask(snapshot, self.terms)
        return mask

    def explain(self, node: NodeInfo) -> str:
        parts = [
            _explain_requirement(r, node.labels, "nodeSelector")
            for r in self.selector
            if not r.matches(node.labels)
        ]
        if self.terms is not None and not any(t.matches(node) for t in self.terms):
            if not self.terms:
                parts.append("required node affinity has no usable terms")
            for i, term in enumerate(self.terms):
                parts.append(f"term {i}: " + _explain_term(term, node))
        return "; ".join(parts)


def _required_raw(affinity: Mapping[str, Any]) -> Mapping[str, Any] | None:
    node_affinity = affinity.get("nodeAffinity")
    if not isinstance(node_affinity, Mapping):
        return None
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return None
    return required if isinstance(required, Mapping) else {}


def required_node_affinity(cycle: Cycle) -> RequiredNodeAffinity:
    """The pod's parsed nodeSelector and required affinity, once per cycle."""
    cached = cycle.state.get("NodeAffinity/required")
    if isinstance(cached, RequiredNodeAffinity):
        return cached
    pod = cycle.pod
    required = _required_raw(pod.affinity)
    parsed = RequiredNodeAffinity(
        selector=selector_from_set(pod.node_selector).requirements or (),
        terms=None if required is None else parse_node_terms(required.get("nodeSelectorTerms")),
    )
    cycle.state["NodeAffinity/required"] = parsed
    return parsed


def required_node_affinity_mask(cycle: Cycle) -> MaskArray:
    """Over every snapshot row: does the pod's required node affinity match the node."""
    cached = cycle.state.get("NodeAffinity/requiredMask")
    if cached is None:
        required = required_node_affinity(cycle)
        if required.trivial:
            cached = np.ones(len(cycle.snapshot), dtype=bool)
        else:
            cached = required.mask(cycle.snapshot)
        cycle.state["NodeAffinity/requiredMask"] = cached
    mask: MaskArray = cached
    return mask


def _explain_requirement(r: Requirement, labels: Mapping[str, str], what: str) -> str:
    value = labels.get(r.key)
    if value is None:
        return f"node has no label {r.key} ({what} wants {r.describe()})"
    if r.op == IN and len(r.values) == 1:
        return f"node label {r.key}={value}, {what} wants {next(iter(r.values))}"
    return f"node label {r.key}={value} does not satisfy {r.describe()}"


def _explain_term(term: NodeTerm, node: NodeInfo) -> str:
    if term.error:
        return f"invalid ({term.error})"
    parts = [
        _explain_requirement(r, node.labels, "affinity")
        for r in term.labels or ()
        if not r.matches(node.labels)
    ]
    for key, op, value in term.fields or ():
        actual = node.name if key == NAME_FIELD else ""
        if (actual == value) != (op == IN):
            parts.append(f"field {key}={actual!r} {'is not' if op == IN else 'is'} {value!r}")
    return ", ".join(parts)


def prefilter_node_names(terms: object) -> frozenset[str] | bool | None:
    """NodeAffinity PreFilter: the node names metadata.name In fields pin the pod to.

    None when every node stays eligible, False when the terms conflict (each
    term pins to names, and the union is empty).
    """
    if not isinstance(terms, list) or not terms:
        return None
    names: set[str] | None = None
    for term in terms:
        fields = term.get("matchFields") if isinstance(term, Mapping) else None
        term_names: set[str] | None = None
        for expr in fields if isinstance(fields, list) else []:
            if not isinstance(expr, Mapping):
                continue
            if expr.get("key") == NAME_FIELD and expr.get("operator") == IN:
                values = expr.get("values")
                found = (
                    {v for v in values if isinstance(v, str)} if isinstance(values, list) else set()
                )
                term_names = found if term_names is None else term_names & found
        if term_names is None:
            return None
        names = term_names if names is None else names | term_names
    if names is not None and not names:
        return False
    return frozenset(names) if names else None


# -- the plugin --------------------------------------------------------------------
def _added_affinity(
    args: Mapping[str, Any],
) -> tuple[tuple[NodeTerm, ...] | None, tuple[tuple[int, NodeTerm], ...]]:
    """NodeAffinityArgs.addedAffinity; a term that does not parse is a configuration error."""
    added = args.get("addedAffinity")
    if added is None:
        return None, ()
    if not isinstance(added, Mapping):
        raise ValueError("nodeAffinity.addedAffinity must be an object")
    required: tuple[NodeTerm, ...] | None = None
    raw_required = added.get("requiredDuringSchedulingIgnoredDuringExecution")
    if raw_required is not None:
        raw_terms = (
            raw_required.get("nodeSelectorTerms") if isinstance(raw_required, Mapping) else None
        )
        required = parse_node_terms(raw_terms)
        bad = [t.error for t in required if t.error]
        if bad:
            raise ValueError(
                f"addedAffinity.requiredDuringSchedulingIgnoredDuringExecution: {bad[0]}"
            )
    raw_preferred = added.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    if not isinstance(raw_preferred, list):
        raise ValueError(
            "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution must be a list"
        )
    for item in raw_preferred:
        preference = item.get("preference") if isinstance(item, Mapping) else item
        term = parse_node_term(preference or {})
        if term is not None and term.error:
            raise ValueError(
                f"addedAffinity.preferredDuringSchedulingIgnoredDuringExecution: {term.error}"
            )
    return required, parse_preferred(raw_preferred)


@register
class NodeAffinity(FilterPlugin, ScorePlugin):
    name = "NodeAffinity"
    description = (
        "Filter: the node must match the pod's nodeSelector and required node affinity. "
        "Score: the sum of the weights of the preferred terms the node matches."
    )
    default_weight = 2
    events = ClusterEvent.NODE_ADD | ClusterEvent.NODE_LABEL

    def sign_pod(self, cycle: Cycle) -> SignFragments | None:
        """NodeAffinity.SignPod: the node affinity terms and the nodeSelector."""
        pod = cycle.pod
        return {
            signers.NODE_AFFINITY: signers.node_affinity_signer(pod),
            signers.NODE_SELECTOR: pod.node_selector,
        }

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.added_required, self.added_preferred = _added_affinity(self.args)

    def pre_filter(self, cycle: Cycle) -> PreFilterResult | None:
        required = _required_raw(cycle.pod.affinity)
        if required is None:
            return None
        names = prefilter_node_names(required.get("nodeSelectorTerms"))
        if names is False:
            return PreFilterResult(reject=REASON_CONFLICT, unresolvable=True)
        if isinstance(names, frozenset):
            return PreFilterResult(node_names=names)
        return None

    def _added_mask(self, cycle: Cycle) -> MaskArray | None:
        if self.added_required is None:
            return None
        cached = cycle.state.get("NodeAffinity/addedMask")
        if cached is None:
            cached = cycle.state["NodeAffinity/addedMask"] = terms_mask(
                cycle.snapshot, self.added_required
            )
        mask: MaskArray = cached
        return mask

    def filter(self, cycle: Cycle, nodes: IndexArray) -> list[Rejection]:
        out: list[Rejection] = []
        rejected = np.zeros(len(nodes), dtype=bool)
        added = self._added_mask(cycle)
        if added is not None:
            rejected = ~added[nodes]
            if rejected.any():
                out.append(Rejection(REASON_ENFORCED, rejected, unresolvable=True))
        if not required_node_affinity(cycle).trivial:
            mask = ~required_node_affinity_mask(cycle)[nodes] & ~rejected
            if mask.any():
                out.append(Rejection(REASON, mask, unresolvable=True))
        return out

    def explain(self, cycle: Cycle, node: int) -> str:
        info = cycle.snapshot.nodes[node]
        if self.added_required is not None and not any(
            t.matches(info) for t in self.added_required
        ):
            return "node does not match the scheduler's addedAffinity"
        return required_node_affinity(cycle).explain(info)

    def _preferred(self, cycle: Cycle) -> tuple[tuple[int, NodeTerm], ...]:
        cached = cycle.state.get("NodeAffinity/preferred")
        if cached is None:
            node_affinity = cycle.pod.affinity.get("nodeAffinity")
            raw = (
                node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution")
                if isinstance(node_affinity, Mapping)
                else None
            )
            cached = cycle.state["NodeAffinity/preferred"] = self.added_preferred + parse_preferred(
                raw
            )
        terms: tuple[tuple[int, NodeTerm], ...] = cached
        return terms

    def pre_score(self, cycle: Cycle, nodes: IndexArray) -> bool:
        return bool(self._preferred(cycle))

    def score(self, cycle: Cycle, nodes: IndexArray) -> IntArray:
        out = np.zeros(len(nodes), dtype=np.int64)
        for weight, term in self._preferred(cycle):
            out += np.where(term_mask(cycle.snapshot, term)[nodes], weight, 0)
        return out

    def normalize(self, cycle: Cycle, nodes: IndexArray, scores: IntArray) -> IntArray:
        return default_normalize(scores, reverse=False)
