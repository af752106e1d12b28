"""Per-plugin metrics of a cycle: evaluations every cycle, durations on sampled ones."""

from __future__ import annotations

import random

import pytest

from podium.framework.cycle import Scheduler
from podium.framework.probe import PLUGIN_METRICS_SAMPLE_PERCENT, PluginStats
from podium.kube.objects import parse_node, parse_pod
from podium.policy import build_profile
from podium.state.cache import Cache
from podium.state.snapshot import Snapshot
from tests.unit.builders import node, pod

PROFILE = {
    "filters": [{"name": "TaintToleration"}, {"name": "NodeResourcesFit"}],
    "scores": [{"name": "NodeResourcesFit", "weight": 1}],
}
TAINT = {"key": "k", "value": "v", "effect": "NoSchedule"}


class Always(random.Random):
    """A sampler that picks every cycle (or none), so the test is not left to chance."""

    def __init__(self, value: int) -> None:
        super().__init__()
        self.value = value

    def randrange(self, *args: object, **kwargs: object) -> int:
        return self.value


def snapshot() -> Snapshot:
    cache = Cache()
    for body in (node("a"), node("b"), node("tainted", taints=[TAINT]), node("small", cpu="1")):
        cache.add_node(parse_node(body))
    snap = Snapshot()
    snap.update(cache)
    return snap


@pytest.mark.parametrize(("draw", "timed"), [(0, True), (PLUGIN_METRICS_SAMPLE_PERCENT, False)])
def test_counts_every_cycle_and_times_the_sampled_ones(draw: int, timed: bool) -> None:
    profile = build_profile(PROFILE)
    state = Scheduler(random.Random(0))
    state.plugin_stats = PluginStats(sampler=Always(draw))
    placement = state.schedule(profile, snapshot(), parse_pod(pod("p", cpu="2")))
    assert placement.node in ("a", "b")
    name = profile.scheduler_name
    # TaintToleration sees all four nodes and drops the tainted one; NodeResourcesFit
    # sees the other three and drops the small one; two are scored.
    assert state.plugin_stats.evaluations == {
        ("TaintToleration", "PreFilter", name): 1,
        ("NodeResourcesFit", "PreFilter", name): 1,
        ("TaintToleration", "Filter", name): 4,
        ("NodeResourcesFit", "Filter", name): 3,
        ("NodeResourcesFit", "PreScore", name): 1,
        ("NodeResourcesFit", "Score", name): 2,
    }
    labels = [(plugin, point, status) for plugin, point, status, _ in state.plugin_stats.durations]
    assert labels == (
        [
            ("TaintToleration", "PreFilter", "Success"),
            ("NodeResourcesFit", "PreFilter", "Success"),
            ("TaintToleration", "Filter", "Unschedulable"),
            ("NodeResourcesFit", "Filter", "Unschedulable"),
            ("NodeResourcesFit", "PreScore", "Success"),
            ("NodeResourcesFit", "Score", "Success"),
        ]
        if timed
        else []
    )
    assert all(seconds >= 0 for *_, seconds in state.plugin_stats.durations)


def test_no_stats_records_nothing() -> None:
    """Cycles of tools and dry runs (no stats set) cost nothing and keep nothing."""
    state = Scheduler(random.Random(0))
    placement = state.schedule(build_profile(PROFILE), snapshot(), parse_pod(pod("p", cpu="2")))
    assert placement.node in ("a", "b")
    assert state.plugin_stats is None
