"""Opt-in tracing (podium.tracing, docs/tracing.md): settings, the span tree of an
attempt, sampling, and no OpenTelemetry at all while it is off."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from podium import cli, tracing
from podium.framework.probe import PluginStats
from podium.kube.objects import PodInfo
from podium.policy import default_profile
from podium.scheduling.binder import Binder, BindOutcome
from podium.scheduling.nominator import Nominator
from podium.scheduling.scheduler import PodiumScheduler
from podium.scheduling.traces import ATTEMPT, BINDING
from tests.unit.builders import node, pod


class Always(random.Random):
    """A plugin sampler that times every cycle (0) or none (100)."""

    def __init__(self, value: int) -> None:
        super().__init__()
        self.value = value

    def randrange(self, *args: object, **kwargs: object) -> int:
        return self.value


@dataclass
class _Binder:
    client: Any = None
    instance: str = "test"
    bound: dict[str, str] = field(default_factory=dict)

    async def bind(self, p: PodInfo, n: str) -> tuple[BindOutcome, str]:
        self.bound[p.name] = n
        return BindOutcome.BOUND, ""

    async def set_condition(
        self, p: PodInfo, reason: str, message: str, nominator: Nominator | None = None
    ) -> None:
        return None

    async def event(self, *args: Any, **kwargs: Any) -> None:
        return None


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    yield spans
    tracing.shutdown()


async def _schedule(pods: list[dict[str, Any]], timed: bool = True) -> _Binder:
    """Two nodes (one small), ``pods`` scheduled one attempt each, binding included."""
    binder = _Binder()
    sched = PodiumScheduler(cast(Binder, binder), {"podium": default_profile("podium")})
    sched.algorithm.plugin_stats = PluginStats(sampler=Always(0 if timed else 100))
    sched.on_node("ADDED", node("big", cpu="4"))
    sched.on_node("ADDED", node("small", cpu="1"))
    for body in pods:
        sched.on_pod("ADDED", body)
    for _ in pods:
        sched.schedule_one(await asyncio.wait_for(sched.queue.pop(), 1))
    await sched.settle()
    return binder


def _children(spans: tuple[ReadableSpan, ...], parent: ReadableSpan) -> list[str]:
    assert parent.context is not None
    return [
        s.name
        for s in sorted(spans, key=lambda s: s.start_time or 0)
        if s.parent is not None and s.parent.span_id == parent.context.span_id
    ]


def _one(spans: tuple[ReadableSpan, ...], name: str, **attributes: object) -> ReadableSpan:
    found = [
        s
        for s in spans
        if s.name == name and all((s.attributes or {}).get(k) == v for k, v in attributes.items())
    ]
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


async def test_a_scheduled_pod_has_the_attempt_tree(exporter: InMemorySpanExporter) -> None:
    tracing.configure(1.0, exporter=exporter)
    binder = await _schedule([pod("p", cpu="2")])
    assert binder.bound == {"p": "big"}
    spans = exporter.get_finished_spans()
    attempt = _one(spans, ATTEMPT)
    assert attempt.parent is None
    assert dict(attempt.attributes or {}) == {
        "pod": "p",
        "namespace": "default",
        "attempt": 1,
        "profile": "podium",
        "node": "big",
        "evaluated_nodes": 2,
        "feasible_nodes": 1,
        "result": "scheduled",
    }
    # Decision records score even the only feasible node (their top nodes).
    assert _children(spans, attempt) == [
        "PreFilter",
        "Filter",
        "Score",
        "Reserve",
        "Permit",
        BINDING,
    ]
    binding = _one(spans, BINDING)
    assert dict(binding.attributes or {}) == {
        "pod": "p",
        "namespace": "default",
        "node": "big",
        "result": "scheduled",
    }
    assert _children(spans, binding) == ["WaitOnPermit", "PreBind", "Bind", "PostBind"]
    filters = _one(spans, "Filter")
    assert (filters.attributes or {})["feasible_nodes"] == 1
    fit = _one(spans, "Filter/NodeResourcesFit")
    assert dict(fit.attributes or {}) == {
        "plugin": "NodeResourcesFit",
        "extension_point": "Filter",
        "status": "Unschedulable",
        "nodes": 2,
    }
    assert "Filter/NodeResourcesFit" in _children(spans, filters)
    assert "PreFilter/NodeResourcesFit" in _children(spans, _one(spans, "PreFilter"))
    for span in spans:  # every child lies within its attempt
        assert span.context is not None and span.context.trace_id == attempt.context.trace_id
        assert span.start_time is not None and span.end_time is not None
        assert span.start_time <= span.end_time
    for name in ("PreFilter", "Filter", "Reserve", "Permit"):
        span = _one(spans, name)
        assert attempt.start_time <= span.start_time and span.end_time <= attempt.end_time  # type: ignore[operator]


async def test_scoring_and_untimed_cycles(exporter: InMemorySpanExporter) -> None:
    """Two feasible nodes are scored (a Score span); a cycle that does not time its
    plugins (the metric's sample) has extension points but no plugin spans."""
    tracing.configure(1.0, exporter=exporter)
    await _schedule([pod("p", cpu="500m")], timed=False)
    spans = exporter.get_finished_spans()
    attempt = _one(spans, ATTEMPT)
    assert (attempt.attributes or {})["feasible_nodes"] == 2
    assert _children(spans, attempt)[:3] == ["PreFilter", "Filter", "Score"]
    assert not [s for s in spans if "/" in s.name]


async def test_scored_plugins_sit_below_score(exporter: InMemorySpanExporter) -> None:
    tracing.configure(1.0, exporter=exporter)
    await _schedule([pod("p", cpu="500m")])
    spans = exporter.get_finished_spans()
    below = _children(spans, _one(spans, "Score"))
    assert "PreScore/NodeResourcesFit" in below and "Score/NodeResourcesFit" in below


async def test_an_unschedulable_pod_ends_after_post_filter(exporter: InMemorySpanExporter) -> None:
    tracing.configure(1.0, exporter=exporter)
    binder = await _schedule([pod("huge", cpu="9")])
    assert binder.bound == {}
    spans = exporter.get_finished_spans()
    attempt = _one(spans, ATTEMPT)
    attributes = attempt.attributes or {}
    assert attributes["result"] == "unschedulable"
    assert attributes["node"] == ""
    assert attributes["feasible_nodes"] == 0
    assert str(attributes["message"]).startswith("0/2 nodes are available: 2 Insufficient cpu.")
    assert _children(spans, attempt) == ["PreFilter", "Filter", "PostFilter"]
    assert not [s for s in spans if s.name == BINDING]


async def test_one_attempt_span_per_pod(exporter: InMemorySpanExporter) -> None:
    tracing.configure(1.0, exporter=exporter)
    await _schedule([pod(f"p{i}", cpu="100m") for i in range(3)])
    attempts = [s for s in exporter.get_finished_spans() if s.name == ATTEMPT]
    assert sorted((s.attributes or {})["pod"] for s in attempts) == ["p0", "p1", "p2"]
    assert len({s.context.trace_id for s in attempts if s.context}) == 3


async def test_sampling_zero_makes_no_spans(exporter: InMemorySpanExporter) -> None:
    tracing.configure(0.0, exporter=exporter)
    binder = await _schedule([pod(f"p{i}", cpu="100m") for i in range(3)])
    assert len(binder.bound) == 3
    assert exporter.get_finished_spans() == ()


async def test_off_calls_no_opentelemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    """With tracing off the scheduler never reaches a tracer: one that fails on any
    use, left in place of the module's SDK, is never touched."""
    from opentelemetry.sdk.trace import Tracer

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("OpenTelemetry called while tracing is off")

    monkeypatch.setattr(Tracer, "start_span", forbidden)
    monkeypatch.setattr(Tracer, "start_as_current_span", forbidden)
    assert tracing.tracer is None
    binder = await _schedule([pod("p", cpu="2"), pod("huge", cpu="9")])
    assert binder.bound == {"p": "big"}


_OFF = """
import asyncio, sys
sys.modules["opentelemetry"] = None  # any import of it would fail
from podium.policy import default_profile
from podium.scheduling.binder import BindOutcome
from podium.scheduling.scheduler import PodiumScheduler
from tests.unit.builders import node, pod

class Binder:
    client, instance, bound = None, "test", {}
    async def bind(self, p, n):
        self.bound[p.name] = n
        return BindOutcome.BOUND, ""
    async def event(self, *args, **kwargs):
        return None

async def main():
    binder = Binder()
    sched = PodiumScheduler(binder, {"podium": default_profile("podium")})
    sched.on_node("ADDED", node("n"))
    sched.on_pod("ADDED", pod("p", cpu="1"))
    sched.schedule_one(await sched.queue.pop())
    await sched.settle()
    loaded = [m for m, module in sys.modules.items() if m.startswith("opentelemetry") and module]
    print(binder.bound, loaded)

asyncio.run(main())
"""


def test_off_imports_no_opentelemetry() -> None:
    """A fresh interpreter schedules and binds a pod without importing OpenTelemetry."""
    out = subprocess.run(
        [sys.executable, "-c", _OFF],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).parents[2],
    )
    assert out.stdout.splitlines()[-1] == "{'p': 'n'} []"


