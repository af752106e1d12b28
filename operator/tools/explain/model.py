"""What ``podium explain`` found for one pod: a row per node, the decision, the suggestions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from podium.algorithms.dynamic_resources.diagnose import RequestProblem

FORCED_PERCENTAGE = 100


class ExplainError(RuntimeError):
    """Something the user must fix (pod not found, no access); the CLI exits 1."""


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
    # DynamicResources rejections: the claim requests that cannot be met on this node.
    claims: list[RequestProblem] = field(default_factory=list)
    # Feasible nodes: what would serve each DRA-backed extended resource (class and
    # devices, or the device plugin).
    extended: list[str] = field(default_factory=list)

    def to_dict(self, weights: Mapping[str, int]) -> dict[str, Any]:
        out: dict[str, Any] = {"node": self.node, "verdict": self.verdict}
        if self.verdict == "feasible":
            out["total"] = self.total
            out["scores"] = {
                name: {"score": score, "weight": weights[name], "weighted": score * weights[name]}
                for name, score in self.scores.items()
            }
            if self.extended:
                out["extendedResources"] = list(self.extended)
        else:
            out["plugin"] = self.plugin
            out["reasons"] = list(self.reasons)
            out["detail"] = self.detail
            out["unresolvable"] = self.unresolvable
            out["claims"] = [p.to_dict() for p in self.claims]
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
    group: GroupReport | None = None

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
            "group": self.group.to_dict() if self.group is not None else None,
        }


@dataclass(slots=True)
class GroupReport:
    """The explained pod's PodGroup: would a pod-group cycle place it now, and if not why."""

    name: str
    policy: str  # "gang (minCount N)", "basic", or "missing"
    pending: list[str] = field(default_factory=list)
    scheduled: list[str] = field(default_factory=list)
    waiting: str = ""  # the PreEnqueue reason: no cycle is tried while it holds
    invalid: str = ""
    fits: bool = False
    message: str = ""  # the PodGroup condition a cycle now would write, when it fails
    members: dict[str, str] = field(default_factory=dict)  # member -> node, or its reason
    breaks: str = ""
    suggestions: list[str] = field(default_factory=list)
    # Workload-aware preemption: the pods it would evict, and each member's nominated node.
    victims: list[str] = field(default_factory=list)
    nominated: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "podGroup": self.name,
            "policy": self.policy,
            "pending": list(self.pending),
            "scheduled": list(self.scheduled),
            "waiting": self.waiting or None,
            "invalid": self.invalid or None,
            "fits": self.fits,
            "message": self.message or None,
            "members": dict(self.members),
            "breaks": self.breaks or None,
            "suggestions": list(self.suggestions),
            "victims": list(self.victims),
            "nominated": dict(self.nominated),
        }

    def lines(self) -> list[str]:
        out = [
            f"GROUP: {self.name} ({self.policy}): {len(self.pending)} pending, "
            f"{len(self.scheduled)} scheduled"
        ]
        if self.waiting:
            out.append(f"  waiting (no cycle is tried): {self.waiting}")
        elif self.invalid:
            out.append(f"  invalid: {self.invalid}")
        else:
            verdict = "all-or-nothing placement fits" if self.fits else "does not fit"
            out.append(f"  {verdict}" + (f": {self.message}" if self.message else ""))
            for member, where in self.members.items():
                out.append(f"  {member}: {where}")
            if self.breaks:
                out.append(f"  breaks it: {self.breaks}")
            if self.victims:
                out.append(f"  preemption would evict: {', '.join(self.victims)}")
                nominated = ", ".join(f"{m} on {n}" for m, n in self.nominated.items())
                out.append(f"  and nominate: {nominated}")
        out += [f"  suggestion: {s}" for s in self.suggestions]
        return out
