"""NodeAffinity: nodeSelector and required node affinity filter; preferred terms score.

Matching follows component-helpers ``nodeaffinity``: nodeSelector entries
must all equal the node's labels; required terms are ORed, the expressions
and fields inside a term ANDed; an empty term (no expressions, no fields) is
dropped and so selects nothing; a term that does not parse (unknown
operator, Gt with a non-integer, In without values, an invalid key) never
matches and never raises.

This module also holds the label-selector primitives that InterPodAffinity
and PodTopologySpread share: ``Requirement`` and ``Selector`` (labels.Selector
with the validation of labels.NewRequirement), and ``label_codes``, which
factorises a node label column once per snapshot so that a requirement is
evaluated once per distinct label value rather than once per node.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

from podium.algorithms import register
from podium.framework import (
    ClusterEvent,
    Cycle,
    FilterPlugin,
    IndexArray,
    IntArray,
    MaskArray,
    PreFilterResult,
    Rejection,
    ScorePlugin,
    default_normalize,
)

if TYPE_CHECKING:
    from podium.objects import NodeInfo
    from podium.snapshot import Snapshot

REASON = "node(s) didn't match Pod's node affinity/selector"
REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
REASON_CONFLICT = "pod affinity terms conflict"
NAME_FIELD = "metadata.name"

IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT = "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"
LABEL_SELECTOR_OPS = frozenset({IN, NOT_IN, EXISTS, DOES_NOT_EXIST})
NODE_SELECTOR_OPS = LABEL_SELECTOR_OPS | {GT, LT}

# -- label validation (apimachinery validate/content) --------------------------
_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_DECIMAL = re.compile(r"[+-]?[0-9]+")
_INT64 = 2**63


def label_key_error(key: str) -> str:
    """IsLabelKey: an optional DNS-subdomain prefix and '/', then a name of 63 at most."""
    parts = key.split("/")
    if len(parts) > 2:
        return f"invalid label key {key!r}: at most one '/'"
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix or len(prefix) > 253 or not _SUBDOMAIN.fullmatch(prefix):
            return f"invalid label key {key!r}: bad prefix"
    name = parts[-1]
    if not name or len(name) > 63 or not _NAME.fullmatch(name):
        return f"invalid label key {key!r}"
    return ""


def label_value_error(value: str) -> str:
    if len(value) > 63 or not _VALUE.fullmatch(value):
        return f"invalid label value {value!r}"
    return ""


def parse_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64); None where Go returns an error."""
    if not _DECIMAL.fullmatch(text):
        return None
    number = int(text)
    return number if -_INT64 <= number < _INT64 else None


# -- requirements and selectors ------------------------------------------------
@dataclass(frozen=True, slots=True)
class Requirement:
    """One parsed labels.Requirement; Equals is stored as In with one value."""

    key: str
    op: str
    values: frozenset[str] = frozenset()
    bound: int = 0

    def matches_value(self, present: bool, value: str) -> bool:
        op = self.op
        if op == IN:
            return present and value in self.values
        if op == NOT_IN:
            return not present or value not in self.values
        if op == EXISTS:
            return present
        if op == DOES_NOT_EXIST:
            return not present
        if not present:
            return False
        number = parse_int64(value)
        if number is None:
            return False
        return number > self.bound if op == GT else number < self.bound

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        return self.matches_value(value is not None, value or "")

    def describe(self) -> str:
        if self.op in (EXISTS, DOES_NOT_EXIST):
            return f"{self.key} {self.op}"
        if self.op in (GT, LT):
            return f"{self.key} {self.op} {self.bound}"
        shown = sorted(self.values)
        more = f", ... ({len(shown)} values)" if len(shown) > 5 else ""
        return f"{self.key} {'in' if self.op == IN else 'not in'} [{', '.join(shown[:5])}{more}]"