@pytest.mark.parametrize(
    ("url", "want"),
    [
        ("http://collector:4318", "http://collector:4318/v1/traces"),
        ("https://collector:4318/", "https://collector:4318/v1/traces"),
        ("http://127.0.0.1:4318/custom/path", "http://127.0.0.1:4318/custom/path"),
        ("http://[::1]:4318", "http://[::1]:4318/v1/traces"),
        ("collector:4318", None),
        ("grpc://collector:4317", None),
        ("http://", None),
        ("http://collector:port", None),
        ("http://collector:0", None),
        ("http://collector:4318/v1/traces?x=1", None),
        ("", None),
    ],
)
def test_parse_endpoint(url: str, want: str | None) -> None:
    if want is None:
        with pytest.raises(tracing.TracingError, match="--tracing-endpoint"):
            tracing.parse_endpoint(url)
    else:
        assert tracing.parse_endpoint(url) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("0", 0.0),
        ("1", 1.0),
        ("0.25", 0.25),
        ("1.5", None),
        ("-0.1", None),
        ("nan", None),
        ("inf", None),
        ("half", None),
    ],
)
def test_parse_sampling(text: str, want: float | None) -> None:
    if want is None:
        with pytest.raises(tracing.TracingError, match="--tracing-sampling"):
            tracing.parse_sampling(text)
    else:
        assert tracing.parse_sampling(text) == want


def test_missing_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    with pytest.raises(tracing.TracingError, match=r"pip install 'podium\[tracing\]'"):
        tracing.configure(1.0, "http://collector:4318/v1/traces")
    assert tracing.tracer is None


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--tracing-sampling", "0.5"], "--tracing-sampling needs --tracing-endpoint"),
        (["--tracing-endpoint", "collector:4318"], "need an http:// or https:// URL"),
        (
            ["--tracing-endpoint", "http://c:4318", "--tracing-sampling", "2"],
            "need a ratio from 0 to 1",
        ),
    ],
)
def test_run_refuses_bad_settings_at_start(
    args: list[str], error: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The run path blocks imports for the whole process; this test's process needs them.
    monkeypatch.setattr(cli, "block_unused_imports", lambda log_format: None)
    assert cli.main(["run", *args]) == 2
    assert error in capsys.readouterr().err
    assert tracing.tracer is None
