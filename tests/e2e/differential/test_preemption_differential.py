"""DefaultPreemption, Podium against the real kube-scheduler on the same states.

Each seed builds a few full nodes of bound low-priority pods and one
high-priority pod that fits nowhere until something is evicted. A victim's
cpu is asked for by its container, at pod level (``spec.resources``), or by
its resize status (allocated above a smaller spec, or an Infeasible resize
below a larger one), so victim arithmetic uses kube-scheduler's accounting. The same
state is given to kube-scheduler and then, rebuilt from scratch, to Podium.
They must agree on whether preemption helps, on the FailedScheduling message
when it does not, and, wherever Podium's own dry run finds a single best
candidate, on the victims and the node the pod ends on. Where it preempts, the
preemptor's PodScheduled condition as the API server stored it with the
nomination (handleSchedulingFailure writes both at once) must be present with
the same reason and message (node names aside where the best candidate is not unique).

Then preemptions in flight (``nominated_cases``): a pending pod that fits
nowhere, with preemptionPolicy Never so that its own failures keep its
nomination, is nominated to a node through pods/status, as an earlier
preemption would have left it; it matches the preemptor's topology spread
selector or (anti-)affinity, so whether RunFilterPluginsWithNominatedPods
counts it on its node decides where, or whether, the preemptor preempts.
"""

from __future__ import annotations

import asyncio
import copy
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client import ApiClient

from podium.devcluster.objects import create_nodes, delete_nodes, wait_for
from podium.framework.cycle import Scheduler
from podium.framework.preemption import best_candidates, evaluate
from podium.kube.manifests import make_node, make_pod
from podium.kube.objects import PodInfo, parse_node, parse_pod
from podium.policy import build_profile
from podium.state.snapshot import build_snapshot
from tests.e2e.differential.kube_scores import NODE_ADDED, NODE_DELETED, KubeLog
from tests.e2e.differential.podium_cache import cached, holds

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

KUBE, PODIUM = "preempt-kube", "preempt-podium"
PREEMPTOR = "preemptor"
# A nominated pod is moved back to the active queue and tried again by its scheduler: the
# seconds that retry is given to end before the preemptor arrives.
NOMINATION_SETTLE = 1.0
_PLACEMENT = re.compile(r"(found a potential placement for pod on node )\S+(, preempting)")


@dataclass
class Case:
    seed: int
    nodes: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    preemptor: dict[str, Any] = field(default_factory=dict)
    # Status written through pods/status after creation, by pod name.
    statuses: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Pending pods, scheduled by the scheduler under test, nominated to a node by name.
    waiting: list[dict[str, Any]] = field(default_factory=list)
    nominations: dict[str, str] = field(default_factory=dict)
    label: str = ""


