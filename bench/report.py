"""Tables for the terminal and the bound-pods-over-time plot.

The table puts both schedulers' rows under each other with a ratio row
(Podium / kube-scheduler) so a regression or an improvement reads off directly;
the correctness column is there because a fast but wrong run must not look good.
With --repeat, every run has its row, and each scheduler and the ratio get a
median row and a min–max row (see bench/stats.py for how they are taken).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from .results import BenchResults
from .run_result import RunResult
from .schedulers import KUBE, PODIUM
from .stats import METRICS, Metric, Spread, Summary, summarise

__all__ = ["plot", "sweep_table", "table"]

_RATIO = f"{PODIUM}/{KUBE.removesuffix('-scheduler')}"


def _number(value: float | None, fmt: str) -> str:
    return "-" if value is None or math.isnan(value) else fmt.format(value)


def _range(spread: Spread | None, fmt: str, suffix: str = "") -> str:
    if spread is None:
        return "-"
    return f"{fmt.format(spread.low)}–{fmt.format(spread.high)}{suffix}"


def _align(header: Sequence[str], rows: Sequence[Sequence[str]], left: int) -> list[str]:
    """Columns as wide as their widest cell; the first `left` and the last are left-aligned."""
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    lines = []
    for row in (header, *rows):
        cells = [
            cell.ljust(width) if i < left else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row[:-1], widths, strict=False))
        ]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return lines


def _summary_rows(summary: Summary, lead: int) -> list[list[str]]:
    """Median and min–max rows per scheduler and for the ratio; lead blank cells before them."""
    rows: list[list[str]] = []
    pad = [""] * (lead - 1)
    for name, figures in summary.figures.items():
        count = f"{summary.runs[name]} runs"
        rows.append(
            [name, *pad, "median", count]
            + [_number(s.median if (s := figures.get(m.key)) else None, m.fmt) for m in METRICS]
            + [""]
        )
        rows.append(
            ["", *pad, "min–max", ""] + [_range(figures.get(m.key), m.fmt) for m in METRICS] + [""]
        )
    if summary.pairs:

        def ratio(m: Metric, get: Callable[[Spread], str]) -> str:
            s = summary.ratios.get(m.key)
            return get(s) if s is not None else ""

        count = f"{summary.pairs} pairs"
        rows.append(
            [_RATIO, *pad, "median", count]
            + [ratio(m, lambda s: f"{s.median:.2f}x") for m in METRICS]
            + [""]
        )
        rows.append(
            ["", *pad, "min–max", ""]
            + [ratio(m, lambda s: _range(s, "{:.2f}", "x")) for m in METRICS]
            + [""]
        )
    return rows  # fmt: skip


def table(runs: Sequence[RunResult]) -> str:
    """One case: a row per run, the ratio (or, repeated, median and range) rows, and notes."""
    if not runs:
        return ""
    first = runs[0]
    repeated = any(run.repeat > 1 for run in runs)
    lead = ["scheduler", "run"] if repeated else ["scheduler"]
    header = [*lead, "status", "bound", *(m.title for m in METRICS), "correctness"]
    rows: list[list[str]] = []
    for run in runs:
        status = run.status if run.status in ("ok", "timeout") else "error"
        rows.append(
            [run.scheduler, *([str(run.repeat)] if repeated else []), status,
             f"{run.bound}/{run.measure_pods}", *(_number(m.get(run), m.fmt) for m in METRICS),
             run.correctness.summary()]
        )  # fmt: skip
    summary = summarise(runs)
    if repeated:
        rows += _summary_rows(summary, len(lead))
    elif summary.pairs:
        ratios = [
            f"{s.median:.2f}x" if (s := summary.ratios.get(m.key)) is not None else "-"
            for m in METRICS
        ]
        rows.append([_RATIO, "", "", *ratios, ""])
    runs_each = max(run.repeat for run in runs)
    lines = [
        f"\n{first.key}: {first.nodes} nodes, {first.init_pods} init pods, "
        f"{first.measure_pods} measured pods" + (f"; {runs_each} runs each" if repeated else ""),
        *_align(header, rows, len(lead) + 1),
    ]
    for run in runs:
        who = f"{run.scheduler} #{run.repeat}" if repeated else run.scheduler
        noise = run.background_cpu_seconds
        if (
            noise is not None
            and run.measure_seconds
            and noise > max(1.0, 0.25 * run.measure_seconds)
        ):
            lines.append(
                f"  {who} note: other processes took {noise:.0f} CPU s "
                f"({noise / run.measure_seconds:.1f} cores) during the phase; numbers are noisy"
            )
        if run.status.startswith("error"):
            lines.append(f"  {who} {run.status}")
        if run.requests and run.bound:
            top = sorted(run.requests.items(), key=lambda item: -item[1])[:6]
            spread = ", ".join(f"{key} {count / run.bound:.2f}" for key, count in top)
            lines.append(f"  {who} requests/pod: {spread}")
        for example in run.correctness.examples[:3]:
            lines.append(f"  {who} violation: {example}")
        for name, value in sorted(run.correctness.quality.items()):
            lines.append(f"  {who} {name}: {value:.3g}")
    return "\n".join(lines)


def _sweep_points(results: BenchResults, cases: Collection[str]) -> dict[int, Summary]:
    """Node count -> summary of the sweep workload with that many nodes."""
    return {
        group[0].nodes: summarise(group) for _, group in results.groups() if group[0].case in cases
    }


def sweep_table(results: BenchResults, cases: set[str]) -> str:
    """Throughput and scheduler CPU per pod against node count (SchedulingBasicSweep).

    With --repeat the cells are medians; the per-case tables above hold the ranges.
    """
    points = _sweep_points(results, cases)
    if not points:
        return ""
    schedulers = list(dict.fromkeys(run.scheduler for run in results.runs if run.case in cases))
    both = {KUBE, PODIUM} <= set(schedulers)
    repeated = any(run.repeat > 1 for run in results.runs if run.case in cases)
    header = ["nodes"]
    for title in ("pods/s", "CPU ms/pod"):
        header += [f"{name} {title}" for name in schedulers] + ([_RATIO] if both else [])
    rows = []
    for count in sorted(points):
        summary = points[count]
        row = [str(count)]
        for key, fmt in (("throughput", "{:.1f}"), ("cpu_ms_per_pod", "{:.2f}")):
            for name in schedulers:
                spread = summary.figures.get(name, {}).get(key)
                row.append(_number(None if spread is None else spread.median, fmt))
            if both:
                ratio = summary.ratios.get(key)
                row.append("-" if ratio is None else f"{ratio.median:.2f}x")
        rows.append([*row, ""])
    title = "\nBy node count" + (" (medians)" if repeated else "") + ": " + ", ".join(sorted(cases))
    return "\n".join([title, *_align([*header, ""], rows, 0)])


def plot(results: BenchResults, path: Path, sweep_cases: Collection[str] = ()) -> None:
    """Measured pods bound over time, every run in its case's panel; PNG via Agg.

    Sweep cases get one more panel: throughput (the median, when repeated) against
    node count.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = list(results.groups())
    swept = {run.case for run in results.runs if run.case in sweep_cases}
    panels = len(groups) + (1 if swept else 0)
    if panels == 0:
        return
    cols = min(3, panels)
    rows = math.ceil(panels / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 3.8 * rows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax, (key, runs) in zip(flat, groups, strict=False):
        repeated = any(run.repeat > 1 for run in runs)
        for run in runs:
            if run.timeline:
                times, bound = zip(*run.timeline, strict=True)
                who = f"{run.scheduler} #{run.repeat}" if repeated else run.scheduler
                ax.plot((0.0, *times), (0, *bound), label=f"{who} ({run.status})")
        ax.axhline(runs[0].measure_pods, color="grey", linewidth=0.5, linestyle="--")
        first = runs[0]
        ax.set_title(f"{key}\n{first.nodes} nodes, {first.measure_pods} measured pods", fontsize=9)
        ax.set_xlabel("seconds since first measured create")
        ax.set_ylabel("measured pods bound")
        ax.legend(fontsize=7, loc="lower right")
        ax.grid(alpha=0.3)
    if swept:
        ax = flat[len(groups)]
        by_scheduler: dict[str, list[tuple[int, float]]] = {}
        for nodes, summary in _sweep_points(results, swept).items():
            for name, figures in summary.figures.items():
                if (spread := figures.get("throughput")) is not None:
                    by_scheduler.setdefault(name, []).append((nodes, spread.median))
        for name, points in by_scheduler.items():
            xs, ys = zip(*sorted(points), strict=True)
            ax.plot(xs, ys, marker="o", label=name)
        ax.set_title("SchedulingBasic throughput by node count", fontsize=9)
        ax.set_xlabel("nodes")
        ax.set_ylabel("pods/s")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    for ax in flat[panels:]:
        ax.set_visible(False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
