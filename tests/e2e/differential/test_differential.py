"""Podium against the real kube-scheduler on the same cluster states.

For each generated scenario the same nodes and bound pods are created, then
the incoming pod is given to kube-scheduler (percentageOfNodesToScore 100)
and, after it is deleted again, to Podium. They must agree on whether the
pod is schedulable, on the FailedScheduling message byte for byte, and on
the node wherever the best node is unique: one feasible node, or a unique top
final score in kube-scheduler's own -v=10 log (``kube_scores``).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from podium.devcluster.objects import create_nodes, delete_nodes, wait_for
from tests.e2e.differential.kube_scores import NODE_ADDED, NODE_DELETED, KubeLog
from tests.e2e.differential.podium_cache import cached, holds
from tests.e2e.differential.scenarios import Scenario, generate

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

KUBE, PODIUM = "diff-kube", "diff-podium"


@dataclass
class Decision:
    node: str = ""
    message: str = ""


async def _decide(core: client.CoreV1Api, namespace: str, body: dict[str, Any]) -> Decision:
    name = body["metadata"]["name"]
    await core.create_namespaced_pod(namespace, cast(Any, body))

    async def outcome() -> Decision | None:
        raw = await core.read_namespaced_pod(name, namespace, _preload_content=False)
        pod = await raw.json()
        if pod["spec"].get("nodeName"):
            return Decision(node=pod["spec"]["nodeName"])
        for cond in pod["status"].get("conditions") or []:
            if cond["type"] == "PodScheduled" and cond.get("reason") == "Unschedulable":
                return Decision(message=cond.get("message", ""))
        return None

    decision = await wait_for(outcome, timeout=30, interval=0.05, message=f"decision on {name}")
    await core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    return decision


async def _run(
    api: ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    scenario: Scenario,
    kube_log: KubeLog,
    podium: Any,
    base_nodes: int,
) -> dict[str, Any]:
    """One scenario. Each scheduler decides once its cache holds the scenario's nodes
    (kube-scheduler's log, Podium's cache size); pods need no wait, since each scheduler
    sees them in the one pod stream, in order, before its incoming pod."""
    names = [n["metadata"]["name"] for n in scenario.nodes]
    mark = kube_log.mark()
    await create_nodes(api, scenario.nodes)
    for pod in scenario.pods:
        await core.create_namespaced_pod(namespace, cast(Any, pod))
    try:
        await kube_log.wait_events(((NODE_ADDED, n) for n in names), mark, 30)
        await holds(podium, {"nodes": base_nodes + len(names)})
        decisions, marks = {}, {}
        for scheduler in (KUBE, PODIUM):
            body = copy.deepcopy(scenario.incoming)
            body["metadata"]["name"] = f"incoming-{scheduler}"
            body["spec"]["schedulerName"] = scheduler
            asked = kube_log.mark()
            decisions[scheduler] = await _decide(core, namespace, body)
            marks[scheduler] = (asked, kube_log.mark())
    finally:
        await core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        gone = kube_log.mark()
        await delete_nodes(api, names)
        await kube_log.wait_events(((NODE_DELETED, n) for n in names), gone, 30)
        await holds(podium, {"nodes": base_nodes})
    kube, mine = decisions[KUBE], decisions[PODIUM]
    cycle = kube_log.cycle(namespace, f"incoming-{KUBE}", *marks[KUBE]) if kube.node else None
    best = cycle.unique_best(kube.node) if cycle else ""
    result = {
        "seed": scenario.seed,
        "kube": kube.__dict__,
        "podium": mine.__dict__,
        "unique": best,
        "kube_scores": cycle.scores if cycle else {},
    }
    if bool(kube.node) != bool(mine.node):
        result["disagree"] = "schedulability"
    elif not kube.node and kube.message != mine.message:
        result["disagree"] = "message"
    elif kube.node and best and kube.node != mine.node:
        result["disagree"] = "node"
    return result


async def test_agrees_with_kube_scheduler(
    api_client: ApiClient,
    namespace: str,
    kube_scheduler: Any,
    podium: Any,
    pytestconfig: pytest.Config,
    tmp_path: Path,
) -> None:
    core = client.CoreV1Api(api_client)
    kube = await kube_scheduler(KUBE, percentage_of_nodes_to_score=100, verbosity=10)
    proc = await podium("--scheduler-name", PODIUM)
    base_nodes = await cached(proc, "nodes")
    kube_log = KubeLog(kube.log_path)
    count = int(pytestconfig.getoption("--scenarios"))
    results = []
    for seed in range(count):
        scenario = generate(seed, prefix=f"{namespace[:20]}-s{seed}")
        try:
            results.append(
                await _run(api_client, core, namespace, scenario, kube_log, proc, base_nodes)
            )
        except (TimeoutError, ApiException, ValueError) as exc:
            results.append({"seed": seed, "disagree": f"harness: {exc}"})
    report = tmp_path / "differential.json"
    report.write_text(json.dumps(results, indent=1))
    bad = [r for r in results if "disagree" in r]
    unschedulable = sum(1 for r in results if "kube" in r and not r["kube"]["node"])
    compared = sum(1 for r in results if "kube" in r and r["kube"]["node"] and r["unique"])
    summary = (
        f"{len(results) - len(bad)}/{len(results)} scenarios agree; "
        f"{unschedulable} unschedulable with messages compared, "
        f"{compared} with a unique best node by kube-scheduler's scores compared "
        f"(report: {report})"
    )
    print(summary)
    assert not bad, summary + "\n" + "\n".join(json.dumps(r) for r in bad[:10])
