"""`podium explain POD`: where would this pod go, and why not elsewhere?

Reads the live cluster (LIST nodes and pods, GET the pod, LIST SchedulerPolicies
when the CRD is installed) and never writes. It builds a fresh snapshot and runs
the real ``schedule(..., record=True)`` with percentageOfNodesToScore forced to
100, so every node is judged, then reports per node: the verdict, the rejecting
plugin with its own concrete sentence (``FilterPlugin.explain``), and for
feasible nodes each score plugin's normalised score, weight and the total.

For a pod that fits nowhere it adds kube-scheduler's message and, where one
plugin alone blocks it, a suggestion that has been checked by running the
algorithm again on a modified copy of the pod (a toleration added, smaller
requests). The preemption note is an estimate: nodes where evicting every
lower-priority pod would make room, re-checked against all filters.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from podium.algorithm import (
    UNRESOLVABLE,
    UNSEEN,
    Diagnosis,
    Placement,
    Scheduler,
    _run_filters,
    schedule,
)
from podium.algorithms.node_resources_fit import TOO_MANY_PODS
from podium.algorithms.taint_toleration import untolerated
from podium.cache import Cache
from podium.framework import Cycle, IndexArray
from podium.objects import PodInfo, Taint, Toleration, parse_node, parse_pod
from podium.pod_resources import describe_requests, quantity_text
from podium.policy import GROUP, PLURAL, VERSION, default_profile
from podium.preemption import post_filter
from podium.profile import Profile
from podium.selectors import KINDS as SELECTOR_PATHS
from podium.selectors import OBJECT_KINDS as SELECTOR_KINDS
from podium.simulate import SimulateError, load_policy, profile_from_policy
from podium.snapshot import Snapshot
from podium.volumes import KINDS as VOLUME_PATHS
from podium.volumes import OBJECT_KINDS

__all__ = [
    "ClusterState",
    "ExplainError",
    "Explanation",
    "NodeRow",
    "explain_cluster",
    "explain_pod",
    "format_table",
    "run_explain",
    "snapshot_from",
]

FORCED_PERCENTAGE = 100
_HARD_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
# How many alternatives a suggestion lists, and preemption candidates re-checked.
_SUGGESTIONS = 3
_PREEMPTION_CHECKS = 20


class ExplainError(RuntimeError):
    """Something the user must fix (pod not found, no access); the CLI exits 1."""


# -- the explanation ----------------------------------------------------------------------
@dataclass(slots=True)
class NodeRow:
    node: str
    verdict: str  # "feasible" or "rejected"
    unresolvable: bool = False
    plugin: str = ""
    reasons: list[str] = field(default_factory=list)
    detail: str = ""
    scores: dict[str, int] = field(default_factory=dict)
    total: int | None = None

    def to_dict(self, weights: Mapping[str, int]) -> dict[str, Any]:
        out: dict[str, Any] = {"node": self.node, "verdict": self.verdict}
        if self.verdict == "feasible":
            out["total"] = self.total
            out["scores"] = {
                name: {"score": score, "weight": weights[name], "weighted": score * weights[name]}
                for name, score in self.scores.items()
            }
        else:
            out["plugin"] = self.plugin
            out["reasons"] = list(self.reasons)
            out["detail"] = self.detail
            out["unresolvable"] = self.unresolvable
        return out


@dataclass(slots=True)
class Explanation:
    pod: str
    scheduler_name: str
    priority: int
    requests: dict[str, int]
    # Where each request came from (pod level, resize status, containers, + overhead).
    request_sources: dict[str, str]
    qos: str
    profile: str
    policy_percentage: int
    nodes_total: int
    score_plugins: list[tuple[str, int]]
    skipped_scores: list[str]
    rows: list[NodeRow]
    rejected_reasons: dict[str, int]
    rejected_by_plugin: dict[str, int]
    winner: str = ""
    winner_total: int | None = None
    ties: list[str] = field(default_factory=list)
    why: str = ""
    message: str = ""
    suggestions: list[str] = field(default_factory=list)
    preemption: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def feasible(self) -> list[NodeRow]:
        return [r for r in self.rows if r.verdict == "feasible"]

    @property
    def rejected(self) -> list[NodeRow]:
        return [r for r in self.rows if r.verdict != "feasible"]

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        weights = dict(self.score_plugins)
        feasible = self.feasible
        rows = feasible[:top] if top is not None else self.rows
        return {
            "pod": self.pod,
            "schedulerName": self.scheduler_name,
            "priority": self.priority,
            "requests": dict(self.requests),
            "requestSources": dict(self.request_sources),
            "qosClass": self.qos,
            "profile": self.profile,
            "percentageOfNodesToScore": {
                "policy": self.policy_percentage,
                "used": FORCED_PERCENTAGE,
                "note": "forced to 100 so that every node is evaluated",
            },
            "readOnly": True,
            "nodes": {
                "total": self.nodes_total,
                "feasible": len(feasible),
                "rejected": self.nodes_total - len(feasible),
                "shown": len(rows),
            },
            "scorePlugins": [{"name": n, "weight": w} for n, w in self.score_plugins],
            "skippedScorePlugins": list(self.skipped_scores),
            "rows": [r.to_dict(weights) for r in rows],
            "rejectedReasons": dict(self.rejected_reasons),
            "rejectedByPlugin": dict(self.rejected_by_plugin),
            "decision": {
                "node": self.winner or None,
                "total": self.winner_total,
                "ties": list(self.ties),
                "why": self.why,
            },
            "message": self.message or None,
            "suggestions": list(self.suggestions),
            "preemption": self.preemption,
            "notes": list(self.notes),
        }


def _prepare(
    profile: Profile, snapshot: Snapshot, pod: PodInfo
) -> tuple[Cycle, list[str], frozenset[str] | None]:
    """A cycle with every PreFilter run, as ``schedule`` runs them, for Filter/explain calls.

    Returns the cycle, the plugins whose PreFilter restricted the node set, and
    the nodes they allow (None: no restriction).
    """
    cycle = Cycle(pod, snapshot)
    narrowing: list[str] = []
    allowed: frozenset[str] | None = None
    for plugin in profile.filters:
        result = plugin.pre_filter(cycle)
        if result is None:
            continue
        if result.reject:
            break
        if result.node_names is not None:
            narrowing.append(plugin.name)
            allowed = result.node_names if allowed is None else allowed & result.node_names
            if not allowed:
                break  # disjoint node sets: schedule() rejects the pod outright here
    return cycle, narrowing, allowed


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
    _run_filters(profile, cycle, order, diagnosis)
    return diagnosis


def _attempt(profile: Profile, snapshot: Snapshot, pod: PodInfo) -> Placement:
    return schedule(profile, snapshot, pod, Scheduler(random.Random(0)), record=True)


def _abbreviation(names: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in names:
        short = "".join(c for c in name.rsplit("/", 1)[-1] if c.isupper()) or name
        out[name] = short if short not in out.values() else name
    return out


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
    placement = _attempt(forced, snapshot, pod)
    cycle, narrowing, allowed = _prepare(forced, snapshot, pod)
    diagnosis = placement.diagnosis or _full_diagnosis(forced, cycle, allowed)
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

    out = Explanation(
        pod=pod.key,
        scheduler_name=pod.scheduler_name,
        priority=pod.priority,
        requests=dict(pod.requests),
        request_sources={r: pod.request_sources.get(r, "containers") for r in pod.requests},
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
        if profile.preemption:
            diagnosis.post_filter_msg = post_filter(
                forced, snapshot, pod, diagnosis, random.Random(0)
            )
        out.message = diagnosis.message()
        if len(snapshot) == 0:
            out.message = "no nodes available to schedule pods"
        blockers = set(by_plugin)
        if not diagnosis.prefilter_msg and blockers == {"TaintToleration"}:
            out.suggestions = _toleration_suggestions(forced, snapshot, pod)
        elif not diagnosis.prefilter_msg and blockers == {"NodeResourcesFit"}:
            out.suggestions = _resource_suggestions(forced, snapshot, pod, rejected_rows)
        elif len(blockers) > 1:
            out.notes.append(
                "no single-plugin suggestion: nodes are rejected by "
                + ", ".join(f"{p} ({n})" for p, n in sorted(by_plugin.items()))
            )
        out.preemption = _preemption(forced, snapshot, pod, rows, cache)
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


def _feasible_count(profile: Profile, snapshot: Snapshot, pod: PodInfo) -> int:
    return _attempt(profile, snapshot, pod).feasible


def _toleration_text(taint: Taint) -> str:
    if taint.value:
        return f"{taint.key}={taint.value}:{taint.effect}"
    return f"{taint.key}:{taint.effect} (operator Exists)"


def _toleration_for(taint: Taint) -> Toleration:
    operator = "Equal" if taint.value else "Exists"
    return Toleration(taint.key, operator, taint.value, taint.effect)


def _toleration_suggestions(profile: Profile, snapshot: Snapshot, pod: PodInfo) -> list[str]:
    counts: Counter[Taint] = Counter()
    for node in snapshot.nodes:
        counts.update(untolerated(node.taints, pod.tolerations, _HARD_EFFECTS))
    out = []
    for taint, _ in counts.most_common(_SUGGESTIONS):
        trial = replace(pod, tolerations=(*pod.tolerations, _toleration_for(taint)))
        fits = _feasible_count(profile, snapshot, trial)
        if fits:
            out.append(f"add toleration {_toleration_text(taint)}: {fits} node(s) would fit")
    if not out and counts:
        everything = tuple(_toleration_for(t) for t in counts)
        trial = replace(pod, tolerations=(*pod.tolerations, *everything))
        fits = _feasible_count(profile, snapshot, trial)
        listed = ", ".join(_toleration_text(t) for t in counts)
        if fits:
            out.append(f"add tolerations {listed}: {fits} node(s) would fit")
        else:
            out.append(f"tolerating {listed} would still leave the pod unschedulable")
    return out


def _free(snapshot: Snapshot, node: int, resource: str) -> int:
    col = snapshot.resource_column(resource)
    if col is None:
        return 0
    return max(int(snapshot.allocatable[node, col] - snapshot.requested[node, col]), 0)


def _resource_suggestions(
    profile: Profile, snapshot: Snapshot, pod: PodInfo, rows: Sequence[NodeRow]
) -> list[str]:
    """Smaller requests that would fit, each checked by scheduling a trimmed copy of the pod."""
    single: dict[str, list[int]] = {}
    multi: list[tuple[float, int, dict[str, int]]] = []
    full_nodes = 0
    for row in rows:
        if TOO_MANY_PODS in row.reasons:
            full_nodes += 1
            continue
        prefix = "Insufficient "
        short = [r.removeprefix(prefix) for r in row.reasons if r.startswith(prefix)]
        i = snapshot.index[row.node]
        free = {r: _free(snapshot, i, r) for r in short}
        if any(v <= 0 for v in free.values()) or not short:
            continue
        if len(short) == 1:
            single.setdefault(short[0], []).append(free[short[0]])
        else:
            cut = max(1 - free[r] / pod.requests[r] for r in short)
            multi.append((cut, i, free))
    out: list[str] = []
    for resource, frees in sorted(single.items()):
        asked = pod.requests[resource]
        for threshold in sorted(set(frees), reverse=True)[:_SUGGESTIONS]:
            trial = replace(pod, requests={**pod.requests, resource: threshold})
            fits = _feasible_count(profile, snapshot, trial)
            if fits:
                out.append(
                    f"{fits} node(s) would fit if the pod asked for ≤ "
                    f"{quantity_text(resource, threshold)} {resource} "
                    f"(it asks for {quantity_text(resource, asked)})"
                )
    for _, i, free in sorted(multi, key=lambda m: (m[0], snapshot.names[m[1]]))[:_SUGGESTIONS]:
        trial = replace(pod, requests={**pod.requests, **free})
        fits = _feasible_count(profile, snapshot, trial)
        if fits:
            wanted = " and ".join(f"≤ {quantity_text(r, v)} {r}" for r, v in sorted(free.items()))
            out.append(
                f"{fits} node(s) would fit (including {snapshot.names[i]}) if the pod "
                f"asked for {wanted}"
            )
    if full_nodes:
        out.append(
            f"{full_nodes} node(s) are at their pod limit; smaller requests do not help there"
        )
    return out


def _preemption(
    profile: Profile,
    snapshot: Snapshot,
    pod: PodInfo,
    rows: Mapping[int, NodeRow],
    cache: Cache | None,
) -> dict[str, Any] | None:
    """Nodes where evicting all lower-priority pods would make room: an estimate."""
    if pod.preemption_policy == "Never":
        return {
            "estimate": True,
            "nodes": [],
            "note": "preemptionPolicy is Never: this pod never preempts others",
        }
    found: list[dict[str, Any]] = []
    for i, row in sorted(rows.items(), key=lambda kv: kv[1].node):
        if row.verdict == "feasible" or row.unresolvable or row.plugin != "NodeResourcesFit":
            continue
        victims = [p for p in snapshot.pods[i].values() if p.priority < pod.priority]
        if not victims:
            continue
        freed: Counter[str] = Counter()
        for victim in victims:
            freed.update(victim.requests)
        room = all(
            amount <= _free(snapshot, i, r) + freed[r]
            for r, amount in pod.requests.items()
            if amount > 0
        )
        slots = snapshot.pod_count[i] - len(victims) + 1 <= snapshot.max_pods[i]
        if room and slots:
            found.append({"node": row.node, "victims": len(victims), "checked": None, "_row": i})
    found.sort(key=lambda f: (f["victims"], f["node"]))
    if cache is not None:
        for entry in found[:_PREEMPTION_CHECKS]:
            entry["checked"] = _fits_after_eviction(profile, snapshot, cache, pod, entry["_row"])
    for entry in found:
        del entry["_row"]
    if not found:
        return None
    return {
        "estimate": True,
        "nodes": found,
        "note": (
            "estimate: evicting every lower-priority pod on one of these nodes would free "
            "enough resources there (checked=true: every filter passes after that eviction); "
            "it ignores PodDisruptionBudgets and does not pick the fewest victims"
        ),
    }


def _fits_after_eviction(
    profile: Profile, snapshot: Snapshot, cache: Cache, pod: PodInfo, row: int
) -> bool:
    victims = [p for p in snapshot.pods[row].values() if p.priority < pod.priority]
    node = snapshot.names[row]
    removed = [v for v in victims if cache.remove_pod(v.uid) is not None]
    try:
        snapshot.update(cache)
        placement = _attempt(profile, snapshot, pod)
        where = snapshot.index[node]
        return placement.candidates is not None and bool((placement.candidates == where).any())
    finally:
        for victim in removed:
            cache.add_pod(victim)
        snapshot.update(cache)


# -- text output --------------------------------------------------------------------------
def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    fmt = [(h.ljust(w)) for h, w in zip(headers, widths, strict=True)]
    lines = ["  ".join(fmt).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return lines


def format_table(exp: Explanation, top: int | None = None) -> str:
    feasible = exp.feasible
    adaptive = " = adaptive" if not exp.policy_percentage else ""
    lines = [
        f"Pod {exp.pod} (schedulerName {exp.scheduler_name}, priority {exp.priority}) "
        f"requests {describe_requests(exp.requests, exp.request_sources, exp.qos)}",
        f"Profile: {exp.profile}",
        f"All {exp.nodes_total} nodes evaluated: percentageOfNodesToScore forced to 100 "
        f"(the profile has {exp.policy_percentage}{adaptive}). Read-only: nothing was written.",
    ]
    lines += [f"Note: {n}" for n in exp.notes]
    short = _abbreviation([n for n, _ in exp.score_plugins])
    shown = feasible[:top] if top is not None else feasible
    lines.append("")
    lines.append(
        f"FEASIBLE: {len(feasible)} of {exp.nodes_total}"
        + (f" (top {len(shown)})" if top is not None and len(shown) < len(feasible) else "")
    )
    if shown:
        headers = ["NODE", "TOTAL"] + [f"{short[n]}×{w}" for n, w in exp.score_plugins]
        body = [
            [r.node, str(r.total)]
            + [str(r.scores[n]) if n in r.scores else "-" for n, _ in exp.score_plugins]
            for r in shown
        ]
        lines += _table(headers, body)
        legend = ", ".join(f"{short[n]} {n}" for n, _ in exp.score_plugins)
        lines.append("  scores are normalised to 0..100; TOTAL is the sum of score × weight")
        lines.append(f"  {legend}")
        if exp.skipped_scores:
            skipped = ", ".join(exp.skipped_scores)
            lines.append(f"  skipped for this pod (nothing to score): {skipped}")
    rejected = exp.rejected
    lines.append("")
    lines.append(f"REJECTED: {len(rejected)} of {exp.nodes_total}")
    if rejected and top is None:
        body = [
            [
                r.node,
                r.plugin,
                r.detail or ", ".join(r.reasons),
            ]
            for r in rejected
        ]
        lines += _table(["NODE", "PLUGIN", "REASON"], body)
    elif rejected:
        lines += _table(
            ["COUNT", "REASON"],
            [[str(n), r] for r, n in sorted(exp.rejected_reasons.items(), key=lambda x: -x[1])],
        )
        by_plugin = ", ".join(f"{p} {n}" for p, n in exp.rejected_by_plugin.items())
        lines.append(f"  by plugin: {by_plugin}")
    lines.append("")
    if exp.winner:
        lines.append(f"DECISION: {exp.winner} (total {exp.winner_total}): {exp.why}")
    else:
        lines.append(f"DECISION: unschedulable: {exp.message}")
        for suggestion in exp.suggestions:
            lines.append(f"  suggestion: {suggestion}")
        if exp.preemption is not None:
            nodes = exp.preemption["nodes"]
            if nodes:
                listed = ", ".join(
                    f"{n['node']} ({n['victims']} pod(s)"
                    + ("" if n["checked"] is None else f", checked={str(n['checked']).lower()}")
                    + ")"
                    for n in nodes[:10]
                )
                lines.append(f"  preemption (estimate): {len(nodes)} node(s): {listed}")
            lines.append(f"  {exp.preemption['note']}")
    return "\n".join(lines)


# -- reading the cluster ------------------------------------------------------------------
@dataclass(slots=True)
class ClusterState:
    pod: dict[str, Any]
    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    policies: list[dict[str, Any]] | None  # None: the CRD is not installed
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # PVs, PVCs, StorageClasses and CSINodes, each with its kind set.
    storage: list[dict[str, Any]] = field(default_factory=list)
    # Services, ReplicationControllers, ReplicaSets and StatefulSets, each with its kind set.
    selectors: list[dict[str, Any]] = field(default_factory=list)


def snapshot_from(
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    exclude_uid: str = "",
) -> tuple[Cache, Snapshot]:
    """A cache and snapshot from Node and Pod bodies: bound, non-terminal pods count."""
    cache = Cache()
    for body in nodes:
        cache.add_node(parse_node(body))
    for body in pods:
        info = parse_pod(body)
        if info.uid and info.uid != exclude_uid and info.bound and not info.terminal:
            cache.add_pod(info)
    snapshot = Snapshot()
    snapshot.update(cache)
    return cache, snapshot


def select_policy(
    policies: Sequence[Mapping[str, Any]] | None, scheduler_name: str
) -> tuple[Mapping[str, Any] | None, str]:
    """The SchedulerPolicy serving ``scheduler_name``, and a note on how it was chosen."""
    if policies is None:
        return None, "the SchedulerPolicy CRD is not installed"
    matching = [
        p
        for p in policies
        if str((p.get("spec") or {}).get("schedulerName") or "podium") == scheduler_name
    ]
    if not matching:
        return None, f"no SchedulerPolicy has spec.schedulerName {scheduler_name!r}"

    def accepted(policy: Mapping[str, Any]) -> bool:
        conditions = (policy.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Accepted" and c.get("status") == "True" for c in conditions)

    matching.sort(
        key=lambda p: (
            not accepted(p),
            str((p.get("metadata") or {}).get("creationTimestamp") or ""),
            str((p.get("metadata") or {}).get("name") or ""),
        )
    )
    chosen = matching[0]
    name = (chosen.get("metadata") or {}).get("name")
    note = f"SchedulerPolicy {name}"
    if len(matching) > 1:
        note += f" (of {len(matching)} naming {scheduler_name!r}; the accepted/oldest one)"
    return chosen, note


async def _list(client: Any, path: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        params = {"limit": "500", **({"continue": token} if token else {})}
        page = await client.get(path, params=params)
        items.extend(page.get("items") or [])
        token = str((page.get("metadata") or {}).get("continue") or "")
        if not token:
            return items


async def fetch_state(client: Any, namespace: str, name: str) -> ClusterState:
    """Read what explain needs; GET and LIST only."""
    from podium.kube import ApiError

    try:
        pod = await client.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    except ApiError as exc:
        if exc.status == 404:
            raise ExplainError(f"pod {namespace}/{name} not found") from exc
        raise ExplainError(f"cannot read pod {namespace}/{name}: {exc}") from exc
    nodes, pods = await asyncio.gather(
        _list(client, "/api/v1/nodes"), _list(client, "/api/v1/pods")
    )
    state = ClusterState(pod=pod, nodes=nodes, pods=pods, policies=None)
    try:
        state.policies = await _list(client, f"/apis/{GROUP}/{VERSION}/{PLURAL}")
    except ApiError as exc:
        if exc.status == 403:
            state.notes.append(f"cannot list SchedulerPolicies ({exc}); using the default profile")
        elif exc.status != 404:
            raise ExplainError(f"cannot list SchedulerPolicies: {exc}") from exc
    try:
        for ns in await _list(client, "/api/v1/namespaces"):
            meta = ns.get("metadata") or {}
            state.namespace_labels[str(meta.get("name"))] = dict(meta.get("labels") or {})
    except ApiError as exc:
        state.notes.append(f"cannot list namespaces ({exc}); namespaceSelectors see no labels")
    for kind, store_kind in OBJECT_KINDS.items():
        try:
            items = await _list(client, VOLUME_PATHS[store_kind])
            state.storage.extend({**item, "kind": kind} for item in items)
        except ApiError as exc:
            state.notes.append(f"cannot list {kind} objects ({exc}); volume plugins see none")
    for kind, store_kind in SELECTOR_KINDS.items():
        try:
            items = await _list(client, SELECTOR_PATHS[store_kind])
            state.selectors.extend({**item, "kind": kind} for item in items)
        except ApiError as exc:
            state.notes.append(
                f"cannot list {kind} objects ({exc}); default topology spreading sees none"
            )
    return state


def explain_state(
    state: ClusterState, policy_file: str | None = None, details_for: int | None = None
) -> Explanation:
    """Build the snapshot and profile from fetched objects, then explain."""
    pod = parse_pod(state.pod)
    notes = list(state.notes)
    if pod.bound:
        notes.append(
            f"the pod is bound to {pod.node_name}; this shows where it would go if it were "
            "pending now (its own usage left out)"
        )
        pod.node_name = ""
    if pod.problem:
        notes.append(f"the scheduler rejects this pod as invalid: {pod.problem}")
    if pod.scheduling_gates:
        notes.append(
            f"the pod has scheduling gates ({', '.join(pod.scheduling_gates)}): "
            "no scheduler tries it until they are removed"
        )
    if policy_file is not None:
        profile = load_policy(policy_file)
        profile_note = f"{profile.policy} from {policy_file} (--policy)"
    else:
        chosen, why = select_policy(state.policies, pod.scheduler_name)
        if chosen is None:
            profile = default_profile(pod.scheduler_name)
            profile_note = f"<built-in> default profile ({why})"
        else:
            profile = profile_from_policy(chosen)
            profile_note = why
    cache, snapshot = snapshot_from(state.nodes, state.pods, exclude_uid=pod.uid)
    snapshot.namespace_labels = dict(state.namespace_labels)
    snapshot.volumes.load(state.storage)
    snapshot.selectors.load(state.selectors)
    out = explain_pod(profile, snapshot, pod, cache, details_for=details_for)
    out.profile = profile_note
    out.notes = notes + out.notes
    return out


async def explain_cluster(
    namespace: str,
    name: str,
    kubeconfig: str | None = None,
    context: str | None = None,
    policy_file: str | None = None,
    details_for: int | None = None,
) -> Explanation:
    """Explain one live pod; the whole read-only path that ``podium explain`` runs."""
    from podium.kube import KubeClient, load_credentials

    creds = await load_credentials(kubeconfig, context)
    client = KubeClient(creds, pool_size=4)
    try:
        state = await fetch_state(client, namespace, name)
    finally:
        await client.close()
    return explain_state(state, policy_file, details_for)


def _context_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The namespace of the kubeconfig context (kubectl's default for -n)."""
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        token = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        if token.exists():
            return token.read_text().strip() or "default"
    if kubeconfig:
        paths = [kubeconfig]
    elif os.environ.get("KUBECONFIG"):
        paths = [p for p in os.environ["KUBECONFIG"].split(os.pathsep) if p]
    else:
        paths = [str(Path.home() / ".kube" / "config")]
    current = context
    contexts: dict[str, Any] = {}
    for path in paths:
        try:
            data = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError):
            continue
        if not isinstance(data, dict):
            continue
        current = current or data.get("current-context")
        for item in data.get("contexts") or []:
            if isinstance(item, dict) and item.get("name") not in contexts:
                contexts[str(item.get("name"))] = item.get("context") or {}
    chosen = contexts.get(str(current)) if current else None
    namespace = chosen.get("namespace") if isinstance(chosen, dict) else None
    return str(namespace or "default")


