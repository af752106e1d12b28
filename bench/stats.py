"""The figures the tables show, and their median and spread over repeated runs.

One run is one sample: on two shared cores the same case measured twice can differ
by a third. With --repeat N each figure is reported as the median of the N finished
runs with its range (min–max), and each Podium / kube-scheduler ratio is taken per
pair of back-to-back runs (run i of one against run i of the other, so both saw the
same machine) before its median and range are taken.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .run_result import RunResult
from .schedulers import KUBE, PODIUM

__all__ = ["METRICS", "Metric", "Spread", "Summary", "summarise"]


@dataclass(frozen=True, slots=True)
class Metric:
    key: str
    """Its name in results.json's summary."""
    title: str
    """Its column header."""
    fmt: str
    get: Callable[[RunResult], float | None]
    ratio: bool
    """Whether the podium/kube row shows it (not for figures the harness sets)."""


METRICS: tuple[Metric, ...] = (
    Metric("throughput", "pods/s", "{:.1f}", lambda r: r.throughput, True),
    Metric("create_rate", "create/s", "{:.0f}", lambda r: r.create_rate, False),
    Metric("p50_ms", "p50 ms", "{:.0f}", lambda r: r.latency_ms.get("p50"), False),
    Metric("p90_ms", "p90 ms", "{:.0f}", lambda r: r.latency_ms.get("p90"), False),
    Metric("p99_ms", "p99 ms", "{:.0f}", lambda r: r.latency_ms.get("p99"), True),
    Metric("cpu_ms_per_pod", "CPU ms/pod", "{:.2f}", lambda r: r.cpu_ms_per_pod, True),
    Metric(
        "apiserver_cpu_ms_per_pod",
        "apiserver ms/pod",
        "{:.2f}",
        lambda r: r.apiserver_cpu_ms_per_pod,
        True,
    ),
    Metric("etcd_cpu_ms_per_pod", "etcd ms/pod", "{:.2f}", lambda r: r.etcd_cpu_ms_per_pod, True),
    Metric("peak_rss_mib", "RSS MiB", "{:.0f}", lambda r: r.peak_rss_mib, True),
    Metric("requests_per_pod", "req/pod", "{:.2f}", lambda r: r.requests_per_pod, True),
)


@dataclass(frozen=True, slots=True)
class Spread:
    """Median and range of n values (for an even n, the mean of the middle two)."""

    median: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: Iterable[float | None]) -> Spread | None:
        present = [v for v in values if v is not None]
        if not present:
            return None
        return cls(statistics.median(present), min(present), max(present), len(present))

    def to_json(self) -> dict[str, float | int]:
        return {"median": self.median, "min": self.low, "max": self.high, "n": self.n}


@dataclass(slots=True)
class Summary:
    """One case and workload: each scheduler's figures and the ratios, over its finished runs."""

    key: str
    runs: dict[str, int] = field(default_factory=dict)
    """Finished runs (status ok) per scheduler; only these enter the figures."""
    figures: dict[str, dict[str, Spread]] = field(default_factory=dict)
    """scheduler -> metric key -> spread."""
    pairs: int = 0
    """Repeats in which both schedulers finished."""
    ratios: dict[str, Spread] = field(default_factory=dict)
    """metric key -> spread of Podium / kube-scheduler over the pairs."""

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "runs": self.runs,
            "figures": {
                name: {key: spread.to_json() for key, spread in figures.items()}
                for name, figures in self.figures.items()
            },
            "pairs": self.pairs,
            "ratios": {key: spread.to_json() for key, spread in self.ratios.items()},
        }


def _ratio(ours: float | None, theirs: float | None) -> float | None:
    return ours / theirs if ours is not None and theirs else None


def summarise(runs: Sequence[RunResult]) -> Summary:
    """The summary of the runs of one case and workload, in the order they ran."""
    summary = Summary(runs[0].key if runs else "")
    finished = [run for run in runs if run.status == "ok"]
    for name in dict.fromkeys(run.scheduler for run in runs):
        mine = [run for run in finished if run.scheduler == name]
        summary.runs[name] = len(mine)
        figures = {m.key: Spread.of(m.get(run) for run in mine) for m in METRICS}
        summary.figures[name] = {key: s for key, s in figures.items() if s is not None}
    by_repeat: dict[int, dict[str, RunResult]] = {}
    for run in finished:
        by_repeat.setdefault(run.repeat, {})[run.scheduler] = run
    pairs = [(by[PODIUM], by[KUBE]) for by in by_repeat.values() if {PODIUM, KUBE} <= set(by)]
    summary.pairs = len(pairs)
    for m in METRICS:
        if not m.ratio:
            continue
        spread = Spread.of(_ratio(m.get(ours), m.get(theirs)) for ours, theirs in pairs)
        if spread is not None:
            summary.ratios[m.key] = spread
    return summary
