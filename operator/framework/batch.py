"""Opportunistic batching: the next pod of a burst reuses the last pod's scored nodes.

A port of kube-scheduler v1.37's ``framework/runtime/batch.go`` (KEP-5598, the
OpportunisticBatching gate, beta and on by default). After a cycle that scored
nodes, the sorted list less the chosen node is kept with the pod's signature. The
next cycle, if it is the very next scheduling cycle, its pod has the same
signature, no nominated node, and the list is under 500 ms old, re-checks the
node the last pod took (still feasible: it is rescored against the cached
candidates and put back in the list) and pops the list's head as a hint; the
cycle then tries the hint first, as it tries a nominated node.

Every pod of kube-scheduler's default profile is unsignable (PodTopologySpread's
system default constraints), so batching only ever fires in profiles without
default spread constraints.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from podium.framework import signers
from podium.framework.plugin import Cycle, IndexArray, IntArray, Plugin, PluginError, signs
from podium.framework.profile import Profile
from podium.metrics import Metrics
from podium.state.snapshot import Snapshot

__all__ = [
    "MAX_BATCH_AGE",
    "BatchStats",
    "OpportunisticBatch",
    "SortedNodes",
    "batchable",
    "heap_top",
    "sign_pod",
]

MAX_BATCH_AGE = 0.5
"""maxBatchAge: a cached list older than this is thrown away."""

# metrics.BatchAttempt* and metrics.BatchFlush*: the label values Go records.
NO_HINT, HINT_USED, HINT_NOT_USED = "no_hint", "hint_used", "hint_not_used"
POD_SKIPPED, POD_FAILED, POD_NOMINATED = "pod_skipped", "pod_failed", "pod_nominated"
NODE_MISSING, EMPTY_LIST, EXPIRED = "node_missing", "empty_list", "expired"
POD_INCOMPATIBLE, POD_NOT_BATCHABLE = "pod_incompatible", "pod_not_batchable"
FILTER_ERROR, PRESCORE_ERROR = "filter_error", "prescore_error"
RESCORE_ERROR, NORMALIZE_ERROR = "rescore_error", "normalize_error"


def batchable(profile: Profile) -> bool:
    """computeBatchablePlugins: every PreFilter, Filter, PreScore and Score plugin of
    the profile implements SignPod (Podium has no extenders)."""
    return all(signs(p) for p in profile.filters) and all(signs(p) for p, _ in profile.scores)


def _signing_plugins(profile: Profile) -> tuple[Plugin, ...] | None:
    """The plugins that sign a pod, filters then scores; None when the profile is not
    batchable or one plugin signs no pod by its settings alone (the answer, without the
    work)."""
    if not batchable(profile):
        return None
    plugins = (*profile.filters, *(p for p, _ in profile.scores))
    return None if any(p.signs_no_pod() for p in plugins) else plugins


def sign_pod(profile: Profile, cycle: Cycle) -> bytes | None:
    """frameworkImpl.SignPod: the scheduler name and every plugin's fragments (one per
    key, the first plugin's), or None when the profile or any plugin cannot sign the
    cycle's pod."""
    if not profile.opportunistic_batching:
        return None
    plugins = profile.derived(sign_pod, lambda: _signing_plugins(profile))
    if plugins is None:
        return None
    signature: dict[str, object] = {signers.SCHEDULER_NAME: cycle.pod.scheduler_name}
    seen: set[str] = set()
    for plugin in plugins:
        if plugin.name in seen:
            continue
        seen.add(plugin.name)
        fragments = plugin.sign_pod(cycle)
        if fragments is None:
            return None
        signature.update(fragments)
    return json.dumps(signature, sort_keys=True, separators=(",", ":")).encode()


