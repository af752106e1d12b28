"""One scheduling decision: findNodesThatFit, then score, then select.

Pure and synchronous: given a profile, a snapshot and a pod it returns a
node or a diagnosis, so the live scheduler, ``podium explain`` and ``podium
simulate`` all run exactly this code.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from podium.framework.batch import (
    BatchStats,
    OpportunisticBatch,
    SortedNodes,
    heap_top,
    sign_pod,
)
from podium.framework.plugin import Cycle, IndexArray, IntArray
from podium.framework.probe import PluginStats
from podium.framework.profile import Profile
from podium.kube.objects import PodInfo
from podium.state.snapshot import Snapshot

__all__ = [
    "NO_NODES_MSG",
    "Diagnosis",
    "Held",
    "Nominated",
    "Placement",
    "PreFilterOutcome",
    "filter_nodes",
    "filter_with_nominated",
    "nominated_rows",
    "num_feasible_nodes_to_find",
    "run_filters",
    "run_pre_filters",
    "schedule",
]

NO_NODES_MSG = "no nodes available to schedule pods"
MIN_FEASIBLE_NODES = 100
MIN_FEASIBLE_PERCENTAGE = 5

# Node status codes in Diagnosis.status.
FEASIBLE, UNSCHEDULABLE, UNRESOLVABLE, UNSEEN = 0, 1, 2, 3


@dataclass(slots=True)
class Diagnosis:
    """Why no node fits: kube-scheduler's FitError, plus per-node detail for explain."""

    num_all_nodes: int
    status: np.ndarray
    plugin: np.ndarray
    reasons: Counter[str] = field(default_factory=Counter)
    rejected_by: set[str] = field(default_factory=set)
    prefilter_msg: str = ""
    prefilter_plugin: str = ""
    post_filter_msg: str = ""

    def message(self) -> str:
        """FitError.Error(): counts sorted as strings, exactly like sort.Strings."""
        msg = f"0/{self.num_all_nodes} nodes are available:"
        if self.prefilter_msg:
            msg += f" {self.prefilter_msg}."
        else:
            histogram = sorted(f"{count} {reason}" for reason, count in self.reasons.items())
            if histogram:
                msg += " " + ", ".join(histogram) + "."
        if self.post_filter_msg:
            msg += f" {self.post_filter_msg}"
        return msg


@dataclass(slots=True)
class Placement:
    """The outcome of one attempt; ``node`` is empty when the pod fits nowhere."""

    node: str = ""
    diagnosis: Diagnosis | None = None
    evaluated: int = 0
    feasible: int = 0
    candidates: IndexArray | None = None
    totals: IntArray | None = None
    plugin_scores: dict[str, IntArray] = field(default_factory=dict)
    nominated: str = ""
    # Time spent in each extension point, for scheduler_framework_extension_point_duration.
    prefilter_seconds: float = 0.0
    filter_seconds: float = 0.0
    score_seconds: float = 0.0
    # The filters' Diagnosis on success too, for decision records' rejection counts.
    filtered: Diagnosis | None = None
    # The heap of scored nodes less the chosen one, kept when the pod has a signature.
    ranked: SortedNodes | None = None
    # The opportunistic batch's hint this cycle tried first ("" if none).
    hint: str = ""