def _asks(rng: random.Random, case: Case, pod: dict[str, Any], millis: int) -> None:
    """Make ``pod`` count ``millis`` of cpu one of four ways kube-scheduler accounts for."""
    name, container = pod["metadata"]["name"], pod["spec"]["containers"][0]
    way = rng.choice(["container", "container", "pod level", "resized", "infeasible"])
    if way == "pod level":
        pod["spec"]["resources"] = {"requests": {"cpu": f"{millis}m"}}
        container["resources"] = {"requests": {"cpu": "10m"}}
    elif way in ("resized", "infeasible"):
        spec = max(millis // 2, 10) if way == "resized" else millis * 2
        container["resources"] = {"requests": {"cpu": f"{spec}m"}}
        status: dict[str, Any] = {
            "containerStatuses": [
                {
                    "name": container["name"],
                    "allocatedResources": {"cpu": f"{millis}m"},
                    "resources": {"requests": {"cpu": f"{millis}m"}},
                }
            ]
        }
        if way == "infeasible":
            status["conditions"] = [
                {"type": "PodResizePending", "status": "True", "reason": "Infeasible"}
            ]
        case.statuses[name] = status
    else:
        container["resources"] = {"requests": {"cpu": f"{millis}m"}}


def generate(seed: int, prefix: str) -> Case:
    """2–5 nodes of 2–4 CPU, each filled by bound pods of distinct priorities.

    Distinct priorities per node keep victim selection deterministic: both
    schedulers sort victims by priority, and pods here never started.
    """
    rng = random.Random(seed)
    case = Case(seed)
    label = {"diff": prefix}
    for n in range(rng.randint(2, 5)):
        name = f"{prefix}-n{n}"
        cpu = rng.choice([2, 3, 4])
        case.nodes.append(make_node(name, cpu=str(cpu), memory="8Gi", labels=label))
        free = cpu * 1000
        priorities = rng.sample([1, 2, 5, 10, 50, 100, 200, 2000, 5000], k=rng.randint(1, 4))
        for i, priority in enumerate(priorities):
            last = i == len(priorities) - 1
            share = free if last else rng.choice([250, 500, 750, 1000])
            share = min(share, free)
            if share <= 0:
                break
            free -= share
            pod = make_pod(f"n{n}-p{i}", priority=priority, node_name=name, labels=label)
            _asks(rng, case, pod, share)
            case.pods.append(pod)
    cpu = rng.choice(["500m", "1", "1500m", "2"])
    policy = "Never" if rng.random() < 0.1 else None
    case.preemptor = make_pod(
        PREEMPTOR,
        cpu=cpu,
        priority=1000,
        node_selector=label,
        preemption_policy=policy,
    )
    if rng.random() < 0.3:
        # The same request at pod level; the container asks for a sliver of it.
        case.preemptor["spec"]["resources"] = {"requests": {"cpu": cpu}}
        case.preemptor["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "10m"}}
    return case


WAITING_LABEL = "app"
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


def _nominated_case(
    prefix: str,
    label: str,
    *,
    room: bool,
    waiting_priority: int,
    constraint: str,
    key: str = HOSTNAME,
    guard: bool = False,
) -> Case:
    """n0 (zone-a) and n1 (zone-b), each with a low-priority pod; a pod nominated to n0.

    ``room``: n0 has 3 of its 4 CPU free, so the preemptor fits there unless the
    nominated pod is counted; otherwise n0 is full too and its victim is the cheaper
    one, so preemption picks n0 unless the nominated pod is counted there.
    ``constraint``: "spread" (a DoNotSchedule constraint on ``key``), "anti" (required
    anti-affinity on ``key``), "affinity" (required affinity on ``key``) or "existing"
    (the nominated pod's own anti-affinity against the preemptor; ``guard`` puts a
    bound pod with the same anti-affinity on n1, so that InterPodAffinity's PreFilter
    is not skipped).
    """
    case = Case(seed=-1, label=label)
    base = {"diff": prefix}
    for n, zone in enumerate(("zone-a", "zone-b")):
        case.nodes.append(
            make_node(f"{prefix}-n{n}", cpu="4", memory="8Gi", labels={**base, ZONE: zone})
        )
    victims = (("1", 5), ("4", 5)) if room else (("4", 1), ("4", 5))
    for n, (cpu, priority) in enumerate(victims):
        pod = make_pod(
            f"n{n}-p0", cpu=cpu, priority=priority, node_name=f"{prefix}-n{n}", labels=base
        )
        if guard and n == 1:
            pod["spec"]["affinity"] = _anti({PREEMPTOR: "yes"}, HOSTNAME)
        case.pods.append(pod)
    waiting = make_pod(
        "waiting",
        cpu="100m",
        priority=waiting_priority,
        labels={WAITING_LABEL: label},
        node_selector={"nowhere": "true"},
        preemption_policy="Never",
    )
    preemptor = make_pod(
        PREEMPTOR, cpu="1", priority=1000, node_selector=base, labels={PREEMPTOR: "yes"}
    )
    selector = {"matchLabels": {WAITING_LABEL: label}}
    if constraint == "spread":
        # The preemptor matches its own selector: Go's selfMatchNum is 1.
        preemptor["metadata"]["labels"][WAITING_LABEL] = label
        preemptor["spec"]["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": key,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": selector,
            }
        ]
    elif constraint == "anti":
        preemptor["spec"]["affinity"] = _anti({WAITING_LABEL: label}, key)
    elif constraint == "affinity":
        term = {"labelSelector": selector, "topologyKey": key}
        required = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        preemptor["spec"]["affinity"] = {"podAffinity": required}
    else:
        waiting["spec"]["affinity"] = _anti({PREEMPTOR: "yes"}, key)
    case.waiting.append(waiting)
    case.nominations["waiting"] = f"{prefix}-n0"
    case.preemptor = preemptor
    return case


def _anti(labels: dict[str, str], key: str) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": labels}, "topologyKey": key}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def nominated_cases(prefix: str) -> list[Case]:
    """Each case's nominated pod changes the decision only if counted on its node."""
    return [
        # Higher priority, on n0: n0 is rejected, so the preemptor preempts on n1.
        _nominated_case(
            f"{prefix}-a", "spread-host", room=True, waiting_priority=2000, constraint="spread"
        ),
        _nominated_case(
            f"{prefix}-b",
            "spread-zone",
            room=True,
            waiting_priority=1000,
            constraint="spread",
            key=ZONE,
        ),
        _nominated_case(
            f"{prefix}-c", "anti-host", room=True, waiting_priority=2000, constraint="anti"
        ),
        _nominated_case(
            f"{prefix}-d",
            "existing-anti",
            room=True,
            waiting_priority=2000,
            constraint="existing",
            guard=True,
        ),
        # Both full: the dry run counts it on n0 too, and n0's cheaper victim loses.
        _nominated_case(
            f"{prefix}-e",
            "anti-zone-full",
            room=False,
            waiting_priority=2000,
            constraint="anti",
            key=ZONE,
        ),
        # Lower priority: not counted, so n0's cheaper victim wins.
        _nominated_case(
            f"{prefix}-f", "spread-low", room=False, waiting_priority=500, constraint="spread"
        ),
        # Affinity met only by the nominated pod: the pass without it fails, nothing helps.
        _nominated_case(
            f"{prefix}-g",
            "affinity-full",
            room=False,
            waiting_priority=2000,
            constraint="affinity",
        ),
        # No pod has terms against the preemptor but the nominated one: InterPodAffinity's
        # PreFilter skips, so AddPod never sees its anti-affinity and n0 wins.
        _nominated_case(
            f"{prefix}-h",
            "existing-anti-skipped",
            room=False,
            waiting_priority=2000,
            constraint="existing",
        ),
    ]


@dataclass
class Outcome:
    node: str = ""
    victims: list[str] = field(default_factory=list)
    message: str = ""
    # The PodScheduled condition of the first stored version that names a nominated node.
    condition: dict[str, str] = field(default_factory=dict)


def _dry_run(case: Case) -> dict[str, Any]:
    """Podium's own view: does preemption help, and is the best candidate unique?"""
    bound = []
    for pod in case.pods:
        body = copy.deepcopy(pod)
        body["metadata"].update(namespace="x", uid=f"uid-{pod['metadata']['name']}")
        body["status"] = case.statuses.get(pod["metadata"]["name"], {})
        bound.append(parse_pod(body))
    _, snap = build_snapshot([parse_node(node) for node in case.nodes], bound)
    nominated: dict[str, dict[str, PodInfo]] = {}
    for waiting in case.waiting:
        body = copy.deepcopy(waiting)
        name = body["metadata"]["name"]
        body["metadata"].update(namespace="x", uid=f"uid-{name}")
        nominated.setdefault(case.nominations[name], {})[f"uid-{name}"] = parse_pod(body)
    body = copy.deepcopy(case.preemptor)
    body["metadata"].update(namespace="x", uid="uid-preemptor")
    pod = parse_pod(body)
    profile = build_profile({"percentageOfNodesToScore": 100})
    placement = Scheduler(random.Random(0)).schedule(profile, snap, pod, nominated=nominated)
    if placement.node or placement.diagnosis is None:
        return {"fits": True}
    result = evaluate(
        profile, snap, pod, placement.diagnosis, random.Random(0), nominated=nominated
    )
    best = best_candidates(result.candidates)
    return {"fits": False, "unique": len(best) == 1, "candidates": len(result.candidates)}


async def _names(core: client.CoreV1Api, namespace: str) -> set[str]:
    raw = await core.list_namespaced_pod(namespace, _preload_content=False)
    return {p["metadata"]["name"] for p in (await raw.json())["items"]}


async def _outcome(core: client.CoreV1Api, namespace: str, case: Case) -> Outcome:
    """Bound (victims are whoever is gone), or Unschedulable with no nomination."""
    before = {p["metadata"]["name"] for p in case.pods}

    async def decided() -> Outcome | None:
        raw = await core.read_namespaced_pod(PREEMPTOR, namespace, _preload_content=False)
        pod = await raw.json()
        if pod["spec"].get("nodeName"):
            gone = sorted(before - await _names(core, namespace))
            return Outcome(node=pod["spec"]["nodeName"], victims=gone)
        if pod["status"].get("nominatedNodeName"):
            return None  # victims are on their way out
        for cond in pod["status"].get("conditions") or []:
            message = cond.get("message", "")
            if (
                cond["type"] == "PodScheduled"
                and cond.get("reason") == "Unschedulable"
                and "preemption: found a potential placement" not in message
            ):
                return Outcome(message=message)
        return None

    return await wait_for(decided, timeout=60, interval=0.1, message="preemption outcome")


async def _record(namespace: str, since: str, core: client.CoreV1Api, seen: list[Any]) -> None:
    """Every version of the preemptor the API server stores after resourceVersion ``since``."""
    stream = watch.Watch().stream(
        core.list_namespaced_pod,
        namespace,
        field_selector=f"metadata.name={PREEMPTOR}",
        resource_version=since,
        timeout_seconds=120,
    )
    async for event in stream:
        seen.append(event["raw_object"])


def _nominated_condition(seen: list[Any]) -> dict[str, str]:
    """What the preempting attempt wrote with its nomination: PodScheduled, as stored."""
    for pod in seen:
        status = pod.get("status") or {}
        if status.get("nominatedNodeName"):
            for cond in status.get("conditions") or []:
                if cond["type"] == "PodScheduled":
                    return {k: cond.get(k, "") for k in ("status", "reason", "message")}
            return {}
    return {}


@dataclass
class Watchers:
    """What tells the harness that a scheduler's cache holds a case's nodes: kube-scheduler's
    -v=10 log and Podium's /metrics, with the node count Podium started with."""

    kube_log: KubeLog
    podium: Any
    base_nodes: int

    async def nodes_seen(self, scheduler: str, names: list[str], mark: int, added: bool) -> None:
        if scheduler == KUBE:
            event = NODE_ADDED if added else NODE_DELETED
            await self.kube_log.wait_events(((event, n) for n in names), mark, 30)
        else:
            await holds(self.podium, {"nodes": self.base_nodes + (len(names) if added else 0)})


async def _run_one(
    api: ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    case: Case,
    scheduler: str,
    watchers: Watchers,
) -> Outcome:
    """One case on one scheduler. It decides once its cache holds the case's nodes; the
    pods, their status writes and nominations reach it in the one pod stream, in order,
    before the preemptor. A nominated pod is first retried by its scheduler, which the
    settle period after a nomination leaves time for."""
    names = [n["metadata"]["name"] for n in case.nodes]
    mark = watchers.kube_log.mark()
    await create_nodes(api, case.nodes)
    try:
        for pod in case.pods:
            await core.create_namespaced_pod(namespace, cast(Any, pod))
        for name, status in case.statuses.items():
            await core.patch_namespaced_pod_status(name, namespace, {"status": status})
        for waiting in case.waiting:
            body = copy.deepcopy(waiting)
            body["spec"]["schedulerName"] = scheduler
            await core.create_namespaced_pod(namespace, cast(Any, body))
        for name, node in case.nominations.items():
            await _nominate(core, namespace, name, node)
        await watchers.nodes_seen(scheduler, names, mark, added=True)
        if case.nominations:
            await asyncio.sleep(NOMINATION_SETTLE)
        listed = await core.list_namespaced_pod(namespace, _preload_content=False)
        since = (await listed.json())["metadata"]["resourceVersion"]
        seen: list[Any] = []
        recorder = asyncio.create_task(_record(namespace, since, core, seen))
        try:
            body = copy.deepcopy(case.preemptor)
            body["spec"]["schedulerName"] = scheduler
            await core.create_namespaced_pod(namespace, cast(Any, body))
            outcome = await _outcome(core, namespace, case)
            if outcome.node:  # the watch has delivered every version up to the bound one
                await wait_for(
                    lambda: any(p["spec"].get("nodeName") for p in seen),
                    timeout=30,
                    message="the bound preemptor on the watch",
                )
                outcome.condition = _nominated_condition(seen)
        finally:
            recorder.cancel()
        return outcome
    finally:
        await core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        await wait_for(lambda: _empty(core, namespace), timeout=30, message="pods gone")
        gone = watchers.kube_log.mark()
        await delete_nodes(api, names)
        await watchers.nodes_seen(scheduler, names, gone, added=False)


async def _nominate(core: client.CoreV1Api, namespace: str, name: str, node: str) -> None:
    """Write nominatedNodeName once the scheduler has failed the pod (its PodScheduled
    condition), so the scheduler's informer delivers the nomination as an update."""

    async def failed() -> bool:
        raw = await core.read_namespaced_pod(name, namespace, _preload_content=False)
        conditions = (await raw.json())["status"].get("conditions") or []
        return any(c["type"] == "PodScheduled" and c["status"] == "False" for c in conditions)

    await wait_for(failed, timeout=30, interval=0.1, message=f"{name} unschedulable")
    await core.patch_namespaced_pod_status(name, namespace, {"status": {"nominatedNodeName": node}})

    async def nominated() -> bool:
        raw = await core.read_namespaced_pod(name, namespace, _preload_content=False)
        return bool((await raw.json())["status"].get("nominatedNodeName") == node)

    await wait_for(nominated, timeout=30, interval=0.1, message=f"{name} nominated")


def _condition_differs(kube: Outcome, mine: Outcome, unique: bool) -> bool:
    """Present in both, same status, reason and message; without a unique best
    candidate the node each names in "found a potential placement ..." may differ."""
    if not kube.condition or not mine.condition:
        return True
    theirs, ours = dict(kube.condition), dict(mine.condition)
    if not unique:
        for cond in (theirs, ours):
            cond["message"] = _PLACEMENT.sub(r"\1<node>\2", cond["message"])
    return theirs != ours


async def _empty(core: client.CoreV1Api, namespace: str) -> bool:
    return not await _names(core, namespace)


async def test_preemption_agrees_with_kube_scheduler(
    api_client: ApiClient,
    namespace: str,
    kube_scheduler: Any,
    podium: Any,
    pytestconfig: pytest.Config,
    tmp_path: Path,
) -> None:
    core = client.CoreV1Api(api_client)
    kube_process = await kube_scheduler(KUBE, percentage_of_nodes_to_score=100, verbosity=10)
    proc = await podium("--scheduler-name", PODIUM)
    watchers = Watchers(KubeLog(kube_process.log_path), proc, await cached(proc, "nodes"))
    count = max(10, int(pytestconfig.getoption("--scenarios")) // 5)
    results = []
    cases = [generate(seed, prefix=f"{namespace[:20]}-p{seed}") for seed in range(count)]
    cases += nominated_cases(f"{namespace[:20]}-nom")
    for case in cases:
        seed = case.seed if case.seed >= 0 else case.label
        view = _dry_run(case)
        kube = await _run_one(api_client, core, namespace, case, KUBE, watchers)
        mine = await _run_one(api_client, core, namespace, case, PODIUM, watchers)
        result: dict[str, Any] = {
            "seed": seed,
            "kube": kube.__dict__,
            "podium": mine.__dict__,
            **view,
        }
        if bool(kube.node) != bool(mine.node):
            result["disagree"] = "preempted or not"
        elif not kube.node and kube.message != mine.message:
            result["disagree"] = "message"
        elif kube.node and _condition_differs(kube, mine, unique=bool(view.get("unique"))):
            result["disagree"] = "condition"
        elif (
            kube.node
            and view.get("unique")
            and (kube.node, kube.victims)
            != (
                mine.node,
                mine.victims,
            )
        ):
            result["disagree"] = "victims or node"
        results.append(result)
    report = tmp_path / "preemption-differential.json"
    report.write_text(json.dumps(results, indent=1))
    bad = [r for r in results if "disagree" in r]
    preempted = sum(1 for r in results if r["kube"]["node"])
    compared = sum(1 for r in results if r["kube"]["node"] and r.get("unique"))
    present = sum(1 for r in results if r["kube"]["node"] and r["podium"]["condition"])
    summary = (
        f"{len(results) - len(bad)}/{len(results)} preemption scenarios agree; "
        f"{preempted} preempted (Podium's PodScheduled condition with the nomination "
        f"present {present}/{preempted}), {compared} with a unique best candidate compared on "
        f"victims and node, {len(results) - preempted} messages compared (report: {report})"
    )
    nominated = [r for r in results if isinstance(r["seed"], str)]
    summary += f"; {sum('disagree' not in r for r in nominated)}/{len(nominated)} in flight agree"
    print(summary)
    assert not bad, summary + "\n" + "\n".join(json.dumps(r) for r in bad[:10])