def _pod_name(raw: str) -> tuple[str | None, str]:
    """``name``, ``pod/name`` or ``namespace/name``."""
    for prefix in ("pod/", "pods/", "po/"):
        if raw.startswith(prefix):
            return None, raw[len(prefix) :]
    if "/" in raw:
        namespace, _, name = raw.partition("/")
        return namespace, name
    return None, raw


def run_explain(args: argparse.Namespace) -> int:
    from_arg, name = _pod_name(args.pod)
    namespace = args.namespace or from_arg or _context_namespace(args.kubeconfig, args.context)
    details = args.top if args.top is not None else None
    try:
        exp = asyncio.run(
            explain_cluster(
                namespace,
                name,
                args.kubeconfig,
                args.context,
                args.policy,
                details_for=0 if details is not None else None,
            )
        )
    except (ExplainError, SimulateError) as exc:
        print(f"podium explain: {exc}", file=sys.stderr)
        return 1
    except FileNotFoundError as exc:
        print(f"podium explain: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"podium explain: cannot reach the API server: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        if type(exc).__name__ == "ConfigException":
            print(f"podium explain: cannot load cluster credentials: {exc}", file=sys.stderr)
            return 1
        if type(exc).__module__.startswith("aiohttp"):
            print(f"podium explain: cannot reach the API server: {exc}", file=sys.stderr)
            return 1
        raise
    if args.output == "json":
        print(json.dumps(exp.to_dict(args.top), indent=2))
    elif args.output == "yaml":
        print(yaml.safe_dump(exp.to_dict(args.top), sort_keys=False, allow_unicode=True), end="")
    else:
        print(format_table(exp, args.top))
    return 0