def new_requirement(key: object, op: str, values: object) -> Requirement | str:
    """labels.NewRequirement: a Requirement, or the reason it is invalid."""
    if not isinstance(key, str):
        return f"label key must be a string, got {key!r}"
    if values is None:
        values = []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return f"values of {key!r} must be a list of strings"
    errors = [label_key_error(key)]
    bound = 0
    if op in (IN, NOT_IN):
        if not values:
            errors.append(f"{key}: values set can't be empty for 'In', 'NotIn'")
    elif op in (EXISTS, DOES_NOT_EXIST):
        if values:
            errors.append(f"{key}: values set must be empty for 'Exists', 'DoesNotExist'")
    elif op in (GT, LT):
        if len(values) != 1:
            errors.append(f"{key}: exactly one value is required for 'Gt', 'Lt'")
        for value in values:
            number = parse_int64(value)
            if number is None:
                errors.append(f"{key}: value {value!r} must be an integer for 'Gt', 'Lt'")
            else:
                bound = number
    else:
        errors.append(f"{key}: operator {op!r} is not supported")
    errors.extend(label_value_error(v) for v in values)
    problems = [e for e in errors if e]
    if problems:
        return "; ".join(problems)
    return Requirement(key, op, frozenset(values), bound)


@dataclass(frozen=True, slots=True)
class Selector:
    """labels.Selector: ``requirements`` ANDed; None is labels.Nothing()."""

    requirements: tuple[Requirement, ...] | None = ()

    @property
    def empty(self) -> bool:
        """Selector.Empty(): true for Everything only (Nothing is not empty)."""
        return self.requirements == ()

    @property
    def nothing(self) -> bool:
        return self.requirements is None

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.requirements is None:
            return False
        return all(r.matches(labels) for r in self.requirements)

    def describe(self) -> str:
        if self.requirements is None:
            return "<nothing>"
        return ", ".join(r.describe() for r in self.requirements) or "<everything>"


EVERYTHING = Selector(())
NOTHING = Selector(None)


def selector_from_set(labels: Mapping[str, str]) -> Selector:
    """labels.SelectorFromSet: equality on every entry, without validation."""
    return Selector(tuple(Requirement(k, IN, frozenset((v,))) for k, v in sorted(labels.items())))


def parse_label_selector(raw: object) -> Selector | str:
    """metav1.LabelSelectorAsSelector: nil selects nothing, {} selects everything."""
    if raw is None:
        return NOTHING
    if not isinstance(raw, Mapping):
        return f"label selector must be an object, got {raw!r}"
    match_labels = raw.get("matchLabels") or {}
    expressions = raw.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping) or not isinstance(expressions, list):
        return "matchLabels must be an object and matchExpressions a list"
    if not match_labels and not expressions:
        return EVERYTHING
    requirements: list[Requirement] = []
    for key, value in match_labels.items():
        parsed = new_requirement(key, IN, [value])
        if isinstance(parsed, str):
            return parsed
        requirements.append(parsed)
    for expr in expressions:
        if not isinstance(expr, Mapping):
            return f"match expression must be an object, got {expr!r}"
        op = expr.get("operator")
        if op not in LABEL_SELECTOR_OPS:
            return f"{op!r} is not a valid label selector operator"
        parsed = new_requirement(expr.get("key"), str(op), expr.get("values"))
        if isinstance(parsed, str):
            return parsed
        requirements.append(parsed)
    return Selector(tuple(requirements))


# -- node selector terms ---------------------------------------------------------
@dataclass(frozen=True, slots=True)
class NodeTerm:
    """A parsed NodeSelectorTerm; ``error`` makes it match no node."""

    labels: tuple[Requirement, ...] | None = None
    fields: tuple[tuple[str, str, str], ...] | None = None
    error: str = ""

    def matches(self, node: NodeInfo) -> bool:
        if self.error:
            return False
        if self.labels is not None and not all(r.matches(node.labels) for r in self.labels):
            return False
        if self.fields is not None and node.name:
            for key, op, value in self.fields:
                actual = node.name if key == NAME_FIELD else ""
                if (actual == value) != (op == IN):
                    return False
        return True

    def describe(self) -> str:
        if self.error:
            return f"invalid term ({self.error})"
        parts = [r.describe() for r in self.labels or ()]
        parts += [f"{k} {'=' if op == IN else '!='} {v}" for k, op, v in self.fields or ()]
        return " and ".join(parts)


