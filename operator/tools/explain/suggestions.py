"""What would make a pending pod fit, each suggestion checked by running the cycle again.

A toleration added or smaller requests are tried on a modified copy of the
pod; the preemption note is an estimate: nodes where evicting every
lower-priority pod would make room, re-checked against all filters.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from podium.algorithms.dynamic_resources.diagnose import (
    CONSTRAINT,
    NO_MATCH,
    TAKEN,
    RequestProblem,
)
from podium.algorithms.node_resources_fit import TOO_MANY_PODS
from podium.algorithms.taint_toleration import untolerated
from podium.framework.cycle import Placement, Scheduler, schedule
from podium.framework.profile import Profile
from podium.kube.objects import PodInfo, Taint, Toleration
from podium.state.cache import Cache
from podium.state.snapshot import Snapshot
from podium.tools.explain.model import NodeRow
from podium.tools.requests_text import quantity_text

_HARD_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


# How many alternatives a suggestion lists, and preemption candidates re-checked.
_SUGGESTIONS = 3


_PREEMPTION_CHECKS = 20


def attempt(profile: Profile, snapshot: Snapshot, pod: PodInfo) -> Placement:
    """One cycle as the live scheduler runs it, with a fixed tie-break for repeatable output."""
    return schedule(profile, snapshot, pod, Scheduler(random.Random(0)), record=True)


def _feasible_count(profile: Profile, snapshot: Snapshot, pod: PodInfo) -> int:
    return attempt(profile, snapshot, pod).feasible


def _toleration_text(taint: Taint) -> str:
    if taint.value:
        return f"{taint.key}={taint.value}:{taint.effect}"
    return f"{taint.key}:{taint.effect} (operator Exists)"


def _toleration_for(taint: Taint) -> Toleration:
    operator = "Equal" if taint.value else "Exists"
    return Toleration(taint.key, operator, taint.value, taint.effect)


def toleration_suggestions(profile: Profile, snapshot: Snapshot, pod: PodInfo) -> list[str]:
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


def resource_suggestions(
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


def claim_suggestions(rows: Sequence[NodeRow]) -> list[str]:
    """From the per-node claim diagnoses: selectors that match nothing anywhere, a count
    no node can give (and the claims holding the devices), a constraint that never holds."""
    by_request: dict[tuple[str, str], list[tuple[str, RequestProblem]]] = {}
    for row in rows:
        for problem in row.claims:
            by_request.setdefault((problem.claim, problem.request), []).append((row.node, problem))
    out: list[str] = []
    for (claim, request), found in by_request.items():
        problems = [p for _, p in found]
        what = f"claim {claim}" + (f" request {request}" if request else "")
        if all(p.kind == NO_MATCH for p in problems):
            first = problems[0]
            out.append(
                f'{what}: no device matches the class "{first.class_name}" and request '
                "selectors on any node"
            )
        elif all(p.kind in (NO_MATCH, TAKEN) for p in problems):
            node, best = max(found, key=lambda f: f[1].matching - f[1].taken - f[1].tainted)
            free = best.matching - best.taken - best.tainted
            wanted = problems[0].wanted
            if wanted is not None and 0 < free < wanted:
                out.append(f"{what}: at most {free} device(s) free on one node ({node})")
            holders = sorted({h for p in problems for h in p.holders})
            if holders:
                listed = ", ".join(holders[:_SUGGESTIONS])
                more = (
                    f" and {len(holders) - _SUGGESTIONS} more"
                    if len(holders) > _SUGGESTIONS
                    else ""
                )
                out.append(f"{what}: devices held by {listed}{more}")
        elif all(p.kind == CONSTRAINT for p in problems):
            constraints = sorted({c for p in problems for c in p.constraints})
            out.append(f"{what}: no node can satisfy {' and '.join(constraints)}")
    return out


def preemption_estimate(
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
        placement = attempt(profile, snapshot, pod)
        where = snapshot.index[node]
        return placement.candidates is not None and bool((placement.candidates == where).any())
    finally:
        for victim in removed:
            cache.add_pod(victim)
        snapshot.update(cache)
