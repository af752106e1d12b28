"""Judging one pod on every node with the live scheduler's own cycle, and saying why.

``schedule(..., record=True)`` runs with percentageOfNodesToScore forced to
100, so every node is judged; the filters are then asked, node by node, for
their concrete sentence (``FilterPlugin.explain``).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from podium.algorithms.default_preemption import offline_message
from podium.algorithms.dynamic_resources.diagnose import ClaimDiagnoser
from podium.algorithms.dynamic_resources.plugin import CANNOT_ALLOCATE, pod_claims
from podium.algorithms.dynamic_resources.plugin import NAME as DYNAMIC_RESOURCES
from podium.framework.cycle import (
    UNRESOLVABLE,
    UNSEEN,
    Diagnosis,
    Placement,
    run_filters,
    run_pre_filters,
)
from podium.framework.plugin import Cycle, IndexArray
from podium.framework.profile import Profile
from podium.kube.objects import PodInfo
from podium.kube.resources import request_sources
from podium.state.cache import Cache
from podium.state.snapshot import Snapshot
from podium.tools.explain.extended import add_extended
from podium.tools.explain.model import FORCED_PERCENTAGE, Explanation, NodeRow
from podium.tools.explain.suggestions import (
    attempt,
    claim_suggestions,
    preemption_estimate,
    resource_suggestions,
    toleration_suggestions,
)


def _full_diagnosis(profile: Profile, cycle: Cycle, allowed: frozenset[str] | None) -> Diagnosis:
    """Every node's filter verdict; ``schedule`` keeps its diagnosis only when nothing fits."""
    snapshot = cycle.snapshot
    total = len(snapshot)
    diagnosis = Diagnosis(
        num_all_nodes=total,
        status=np.full(total, UNSEEN, dtype=np.int8),
        plugin=np.full(total, -1, dtype=np.int16),
    )
    order = snapshot.all_nodes()
    if allowed is not None:
        keep = np.fromiter((name in allowed for name in snapshot.names), bool, count=total)
        diagnosis.status[order[~keep]] = UNRESOLVABLE
        order = order[keep]
    run_filters(profile, cycle, order, diagnosis)
    return diagnosis


def explain_pod(
    profile: Profile,
    snapshot: Snapshot,
    pod: PodInfo,
    cache: Cache | None = None,
    *,
    details_for: int | None = None,
) -> Explanation:
    """Judge ``pod`` on every node of ``snapshot`` with the real algorithm.

    With ``cache`` (the one ``snapshot`` was built from), the preemption
    estimate is re-checked by evicting candidates in the cache and restoring
    them afterwards. ``details_for`` limits the per-node sentences of rejected
    nodes to that many (they cost a Python call per node); None means all.
    """
    forced = replace(profile, percentage_of_nodes_to_score=FORCED_PERCENTAGE)
    placement = attempt(forced, snapshot, pod)
    cycle = Cycle(pod, snapshot)
    pre = run_pre_filters(forced, cycle)
    narrowing = pre.narrowing
    diagnosis = placement.diagnosis or _full_diagnosis(forced, cycle, pre.allowed)
    names = snapshot.names
    rows: dict[int, NodeRow] = {}

    weights = [(s.name, w) for s, w in forced.scores]
    candidates = placement.candidates if placement.candidates is not None else np.zeros(0, np.intp)
    for k, i in enumerate(candidates.tolist()):
        scores = {n: int(a[k]) for n, a in placement.plugin_scores.items()}
        total = int(placement.totals[k]) if placement.totals is not None else 0
        rows[i] = NodeRow(names[i], "feasible", scores=scores, total=total)

    rejected = np.flatnonzero(diagnosis.status != UNSEEN)
    by_plugin: Counter[str] = Counter()
    if diagnosis.prefilter_msg:
        for i in rejected.tolist():
            rows[i] = NodeRow(
                names[i],
                "rejected",
                bool(diagnosis.status[i] == UNRESOLVABLE),
                diagnosis.prefilter_plugin,
                [diagnosis.prefilter_msg],
            )
        by_plugin[diagnosis.prefilter_plugin] = int(rejected.size)
    else:
        positions = diagnosis.plugin[rejected]
        excluded = rejected[positions < 0]
        label = " ".join(sorted(narrowing))
        for i in excluded.tolist():
            rows[i] = NodeRow(
                names[i],
                "rejected",
                True,
                label,
                [f"node(s) didn't satisfy plugin(s) [{label}]"],
            )
        if excluded.size:
            by_plugin[label] += int(excluded.size)
        for position in sorted(set(positions[positions >= 0].tolist())):
            plugin = forced.filters[position]
            idx: IndexArray = rejected[positions == position]
            by_plugin[plugin.name] += int(idx.size)
            reasons: dict[int, list[str]] = {i: [] for i in idx.tolist()}
            for rejection in plugin.filter(cycle, idx):
                for j in np.flatnonzero(rejection.mask).tolist():
                    reasons[int(idx[j])].append(rejection.reason)
            for i in idx.tolist():
                rows[i] = NodeRow(
                    names[i],
                    "rejected",
                    bool(diagnosis.status[i] == UNRESOLVABLE),
                    plugin.name,
                    reasons[i],
                )
    for i in range(len(snapshot)):
        if i not in rows:  # cannot happen at 100%; kept so that no node goes missing
            rows[i] = NodeRow(names[i], "rejected", plugin="-", reasons=["not evaluated"])

    ordered = sorted(
        (r for r in rows.values() if r.verdict == "feasible"),
        key=lambda r: (-(r.total or 0), r.node),
    )
    rejected_rows = sorted(
        (r for r in rows.values() if r.verdict != "feasible"), key=lambda r: r.node
    )
    _add_details(forced, cycle, narrowing, rejected_rows[:details_for], snapshot)
    _add_claim_problems(cycle, rejected_rows[:details_for], snapshot)
    add_extended(forced, snapshot, pod, ordered)

    out = Explanation(
        pod=pod.key,
        scheduler_name=pod.scheduler_name,
        priority=pod.priority,
        requests=dict(pod.requests),
        request_sources=request_sources(
            pod.raw.get("spec") or {}, pod.raw.get("status") or {}, pod.bound
        ),
        qos=pod.qos,
        profile=profile.policy or "<built-in>",
        policy_percentage=profile.percentage_of_nodes_to_score,
        nodes_total=len(snapshot),
        score_plugins=weights,
        skipped_scores=[n for n, _ in weights if n not in placement.plugin_scores]
        if placement.node
        else [],
        rows=ordered + rejected_rows,
        rejected_reasons=dict(sorted(diagnosis.reasons.items())),
        rejected_by_plugin=dict(sorted(by_plugin.items())),
    )
    if placement.node:
        _decide(out, placement, weights)
    else:
        diagnosis.post_filter_msg = offline_message(
            forced, snapshot, pod, diagnosis, random.Random(0)
        )
        out.message = diagnosis.message()
        if len(snapshot) == 0:
            out.message = "no nodes available to schedule pods"
        blockers = set(by_plugin)
        if not diagnosis.prefilter_msg and blockers == {"TaintToleration"}:
            out.suggestions = toleration_suggestions(forced, snapshot, pod)
        elif not diagnosis.prefilter_msg and blockers == {"NodeResourcesFit"}:
            out.suggestions = resource_suggestions(forced, snapshot, pod, rejected_rows)
        elif not diagnosis.prefilter_msg and blockers == {DYNAMIC_RESOURCES}:
            out.suggestions = claim_suggestions(rejected_rows)
        elif len(blockers) > 1:
            out.notes.append(
                "no single-plugin suggestion: nodes are rejected by "
                + ", ".join(f"{p} ({n})" for p, n in sorted(by_plugin.items()))
            )
        out.preemption = preemption_estimate(forced, snapshot, pod, rows, cache)
    return out


