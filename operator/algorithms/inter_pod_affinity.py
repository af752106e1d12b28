"""InterPodAffinity: required pod (anti-)affinity filter; preferred terms score.

Follows kube-scheduler v1.37 with InterPodAffinityHostnameFastPath off (its
default): PreFilter counts, per topology pair (key, value), the existing pods
that match all of the incoming pod's affinity terms, those that match each
of its anti-affinity terms, and the existing pods whose required
anti-affinity matches the incoming pod (the symmetry rule). Filter then
reads those counts through the node's labels, vectorised over label codes.

Namespaces, as ``affinity_terms`` parses them: a term without namespaces and
namespaceSelector means the pod's own namespace; ``namespaceSelector: {}``
means every namespace; a selector with requirements is resolved against
``Snapshot.namespace_labels`` (empty until something fills it, in which case
such a term matches only its listed namespaces). matchLabelKeys /
mismatchLabelKeys are merged into the label selector by the API server when the
pod is created (MatchLabelKeysInPodAffinity, GA and locked on); kube-scheduler
reads the merged selector and ignores the key lists, and so does Podium.

``PodIndex`` keeps, per snapshot, the bound pods by namespace, by the label
keys that selectors have asked about, and the pods that carry affinity
terms, updating only rows whose pods changed since the last cycle;
PodTopologySpread uses it too. It also keeps the sums a cycle needs per
topology pair, so a cycle costs O(distinct term lists + topology pairs)
rather than O(pods): per shared term list of existing pods, how many pods
carry it in each pair; per recently used incoming term list, how many pods
match it in each pair (``affinity_tallies``). Both follow pod changes and
node label changes.

Why one module of this size: the plugin is kube-scheduler's InterPodAffinity
(filter, score and their PreFilter state) plus the incremental pod index it
needs, one plugin per module as the framework asks.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from podium.algorithms.affinity_tallies import (
    KeyCounts,
    MatchTally,
    TermsTally,
    add_count,
    merge_counts,
    same_labels,
)
from podium.algorithms.affinity_terms import (
    AffinityTerm,
    PodAffinity,
    has_pod_affinity,
    merge_namespaces,
    parse_pod_affinity,
)
from podium.framework import signers
from podium.framework.plugin import (
    MAX_NODE_SCORE,
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
)
from podium.framework.registry import register
from podium.kube.labels import EXISTS, IN, Selector
from podium.kube.objects import PodInfo
from podium.state.rows import RowTracker, label_codes, same_pods, snapshot_cache

if TYPE_CHECKING:
    from podium.kube.objects import NodeInfo, PodInfo
    from podium.state.snapshot import Snapshot

REASON_EXISTING_ANTI = "node(s) didn't satisfy existing pods anti-affinity rules"
REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI = "node(s) didn't match pod anti-affinity rules"

T = TypeVar("T")
_MAX_INTERNED = 10_000
# Incoming term lists whose match counts PodIndex keeps up to date: each costs a
# match per pod added or removed, so only the most recently used few.
_MAX_TERM_TALLIES = 32


# -- the per-snapshot pod index ---------------------------------------------------------
# Tables map a key (namespace, label value) to the pods on each node, by node name.
ByNode = dict[str, list["PodInfo"]]


class PodIndex:
    """Bound pods of one snapshot, indexed for selector lookups; updated per changed node."""

    def __init__(self) -> None:
        self.tracker: RowTracker[dict[str, PodInfo]] = RowTracker(same_pods)
        # Node labels decide the topology pairs: a label change re-files that node's pods.
        self.node_tracker: RowTracker[NodeInfo] = RowTracker(same_labels)
        self.labels: dict[str, Mapping[str, str]] = {}  # node name -> labels its pods are filed by
        self.row_of: Mapping[str, int] = {}
        self.nodes: list[NodeInfo] = []
        self.by_ns: dict[str, ByNode] = {}
        self.by_key: dict[str, dict[str, ByNode]] = {}
        self.affinity: dict[str, list[tuple[PodInfo, PodAffinity]]] = {}
        self.anti: dict[str, list[tuple[PodInfo, PodAffinity]]] = {}
        self.stamp: tuple[int, int, int] | None = None
        # Pods of one controller carry equal terms; sharing one object per distinct
        # value lets a cycle judge each distinct term list against its pod once.
        self._interned: dict[PodAffinity, PodAffinity] = {}
        # id(interned terms) -> its tally, for all existing pods with terms and for
        # those with required anti-affinity terms.
        self.tallies: dict[int, TermsTally] = {}
        self.anti_tallies: dict[int, TermsTally] = {}
        self._matches: OrderedDict[tuple[tuple[AffinityTerm, ...], tuple[str, ...]], MatchTally] = (
            OrderedDict()
        )

    def refresh(self, snapshot: Snapshot) -> None:
        changes = {
            name: (old, new) for name, old, new in self.tracker.changes(snapshot, snapshot.pods)
        }
        for name, old_node, new_node in self.node_tracker.changes(snapshot, snapshot.nodes):
            if old_node is not None and new_node is not None and name not in changes:
                pods = self.tracker.by_name[name]
                changes[name] = (pods, pods)
        self.row_of = snapshot.index
        self.nodes = snapshot.nodes
        for name, (old, new) in changes.items():
            # A node's pods are re-filed together; those still there keep their parsed terms.
            parsed = {id(pod): terms for pod, terms in self.affinity.get(name, ())}
            if old is not None:
                self._drop(name, old)
            if new is None:
                del self.labels[name]
            else:
                self.labels[name] = snapshot.nodes[snapshot.index[name]].labels
                self._add(name, new, parsed)

    @staticmethod
    def _put(table: dict[str, ByNode], key: str, name: str, pod: PodInfo) -> None:
        table.setdefault(key, {}).setdefault(name, []).append(pod)

    @staticmethod
    def _pop(table: dict[str, ByNode], key: str, name: str) -> None:
        nodes = table.get(key)
        if nodes is not None:
            nodes.pop(name, None)
            if not nodes:
                del table[key]

    def _add(self, name: str, pods: dict[str, PodInfo], known: Mapping[int, PodAffinity]) -> None:
        """File ``pods`` under node ``name``; ``known``: terms by id() of pods still alive."""
        labels = self.labels[name]
        for pod in pods.values():
            self._put(self.by_ns, pod.namespace, name, pod)
            for key, table in self.by_key.items():
                value = pod.labels.get(key)
                if value is not None:
                    self._put(table, value, name, pod)
            for match in self._matches.values():
                match.update(pod, labels, 1)
            if has_pod_affinity(pod):
                parsed = known.get(id(pod)) or self.intern(parse_pod_affinity(pod))
                self.affinity.setdefault(name, []).append((pod, parsed))
                if parsed.required_anti:
                    self.anti.setdefault(name, []).append((pod, parsed))
                self._tally(parsed, labels, 1)

    def _tally(self, parsed: PodAffinity, labels: Mapping[str, str], sign: int) -> None:
        tally = self.tallies.get(id(parsed))
        if tally is None:
            tally = self.tallies[id(parsed)] = TermsTally(parsed)
            if parsed.required_anti:
                self.anti_tallies[id(parsed)] = tally
        tally.pods += sign
        if not tally.pods:
            del self.tallies[id(parsed)]
            self.anti_tallies.pop(id(parsed), None)
            return
        for key in tally.keys:
            add_count(tally.counts, key, labels, sign)

    def intern(self, parsed: PodAffinity) -> PodAffinity:
        if len(self._interned) > _MAX_INTERNED:
            self._interned.clear()  # objects still in use keep working, just unshared
        return self._interned.setdefault(parsed, parsed)

    def _drop(self, name: str, pods: dict[str, PodInfo]) -> None:
        labels = self.labels[name]
        for pod in pods.values():
            self._pop(self.by_ns, pod.namespace, name)
            for key, table in self.by_key.items():
                value = pod.labels.get(key)
                if value is not None:
                    self._pop(table, value, name)
            for match in self._matches.values():
                match.update(pod, labels, -1)
        for _, parsed in self.affinity.pop(name, ()):
            self._tally(parsed, labels, -1)
        self.anti.pop(name, None)

    def match_counts(self, terms: tuple[AffinityTerm, ...], keys: tuple[str, ...]) -> KeyCounts:
        """Per topology pair, pods matching all of ``terms`` (namespace-merged), once per key.

        Built from the index on first use, then kept up to date while among
        the most recently used; callers must not modify the result.
        """
        cache_key = (terms, keys)
        match = self._matches.get(cache_key)
        if match is not None:
            self._matches.move_to_end(cache_key)
            return match.counts
        counts: KeyCounts = {}
        rest = terms[1:]  # term_candidates already matched the first
        for row, pod in term_candidates(self, terms[0]):
            if not rest or _matches_all(rest, pod):
                labels = self.nodes[row].labels
                for key in keys:
                    add_count(counts, key, labels, 1)
        self._matches[cache_key] = MatchTally(terms, keys, counts)
        if len(self._matches) > _MAX_TERM_TALLIES:
            self._matches.popitem(last=False)
        return counts

    def rows(self, by_node: Mapping[str, T]) -> Iterator[tuple[int, T]]:
        """Entries keyed by node name, with their snapshot rows."""
        row_of = self.row_of
        for name, value in by_node.items():
            yield row_of[name], value

    def key_index(self, key: str) -> dict[str, ByNode]:
        """Pods by the value of one label key, built on first use and kept up to date."""
        table = self.by_key.get(key)
        if table is None:
            table = self.by_key[key] = {}
            for name, pods in self.tracker.by_name.items():
                for pod in pods.values():
                    value = pod.labels.get(key)
                    if value is not None:
                        self._put(table, value, name, pod)
        return table

    def candidates(
        self, selector: Selector, namespaces: frozenset[str] | None
    ) -> Iterator[tuple[int, PodInfo]]:
        """A superset of the pods ``selector`` can match in ``namespaces`` (None: all).

        Uses the most selective In or Exists requirement when there is one;
        callers still apply the full match.
        """
        if selector.requirements is None:
            return
        best: list[ByNode] | None = None
        best_size = -1
        for requirement in selector.requirements:
            if requirement.op not in (IN, EXISTS):
                continue
            table = self.key_index(requirement.key)
            if requirement.op == IN:
                groups = [table[v] for v in requirement.values if v in table]
            else:
                groups = list(table.values())
            size = sum(len(g) for g in groups)
            if best is None or size < best_size:
                best, best_size = groups, size
        if best is None:
            if namespaces is None:
                best = list(self.by_ns.values())
            else:
                best = [self.by_ns[ns] for ns in namespaces if ns in self.by_ns]
        for group in best:
            for row, pods in self.rows(group):
                for pod in pods:
                    if namespaces is None or pod.namespace in namespaces:
                        yield row, pod


def pod_index(snapshot: Snapshot) -> PodIndex:
    """The snapshot's PodIndex, brought up to date (cheap when few rows changed)."""
    cache = snapshot_cache(snapshot)
    index = cache.get("pods")
    if not isinstance(index, PodIndex):
        index = cache["pods"] = PodIndex()
    stamp = (snapshot.generation, snapshot.pod_generation, len(snapshot.pods))
    if index.stamp != stamp:
        index.refresh(snapshot)
        index.stamp = stamp
    return index


