"""Per-snapshot indexes that plugins keep across cycles, updated row by row.

``label_codes`` factorises a node label column once per snapshot, so a label
requirement is evaluated once per distinct value rather than once per node;
``RowTracker`` tells a plugin which snapshot rows changed since it last
looked, so its own index is refreshed for those rows only.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from podium.kube.labels import IN, NAME_FIELD, NodeTerm, Requirement
from podium.state.arrays import IntArray, MaskArray

if TYPE_CHECKING:
    from podium.state.snapshot import Snapshot

# -- vectorised evaluation over snapshot rows -----------------------------------
_CACHES: weakref.WeakKeyDictionary[Snapshot, dict[str, Any]] = weakref.WeakKeyDictionary()


def snapshot_cache(snapshot: Snapshot) -> dict[str, Any]:
    """Scratch space that lives as long as one Snapshot object (across cycles)."""
    cache = _CACHES.get(snapshot)
    if cache is None:
        cache = _CACHES[snapshot] = {}
    return cache


class _Refreshed(Protocol):
    def refresh(self, snapshot: Snapshot) -> None: ...


X = TypeVar("X", bound=_Refreshed)


def kept_index(snapshot: Snapshot, key: str, make: type[X]) -> X:
    """The index a plugin keeps for ``snapshot`` under ``key`` (made by ``make()`` on
    first use), brought up to date by its ``refresh``."""
    cache = snapshot_cache(snapshot)
    index = cache.get(key)
    if not isinstance(index, make):
        index = cache[key] = make()
    index.refresh(snapshot)
    return index


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
        """Per-code lookup of ``counts`` by label value; nodes without the label get 0.

        Filled with one vector assignment: values no node has go to a spare last slot,
        which is cut off.
        """
        spare = len(self.uniques) + 1
        table = np.zeros(spare + 1, dtype=np.int64)
        if counts:
            rows = np.fromiter(map(self.lookup.get, counts, repeat(spare)), np.intp, len(counts))
            table[rows] = np.fromiter(counts.values(), np.int64, len(counts))
        return table[:spare]

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

    def renumbered(self, snapshot: Snapshot, column: Sequence[T]) -> bool:
        """Whether the snapshot was rebuilt (rows renumbered) since the last look."""
        return snapshot.names is not self.names or len(column) != len(self.refs)

    def changes(
        self, snapshot: Snapshot, column: Sequence[T]
    ) -> list[tuple[str, T | None, T | None]]:
        """(name, previous, current) for every node whose entry changed; None for absent.

        Between rebuilds only rows the snapshot rewrote since the last look
        are compared (``Snapshot.rows_written_since``), so a cycle costs O(changed).
        """
        names = snapshot.names
        if not self.renumbered(snapshot, column):
            rows = snapshot.rows_written_since(self.version)
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