def num_feasible_nodes_to_find(percentage: int, total: int) -> int:
    """numFeasibleNodesToFind: all nodes below 100, else an adaptive share, at least 100."""
    if total < MIN_FEASIBLE_NODES:
        return total
    if percentage <= 0:
        percentage = max(50 - total // 125, MIN_FEASIBLE_PERCENTAGE)
    if percentage >= 100:
        return total
    return max(total * percentage // 100, MIN_FEASIBLE_NODES)


class Scheduler:
    """Holds what successive cycles share: the round-robin start index (Go's
    nextStartNodeIndex) and each profile's opportunistic batch."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.next_start = 0
        self.rng = rng or random.Random()
        # Set by the scheduling loop, which drains them into /metrics; None records nothing.
        self.plugin_stats: PluginStats | None = None
        self.batch_stats: BatchStats | None = None
        self.batches: dict[str, OpportunisticBatch] = {}

    def batch(self, profile: Profile) -> OpportunisticBatch:
        """The profile's batch (Go's frameworkImpl.batch), made on first use."""
        batch = self.batches.get(profile.scheduler_name)
        if batch is None:
            batch = OpportunisticBatch(profile.scheduler_name, self.batch_stats)
            self.batches[profile.scheduler_name] = batch
        return batch

    def schedule(
        self,
        profile: Profile,
        snapshot: Snapshot,
        pod: PodInfo,
        *,
        record: bool = False,
        nominated: Nominated | None = None,
        nominated_node: str = "",
        within: frozenset[str] | None = None,
        cycle_count: int | None = None,
        group: dict[str, Any] | None = None,
    ) -> Placement:
        return schedule(
            profile,
            snapshot,
            pod,
            self,
            record=record,
            nominated=nominated,
            nominated_node=nominated_node,
            within=within,
            cycle_count=cycle_count,
            group=group,
        )


Nominated = Mapping[str, Mapping[str, PodInfo]]
"""Pods nominated to nodes by earlier preemptions: node name -> uid -> pod."""


Held = dict[int, list[PodInfo]]
"""Snapshot row -> the nominated pods that hold room there for the cycle's pod."""


def nominated_rows(snapshot: Snapshot, pod: PodInfo, nominated: Nominated | None) -> Held:
    """addGENominatedPods' choice: per row, the pods nominated there of equal or higher
    priority than ``pod``, other than ``pod`` itself. Rows without any are left out."""
    held: Held = {}
    for node, pods in (nominated or {}).items():
        row = snapshot.index.get(node)
        if row is None:
            continue
        chosen = [p for p in pods.values() if p.priority >= pod.priority and p.uid != pod.uid]
        if chosen:
            held[row] = chosen
    return held


def filter_with_nominated(
    profile: Profile, cycle: Cycle, row: int, held: list[PodInfo], diagnosis: Diagnosis | None
) -> bool:
    """RunFilterPluginsWithNominatedPods on one node that has ``held`` pods nominated.

    First pass: the pods added to the node's row and to a copy of the PreFilter state
    (each plugin's ``add_pods``, Go's RunPreFilterExtensionAddPod), so resources, ports,
    topology spread and inter-pod (anti-)affinity all count them. Only if that passes,
    a second pass without them, on the state as PreFilter left it. The node is feasible
    when both pass; the failing pass's reasons go to ``diagnosis``.
    """
    snapshot = cycle.snapshot
    nodes = np.array([row], dtype=np.intp)
    backup = snapshot.edit_row(row, add=held)
    try:
        added = Cycle(cycle.pod, snapshot, dict(cycle.state))
        for plugin in profile.filters:
            plugin.add_pods(added)
        passed = run_filters(profile, added, nodes, diagnosis).size > 0
    finally:
        snapshot.restore_row(row, backup)
    return passed and run_filters(profile, cycle, nodes, diagnosis).size > 0


def filter_nodes(
    profile: Profile,
    cycle: Cycle,
    nodes: IndexArray,
    diagnosis: Diagnosis | None,
    held: Held,
) -> IndexArray:
    """The feasible ``nodes``, in order: the nodes without nominated pods in one vector
    pass, each node with some through ``filter_with_nominated``."""
    special = np.isin(nodes, np.fromiter(held, dtype=np.intp, count=len(held))) if held else None
    if special is None or not special.any():
        return run_filters(profile, cycle, nodes, diagnosis)
    keep = np.zeros(nodes.size, dtype=bool)
    plain = ~special
    keep[plain] = np.isin(nodes[plain], run_filters(profile, cycle, nodes[plain], diagnosis))
    for i in np.flatnonzero(special):
        row = int(nodes[i])
        keep[i] = filter_with_nominated(profile, cycle, row, held[row], diagnosis)
    out: IndexArray = nodes[keep]
    return out


@dataclass(slots=True)
class PreFilterOutcome:
    """What the PreFilter plugins decided before any node is filtered."""

    # The node names the pod may go to; None when no plugin restricted them.
    allowed: frozenset[str] | None = None
    # The plugins that restricted them, in profile order.
    narrowing: list[str] = field(default_factory=list)
    # Set when the pod is rejected for every node: the message and the plugin.
    reject: str = ""
    plugin: str = ""
    unresolvable: bool = True


def run_pre_filters(profile: Profile, cycle: Cycle) -> PreFilterOutcome:
    """RunPreFilterPlugins: each plugin's verdict, stopping at the first outright rejection."""
    out = PreFilterOutcome()
    probe = cycle.probe
    for plugin in profile.filters:
        started = probe.start() if probe else 0.0
        result = plugin.pre_filter(cycle)
        if probe:
            probe.ran(plugin.name, "PreFilter", started, _status(result and result.reject))
        if result is None:
            continue
        if result.reject:
            out.reject, out.plugin, out.unresolvable = (
                result.reject,
                plugin.name,
                result.unresolvable,
            )
            return out
        if result.node_names is not None:
            allowed = result.node_names if out.allowed is None else out.allowed & result.node_names
            out.allowed = allowed
            out.narrowing.append(plugin.name)
            if not allowed:
                # Disjoint node sets reject the pod outright.
                plugins = sorted(set(out.narrowing))
                out.reject = (
                    f"node(s) didn't satisfy plugin {plugins[0]}"
                    if len(plugins) == 1
                    else f"node(s) didn't satisfy plugin(s) [{' '.join(plugins)}] simultaneously"
                )
                out.plugin = plugin.name
                return out
    return out


def _status(rejected: object) -> str:
    """The status label of a plugin call: Unschedulable when it turned the pod away."""
    return "Unschedulable" if rejected else "Success"


def run_filters(
    profile: Profile, cycle: Cycle, nodes: IndexArray, diagnosis: Diagnosis | None
) -> IndexArray:
    """Every filter in order over the still-feasible nodes; the first rejection wins."""
    alive = nodes
    probe = cycle.probe
    for position, plugin in enumerate(profile.filters):
        if alive.size == 0:
            break
        started = probe.start() if probe else 0.0
        rejections = plugin.filter(cycle, alive)
        if probe:
            probe.ran(plugin.name, "Filter", started, _status(rejections), int(alive.size))
        if not rejections:
            continue
        if len(rejections) == 1:
            # One reason: its mask is the verdict, no union to build.
            only = rejections[0]
            rejected = only.mask
            if diagnosis is not None:
                count = int(np.count_nonzero(rejected))
                diagnosis.reasons[only.reason] += count
                if count:
                    diagnosis.status[alive[rejected]] = (
                        UNRESOLVABLE if only.unresolvable else UNSCHEDULABLE
                    )
                    diagnosis.plugin[alive[rejected]] = position
                    diagnosis.rejected_by.add(plugin.name)
            alive = alive[~rejected]
            continue
        rejected = np.zeros(alive.size, dtype=bool)
        unresolvable = np.zeros(alive.size, dtype=bool)
        for rejection in rejections:
            rejected |= rejection.mask
            if rejection.unresolvable:
                unresolvable |= rejection.mask
            if diagnosis is not None:
                diagnosis.reasons[rejection.reason] += int(np.count_nonzero(rejection.mask))
        if diagnosis is not None and rejected.any():
            hit = alive[rejected]
            diagnosis.status[hit] = np.where(unresolvable[rejected], UNRESOLVABLE, UNSCHEDULABLE)
            diagnosis.plugin[hit] = position
            diagnosis.rejected_by.add(plugin.name)
        alive = alive[~rejected]
    return alive


def schedule(
    profile: Profile,
    snapshot: Snapshot,
    pod: PodInfo,
    state: Scheduler,
    *,
    record: bool = False,
    nominated: Nominated | None = None,
    nominated_node: str = "",
    within: frozenset[str] | None = None,
    cycle_count: int | None = None,
    group: dict[str, Any] | None = None,
) -> Placement:
    """One cycle; ``nominated`` pods reserve room while filters run (not while scoring),
    on their own nodes only (``filter_with_nominated``).

    ``within`` (a pod-group trial, Go's AssumePlacement) limits the candidate nodes
    only: every plugin still sees the whole cluster, as PreFilter does in Go.

    ``cycle_count`` is the queue's scheduling cycle (Go's CurrentCycle) of a live
    cycle: with it the profile's opportunistic batch takes part
    (``framework/batch.py``), in a pod-group cycle's members and trials too, as Go's
    schedulePod does for each; without it (tools' dry runs) it does not.

    ``group`` is the state the members of one pod-group cycle share (``Cycle.group``).
    """
    total = len(snapshot)
    stats = state.plugin_stats
    probe = stats.probe(profile.scheduler_name) if stats else None
    cycle = Cycle(pod, snapshot, probe=probe, group=group)
    diagnosis = Diagnosis(
        num_all_nodes=total if within is None else len(within),
        status=np.full(total, UNSEEN, dtype=np.int8),
        plugin=np.full(total, -1, dtype=np.int16),
    )
    prefilter_started = time.perf_counter()
    pre = run_pre_filters(profile, cycle)
    diagnosis.rejected_by.update(pre.narrowing)
    if pre.reject:
        diagnosis.prefilter_msg = pre.reject
        diagnosis.prefilter_plugin = pre.plugin
        diagnosis.rejected_by.add(pre.plugin)
        diagnosis.status[:] = UNRESOLVABLE if pre.unresolvable else UNSCHEDULABLE
        return Placement(
            diagnosis=diagnosis, prefilter_seconds=time.perf_counter() - prefilter_started
        )
    allowed, restricting = pre.allowed, pre.narrowing

    filter_started = time.perf_counter()
    prefilter_seconds = filter_started - prefilter_started
    held = nominated_rows(snapshot, pod, nominated)
    node = nominated_node or pod.nominated_node
    batch = signature = None
    hint = ""
    if cycle_count is not None and profile.opportunistic_batching:
        batch = state.batch(profile)
        signature = sign_pod(profile, cycle)

        def feasible(row: int) -> bool:
            return run_filters(profile, cycle, np.array([row], dtype=np.intp), None).size > 0

        hint = batch.node_hint(profile, cycle, signature, cycle_count, node, feasible)
    tried = node or hint
    row = snapshot.index.get(tried) if tried else None
    rejected = None
    if row is not None and (within is None or tried in within):
        # evaluateNominatedNode: the node an earlier preemption freed, else the batch's
        # hint, is tried first; outside a trial's nodes it is not tried (the hint stays
        # spent, as Go's GetNodeHint popped it).
        nodes = np.array([row], dtype=np.intp)
        if filter_nodes(profile, cycle, nodes, None, held).size:
            if batch is not None:
                assert cycle_count is not None
                batch.store(signature, hint, tried, None, cycle_count, feasible=1)
            return Placement(
                node=tried,
                evaluated=1,
                feasible=1,
                candidates=nodes,
                nominated=node,
                hint=hint,
                prefilter_seconds=prefilter_seconds,
                filter_seconds=time.perf_counter() - filter_started,
            )
        rejected = row
    candidates, processed = _find_feasible(
        profile, snapshot, cycle, state, diagnosis, allowed, restricting, within, held, rejected
    )
    placement = Placement(
        evaluated=processed,
        feasible=int(candidates.size),
        filtered=diagnosis,
        prefilter_seconds=prefilter_seconds,
        filter_seconds=time.perf_counter() - filter_started,
        hint=hint,
    )
    if candidates.size == 0:
        placement.diagnosis = diagnosis
        return placement
    ranked = signature is not None and candidates.size > 1
    placement = _score(profile, snapshot, cycle, state, placement, candidates, record, ranked)
    if batch is not None:
        assert cycle_count is not None
        size = int(candidates.size)
        batch.store(signature, hint, placement.node, placement.ranked, cycle_count, size)
    return placement


def _restricted_order(
    snapshot: Snapshot,
    state: Scheduler,
    diagnosis: Diagnosis,
    allowed: frozenset[str] | None,
    restricting: list[str],
    within: frozenset[str] | None,
) -> tuple[IndexArray, int]:
    """The rotated node order less, marked unresolvable, the nodes PreFilter results
    (``allowed``) leave out, and how many nodes it was drawn from. In a trial it is the
    trial's nodes alone, in snapshot order, rotated by the start index modulo their
    count: Go's findNodesThatPassFilters walks ``ListNodesInPlacement()`` from
    ``nextStartNodeIndex % len(nodes)``."""
    total = len(snapshot)
    if within is not None:
        rows = np.flatnonzero(np.fromiter((name in within for name in snapshot.names), bool, total))
        listed = int(rows.size)
        order = np.roll(rows, -(state.next_start % listed)) if listed else rows
    else:
        listed = total
        order = (state.next_start + np.arange(total, dtype=np.intp)) % max(total, 1)
    if allowed is not None:
        keep = np.fromiter((snapshot.names[i] in allowed for i in order), bool, count=order.size)
        excluded = order[~keep]
        diagnosis.status[excluded] = UNRESOLVABLE
        if excluded.size:
            names = " ".join(sorted(set(restricting)))
            diagnosis.reasons[f"node(s) didn't satisfy plugin(s) [{names}]"] += int(excluded.size)
        order = order[keep]
    return order, listed


def _find_feasible(
    profile: Profile,
    snapshot: Snapshot,
    cycle: Cycle,
    state: Scheduler,
    diagnosis: Diagnosis,
    allowed: frozenset[str] | None,
    restricting: list[str],
    within: frozenset[str] | None = None,
    held: Held | None = None,
    rejected: int | None = None,
) -> tuple[IndexArray, int]:
    """findNodesThatPassFilters: a node counts as feasible only when it passes
    RunFilterPluginsWithNominatedPods (both passes where it has ``held`` pods).

    ``rejected`` is the row of a nominated or hinted node that failed just before: Go
    keeps its status in the Diagnosis, so it counts as processed (and moves
    nextStartNodeIndex one further) when the search stopped before reaching it."""
    total = len(snapshot)
    # The rotated order is built whole only when a restriction must look at every node;
    # otherwise each chunk is computed when reached, as most cycles stop after the first.
    # ``listed``: how many nodes the search draws from (ListNodesInPlacement), a trial's.
    order, listed = None, total
    if within is not None or allowed is not None:
        order, listed = _restricted_order(snapshot, state, diagnosis, allowed, restricting, within)

    size = total if order is None else order.size
    wanted = num_feasible_nodes_to_find(profile.percentage_of_nodes_to_score, size)
    if not profile.scores:
        wanted = min(wanted, 1)
    chunk = max(wanted + wanted // 4, 128)
    feasible: list[IndexArray] = []
    found = 0
    processed = 0
    for start in range(0, size, chunk):
        if order is None:
            stop = min(start + chunk, size)
            nodes = (state.next_start + np.arange(start, stop, dtype=np.intp)) % total
        else:
            nodes = order[start : start + chunk]
        fit = filter_nodes(profile, cycle, nodes, diagnosis, held or {})
        if found + fit.size >= wanted:
            fit = fit[: wanted - found]
            if not fit.size:
                last = -1
            elif order is None:
                # nodes[i] is (next_start + start + i) % total, with i < total.
                last = (int(fit[-1]) - state.next_start - start) % total
            else:
                last = int(np.flatnonzero(nodes == fit[-1])[0])
            processed = start + last + 1
            feasible.append(fit)
            found = wanted
            break
        feasible.append(fit)
        found += fit.size
        processed = start + nodes.size
    if rejected is not None and not _in_window(snapshot, state, order, processed, rejected):
        processed += 1
    if listed:
        state.next_start = (state.next_start + processed) % listed

    if len(feasible) == 1:
        candidates = feasible[0]
    elif feasible:
        candidates = np.concatenate(feasible)
    else:
        candidates = np.zeros(0, dtype=np.intp)
    return candidates, processed


def _in_window(
    snapshot: Snapshot, state: Scheduler, order: IndexArray | None, processed: int, row: int
) -> bool:
    """Whether ``row`` is among the first ``processed`` nodes of this cycle's order."""
    if order is None:
        return (row - state.next_start) % max(len(snapshot), 1) < processed
    return bool(np.isin(row, order[:processed]))


def _score(
    profile: Profile,
    snapshot: Snapshot,
    cycle: Cycle,
    state: Scheduler,
    placement: Placement,
    candidates: IndexArray,
    record: bool,
    ranked: bool = False,
) -> Placement:
    """prioritizeNodes, then NewSortedScoredNodes(...).Pop(): the best total, ties to
    Go's heap over the candidates in search order; with ``ranked`` (a signed pod) the
    rest of the heap is kept for the batch."""
    if candidates.size == 1 and not record:
        placement.node = snapshot.names[int(candidates[0])]
        placement.candidates = candidates
        return placement

    score_started = time.perf_counter()
    totals = np.zeros(candidates.size, dtype=np.int64)
    raw_scores: dict[str, IntArray] = {}
    probe = cycle.probe
    for scorer, weight in profile.scores:
        started = probe.start() if probe else 0.0
        scored = scorer.pre_score(cycle, candidates)
        if probe:
            probe.ran(scorer.name, "PreScore", started, "Success" if scored else "Skip")
            started = probe.start()
        if not scored:
            continue
        raw = scorer.score(cycle, candidates)
        if probe:
            probe.ran(scorer.name, "Score", started, "Success", int(candidates.size))
        if ranked:
            raw_scores[scorer.name] = raw.copy()
        normalized = scorer.normalize(cycle, candidates, raw)
        totals += normalized if weight == 1 else normalized * weight
        if record:
            placement.plugin_scores[scorer.name] = normalized
    if ranked:  # the batch keeps the rest of the heap
        names = [snapshot.names[int(r)] for r in candidates]
        heap = SortedNodes(names, totals, raw_scores)
        placement.node = heap.pop()
        placement.ranked = heap
    else:  # what the heap would pop, found without building it
        placement.node = snapshot.names[int(candidates[heap_top(totals)])]
    placement.score_seconds = time.perf_counter() - score_started
    placement.candidates = candidates
    placement.totals = totals
    return placement