def exact_lookup(selector: Selector) -> bool:
    """Whether PodIndex.candidates() yields exactly the pods ``selector`` matches.

    True for one In or Exists requirement: the index lookup is that requirement.
    """
    requirements = selector.requirements
    return (
        requirements is not None and len(requirements) == 1 and requirements[0].op in (IN, EXISTS)
    )


def term_candidates(index: PodIndex, term: AffinityTerm) -> Iterator[tuple[int, PodInfo]]:
    """Existing pods matching an incoming (namespace-merged) term, with their rows."""
    namespaces = None if term.ns_selector.empty else term.namespaces
    if exact_lookup(term.selector):
        yield from index.candidates(term.selector, namespaces)
        return
    for row, pod in index.candidates(term.selector, namespaces):
        if term.matches(pod, {}):
            yield row, pod


# -- the plugin ---------------------------------------------------------------------------


@dataclass(slots=True)
class _FilterState:
    affinity: tuple[AffinityTerm, ...]
    anti: tuple[AffinityTerm, ...]
    affinity_counts: KeyCounts
    anti_counts: KeyCounts
    existing_counts: KeyCounts
    self_match: bool
    masks: tuple[MaskArray, MaskArray, MaskArray] | None = None


@dataclass(slots=True)
class _ScoreState:
    topology: KeyCounts = field(default_factory=dict)