def parse_node_term(raw: object) -> NodeTerm | None:
    """newNodeSelectorTerm; None for an empty term, which kube-scheduler drops."""
    if not isinstance(raw, Mapping):
        return NodeTerm(error=f"term must be an object, got {raw!r}")
    expressions = raw.get("matchExpressions") or []
    fields = raw.get("matchFields") or []
    if not isinstance(expressions, list) or not isinstance(fields, list):
        return NodeTerm(error="matchExpressions and matchFields must be lists")
    if not expressions and not fields:
        return None
    errors: list[str] = []
    labels: list[Requirement] = []
    for expr in expressions:
        expr = expr if isinstance(expr, Mapping) else {}
        op = expr.get("operator")
        if op not in NODE_SELECTOR_OPS:
            errors.append(f"operator {op!r} is not supported")
            continue
        parsed = new_requirement(expr.get("key"), str(op), expr.get("values"))
        if isinstance(parsed, str):
            errors.append(parsed)
        else:
            labels.append(parsed)
    field_reqs: list[tuple[str, str, str]] = []
    for expr in fields:
        expr = expr if isinstance(expr, Mapping) else {}
        op, values = expr.get("operator"), expr.get("values")
        if op not in (IN, NOT_IN):
            errors.append(f"field operator {op!r} is not supported")
        elif not isinstance(values, list) or len(values) != 1 or not isinstance(values[0], str):
            errors.append(f"field {expr.get('key')!r}: values must have one element")
        else:
            field_reqs.append((str(expr.get("key") or ""), str(op), values[0]))
    if errors:
        return NodeTerm(error="; ".join(errors))
    return NodeTerm(
        labels=tuple(labels) if expressions else None,
        fields=tuple(field_reqs) if fields else None,
    )


def parse_node_terms(raw: object) -> tuple[NodeTerm, ...]:
    terms = raw if isinstance(raw, list) else []
    return tuple(t for t in (parse_node_term(r) for r in terms) if t is not None)


def parse_preferred(raw: object) -> tuple[tuple[int, NodeTerm], ...]:
    """PreferredSchedulingTerms; weight-0, empty and invalid terms are left out."""
    out: list[tuple[int, NodeTerm]] = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, Mapping):
            continue
        weight = item.get("weight")
        if isinstance(weight, bool) or not isinstance(weight, int) or weight == 0:
            continue
        term = parse_node_term(item.get("preference") or {})
        if term is not None and not term.error:
            out.append((weight, term))
    return tuple(out)


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


# -- vectorised evaluation over snapshot rows -----------------------------------
_CACHES: weakref.WeakKeyDictionary[Snapshot, dict[str, Any]] = weakref.WeakKeyDictionary()


def snapshot_cache(snapshot: Snapshot) -> dict[str, Any]:
    """Scratch space that lives as long as one Snapshot object (across cycles)."""
    cache = _CACHES.get(snapshot)
    if cache is None:
        cache = _CACHES[snapshot] = {}
    return cache


@dataclass(frozen=True, slots=True)
class LabelCodes:
    """One node label column factorised: ``codes[row]`` indexes ``uniques``, -1 if absent."""

    codes: NDArray[np.intp]
    uniques: list[str]
    lookup: dict[str, int]

    def table(self, fn: Callable[[str], bool], absent: bool) -> MaskArray:
        """A truth value per distinct label value, the last slot for nodes without it."""
        table = np.fromiter((fn(u) for u in self.uniques), dtype=bool, count=len(self.uniques))
        return np.append(table, absent)

    def count_table(self, counts: Mapping[str, int]) -> IntArray:
        """Per-code lookup of ``counts`` by label value; nodes without the label get 0."""
        table = np.zeros(len(self.uniques) + 1, dtype=np.int64)
        for value, count in counts.items():
            code = self.lookup.get(value)
            if code is not None:
                table[code] = count
        return table

    def value_codes(self) -> NDArray[np.intp]:
        """Codes where a missing label counts as the value "" (Go's ``node.Labels[key]``)."""
        empty = self.lookup.get("", len(self.uniques))
        return np.where(self.codes < 0, empty, self.codes)


