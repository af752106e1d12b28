"""PodTopologySpread: DoNotSchedule constraints filter, ScheduleAnyway constraints score.

As kube-scheduler v1.37 (NodeInclusionPolicyInPodTopologySpread and
MatchLabelKeysInPodTopologySpread on): the pods counted for a constraint are
the non-terminating pods in the incoming pod's namespace that its selector
matches (matchLabelKeys merged in from the pod's labels), on nodes that carry
every constraint's topology key and pass the node inclusion policies
(nodeAffinityPolicy Honor by default: the pod's nodeSelector and required
node affinity; nodeTaintsPolicy Ignore by default). The filter rejects a node
when ``count(domain) + selfMatch - min(count) > maxSkew``, where the minimum
is 0 while there are fewer than minDomains domains. Scoring follows
scoring.go, float64 arithmetic and math.Round included.

Default constraints (a pod without constraints of its own) count the pods
that helper.DefaultSelector selects: the selectors of the pod's Services and
of its controlling ReplicationController, ReplicaSet or StatefulSet, ANDed
(``SelectorStore.default_selector``). A pod that none of them selects gets no
default constraints, so neither filter nor score applies to it.

Why one module of this size: it is kube-scheduler's PodTopologySpread, filter
and score with their shared constraint parsing and domain counting, one plugin
per module.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from podium.algorithms.inter_pod_affinity import exact_lookup, pod_index
from podium.algorithms.node_affinity import required_node_affinity_mask
from podium.algorithms.taint_toleration import untolerated
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
from podium.kube.labels import Selector, parse_label_selector, selector_from_set
from podium.kube.objects import PodInfo, Taint
from podium.state.rows import LabelCodes, RowTracker, label_codes, same_pods, snapshot_cache

if TYPE_CHECKING:
    from podium.kube.objects import PodInfo
    from podium.state.snapshot import Snapshot

REASON = "node(s) didn't match pod topology spread constraints"
REASON_LABEL = REASON + " (missing required label)"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
DO_NOT_SCHEDULE, SCHEDULE_ANYWAY = "DoNotSchedule", "ScheduleAnyway"
HONOR = "Honor"
SYSTEM_DEFAULTS: tuple[Mapping[str, Any], ...] = (
    {"topologyKey": HOSTNAME, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 3},
    {"topologyKey": ZONE, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 5},
)
_MAX_INT32 = 2**31 - 1
_HARD_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


@dataclass(frozen=True, slots=True)
class Constraint:
    """topologySpreadConstraint, its selector parsed."""

    max_skew: int
    topology_key: str
    selector: Selector
    min_domains: int = 1
    honor_affinity: bool = True
    honor_taints: bool = False

    def matches(self, pod: PodInfo) -> bool:
        return self.selector.matches(pod.labels)

    def describe(self) -> str:
        return f"{self.topology_key} maxSkew {self.max_skew} [{self.selector.describe()}]"


def _int(value: object, default: int | None) -> int | None:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def parse_constraints(
    raw: Sequence[Mapping[str, Any]], pod_labels: Mapping[str, str], action: str
) -> tuple[Constraint, ...]:
    """filterTopologySpreadConstraints: the constraints with ``action``, selectors parsed.

    A selector that does not parse selects nothing; a constraint whose maxSkew
    is not an integer is left out (the API server rejects both).
    """
    out = []
    for item in raw:
        if not isinstance(item, Mapping) or item.get("whenUnsatisfiable") != action:
            continue
        max_skew = _int(item.get("maxSkew"), None)
        min_domains = _int(item.get("minDomains"), 1)
        if max_skew is None or min_domains is None:
            continue
        selector = parse_label_selector(item.get("labelSelector"))
        if isinstance(selector, str):
            selector = Selector(None)
        keys = item.get("matchLabelKeys") or []
        if isinstance(keys, list) and keys and selector.requirements is not None:
            found = {k: pod_labels[k] for k in keys if isinstance(k, str) and k in pod_labels}
            if found:
                merged = selector_from_set(found).requirements or ()
                selector = Selector(merged + selector.requirements)
        out.append(
            Constraint(
                max_skew=max_skew,
                topology_key=str(item.get("topologyKey") or ""),
                selector=selector,
                min_domains=min_domains,
                honor_affinity=(item.get("nodeAffinityPolicy") or HONOR) == HONOR,
                honor_taints=(item.get("nodeTaintsPolicy") or "Ignore") == HONOR,
            )
        )
    return tuple(out)


def _validate_defaults(args: Mapping[str, Any]) -> tuple[bool, tuple[Mapping[str, Any], ...]]:
    kind = args.get("defaultingType") or "System"
    raw = args.get("defaultConstraints") or []
    if kind not in ("System", "List"):
        raise ValueError(
            f'podTopologySpread.defaultingType must be "System" or "List", got {kind!r}'
        )
    if not isinstance(raw, list) or not all(isinstance(c, Mapping) for c in raw):
        raise ValueError("podTopologySpread.defaultConstraints must be a list of objects")
    if kind == "System":
        if raw:
            raise ValueError(
                'podTopologySpread.defaultConstraints must be empty with defaultingType "System"'
            )
        return True, SYSTEM_DEFAULTS
    seen = set()
    for c in raw:
        skew = c.get("maxSkew")
        if isinstance(skew, bool) or not isinstance(skew, int) or skew <= 0:
            raise ValueError(
                "podTopologySpread.defaultConstraints: maxSkew must be a positive integer"
            )
        if not c.get("topologyKey"):
            raise ValueError("podTopologySpread.defaultConstraints: topologyKey is required")
        if c.get("whenUnsatisfiable") not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise ValueError("podTopologySpread.defaultConstraints: bad whenUnsatisfiable")
        if c.get("labelSelector") is not None:
            raise ValueError(
                "podTopologySpread.defaultConstraints: constraint must not define a selector, "
                "as they deduced for each pod"
            )
        pair = (c["topologyKey"], c["whenUnsatisfiable"])
        if pair in seen:
            raise ValueError(f"podTopologySpread.defaultConstraints: duplicate {pair}")
        seen.add(pair)
    return False, tuple(raw)


def round_half_away(x: NDArray[np.float64]) -> IntArray:
    """math.Round: halves round away from zero (numpy rounds them to even)."""
    whole = np.trunc(x)
    frac = np.abs(x - whole)
    return (whole + np.where(frac >= 0.5, np.sign(x), 0.0)).astype(np.int64)


def _go_div(a: IntArray, b: int) -> IntArray:
    q = np.abs(a) // abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


@dataclass(slots=True)
class _FilterState:
    constraints: tuple[Constraint, ...]
    codes: list[LabelCodes]
    per_code: list[IntArray]
    domains: list[int]
    min_match: list[int]
    self_match: list[int]


@dataclass(slots=True)
class _ScoreState:
    constraints: tuple[Constraint, ...]
    codes: list[LabelCodes]
    weights: list[float]
    node_counts: list[IntArray]
    per_code: list[IntArray | None]
    ignored: MaskArray


_MAX_COUNTED = 32  # (selector, namespace) pairs whose counts are kept across cycles


def _framework_edits(
    snap: Snapshot, selector: Selector, namespace: str, counts: IntArray
) -> IntArray:
    """Rows under a preemption or nominated-pod edit, counted as Go's ``updateWithPod``.

    A recount skips terminating pods, as ``countPodsMatchSelector`` does; Go's
    RemovePod and AddPod move the PreFilter count for any matching pod, terminating
    or not. So a terminating victim removed lowers its domain's count in Go though
    it was never counted: each edited row gets the terminating pods it gained less
    those it lost.
    """
    fixed = counts
    for row, before in snap.unedited.items():
        delta = _matching(snap.pods[row].values(), selector, namespace, True) - _matching(
            before.values(), selector, namespace, True
        )
        if delta:
            if fixed is counts:
                fixed = counts.copy()
            fixed[row] += delta
    return fixed


def _matching(
    pods: Iterable[PodInfo], selector: Selector, namespace: str, terminating: bool = False
) -> int:
    """The pods of one node in ``namespace`` that ``selector`` matches: those that
    countPodsMatchSelector counts, or (``terminating``) those it skips."""
    return sum(
        1
        for pod in pods
        if pod.deleting == terminating
        and pod.namespace == namespace
        and selector.matches(pod.labels)
    )


class MatchCounts:
    """countPodsMatchSelector per snapshot row, kept across cycles for recent selectors.

    Consecutive cycles differ by a pod or two, so recounting every matching pod of
    the cluster per cycle (O(pods)) is replaced by recounting the rows that changed
    (``RowTracker``); a snapshot rebuild, which renumbers rows, starts afresh. The
    arrays handed out are never written again: a changed row gets a new array.
    """

    def __init__(self) -> None:
        self.tracker: RowTracker[dict[str, PodInfo]] = RowTracker(same_pods)
        self.counts: dict[tuple[Selector, str], IntArray] = {}  # oldest use first

    def get(self, snap: Snapshot, selector: Selector, namespace: str) -> IntArray:
        self._refresh(snap)
        key = (selector, namespace)
        counts = self.counts.pop(key, None)
        if counts is None:
            counts = self._count_all(snap, selector, namespace)
            if len(self.counts) >= _MAX_COUNTED:
                del self.counts[next(iter(self.counts))]
        self.counts[key] = counts
        return counts

    def _refresh(self, snap: Snapshot) -> None:
        renumbered = self.tracker.renumbered(snap, snap.pods)
        changes = self.tracker.changes(snap, snap.pods)
        if renumbered:
            self.counts.clear()
            return
        if not changes or not self.counts:
            return
        rows = [(snap.index[name], new) for name, _, new in changes if new is not None]
        for (selector, namespace), counts in self.counts.items():
            fresh = counts.copy()
            for row, pods in rows:
                fresh[row] = _matching(pods.values(), selector, namespace)
            self.counts[(selector, namespace)] = fresh

    @staticmethod
    def _count_all(snap: Snapshot, selector: Selector, namespace: str) -> IntArray:
        index = pod_index(snap)
        exact = exact_lookup(selector)
        rows = [
            row
            for row, pod in index.candidates(selector, frozenset((namespace,)))
            if not pod.deleting and (exact or selector.matches(pod.labels))
        ]
        if not rows:
            return np.zeros(len(snap), dtype=np.int64)
        return np.bincount(rows, minlength=len(snap)).astype(np.int64)


@register
class PodTopologySpread(FilterPlugin, ScorePlugin):
    name = "PodTopologySpread"
    description = (
        "Filter: DoNotSchedule topology spread constraints (maxSkew, minDomains). "
        "Score: prefers the less crowded domains of ScheduleAnyway and default constraints."
    )
    default_weight = 2
    events = (
        ClusterEvent.ASSIGNED_POD_ADD
        | ClusterEvent.ASSIGNED_POD_UPDATE
        | ClusterEvent.ASSIGNED_POD_DELETE
        | ClusterEvent.NODE_ADD
        | ClusterEvent.NODE_DELETE
        | ClusterEvent.NODE_LABEL
        | ClusterEvent.NODE_TAINT
    )

    def sign_pod(self, cycle: Cycle) -> SignFragments | None:
        """PodTopologySpread.SignPod: a pod with constraints of its own, or any pod when
        the plugin has default constraints (the System defaults included), is unsignable;
        so batching never fires in kube-scheduler's default profile."""
        pod = cycle.pod
        if pod.topology_spread or self.defaults:
            return None
        return {}

    def signs_no_pod(self) -> bool:
        """Default constraints (the System ones included) make every pod unsignable."""
        return bool(self.defaults)

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.system_defaulted, self.defaults = _validate_defaults(self.args)
        self._parsed_defaults: dict[str, tuple[Constraint, ...]] = {}

    # -- constraints ---------------------------------------------------------------
    def constraints(self, cycle: Cycle, action: str) -> tuple[Constraint, ...]:
        """getConstraints: the pod's own, or the defaults with DefaultSelector's selector."""
        pod = cycle.pod
        if pod.topology_spread:
            return parse_constraints(pod.topology_spread, pod.labels, action)
        # The defaults' own selectors are replaced below, so neither their parse (the only
        # use of the pod's labels) nor the pod's default selector changes within a cycle.
        defaults = self._parsed_defaults.get(action)
        if defaults is None:
            defaults = self._parsed_defaults[action] = parse_constraints(self.defaults, {}, action)
        if not defaults:
            return ()
        selector: Selector | None = cycle.state.get("PodTopologySpread/defaultSelector")
        if selector is None:
            selector = cycle.snapshot.selectors.default_selector(pod)
            cycle.state["PodTopologySpread/defaultSelector"] = selector
        if selector.empty:
            return ()
        return tuple(replace(c, selector=selector) for c in defaults)

    @staticmethod
    def _node_counts(cycle: Cycle, c: Constraint) -> IntArray:
        """countPodsMatchSelector for every snapshot row, cached per cycle."""
        memo: dict[Selector, IntArray] = cycle.state.setdefault("PodTopologySpread/counts", {})
        cached = memo.get(c.selector)
        if cached is not None:
            return cached
        snap = cycle.snapshot
        if c.selector.empty:
            counts = np.zeros(len(snap), dtype=np.int64)
        else:
            held = snapshot_cache(snap).get("PodTopologySpread/matchCounts")
            if not isinstance(held, MatchCounts):
                held = snapshot_cache(snap)["PodTopologySpread/matchCounts"] = MatchCounts()
            counts = held.get(snap, c.selector, cycle.pod.namespace)
            if snap.unedited:
                counts = _framework_edits(snap, c.selector, cycle.pod.namespace, counts)
        memo[c.selector] = counts
        return counts

    @staticmethod
    def _taint_ok(cycle: Cycle) -> MaskArray:
        """Rows whose NoSchedule/NoExecute taints the pod tolerates."""
        cached = cycle.state.get("PodTopologySpread/taintOk")
        if cached is None:
            snap = cycle.snapshot
            cached = np.ones(len(snap), dtype=bool)
            verdicts: dict[tuple[Taint, ...], bool] = {}
            for row in np.flatnonzero(snap.tainted):
                taints = snap.nodes[row].taints
                ok = verdicts.get(taints)
                if ok is None:
                    ok = verdicts[taints] = not untolerated(
                        taints, cycle.pod.tolerations, _HARD_EFFECTS
                    )
                cached[row] = ok
            cycle.state["PodTopologySpread/taintOk"] = cached
        mask: MaskArray = cached
        return mask

    def _included(self, cycle: Cycle, c: Constraint) -> MaskArray:
        """matchNodeInclusionPolicies over every row."""
        mask = np.ones(len(cycle.snapshot), dtype=bool)
        if c.honor_affinity:
            mask &= required_node_affinity_mask(cycle)
        if c.honor_taints:
            mask &= self._taint_ok(cycle)
        return mask

    # -- filter ------------------------------------------------------------------------
    def pre_filter(self, cycle: Cycle) -> PreFilterResult | None:
        cycle.state["PodTopologySpread/filter"] = self._filter_state(cycle)
        return None

    def _filter_state(self, cycle: Cycle) -> _FilterState | None:
        constraints = self.constraints(cycle, DO_NOT_SCHEDULE)
        if not constraints:
            return None
        snap = cycle.snapshot
        codes = [label_codes(snap, c.topology_key) for c in constraints]
        has_all = np.ones(len(snap), dtype=bool)
        for lc in codes:
            has_all &= lc.codes >= 0
        state = _FilterState(constraints, codes, [], [], [], [])
        for c, lc in zip(constraints, codes, strict=True):
            eligible = np.flatnonzero(has_all & self._included(cycle, c))
            slots = len(lc.uniques)
            where = lc.codes[eligible]
            per_code = np.bincount(
                where, weights=self._node_counts(cycle, c)[eligible], minlength=slots
            ).astype(np.int64)
            present = np.zeros(slots, dtype=bool)
            present[where] = True
            domains = int(present.sum())
            lowest = int(per_code[present].min()) if domains else _MAX_INT32
            if domains < c.min_domains:
                lowest = 0
            state.per_code.append(np.append(per_code, 0))
            state.domains.append(domains)
            state.min_match.append(lowest)
            state.self_match.append(int(c.matches(cycle.pod)))
        return state

    def add_pods(self, cycle: Cycle) -> None:
        """AddPod (updateWithPod, +1): the counts of the edited rows' domains, recounted.

        A pod without DoNotSchedule constraints has no filter state to update, as in Go.
        """
        if cycle.state.get("PodTopologySpread/filter") is None:
            return
        cycle.state["PodTopologySpread/counts"] = {}  # the copy's own, not the original's
        cycle.state["PodTopologySpread/filter"] = self._filter_state(cycle)

    def _state(self, cycle: Cycle) -> _FilterState | None:
        if "PodTopologySpread/filter" not in cycle.state:
            cycle.state["PodTopologySpread/filter"] = self._filter_state(cycle)
        state: _FilterState | None = cycle.state["PodTopologySpread/filter"]
        return state

    def filter(self, cycle: Cycle, nodes: IndexArray) -> list[Rejection]:
        state = self._state(cycle)
        if state is None:
            return []
        undecided = np.ones(len(nodes), dtype=bool)
        missing = np.zeros(len(nodes), dtype=bool)
        skewed = np.zeros(len(nodes), dtype=bool)
        for i, c in enumerate(state.constraints):
            codes = state.codes[i].codes[nodes]
            lacks = undecided & (codes < 0)
            missing |= lacks
            undecided &= ~lacks
            skew = state.per_code[i][codes] + state.self_match[i] - state.min_match[i]
            over = undecided & (skew > c.max_skew)
            skewed |= over
            undecided &= ~over
        out = []
        if missing.any():
            out.append(Rejection(REASON_LABEL, missing, unresolvable=True))
        if skewed.any():
            out.append(Rejection(REASON, skewed))
        return out

    def explain(self, cycle: Cycle, node: int) -> str:
        state = self._state(cycle)
        if state is None:
            return ""
        labels = cycle.snapshot.nodes[node].labels
        for i, c in enumerate(state.constraints):
            value = labels.get(c.topology_key)
            if value is None:
                return f"node has no label {c.topology_key}"
            count = int(state.per_code[i][state.codes[i].codes[node]])
            skew = count + state.self_match[i] - state.min_match[i]
            if skew > c.max_skew:
                return (
                    f"{c.topology_key}={value} has {count} matching pod(s)"
                    f"{' + this pod' if state.self_match[i] else ''}, the minimum over "
                    f"{state.domains[i]} domain(s) is {state.min_match[i]}: skew {skew} > "
                    f"maxSkew {c.max_skew}"
                )
        return ""

    # -- score --------------------------------------------------------------------------
    def pre_score(self, cycle: Cycle, nodes: IndexArray) -> bool:
        cycle.state["PodTopologySpread/score"] = None
        snap, pod = cycle.snapshot, cycle.pod
        if not len(snap):
            return False
        constraints = self.constraints(cycle, SCHEDULE_ANYWAY)
        if not constraints:
            return False
        require_all = bool(pod.topology_spread) or not self.system_defaulted
        codes = [label_codes(snap, c.topology_key) for c in constraints]
        has_all = np.ones(len(snap), dtype=bool)
        for lc in codes:
            has_all &= lc.codes >= 0
        ignored = ~has_all[nodes] if require_all else np.zeros(len(nodes), dtype=bool)
        kept = nodes[~ignored]
        state = _ScoreState(constraints, codes, [], [], [], ignored)
        for c, lc in zip(constraints, codes, strict=True):
            counts = self._node_counts(cycle, c)
            state.node_counts.append(counts)
            if c.topology_key == HOSTNAME:
                state.weights.append(math.log(len(nodes) - int(ignored.sum()) + 2))
                state.per_code.append(None)
                continue
            values = lc.value_codes()
            in_domain = np.zeros(len(lc.uniques) + 1, dtype=bool)
            in_domain[values[kept]] = True
            state.weights.append(math.log(int(in_domain.sum()) + 2))
            eligible = self._included(cycle, c) & in_domain[values]
            if require_all:
                eligible &= has_all
            rows = np.flatnonzero(eligible)
            per_code = np.bincount(values[rows], weights=counts[rows], minlength=len(in_domain))
            state.per_code.append(per_code.astype(np.int64))
        cycle.state["PodTopologySpread/score"] = state
        return True

    def score(self, cycle: Cycle, nodes: IndexArray) -> IntArray:
        state = cycle.state.get("PodTopologySpread/score")
        if not isinstance(state, _ScoreState):
            return np.zeros(len(nodes), dtype=np.int64)
        total = np.zeros(len(nodes), dtype=np.float64)
        for i, c in enumerate(state.constraints):
            lc = state.codes[i]
            present = lc.codes[nodes] >= 0
            per_code = state.per_code[i]
            if per_code is None:
                count = state.node_counts[i][nodes]
            else:
                count = per_code[lc.value_codes()[nodes]]
            term = count.astype(np.float64) * state.weights[i] + float(c.max_skew - 1)
            total = total + np.where(present, term, 0.0)
        return np.where(state.ignored, 0, round_half_away(total))

    def normalize(self, cycle: Cycle, nodes: IndexArray, scores: IntArray) -> IntArray:
        state = cycle.state.get("PodTopologySpread/score")
        if not isinstance(state, _ScoreState):
            return scores
        valid = ~state.ignored
        low = int(scores[valid].min()) if valid.any() else 2**63 - 1
        high = max(int(scores[valid].max()), 0) if valid.any() else 0
        invalid = state.ignored | (scores == -1)
        if high == 0:
            out = np.full(scores.shape, MAX_NODE_SCORE, dtype=np.int64)
        else:
            out = _go_div(MAX_NODE_SCORE * (high + low - scores), high)
        return np.where(invalid, 0, out)
