"""Gang scheduling, Podium against kube-scheduler v1.37.2 with GenericWorkload on.

Each generated scenario (``gang_scenarios``) is created twice, on two disjoint node
sets (a node label and the members' nodeSelector keep each scheduler on its own):
the same nodes, the same existing load, the same PodGroup and members. After each
phase (the members; then the late members or the missing PodGroup) both schedulers
must agree on how many members are bound, on the PodGroup's
PodGroupInitiallyScheduled condition (status, reason, message byte for byte) and on
the pending members' PodScheduled messages. Where the members land is not compared.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
from pathlib import Path
from typing import Any, cast

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from podium.devcluster import WORKLOAD_GATES
from podium.devcluster.objects import create_nodes, delete_nodes, wait_for
from tests.e2e.differential import kube_scores
from tests.e2e.differential.gang_scenarios import SIDE, GangScenario, generate
from tests.e2e.differential.kube_scores import KubeLog
from tests.e2e.gang import create_group, group_condition, member, pod_group

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

KUBE, PODIUM = "gdiff-kube", "gdiff-podium"
SETTLE = 0.4  # seconds for Podium's watches to see a change
DECIDE = 3.0  # a group with no decision by then is waiting (PreEnqueue)


async def _members(api: ApiClient, namespace: str, prefix: str) -> list[dict[str, Any]]:
    raw: Any = await client.CoreV1Api(api).list_namespaced_pod(
        namespace, label_selector=f"gang-member={prefix}", _preload_content=False
    )
    items: list[dict[str, Any]] = (await raw.json())["items"]
    return items


def _decided(pods: list[dict[str, Any]]) -> bool:
    for pod in pods:
        if pod["spec"].get("nodeName"):
            continue
        conds = pod["status"].get("conditions") or []
        if not any(c["type"] == "PodScheduled" and c.get("status") == "False" for c in conds):
            return False
    return True


async def _observe(api: ApiClient, namespace: str, prefix: str) -> dict[str, Any]:
    pods = await _members(api, namespace, prefix)
    messages = []
    for pod in pods:
        if pod["spec"].get("nodeName"):
            continue
        for cond in pod["status"].get("conditions") or []:
            if cond["type"] == "PodScheduled" and cond.get("status") == "False":
                messages.append(cond.get("message", ""))
    try:
        cond = await group_condition(api, namespace, f"{prefix}-g")
    except ApiException:
        cond = None
    return {
        "bound": sum(1 for p in pods if p["spec"].get("nodeName")),
        "condition": [cond["status"], cond["reason"], cond["message"]] if cond else None,
        "messages": sorted(messages),
    }


async def _settle(api: ApiClient, namespace: str, prefixes: list[str]) -> dict[str, Any]:
    async def all_decided() -> bool:
        for prefix in prefixes:
            if not _decided(await _members(api, namespace, prefix)):
                return False
        return True

    with contextlib.suppress(TimeoutError):  # a waiting group has nothing to decide
        await wait_for(all_decided, timeout=DECIDE, interval=0.1, message="decisions")
    await asyncio.sleep(0.5)  # the PodGroup status write follows the decisions
    return {p: await _observe(api, namespace, p) for p in prefixes}


async def _add_members(
    api: ApiClient,
    namespace: str,
    scenario: GangScenario,
    prefix: str,
    scheduler: str,
    first: int,
    count: int,
) -> None:
    core = client.CoreV1Api(api)
    for i in range(first, first + count):
        body = member(
            f"{prefix}-m{i}",
            f"{prefix}-g",
            scheduler,
            f"{scenario.request_m}m",
            {SIDE: prefix},
            scenario.priority,
        )
        body["metadata"]["labels"] = {"gang-member": prefix}
        await core.create_namespaced_pod(namespace, cast(Any, body))


async def _run(
    api: ApiClient, namespace: str, scenario: GangScenario, kube_log: KubeLog
) -> dict[str, Any]:
    core = client.CoreV1Api(api)
    sides = {
        KUBE: f"{namespace[:14]}-s{scenario.seed}-k",
        PODIUM: f"{namespace[:14]}-s{scenario.seed}-p",
    }
    nodes = [n for prefix in sides.values() for n in scenario.nodes(prefix)]
    load = [p for s, prefix in sides.items() for p in scenario.bound(prefix, s)]
    mark = kube_log.mark()
    await create_nodes(api, nodes)
    for pod in load:
        await core.create_namespaced_pod(namespace, cast(Any, pod))
    phases: list[dict[str, Any]] = []
    try:
        await kube_log.wait_events(
            [(kube_scores.NODE_ADDED, n["metadata"]["name"]) for n in nodes]
            + [(kube_scores.POD_ADDED, f"{namespace}/{p['metadata']['name']}") for p in load],
            after=mark,
        )
        await asyncio.sleep(SETTLE)
        for scheduler, prefix in sides.items():
            if not scenario.group_missing:
                await create_group(api, namespace, pod_group(f"{prefix}-g", scenario.min_count))
            await _add_members(api, namespace, scenario, prefix, scheduler, 0, scenario.members)
        phases.append(await _settle(api, namespace, list(sides.values())))
        if scenario.group_missing or scenario.late:
            for scheduler, prefix in sides.items():
                if scenario.group_missing:
                    await create_group(api, namespace, pod_group(f"{prefix}-g", scenario.min_count))
                await _add_members(
                    api, namespace, scenario, prefix, scheduler, scenario.members, scenario.late
                )
            phases.append(await _settle(api, namespace, list(sides.values())))
    finally:
        await core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        await delete_nodes(api, [n["metadata"]["name"] for n in nodes])
    result: dict[str, Any] = {"seed": scenario.seed, "scenario": vars(scenario), "phases": []}
    for index, phase in enumerate(phases):
        kube, mine = phase[sides[KUBE]], phase[sides[PODIUM]]
        result["phases"].append({"kube": kube, "podium": mine})
        for key in ("bound", "condition", "messages"):
            if kube[key] != mine[key] and "disagree" not in result:
                result["disagree"] = f"{key} (phase {index + 1})"
    return result


async def test_gang_scheduling_agrees_with_kube_scheduler(
    api_client: ApiClient,
    namespace: str,
    kube_scheduler: Any,
    podium: Any,
    pytestconfig: pytest.Config,
    tmp_path: Path,
) -> None:
    kube = await kube_scheduler(KUBE, feature_gates=WORKLOAD_GATES, verbosity=4)
    await podium("--scheduler-name", PODIUM)
    kube_log = KubeLog(kube.log_path)
    count = max(5, int(pytestconfig.getoption("--scenarios")) // 4)
    results = []
    for seed in range(count):
        scenario = generate(seed)
        try:
            results.append(await _run(api_client, namespace, scenario, kube_log))
        except (TimeoutError, ApiException, ValueError) as exc:
            results.append({"seed": seed, "disagree": f"harness: {exc}"})
    report = tmp_path / "gang-differential.json"
    report.write_text(json.dumps(results, indent=1))
    bad = [r for r in results if "disagree" in r]
    kinds = collections.Counter(str(r["disagree"]).split(" ")[0] for r in bad)
    bound = sum(1 for r in results for p in r.get("phases", []) if p["kube"]["bound"])
    failed = sum(
        1
        for r in results
        for p in r.get("phases", [])
        if (p["kube"]["condition"] or [""])[0] == "False"
    )
    summary = (
        f"[gang] {len(results) - len(bad)}/{len(results)} scenarios agree; "
        f"{bound} phases with members bound, {failed} with the group unschedulable; "
        f"disagreements by kind: {dict(sorted(kinds.items()))} (report: {report})"
    )
    print(summary)
    assert not bad, summary + "\n" + "\n".join(json.dumps(r) for r in bad[:10])
