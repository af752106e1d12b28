"""The ``podium simulate --report`` file: a utilisation heatmap and a placement histogram.

Rendered with matplotlib's Agg backend (no display needed). matplotlib is a
dev extra, so it is imported only here and only when a report is asked for.
A ``.png`` path gets the figure; an ``.html`` path gets a self-contained page
with the figure inlined, the metrics and a per-node table.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from podium.tools.inputs import InputError
from podium.tools.simulation import SimulationResult, node_rows, utilisation

__all__ = ["HTML_NODE_ROWS", "check_available", "render_png", "write_report"]

HTML_NODE_ROWS = 1000
_RESOURCES = ("cpu", "memory", "pods")


def _missing() -> str:
    return (
        "--report needs matplotlib, which is not installed; "
        "install it with `pip install matplotlib` (or `pip install 'podium[dev]'`)"
    )


def check_available(path: str) -> None:
    """Fail early, before simulating, if the report cannot be written."""

    if Path(path).suffix.lower() not in (".png", ".html", ".htm"):
        raise InputError(f"--report must end in .html or .png, got {path!r}")
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise InputError(_missing()) from exc


def render_png(results: Sequence[SimulationResult]) -> bytes:
    """One row per policy: the heatmap (resources x nodes) and the new-pods-per-node histogram."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, axes = plt.subplots(
        len(results),
        2,
        figsize=(14, 3.2 * len(results) + 0.6),
        gridspec_kw={"width_ratios": [3, 1]},
        squeeze=False,
    )
    try:
        for row, result in zip(axes, results, strict=True):
            heat_ax, hist_ax = row
            snap = result.snapshot
            order = sorted(range(len(snap)), key=lambda i: snap.names[i])
            util = utilisation(snap)
            grid = np.vstack([util[r][order] for r in _RESOURCES]) if order else np.zeros((3, 1))
            image = heat_ax.imshow(
                grid * 100, aspect="auto", interpolation="nearest", cmap="viridis", vmin=0, vmax=100
            )
            heat_ax.set_yticks(range(len(_RESOURCES)), list(_RESOURCES))
            if len(order) <= 40:
                heat_ax.set_xticks(
                    range(len(order)), [snap.names[i] for i in order], rotation=90, fontsize=7
                )
            else:
                heat_ax.set_xlabel(f"{len(order)} nodes, sorted by name")
                heat_ax.set_xticks([])
            heat_ax.set_title(f"{result.policy}: requested / allocatable per node (%)")
            fig.colorbar(image, ax=heat_ax, fraction=0.03, pad=0.01)
            placed = [result.placed_per_node.get(snap.names[i], 0) for i in range(len(snap))]
            top = max(placed, default=0)
            hist_ax.hist(placed, bins=np.arange(top + 2) - 0.5, color="tab:blue", rwidth=0.9)
            hist_ax.set_xlabel("pods placed on the node")
            hist_ax.set_ylabel("nodes")
            hist_ax.set_title(
                f"{len(result.placements)} placed, {len(result.unschedulable)} unschedulable"
            )
        fig.tight_layout()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=100)
    finally:
        plt.close(fig)
    return buffer.getvalue()


def _metrics_table(results: Sequence[SimulationResult]) -> str:
    metrics = [r.metrics() for r in results]
    keys = list(metrics[0])
    head = "".join(f"<th>{html.escape(r.policy)}</th>" for r in results)
    body = "".join(
        f"<tr><td>{html.escape(k)}</td>"
        + "".join(f"<td>{html.escape(str(m[k]))}</td>" for m in metrics)
        + "</tr>"
        for k in keys
    )
    return f"<table><tr><th>metric</th>{head}</tr>{body}</table>"


def _node_table(result: SimulationResult) -> str:

    rows: list[dict[str, Any]] = node_rows(result)
    shown = rows[:HTML_NODE_ROWS]
    body = "".join(
        "<tr>"
        f"<td>{html.escape(r['node'])}</td><td>{html.escape(r['zone'] or '-')}</td>"
        f"<td>{r['cpu'] * 100:.1f}%</td><td>{r['memory'] * 100:.1f}%</td>"
        f"<td>{r['pods']}/{r['max_pods']}</td><td>{r['placed']}</td>"
        "</tr>"
        for r in shown
    )
    note = (
        f"<p>first {len(shown)} of {len(rows)} nodes by name; -o json lists all</p>"
        if len(rows) > len(shown)
        else ""
    )
    return (
        f"<h2>Nodes: {html.escape(result.policy)}</h2>{note}"
        "<table><tr><th>node</th><th>zone</th><th>cpu</th><th>memory</th>"
        f"<th>pods</th><th>placed</th></tr>{body}</table>"
    )


def _unschedulable(result: SimulationResult) -> str:
    if not result.unschedulable:
        return ""
    items = "".join(
        f"<li><code>{html.escape(f.pod)}</code>: {html.escape(f.message)}</li>"
        for f in result.unschedulable[:200]
    )
    return f"<h2>Unschedulable: {html.escape(result.policy)}</h2><ul>{items}</ul>"


def render_html(results: Sequence[SimulationResult], png: bytes) -> str:
    image = base64.b64encode(png).decode()
    title = " vs ".join(r.policy for r in results)
    sections = "".join(_node_table(r) + _unschedulable(r) for r in results)
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>podium simulate: {html.escape(title)}</title>"
        "<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}img{max-width:100%}</style>"
        f"</head><body><h1>podium simulate: {html.escape(title)}</h1>"
        f"{_metrics_table(results)}"
        f"<h2>Utilisation heatmap and placement histogram</h2>"
        f"<img alt='utilisation heatmap and placement histogram' "
        f"src='data:image/png;base64,{image}'>"
        f"{sections}</body></html>"
    )


def write_report(path: str, results: Sequence[SimulationResult]) -> None:
    check_available(path)
    png = render_png(results)
    target = Path(path)
    try:
        if target.suffix.lower() == ".png":
            target.write_bytes(png)
        else:
            target.write_text(render_html(results, png))
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from exc