def _add_details(
    profile: Profile,
    cycle: Cycle,
    narrowing: Sequence[str],
    rows: Sequence[NodeRow],
    snapshot: Snapshot,
) -> None:
    by_name = {p.name: p for p in profile.filters}
    for row in rows:
        i = snapshot.index[row.node]
        plugins = [by_name[n] for n in narrowing] if row.plugin == " ".join(narrowing) else []
        if row.plugin in by_name:
            plugins = [by_name[row.plugin]]
        sentences = []
        for plugin in plugins:
            try:
                sentence = plugin.explain(cycle, i)
            except Exception as exc:  # a plugin's explain bug must not hide the rest
                sentence = f"({plugin.name}.explain failed: {exc})"
            if sentence:
                sentences.append(sentence)
        row.detail = "; ".join(sentences)


def _add_claim_problems(cycle: Cycle, rows: Sequence[NodeRow], snapshot: Snapshot) -> None:
    """For nodes where the allocator found no devices: which request fails there, and why."""
    failed = [r for r in rows if r.plugin == DYNAMIC_RESOURCES and CANNOT_ALLOCATE in r.reasons]
    if not failed:
        return
    store = snapshot.dra
    found = pod_claims(store, cycle.pod)
    if isinstance(found, str):
        return
    pending = [c.raw for c in found if c.allocation is None]
    allocations = {c.key: c.allocation for c in store.claims.values() if c.allocation is not None}
    allocations.update(
        (f.claim.key, f.claim.allocation) for f in store.in_flight.values() if f.claim.allocation
    )
    diagnoser = ClaimDiagnoser(store.classes, store.allocator_slices(), allocations)
    for row in failed:
        node = snapshot.nodes[snapshot.index[row.node]]
        row.claims = diagnoser.node(
            {"metadata": {"name": node.name, "labels": node.labels}}, pending
        )


def _decide(out: Explanation, placement: Placement, weights: Sequence[tuple[str, int]]) -> None:
    feasible = out.feasible
    best = feasible[0].total or 0
    out.winner = placement.node
    out.winner_total = best
    out.ties = sorted(r.node for r in feasible if r.total == best)
    if len(feasible) == 1:
        out.why = f"{placement.node} is the only feasible node"
        return
    if len(out.ties) > 1:
        out.why = (
            f"{len(out.ties)} nodes tie at total {best} ({', '.join(out.ties)}); the scheduler "
            f"picks one of them at random (this run picked {placement.node})"
        )
        return
    winner, runner = feasible[0], feasible[1]
    weight = dict(weights)
    diffs = sorted(
        (
            ((winner.scores.get(n, 0) - runner.scores.get(n, 0)) * weight[n], n)
            for n in winner.scores
        ),
        key=lambda d: (-abs(d[0]), d[1]),
    )
    parts = [f"{n} {d:+d}" for d, n in diffs if d]
    out.why = (
        f"highest total {best}, {best - (runner.total or 0)} ahead of {runner.node} "
        f"({runner.total}): " + ", ".join(parts)
    )
