"""Label selectors and node selector terms, as apimachinery and component-helpers define them.

``Requirement`` and ``Selector`` are labels.Selector with the validation of
labels.NewRequirement; ``NodeTerm`` is a NodeSelectorTerm as nodeaffinity
parses it. A term that does not parse (unknown operator, Gt with a
non-integer, In without values, an invalid key) matches no node and never
raises. NodeAffinity, InterPodAffinity, PodTopologySpread, the volume plugins,
preemption's PodDisruptionBudgets and the default-spreading selectors all
share these.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from podium.kube.objects import NodeInfo

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
