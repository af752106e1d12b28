"""Per-plugin metrics of scheduling cycles, as plain data the running scheduler drains.

kube-scheduler counts every plugin call (``scheduler_plugin_evaluation_total``, its
instrumented plugins) and times plugins on a sample of cycles only
(``scheduler_plugin_execution_duration_seconds``: ``pluginMetricsSamplePercent`` = 10
in schedule_one.go, ``CycleState.ShouldRecordPluginMetrics``). Podium calls a plugin
once per extension point with all nodes at once, so a Filter or Score evaluation counts
the nodes it was given and a duration covers the whole call. The cycle adds to plain
counters; the scheduler moves them into Prometheus once a second, so a cycle pays a
dictionary increment per plugin and, on a sampled cycle, two clock reads.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field

__all__ = ["PLUGIN_METRICS_SAMPLE_PERCENT", "PluginCall", "PluginProbe", "PluginStats"]

PLUGIN_METRICS_SAMPLE_PERCENT = 10
"""schedule_one.go's pluginMetricsSamplePercent: the share of cycles whose plugins are timed."""

PluginCall = tuple[str, str, str, float, float, int]
"""A timed plugin call for a trace: plugin, extension point, status, start, end, nodes."""


@dataclass(slots=True)
class PluginStats:
    """What the cycles recorded since the last drain."""

    # (plugin, extension_point, profile) -> calls (nodes, for Filter and Score).
    evaluations: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    # (plugin, extension_point, status, seconds) of the sampled cycles.
    durations: list[tuple[str, str, str, float]] = field(default_factory=list)
    sampler: random.Random = field(default_factory=random.Random)
    # Set while a traced attempt's cycle runs (docs/tracing.md): the plugin calls that
    # its sampled cycle times, and when the cycle started. None: no trace wants them.
    calls: list[PluginCall] | None = None
    cycle_started: float = 0.0

    def probe(self, profile: str) -> PluginProbe:
        """One cycle's probe; it times plugins on PLUGIN_METRICS_SAMPLE_PERCENT of cycles."""
        timed = self.sampler.randrange(100) < PLUGIN_METRICS_SAMPLE_PERCENT
        if self.calls is not None:
            self.cycle_started = time.perf_counter()
        return PluginProbe(self, profile, timed)


@dataclass(slots=True)
class PluginProbe:
    stats: PluginStats
    profile: str
    timed: bool

    def start(self) -> float:
        """The clock before a plugin call, read only on a sampled cycle."""
        return time.perf_counter() if self.timed else 0.0

    def ran(self, plugin: str, point: str, started: float, status: str, count: int = 1) -> None:
        """A plugin call at ``point`` over ``count`` nodes ended with ``status``."""
        self.stats.evaluations[plugin, point, self.profile] += count
        if self.timed:
            ended = time.perf_counter()
            self.stats.durations.append((plugin, point, status, ended - started))
            if self.stats.calls is not None:
                self.stats.calls.append((plugin, point, status, started, ended, count))
