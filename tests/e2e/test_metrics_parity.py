"""Podium's /metrics against the real kube-scheduler's, after the same workload.

Each scheduler gets its own two nodes (one tainted) and the same pods: two that
fit, one that preempts a lower-priority pod bound by hand, one too big for any
node (NodeResourcesFit) and one that selects only the tainted node
(TaintToleration); then a gang of two (kube-scheduler runs with the GenericWorkload
gates). Both /metrics are parsed with prometheus_client's parser.
Every ``scheduler_*`` family kube-scheduler exports with a non-zero sample, and
the client and process families in ``ALSO_COMPARED``, must be exported by Podium
with the same type and label names, unless docs/metrics.md lists it as not
exported (with the reason). Values that mean the same must be equal: attempts by
result, unschedulable pods by plugin, preemption attempts and victims, attempts
per scheduled pod, pods entering the queue by queue and event (after the single
pods); pod-group attempts and pod attempts by result (after the gang).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from podium.devcluster import WORKLOAD_GATES
from podium.devcluster.objects import delete_nodes, delete_pods, wait_for
from podium.kube.manifests import make_node, make_pod
from tests.e2e.gang import create_group, member, pod_group
from tests.e2e.queues import pending_pods, scrape_kube

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

SIDE = "metrics.podium.io/side"
DOC = Path(__file__).parents[2] / "docs" / "metrics.md"
_ROW = re.compile(r"^\| `(scheduler_\w+)` \|[^|]*\| not exported \|", re.MULTILINE)
TAINT = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}


# Families whose values must be equal after the single pods, with the sample suffix.
SAME_AFTER_SINGLES = (
    ("scheduler_schedule_attempts_total", ""),
    ("scheduler_scheduling_attempt_duration_seconds", "_count"),
    ("scheduler_scheduling_algorithm_duration_seconds", "_count"),
    ("scheduler_pod_scheduling_attempts", "_count"),
    ("scheduler_pod_scheduling_attempts", "_sum"),
    ("scheduler_pod_scheduling_sli_duration_seconds", "_count"),
    ("scheduler_unschedulable_pods", ""),
    ("scheduler_pending_pods", ""),
    ("scheduler_queued_entities", ""),
    ("scheduler_preemption_attempts_total", ""),
    ("scheduler_preemption_victims", "_count"),
    ("scheduler_preemption_victims", "_sum"),
    ("scheduler_preemption_goroutines_execution_total", ""),
    ("scheduler_preemption_evaluation_duration_seconds", "_count"),
    ("scheduler_preemption_execution_duration_seconds", "_count"),
)


def not_exported() -> set[str]:
    """The kube-scheduler families Podium leaves out on purpose: docs/metrics.md's rows
    whose Podium column reads "not exported" (the note says why)."""
    return set(_ROW.findall(DOC.read_text()))


def exposed_name(family: Metric) -> str:
    """The name as /metrics writes it (the parser drops a counter's ``_total``)."""
    return f"{family.name}_total" if family.type == "counter" else family.name


# Recorded on a random tenth of cycles (pluginMetricsSamplePercent) by both: after a
# few cycles either side may have no sample, so label names are compared only when
# both have one (tests/unit/test_plugin_probe.py checks Podium's labels).
SAMPLED = frozenset({"scheduler_plugin_execution_duration_seconds"})
# Families outside scheduler_* that dashboards built for kube-scheduler read.
ALSO_COMPARED = frozenset(
    {
        "rest_client_requests_total",
        "rest_client_request_duration_seconds",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_virtual_memory_bytes",
        "process_open_fds",
        "process_max_fds",
        "process_start_time_seconds",
    }
)


def families(text: str) -> dict[str, Metric]:
    out = {exposed_name(f): f for f in text_string_to_metric_families(text)}
    return {k: f for k, f in out.items() if k.startswith("scheduler_") or k in ALSO_COMPARED}


def label_names(family: Metric) -> set[str]:
    return {k for s in family.samples for k in s.labels if k not in ("le", "quantile")}


def nonzero(family: Metric) -> bool:
    return any(s.value != 0 for s in family.samples if not s.name.endswith("_created"))


def values(
    family: Metric | None, suffix: str = "", drop: Iterable[str] = ("profile",)
) -> dict[tuple[tuple[str, str], ...], float]:
    """Samples named ``family + suffix``, keyed by their labels less ``drop`` (the
    profile is the scheduler's name, which differs by side)."""
    if family is None:
        return {}
    out: dict[tuple[tuple[str, str], ...], float] = {}
    for s in family.samples:
        if s.name != exposed_name(family) + suffix or s.value == 0:
            continue
        key = tuple(sorted((k, v) for k, v in s.labels.items() if k not in drop))
        out[key] = out.get(key, 0.0) + s.value
    return out


async def bound(api: ApiClient, namespace: str, name: str) -> str:
    pod = await client.CoreV1Api(api).read_namespaced_pod(name, namespace)
    return str(pod.spec.node_name or "")


async def run_workload(
    api: ApiClient,
    namespace: str,
    side: str,
    node_factory: Any,
    scrape: Callable[[], Awaitable[str]],
) -> tuple[str, str]:
    """The same pods, in the same order, with the same waits, for one scheduler: its
    /metrics once the single pods are done, and again after a gang."""
    core = client.CoreV1Api(api)
    plain, tainted = f"{side}-plain", f"{side}-tainted"
    await node_factory(
        [
            make_node(plain, cpu="2", labels={SIDE: side}),
            make_node(tainted, cpu="2", labels={SIDE: side, "role": "tainted"}, taints=[TAINT]),
        ]
    )
    on_side = {SIDE: side}
    low = make_pod(f"{side}-lo", cpu="1", priority=1, node_name=plain)
    await core.create_namespaced_pod(namespace, low)
    for i in range(2):
        body = make_pod(
            f"{side}-ok-{i}", cpu="250m", priority=1000, scheduler_name=side, node_selector=on_side
        )
        await core.create_namespaced_pod(namespace, body)
        await wait_for(lambda n=body["metadata"]["name"]: bound(api, namespace, n), timeout=30)
    # 500m left on the plain node: the preemptor needs 1 cpu, so it evicts "lo".
    hi = make_pod(f"{side}-hi", cpu="1", priority=100, scheduler_name=side, node_selector=on_side)
    await core.create_namespaced_pod(namespace, hi)
    await wait_for(lambda: bound(api, namespace, f"{side}-hi"), timeout=60, message="preemptor")
    big = make_pod(
        f"{side}-big", cpu="3", scheduler_name=side, node_selector=on_side, tolerations=[TAINT]
    )
    selector = {**on_side, "role": "tainted"}
    picky = make_pod(f"{side}-picky", cpu="100m", scheduler_name=side, node_selector=selector)
    for body in (big, picky):
        await core.create_namespaced_pod(namespace, body)

    async def parked() -> str | None:
        text = await scrape()
        p = pending_pods(text)
        done = p.get("unschedulable") == 2 and p.get("active") == 0 and p.get("backoff") == 0
        return text if done else None

    singles = await wait_for(parked, timeout=60, message=f"{side}: two pods parked")
    scheduled = scheduled_attempts(singles)
    # A gang of two that fits in the 500m left: one pod-group cycle.
    group = f"{side}-gang"
    await create_group(api, namespace, pod_group(group, 2))
    for i in range(2):
        body = member(f"{group}-{i}", group, side, "200m", on_side)
        await core.create_namespaced_pod(namespace, body)

    async def gang_done() -> str | None:
        text = await scrape()
        return text if scheduled_attempts(text) == scheduled + 2 else None

    return singles, await wait_for(gang_done, timeout=60, message=f"{side}: gang scheduled")


def scheduled_attempts(text: str) -> float:
    family = families(text).get("scheduler_schedule_attempts_total")
    return sum(v for k, v in values(family).items() if ("result", "scheduled") in k)


async def clear_side(api: ApiClient, namespace: str, side: str) -> None:
    """Remove one side's pods and nodes, so that the other side's pods are rejected by
    the same plugins on the same nodes."""
    await delete_pods(api, namespace)
    await delete_nodes(api, [f"{side}-plain", f"{side}-tainted"])


async def test_scheduler_families_match_kube_scheduler(
    api_client: ApiClient,
    namespace: str,
    node_factory: Any,
    kube_scheduler: Any,
    podium: Any,
) -> None:
    kside, pside = f"{namespace[:30]}-k", f"{namespace[:30]}-p"
    kube = await kube_scheduler(kside, feature_gates=WORKLOAD_GATES)
    kube_singles, kube_all = await run_workload(
        api_client, namespace, kside, node_factory, lambda: scrape_kube(kube)
    )
    await clear_side(api_client, namespace, kside)
    proc = await podium("--scheduler-name", pside)
    podium_singles, podium_all = await run_workload(
        api_client, namespace, pside, node_factory, proc.metrics
    )
    theirs, ours = families(kube_all), families(podium_all)
    left_out = not_exported()
    problems = []
    for name, family in sorted(theirs.items()):
        if not nonzero(family) or name in left_out:
            continue
        mine = ours.get(name)
        if mine is None:
            labels = sorted(label_names(family))
            problems.append(f"{name}: missing ({family.type}, labels {labels})")
        elif mine.type != family.type:
            problems.append(f"{name}: type {mine.type}, kube-scheduler {family.type}")
        elif name in SAMPLED and not mine.samples:
            continue
        elif label_names(mine) != label_names(family):
            problems.append(
                f"{name}: labels {sorted(label_names(mine))}, "
                f"kube-scheduler {sorted(label_names(family))}"
            )
    assert not problems, "\n".join(problems)
    exported_yet_listed = sorted(left_out & ours.keys())
    assert not exported_yet_listed, (
        f"docs/metrics.md calls these not exported: {exported_yet_listed}"
    )

    # The single pods: the same events counted the same way. A pod whose backoff ends
    # leaves backoffQ as BackoffComplete in Podium; kube-scheduler, with activeQ empty,
    # pops it earlier (PopFromBackoffQ), so those rows are left out of the queue
    # comparison.
    theirs, ours = families(kube_singles), families(podium_singles)
    drift = {("event", "BackoffComplete"), ("event", "PopFromBackoffQ")}
    for name, suffix in SAME_AFTER_SINGLES:
        want, got = values(theirs.get(name), suffix), values(ours.get(name), suffix)
        assert want, f"{name}{suffix}: kube-scheduler recorded nothing"
        assert got == want, f"{name}{suffix}: Podium {got}, kube-scheduler {want}"
    incoming = "scheduler_queue_incoming_pods_total"
    want = {k: v for k, v in values(theirs[incoming]).items() if not drift & set(k)}
    got = {k: v for k, v in values(ours.get(incoming)).items() if not drift & set(k)}
    assert got == want, f"{incoming}: Podium {got}, kube-scheduler {want}"
    # The gang: one pod-group cycle, and two more pods scheduled. Go runs each member's
    # algorithm and holds it at Permit; Podium places the group at once, so per-pod
    # algorithm counts, queue moves and SLI attempts of members are not compared.
    theirs, ours = families(kube_all), families(podium_all)
    for name in ("scheduler_podgroup_schedule_attempts_total", "scheduler_schedule_attempts_total"):
        want, got = values(theirs.get(name)), values(ours.get(name))
        assert want, f"{name}: kube-scheduler recorded nothing"
        assert got == want, f"{name}: Podium {got}, kube-scheduler {want}"