def _positive(snapshot: Snapshot, key: str, counts: Mapping[str, int]) -> MaskArray:
    """Rows whose label ``key`` has a value with a positive count."""
    codes = label_codes(snapshot, key)
    mask: MaskArray = codes.count_table(counts)[codes.codes] > 0
    return mask


def _matches_all(terms: tuple[AffinityTerm, ...], pod: PodInfo) -> bool:
    """podMatchesAllAffinityTerms: false for an empty list."""
    return bool(terms) and all(t.matches(pod, {}) for t in terms)


@register
class InterPodAffinity(FilterPlugin, ScorePlugin):
    name = "InterPodAffinity"
    description = (
        "Filter: required pod affinity and anti-affinity, including existing pods' "
        "anti-affinity against this pod. Score: preferred terms both ways."
    )
    default_weight = 2
    events = (
        ClusterEvent.ASSIGNED_POD_ADD
        | ClusterEvent.ASSIGNED_POD_UPDATE
        | ClusterEvent.ASSIGNED_POD_DELETE
        | ClusterEvent.NODE_ADD
        | ClusterEvent.NODE_LABEL
    )

    def sign_pod(self, cycle: Cycle) -> SignFragments | None:
        """InterPodAffinity.SignPod: pods with pod (anti-)affinity are unsignable; others
        sign with their labels, which existing pods' terms may match, unless
        ignorePreferredTermsOfExistingPods is set."""
        pod = cycle.pod
        affinity = pod.affinity
        if affinity.get("podAffinity") is not None or affinity.get("podAntiAffinity") is not None:
            return None
        if self.ignore_existing_preferred:
            return {}
        return {signers.LABELS: pod.labels}

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        weight = self.args.get("hardPodAffinityWeight", 1)
        if isinstance(weight, bool) or not isinstance(weight, int) or not 0 <= weight <= 100:
            raise ValueError("interPodAffinity.hardPodAffinityWeight must be an integer 0..100")
        self.hard_weight = weight
        self.ignore_existing_preferred = bool(self.args.get("ignorePreferredTermsOfExistingPods"))

    # -- filter ---------------------------------------------------------------------
    def _incoming(self, cycle: Cycle) -> PodAffinity:
        cached = cycle.state.get("InterPodAffinity/pod")
        if not isinstance(cached, PodAffinity):
            cached = cycle.state["InterPodAffinity/pod"] = parse_pod_affinity(cycle.pod)
        return cached

    def pre_filter(self, cycle: Cycle) -> PreFilterResult | None:
        parsed = self._incoming(cycle)
        if parsed.error:
            return PreFilterResult(reject=f"parsing pod: {parsed.error}", unresolvable=True)
        cycle.state["InterPodAffinity/filter"] = self._filter_state(cycle, parsed)
        return None

    def _filter_state(self, cycle: Cycle, parsed: PodAffinity) -> _FilterState | None:
        snap, pod = cycle.snapshot, cycle.pod
        ns_labels = snap.namespace_labels.get(pod.namespace, {})
        affinity = tuple(merge_namespaces(t, snap) for t in parsed.required)
        anti = tuple(merge_namespaces(t, snap) for t in parsed.required_anti)
        index = pod_index(snap)
        existing: KeyCounts = {}
        for tally in index.anti_tallies.values():
            for term in tally.terms.required_anti:
                if term.matches(pod, ns_labels):
                    key = term.topology_key
                    merge_counts(existing, key, tally.counts.get(key))
        affinity_counts: KeyCounts = {}
        if affinity:
            keys = tuple(t.topology_key for t in affinity)
            for key, values in index.match_counts(affinity, keys).items():
                merge_counts(affinity_counts, key, values)
        anti_counts: KeyCounts = {}
        for term in anti:
            for key, values in index.match_counts((term,), (term.topology_key,)).items():
                merge_counts(anti_counts, key, values)
        if not existing and not affinity and not anti:
            return None
        return _FilterState(
            affinity, anti, affinity_counts, anti_counts, existing, _matches_all(affinity, pod)
        )

    def add_pods(self, cycle: Cycle) -> None:
        """AddPod (preFilterState.updateWithPod, +1): the three counts recounted with the
        edited rows. A PreFilter that Go skips (no terms either way) stays skipped, so an
        added pod's anti-affinity is then not checked, as in Go."""
        if cycle.state.get("InterPodAffinity/filter") is None:
            return
        cycle.state["InterPodAffinity/filter"] = self._filter_state(cycle, self._incoming(cycle))

    def _state(self, cycle: Cycle) -> _FilterState | None:
        if "InterPodAffinity/filter" not in cycle.state:
            parsed = self._incoming(cycle)
            cycle.state["InterPodAffinity/filter"] = (
                None if parsed.error else self._filter_state(cycle, parsed)
            )
        state: _FilterState | None = cycle.state["InterPodAffinity/filter"]
        return state

    @staticmethod
    def _masks(snapshot: Snapshot, state: _FilterState) -> tuple[MaskArray, MaskArray, MaskArray]:
        """Full-length masks: affinity unmet, anti-affinity hit, existing anti-affinity hit."""
        if state.masks is not None:
            return state.masks
        n = len(snapshot)
        affinity_bad = np.zeros(n, dtype=bool)
        if state.affinity:
            counts = state.affinity_counts
            has_keys = np.ones(n, dtype=bool)
            pods_exist = np.ones(n, dtype=bool)
            for term in state.affinity:
                has_keys &= label_codes(snapshot, term.topology_key).codes >= 0
                pods_exist &= _positive(
                    snapshot, term.topology_key, counts.get(term.topology_key, {})
                )
            first_pod = not state.affinity_counts and state.self_match
            affinity_bad = ~(has_keys & (pods_exist | first_pod))
        anti_bad = np.zeros(n, dtype=bool)
        if state.anti_counts:
            counts = state.anti_counts
            for term in state.anti:
                anti_bad |= _positive(
                    snapshot, term.topology_key, counts.get(term.topology_key, {})
                )
        existing_bad = np.zeros(n, dtype=bool)
        for key, values in state.existing_counts.items():
            existing_bad |= _positive(snapshot, key, values)
        state.masks = (affinity_bad, anti_bad, existing_bad)
        return state.masks

    def filter(self, cycle: Cycle, nodes: IndexArray) -> list[Rejection]:
        state = self._state(cycle)
        if state is None:
            return []
        affinity_bad, anti_bad, existing_bad = self._masks(cycle.snapshot, state)
        a = affinity_bad[nodes]
        b = anti_bad[nodes] & ~a
        c = existing_bad[nodes] & ~a & ~b
        out = []
        if a.any():
            out.append(Rejection(REASON_AFFINITY, a, unresolvable=True))
        if b.any():
            out.append(Rejection(REASON_ANTI, b))
        if c.any():
            out.append(Rejection(REASON_EXISTING_ANTI, c))
        return out

    def explain(self, cycle: Cycle, node: int) -> str:
        state = self._state(cycle)
        if state is None:
            return ""
        snap, pod = cycle.snapshot, cycle.pod
        labels = snap.nodes[node].labels
        affinity_bad, anti_bad, existing_bad = self._masks(snap, state)
        if affinity_bad[node]:
            for term in state.affinity:
                if term.topology_key not in labels:
                    return f"node has no label {term.topology_key} (pod affinity topologyKey)"
            parts = []
            for term in state.affinity:
                value = labels[term.topology_key]
                if state.affinity_counts.get(term.topology_key, Counter())[value] <= 0:
                    parts.append(
                        f"no pod matching {term.describe()} in {term.topology_key}={value}"
                    )
            return "; ".join(parts)
        index = pod_index(snap)
        if anti_bad[node]:
            for term in state.anti:
                here = labels.get(term.topology_key)
                if here is None:
                    continue
                for row, other in term_candidates(index, term):
                    if snap.nodes[row].labels.get(term.topology_key) == here:
                        return (
                            f"pod {other.key} on {snap.names[row]} matches anti-affinity "
                            f"{term.describe()} in {term.topology_key}={here}"
                        )
        if existing_bad[node]:
            ns_labels = snap.namespace_labels.get(pod.namespace, {})
            for row, entries in index.rows(index.anti):
                other_labels = snap.nodes[row].labels
                for other, parsed in entries:
                    for term in parsed.required_anti:
                        key = term.topology_key
                        if (
                            key in other_labels
                            and labels.get(key) == other_labels[key]
                            and term.matches(pod, ns_labels)
                        ):
                            return (
                                f"existing pod {other.key} on {snap.names[row]} has anti-affinity "
                                f"against this pod ({key}={other_labels[key]})"
                            )
        return ""

    # -- score ------------------------------------------------------------------------
    def pre_score(self, cycle: Cycle, nodes: IndexArray) -> bool:
        snap, pod = cycle.snapshot, cycle.pod
        parsed = self._incoming(cycle)
        cycle.state["InterPodAffinity/score"] = None
        if parsed.error:
            return False
        has_constraints = bool(parsed.preferred or parsed.preferred_anti)
        if self.ignore_existing_preferred and not has_constraints:
            return False
        ns_labels = snap.namespace_labels.get(pod.namespace, {})
        totals: KeyCounts = {}
        index = pod_index(snap)
        for weighted, sign in [(w, 1) for w in parsed.preferred] + [
            (w, -1) for w in parsed.preferred_anti
        ]:
            term = merge_namespaces(weighted.term, snap)
            counts = index.match_counts((term,), (term.topology_key,))
            for key, values in counts.items():
                merge_counts(totals, key, values, weighted.weight * sign)
        for tally in index.tallies.values():
            for key, amount in self._existing_weights(tally.terms, pod, ns_labels):
                merge_counts(totals, key, tally.counts.get(key), amount)
        if not totals:
            return False
        cycle.state["InterPodAffinity/score"] = _ScoreState(totals)
        return True

    def _existing_weights(
        self, other: PodAffinity, pod: PodInfo, ns_labels: Mapping[str, str]
    ) -> list[tuple[str, int]]:
        """What an existing pod's terms add to the incoming pod's score, per topology key."""
        out: list[tuple[str, int]] = []
        if self.hard_weight > 0:
            out += [
                (t.topology_key, self.hard_weight)
                for t in other.required
                if t.matches(pod, ns_labels)
            ]
        for weighted, sign in [(w, 1) for w in other.preferred] + [
            (w, -1) for w in other.preferred_anti
        ]:
            if weighted.term.matches(pod, ns_labels):
                out.append((weighted.term.topology_key, weighted.weight * sign))
        return out

    def score(self, cycle: Cycle, nodes: IndexArray) -> IntArray:
        out = np.zeros(len(nodes), dtype=np.int64)
        state = cycle.state.get("InterPodAffinity/score")
        if not isinstance(state, _ScoreState):
            return out
        for key, values in state.topology.items():
            codes = label_codes(cycle.snapshot, key)
            out += codes.count_table(values)[codes.codes[nodes]]
        return out

    def normalize(self, cycle: Cycle, nodes: IndexArray, scores: IntArray) -> IntArray:
        """Min-max to 0..100 in float64, truncated, exactly as scoring.go."""
        if (
            not isinstance(cycle.state.get("InterPodAffinity/score"), _ScoreState)
            or not scores.size
        ):
            return scores
        low, high = int(scores.min()), int(scores.max())
        if high - low <= 0:
            return np.zeros(scores.shape, dtype=np.int64)
        fraction = (scores - low).astype(np.float64) / float(high - low)
        return (float(MAX_NODE_SCORE) * fraction).astype(np.int64)


__all__ = [
    "InterPodAffinity",
    "PodIndex",
    "exact_lookup",
    "pod_index",
]
