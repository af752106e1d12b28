"""The explanation as a table for people (``-o json`` and ``-o yaml`` use ``to_dict``)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from podium.tools.explain.model import Explanation, NodeRow
from podium.tools.requests_text import describe_requests
from podium.tools.tables import table

_WIDTH = 100


def _abbreviation(names: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in names:
        short = "".join(c for c in name.rsplit("/", 1)[-1] if c.isupper()) or name
        out[name] = short if short not in out.values() else name
    return out


def _claim_lines(rows: Sequence[NodeRow]) -> list[str]:
    """Per node rejected by DynamicResources, each request that cannot be met, wrapped."""
    out: list[str] = []
    for row in rows:
        for problem in row.claims:
            out += textwrap.wrap(
                f"{row.node}: {problem.sentence()}",
                width=_WIDTH,
                initial_indent="    ",
                subsequent_indent="      ",
                break_on_hyphens=False,
            )
    return ["  DynamicResources, per node:", *out] if out else []


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
        lines += table(headers, body)
        legend = ", ".join(f"{short[n]} {n}" for n, _ in exp.score_plugins)
        lines.append("  scores are normalised to 0..100; TOTAL is the sum of score × weight")
        lines.append(f"  {legend}")
        if exp.skipped_scores:
            skipped = ", ".join(exp.skipped_scores)
            lines.append(f"  skipped for this pod (nothing to score): {skipped}")
        served = [f"    {r.node}: {sentence}" for r in shown for sentence in r.extended]
        if served:
            lines += ["  extended resources, per node:", *served]
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
        lines += table(["NODE", "PLUGIN", "REASON"], body)
        lines += _claim_lines(rejected)
    elif rejected:
        lines += table(
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
    if exp.group is not None:
        lines.append("")
        lines += exp.group.lines()
    return "\n".join(lines)
