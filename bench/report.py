"""Tables for the terminal and the bound-pods-over-time plot.

The table puts both schedulers' rows under each other with a ratio row
(Podium / kube-scheduler) so a regression or an improvement reads off directly;
the correctness column is there because a fast but wrong run must not look good.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from .results import BenchResults, RunResult
from .schedulers import KUBE, PODIUM

__all__ = ["plot", "sweep_table", "table"]

Column = tuple[str, int, Callable[[RunResult], float | None], str]

_COLUMNS: Sequence[Column] = (
    ("pods/s", 8, lambda r: r.throughput, "{:.1f}"),
    ("create/s", 9, lambda r: r.create_rate, "{:.0f}"),
    ("p50 ms", 8, lambda r: r.latency_ms.get("p50"), "{:.0f}"),
    ("p90 ms", 8, lambda r: r.latency_ms.get("p90"), "{:.0f}"),
    ("p99 ms", 8, lambda r: r.latency_ms.get("p99"), "{:.0f}"),
    ("CPU s", 7, lambda r: r.cpu_seconds, "{:.1f}"),
    ("RSS MiB", 8, lambda r: r.peak_rss_mib, "{:.0f}"),
    ("req/pod", 8, lambda r: r.requests_per_pod, "{:.2f}"),
)
_RATIO_COLUMNS = {"pods/s", "p99 ms", "CPU s", "RSS MiB", "req/pod"}


def _cell(value: float | None, fmt: str, width: int) -> str:
    text = "-" if value is None or math.isnan(value) else fmt.format(value)
    return text.rjust(width)


def table(runs: Sequence[RunResult]) -> str:
    """One case: a row per scheduler, the ratio row, and each scheduler's requests per pod."""
    if not runs:
        return ""
    first = runs[0]
    lines = [
        f"\n{first.key}: {first.nodes} nodes, {first.init_pods} init pods, "
        f"{first.measure_pods} measured pods",
        f"{'scheduler':16}{'status':9}{'bound':>12}"
        + "".join(title.rjust(width) for title, width, _, _ in _COLUMNS)
        + "  correctness",
    ]
    for run in runs:
        status = run.status if run.status in ("ok", "timeout") else "error"
        lines.append(
            f"{run.scheduler:16}{status:9}{f'{run.bound}/{run.measure_pods}':>12}"
            + "".join(_cell(get(run), fmt, width) for _, width, get, fmt in _COLUMNS)
            + f"  {run.correctness.summary()}"
        )
    by_name = {run.scheduler: run for run in runs}
    if KUBE in by_name and PODIUM in by_name:
        ours, theirs = by_name[PODIUM], by_name[KUBE]
        cells = []
        for title, width, get, _ in _COLUMNS:
            a, b = get(ours), get(theirs)
            ratio = a / b if title in _RATIO_COLUMNS and a is not None and b else None
            cells.append(_cell(ratio, "{:.2f}x", width))
        lines.append(f"{'podium/kube':16}{'':9}{'':12}" + "".join(cells))
    for run in runs:
        noise = run.background_cpu_seconds
        if (
            noise is not None
            and run.measure_seconds
            and noise > max(1.0, 0.25 * run.measure_seconds)
        ):
            lines.append(
                f"  {run.scheduler} note: other processes took {noise:.0f} CPU s "
                f"({noise / run.measure_seconds:.1f} cores) during the phase; numbers are noisy"
            )
        if run.status.startswith("error"):
            lines.append(f"  {run.scheduler} {run.status}")
        if run.requests and run.bound:
            top = sorted(run.requests.items(), key=lambda item: -item[1])[:6]
            spread = ", ".join(f"{key} {count / run.bound:.2f}" for key, count in top)
            lines.append(f"  {run.scheduler} requests/pod: {spread}")
        for example in run.correctness.examples[:3]:
            lines.append(f"  {run.scheduler} violation: {example}")
        for name, value in sorted(run.correctness.quality.items()):
            lines.append(f"  {run.scheduler} {name}: {value:.3g}")
    return "\n".join(lines)


def sweep_table(results: BenchResults, cases: set[str]) -> str:
    """Throughput against node count for the sweep cases (SchedulingBasicSweep)."""
    rows = [run for run in results.runs if run.case in cases]
    if not rows:
        return ""
    schedulers = list(dict.fromkeys(run.scheduler for run in rows))
    nodes = sorted({run.nodes for run in rows})
    lines = [
        "\nThroughput (pods/s) by node count: " + ", ".join(sorted(cases)),
        f"{'nodes':>7}" + "".join(f"{name:>16}" for name in schedulers)
        + (f"{'podium/kube':>13}" if {KUBE, PODIUM} <= set(schedulers) else ""),
    ]  # fmt: skip
    for count in nodes:
        values = {run.scheduler: run.throughput for run in rows if run.nodes == count}
        line = f"{count:>7}" + "".join(_cell(values.get(name), "{:.1f}", 16) for name in schedulers)
        if {KUBE, PODIUM} <= set(schedulers):
            a, b = values.get(PODIUM), values.get(KUBE)
            line += _cell(a / b if a is not None and b else None, "{:.2f}x", 13)
        lines.append(line)
    return "\n".join(lines)


def plot(results: BenchResults, path: Path, sweep_cases: Collection[str] = ()) -> None:
    """Measured pods bound over time, both schedulers in each case's panel; PNG via Agg.

    Sweep cases get one more panel: throughput against node count.
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
        for run in runs:
            if run.timeline:
                times, bound = zip(*run.timeline, strict=True)
                ax.plot((0.0, *times), (0, *bound), label=f"{run.scheduler} ({run.status})")
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
        for run in results.runs:
            if run.case in swept and run.throughput is not None:
                by_scheduler.setdefault(run.scheduler, []).append((run.nodes, run.throughput))
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
