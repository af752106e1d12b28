"""The running scheduler's trace hooks (podium.tracing, docs/tracing.md).

Each hook is one call in ``scheduling/scheduler.py`` and takes the queued pod, whose
``trace`` is None unless the attempt is traced: ``begin`` is the one place that reads
``tracing.tracer``, once per attempt, and every other hook returns at once on None, so
with tracing off no span is made and no OpenTelemetry code runs.

The span tree of one attempt (kube-scheduler's extension points; Go's scheduleOne and
bindingCycle in schedule_one.go):

    schedule_attempt                pod, namespace, attempt, profile, node, result, ...
      PreFilter, Filter, Score      from the cycle's own extension-point timings
        <point>/<plugin>            the plugin calls of cycles that time plugins
      PostFilter | Reserve, Permit
      binding_cycle                 pod, namespace, node
        WaitOnPermit, PreBind, Bind, PostBind
"""

from __future__ import annotations

import time
from collections.abc import Coroutine
from typing import Any

from podium import tracing
from podium.framework.cycle import Placement
from podium.framework.probe import PluginStats
from podium.framework.profile import Profile
from podium.framework.queued import QueuedPod

__all__ = ["ATTEMPT", "BINDING", "begin", "binding", "cycle_done", "end", "point", "post_bind"]

ATTEMPT = "schedule_attempt"
BINDING = "binding_cycle"

# The span a plugin call goes below. Podium runs each scorer's PreScore, Score and
# NormalizeScore in one pass over the scorers (framework/cycle.py ``_score``), timed as
# one Score point, so PreScore calls sit below Score.
_PARENT = {"PreFilter": "PreFilter", "Filter": "Filter", "PreScore": "Score", "Score": "Score"}


def begin(entry: QueuedPod, profile: Profile, stats: PluginStats | None, started: float) -> None:
    """The attempt starts at ``started`` (its metric's clock): open its span, and have
    the cycle's probe keep the plugin calls it times."""
    if tracing.tracer is None:  # off: the one check an attempt pays
        return
    pod = entry.pod
    entry.trace = tracing.begin(
        ATTEMPT,
        {
            "pod": pod.name,
            "namespace": pod.namespace,
            "attempt": entry.attempts,
            "profile": profile.scheduler_name,
        },
        started,
    )
    if stats is not None:  # also drops the calls of a cycle that ended in a PluginError
        stats.calls = [] if entry.trace is not None else None


def cycle_done(entry: QueuedPod, placement: Placement, stats: PluginStats | None) -> None:
    """The scheduling algorithm returned: its extension points and timed plugin calls
    become spans, laid end to end from the cycle's start as ``framework/cycle.py``
    timed them, and the attempt gets the chosen node and the node counts."""
    trace = entry.trace
    if trace is None:
        return
    now = time.perf_counter()
    calls: list[tuple[str, str, str, float, float, int]] = []
    start = trace.mark
    if stats is not None and stats.calls is not None:
        calls, stats.calls, start = stats.calls, None, stats.cycle_started
    filtered = start + placement.prefilter_seconds
    parents = {"PreFilter": trace.child("PreFilter", start, filtered)}
    scored = filtered + placement.filter_seconds
    if placement.filter_seconds:
        parents["Filter"] = trace.child(
            "Filter",
            filtered,
            scored,
            {"evaluated_nodes": placement.evaluated, "feasible_nodes": placement.feasible},
        )
    if placement.score_seconds:
        parents["Score"] = trace.child("Score", scored, scored + placement.score_seconds)
    for plugin, point_name, status, began, ended, nodes in calls:
        parent = parents.get(_PARENT.get(point_name, ""))
        if parent is not None:
            attributes: tracing.Attributes = {
                "plugin": plugin,
                "extension_point": point_name,
                "status": status,
                "nodes": nodes,
            }
            trace.child(f"{point_name}/{plugin}", began, ended, attributes, parent)
    trace.span.set_attributes(
        {
            "node": placement.node,
            "evaluated_nodes": placement.evaluated,
            "feasible_nodes": placement.feasible,
        }
    )
    trace.mark = now


def point(entry: QueuedPod, name: str) -> None:
    """The extension point ``name`` ran from the end of the last one until now."""
    trace = entry.trace
    if trace is not None:
        trace.point(name, time.perf_counter())


def binding(entry: QueuedPod, node: str) -> None:
    """The binding cycle starts: its span is a child of the attempt's."""
    trace = entry.trace
    if trace is not None:
        pod = entry.pod
        attributes = {"pod": pod.name, "namespace": pod.namespace, "node": node}
        trace.open_binding(BINDING, time.perf_counter(), attributes)


def post_bind(entry: QueuedPod, running: Coroutine[Any, Any, None]) -> Coroutine[Any, Any, None]:
    """PostBind runs after the attempt is over: ``running`` itself untraced, else wrapped
    so that its span lands below the binding cycle when it finishes."""
    trace = entry.trace
    if trace is None:
        return running
    parent = trace.binding

    async def traced() -> None:
        started = time.perf_counter()
        try:
            await running
        finally:
            trace.child("PostBind", started, time.perf_counter(), parent=parent)

    return traced()


def end(entry: QueuedPod, result: str, message: str = "") -> None:
    """The attempt is over with ``result`` (the log's: scheduled, unschedulable, error,
    ...); an error's ``message`` is the span's error status."""
    trace = entry.trace
    if trace is None:
        return
    entry.trace = None
    attributes = {"result": result, "message": message} if message else {"result": result}
    trace.end(time.perf_counter(), attributes, message if result == "error" else "")