class SortedNodes:
    """framework.SortedScoredNodes: Go's max-heap of scored nodes, kept as Go lays it out
    (container/heap), so that pops, ties included, come in Go's order.

    Go orders by TotalScore, then Randomizer, which it sets only for extenders (Podium
    has none): ties fall to the heap's layout over the feasible nodes in the order the
    Filter search found them. Each node keeps its plugins' raw scores for a rescore.
    """

    __slots__ = ("heap", "names", "raw", "totals")

    def __init__(self, names: list[str], totals: IntArray, raw: dict[str, IntArray]) -> None:
        """NewSortedScoredNodes: heap.Init over the nodes in the given order."""
        self.names = names
        self.totals: list[int] = totals.tolist()
        self.raw = raw
        self.heap = list(range(len(names)))
        for i in range(len(self.heap) // 2 - 1, -1, -1):
            self._down(i, len(self.heap))

    def _less(self, i: int, j: int) -> bool:
        return self.totals[self.heap[i]] > self.totals[self.heap[j]]

    def _down(self, i: int, n: int) -> None:
        """container/heap's down."""
        heap = self.heap
        while True:
            j = 2 * i + 1
            if j >= n:
                return
            if j + 1 < n and self._less(j + 1, j):
                j += 1
            if not self._less(j, i):
                return
            heap[i], heap[j] = heap[j], heap[i]
            i = j

    def __len__(self) -> int:
        return len(self.heap)

    def pop(self) -> str:
        """heap.Pop: the best node, removed."""
        heap = self.heap
        last = len(heap) - 1
        heap[0], heap[last] = heap[last], heap[0]
        self._down(0, last)
        return self.names[heap.pop()]

    def unordered(self) -> tuple[list[str], dict[str, IntArray]]:
        """UnorderedList: the names and raw scores in the heap's own order."""
        order = np.array(self.heap, dtype=np.intp)
        return [self.names[i] for i in self.heap], {k: v[order] for k, v in self.raw.items()}


def heap_top(totals: IntArray) -> int:
    """The index ``SortedNodes(...).pop()`` gives first, without building the heap.

    container/heap's Init leaves at the root the first best-scored element met by a walk
    from the root that stops at a best-scored element and otherwise goes into the child
    whose subtree holds one, the left on a tie (``down`` swaps only for a strictly
    greater child and prefers the left one). Give each position k its leftmost place in
    the tree's bottom row, (k + 1) << (depth - bit_length(k + 1)): a left subtree's
    places all come before its right sibling's, and a node shares its place only with
    the descendants on its left spine. So the walk ends at the best-scored element with
    the smallest place, the highest of those on a tie: array work, where sifting the
    hundreds of tied nodes of a uniform cluster in Python cost a tenth of a cycle.
    """
    is_best = totals == totals.max()
    if is_best[0]:  # the first node is best, as on a uniform cluster: Init leaves it on top
        return 0
    best = np.flatnonzero(is_best)
    if best.size == 1:
        return int(best[0])
    position = best + 1
    bits = np.frexp(position.astype(np.float64))[1].astype(np.int64)  # bit_length
    place = position << (int(bits.max()) - bits)
    first = np.flatnonzero(place == place.min())
    return int(best[first[0]])  # the highest: the smallest index on the spine


@dataclass(slots=True)
class BatchStats:
    """What the batch did since the scheduling loop last drained it into /metrics:
    scheduler_batch_attempts_total, scheduler_batch_cache_flushed_total,
    scheduler_batch_rescore_attempts_total and the three latency histograms."""

    attempts: Counter[tuple[str, str]] = field(default_factory=Counter)
    flushes: Counter[tuple[str, str]] = field(default_factory=Counter)
    rescores: Counter[str] = field(default_factory=Counter)
    # (hinted, profile, seconds) for scheduler_get_node_hint_duration_seconds.
    hint_seconds: list[tuple[str, str, float]] = field(default_factory=list)
    store_seconds: list[tuple[str, float]] = field(default_factory=list)
    rescore_seconds: list[tuple[str, float]] = field(default_factory=list)

    def drain(self, metrics: Metrics) -> None:
        """Move the counts and durations into /metrics and start over."""
        for labels, n in self.attempts.items():
            metrics.batch_attempts.labels(*labels).inc(n)
        for labels, n in self.flushes.items():
            metrics.batch_flushes.labels(*labels).inc(n)
        for profile, n in self.rescores.items():
            metrics.batch_rescores.labels(profile).inc(n)
        for hinted, profile, seconds in self.hint_seconds:
            metrics.node_hint_duration.labels(hinted, profile).observe(seconds)
        for profile, seconds in self.store_seconds:
            metrics.store_results_duration.labels(profile).observe(seconds)
        for profile, seconds in self.rescore_seconds:
            metrics.batch_rescore_duration.labels(profile).observe(seconds)
        for items in (self.attempts, self.flushes, self.rescores):
            items.clear()
        self.hint_seconds.clear()
        self.store_seconds.clear()
        self.rescore_seconds.clear()


@dataclass(slots=True)
class _State:
    signature: bytes
    nodes: SortedNodes
    created: float


@dataclass(slots=True)
class _LastCycle:
    count: int = 0
    chosen: str = ""
    succeeded: bool = False


class OpportunisticBatch:
    """One profile's batch (Go keeps one per framework)."""

    def __init__(
        self,
        profile: str,
        stats: BatchStats | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.profile = profile
        self.stats = stats
        self.clock = clock
        self.state: _State | None = None
        self.last = _LastCycle()

    def _flush(self, reason: str) -> None:
        """logUnusableState: count why the cached list cannot be used."""
        if self.stats is not None:
            self.stats.flushes[(self.profile, reason)] += 1

    def node_hint(
        self,
        profile: Profile,
        cycle: Cycle,
        signature: bytes | None,
        count: int,
        nominated: str,
        feasible: Callable[[int], bool],
    ) -> str:
        """GetNodeHint: the cached list's best node for this pod, or "". ``feasible``
        runs the Filter plugins on one snapshot row (RunFilterPlugins)."""
        started = time.perf_counter()
        hint = ""
        if self._compatible(signature, count, nominated) and self._refresh(
            profile, cycle, feasible
        ):
            assert self.state is not None
            hint = self.state.nodes.pop()
        if self.stats is not None:
            hinted = "hint" if hint else NO_HINT
            if not hint:
                self.stats.attempts[(self.profile, NO_HINT)] += 1
            seconds = time.perf_counter() - started
            self.stats.hint_seconds.append((hinted, self.profile, seconds))
        return hint

    def store(
        self,
        signature: bytes | None,
        hinted: str,
        chosen: str,
        others: SortedNodes | None,
        count: int,
        feasible: int,
    ) -> None:
        """StoreScheduleResults: remember this cycle; keep the list when the hint was
        taken, else cache the new list (or drop the state when it cannot be reused).
        ``others`` is built only for a signed pod; ``feasible`` tells an unsigned pod's
        flush (pod_not_batchable) from a single feasible node's (empty_list)."""
        started = time.perf_counter()
        self.last = _LastCycle(count, chosen, True)
        if hinted and hinted == chosen:
            self._attempt(HINT_USED)
        else:
            if hinted:
                self._attempt(HINT_NOT_USED)
            if signature is not None and others is not None and len(others) > 0:
                self.state = _State(signature, others, self.clock())
            else:
                self._flush(EMPTY_LIST if feasible <= 1 else POD_NOT_BATCHABLE)
                self.state = None
        if self.stats is not None:
            self.stats.store_seconds.append((self.profile, time.perf_counter() - started))

    def _attempt(self, result: str) -> None:
        if self.stats is not None:
            self.stats.attempts[(self.profile, result)] += 1

    def _compatible(self, signature: bytes | None, count: int, nominated: str) -> bool:
        """batchStateCompatible, its checks in Go's order. The members of one pod-group
        cycle share its count, so a member may take the hint the member before it left
        (Go allows it with GenericWorkload on, the only gate under which those cycles
        exist)."""
        state = self.state
        if state is None or len(state.nodes) == 0:
            return False
        if count != self.last.count + 1 and count != self.last.count:
            self._flush(POD_SKIPPED)
            return False
        if not self.last.succeeded:
            self._flush(POD_FAILED)
            return False
        if nominated:
            self._flush(POD_NOMINATED)
            return False
        if signature is None or signature != state.signature:
            self._flush(POD_INCOMPATIBLE)
            return False
        if self.clock() > state.created + MAX_BATCH_AGE:
            self._flush(EXPIRED)
            return False
        return True

    def _refresh(
        self,
        profile: Profile,
        cycle: Cycle,
        feasible: Callable[[int], bool],
    ) -> bool:
        """refreshHintCandidates: the node the last pod took, if still feasible for this
        one, is rescored and competes again; gone from the cluster, or a Filter's Error
        there (not a rejection), and there is no hint: the cycle goes on without one."""
        row = cycle.snapshot.index.get(self.last.chosen)
        if row is None:
            self._flush(NODE_MISSING)
            return False
        try:
            fits = feasible(row)
        except PluginError:
            self._flush(FILTER_ERROR)
            return False
        if not fits:
            return True
        return self._rescore(profile, cycle, row)

    def _rescore(self, profile: Profile, cycle: Cycle, row: int) -> bool:
        """rescoreHintedNode: PreScore over the cached candidates and the node, Score on
        the node alone, then every plugin normalises the cached raw scores and the fresh
        ones together, and a new heap is built over them. An Error at any of the three
        steps leaves no hint (Go's prescore_error, rescore_error, normalize_error)."""
        started = time.perf_counter()
        if self.stats is not None:
            self.stats.rescores[self.profile] += 1
        try:
            return self._rescored(profile, cycle, row)
        finally:
            if self.stats is not None:
                self.stats.rescore_seconds.append((self.profile, time.perf_counter() - started))

    def _rescored(self, profile: Profile, cycle: Cycle, row: int) -> bool:
        state = self.state
        assert state is not None
        snapshot: Snapshot = cycle.snapshot
        cached_names, cached_raw = state.nodes.unordered()
        rows = [snapshot.index.get(name) for name in cached_names]
        if any(r is None for r in rows):
            self._flush(NODE_MISSING)
            return False
        nodes: IndexArray = np.array([*rows, row], dtype=np.intp)
        scratch = Cycle(cycle.pod, snapshot, dict(cycle.state))
        try:  # RunPreScorePlugins
            scorers = [(p, w) for p, w in profile.scores if p.pre_score(scratch, nodes)]
        except PluginError:
            self._flush(PRESCORE_ERROR)
            return False
        try:  # RunRawScorePlugins, on the rescored node alone
            fresh = {p.name: p.score(scratch, nodes[-1:]) for p, _ in scorers}
        except PluginError:
            self._flush(RESCORE_ERROR)
            return False
        totals = np.zeros(nodes.size, dtype=np.int64)
        raw: dict[str, IntArray] = {}
        try:  # NormalizeScores over the cached raw scores and the fresh ones
            for scorer, weight in scorers:
                cached = cached_raw.get(scorer.name)
                if cached is None:  # not scored last cycle: Go's zero NodeScore
                    cached = np.zeros(nodes.size - 1, dtype=np.int64)
                raw[scorer.name] = np.concatenate([cached, fresh[scorer.name]]).astype(np.int64)
                totals += scorer.normalize(scratch, nodes, raw[scorer.name].copy()) * weight
        except PluginError:
            self._flush(NORMALIZE_ERROR)
            return False
        state.nodes = SortedNodes([*cached_names, snapshot.names[row]], totals, raw)
        return True
