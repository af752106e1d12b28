"""Per topology pair tallies that InterPodAffinity's PodIndex keeps across cycles.

A cycle of InterPodAffinity sums, per topology pair (topology key, node label
value), the existing pods that carry some term list or match some terms.
These tallies hold those sums and are updated as pods and node labels change,
so a cycle reads them in O(distinct term lists + topology pairs), not O(pods).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from podium.algorithms.affinity_terms import AffinityTerm, PodAffinity
    from podium.kube.objects import NodeInfo, PodInfo

# Pods per topology pair: topology key -> node label value -> count. Neither
# empty Counters nor zero counts are kept, so "no pair" is an empty dict.
KeyCounts = dict[str, Counter[str]]


def same_labels(old: NodeInfo, new: NodeInfo) -> bool:
    """RowTracker's test for nodes: only a label change moves pods between topology pairs."""
    return old is new or old.labels == new.labels


def add_count(counts: KeyCounts, key: str, labels: Mapping[str, str], sign: int) -> None:
    """Add ``sign`` at (key, labels[key]) when the node has the key."""
    value = labels.get(key)
    if value is None:
        return
    values = counts.get(key)
    if values is None:
        values = counts[key] = Counter()
    total = values[value] + sign
    if total:
        values[value] = total
    else:
        del values[value]
        if not values:
            del counts[key]


def merge_counts(
    into: KeyCounts, key: str, values: Mapping[str, int] | None, amount: int = 1
) -> None:
    """into[key] += amount x values, giving every value of ``values`` an entry, even at 0."""
    if not values:
        return
    have = into.get(key)
    if have is None:
        into[key] = (
            Counter(values)
            if amount == 1
            else Counter({value: amount * count for value, count in values.items()})
        )
    elif amount == 1:
        have.update(values)
    else:
        for value, count in values.items():
            have[value] += amount * count


@dataclass(slots=True)
class TermsTally:
    """Pods on nodes of each topology pair that carry one (interned) term list.

    Holds the list itself, so the ``id()`` it is filed under stays its own.
    """

    terms: PodAffinity
    pods: int = 0
    counts: KeyCounts = field(init=False, default_factory=dict)
    keys: tuple[str, ...] = field(init=False, default=())  # every topology key of ``terms``

    def __post_init__(self) -> None:
        keys = [t.topology_key for t in self.terms.required + self.terms.required_anti]
        keys += [w.term.topology_key for w in self.terms.preferred + self.terms.preferred_anti]
        self.keys = tuple(dict.fromkeys(keys))


@dataclass(frozen=True, slots=True)
class MatchTally:
    """Pods matching all of ``terms``, counted once per key of ``keys`` in its pair."""

    terms: tuple[AffinityTerm, ...]
    keys: tuple[str, ...]
    counts: KeyCounts

    def update(self, pod: PodInfo, labels: Mapping[str, str], sign: int) -> None:
        if all(t.matches(pod, {}) for t in self.terms):
            for key in self.keys:
                add_count(self.counts, key, labels, sign)


__all__ = [
    "KeyCounts",
    "MatchTally",
    "TermsTally",
    "add_count",
    "merge_counts",
    "same_labels",
]