def label_codes(snapshot: Snapshot, key: str) -> LabelCodes:
    """Factorise ``snapshot.label_column(key)``; cached until that column is rebuilt."""
    values, present = snapshot.label_column(key)
    cache: dict[str, tuple[object, LabelCodes]] = snapshot_cache(snapshot).setdefault("codes", {})
    hit = cache.get(key)
    if hit is not None and hit[0] is values:
        return hit[1]
    lookup: dict[str, int] = {}
    codes = np.fromiter(
        (
            lookup.setdefault(v, len(lookup)) if p else -1
            for v, p in zip(values.tolist(), present.tolist(), strict=True)
        ),
        dtype=np.intp,
        count=len(values),
    )
    result = LabelCodes(codes, list(lookup), lookup)
    cache[key] = (values, result)
    return result


def requirement_mask(snapshot: Snapshot, requirement: Requirement) -> MaskArray:
    """Requirement.Matches over every node, evaluated once per distinct label value."""
    codes = label_codes(snapshot, requirement.key)
    table = codes.table(
        lambda v: requirement.matches_value(True, v), requirement.matches_value(False, "")
    )
    mask: MaskArray = table[codes.codes]
    return mask


def term_mask(snapshot: Snapshot, term: NodeTerm) -> MaskArray:
    n = len(snapshot)
    if term.error:
        return np.zeros(n, dtype=bool)
    mask = np.ones(n, dtype=bool)
    for requirement in term.labels or ():
        mask &= requirement_mask(snapshot, requirement)
    for key, op, value in term.fields or ():
        equal = np.zeros(n, dtype=bool)
        if key == NAME_FIELD:
            row = snapshot.index.get(value)
            if row is not None:
                equal[row] = True
        elif value == "":
            equal[:] = True
        mask &= equal if op == IN else ~equal
    return mask


def terms_mask(snapshot: Snapshot, terms: Iterable[NodeTerm]) -> MaskArray:
    mask = np.zeros(len(snapshot), dtype=bool)
    for term in terms:
        mask |= term_mask(snapshot, term)
    return mask


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


T = TypeVar("T")


def same_pods(old: Mapping[str, object], new: Mapping[str, object]) -> bool:
    """Two rows of ``Snapshot.pods`` hold the very same PodInfo objects."""
    return old is new or (len(old) == len(new) and all(old.get(k) is v for k, v in new.items()))


def same_object(old: object, new: object) -> bool:
    return old is new


class RowTracker(Generic[T]):
    """Which nodes of a snapshot column (``nodes`` or ``pods``) changed since the last look.

    Keyed by node name, so a snapshot rebuild (nodes joining or leaving,
    which renumbers rows and copies every row) costs only an identity
    comparison per row, not a re-index. Holds strong references to what it
    saw, so ids are never recycled under it.
    """

    def __init__(self, same: Callable[[T, T], bool]) -> None:
        self.same = same
        self.by_name: dict[str, T] = {}
        self.names: list[str] | None = None
        self.refs: list[T] = []
        self.version = -1

    def changes(
        self, snapshot: Snapshot, column: Sequence[T]
    ) -> list[tuple[str, T | None, T | None]]:
        """(name, previous, current) for every node whose entry changed; None for absent.

        Between rebuilds only rows the snapshot rewrote since the last look
        are compared (``Snapshot.row_version``), so a cycle costs O(changed).
        """
        names = snapshot.names
        if names is self.names and len(column) == len(self.refs):
            rows = np.flatnonzero(snapshot.row_version > self.version).tolist()
            gone: list[str] = []
        else:
            rows = list(range(len(column)))
            present = set(names)
            gone = [name for name in self.by_name if name not in present]
        out: list[tuple[str, T | None, T | None]] = []
        for row in rows:
            name, current = names[row], column[row]
            previous = self.by_name.get(name)
            self.by_name[name] = current
            if previous is None or not self.same(previous, current):
                out.append((name, previous, current))
        for name in gone:
            out.append((name, self.by_name.pop(name), None))
        if names is not self.names or len(column) != len(self.refs):
            self.refs = list(column)
        else:
            for row in rows:
                self.refs[row] = column[row]
        self.names, self.version = names, snapshot.version
        return out
