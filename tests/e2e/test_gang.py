"""Gang scheduling (PodGroup, scheduling.k8s.io/v1beta1) end to end.

The session API server serves the Workload API. The issue's cases run on Podium and on
kube-scheduler v1.37.2 with GenericWorkload on, each on its own two nodes, and both must
give the outcome in the table; then 20 gangs compete on Podium for room for 10 and no
gang is ever left partly bound; and minCount above the member count, raised and lowered
after scheduling, ends as kube-scheduler ends it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, cast

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.devcluster import WORKLOAD_GATES, ControlPlane
from podium.devcluster.objects import wait_for
from podium.framework.decision import read_records
from podium.kube.manifests import make_node
from podium.tools.explain import explain_cluster
from tests.e2e.gang import bound_by_group, create_group, group_condition, member, pod_group
from tests.e2e.queues import pending_pods, scrape_kube
from tests.e2e.test_declared_features import logged_config

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

SIDE = "podium.dev/gang-side"
NO_VICTIMS = "pod group preemption: No preemption victims found for incoming preemptor"


@dataclass(frozen=True)
class Case:
    group: str
    min_count: int | None  # None: the basic policy
    members: int
    cpu: str
    create_group: bool
    bound: int
    # (status, reason, message) of PodGroupInitiallyScheduled, or None for no condition.
    condition: tuple[str, str, str] | None


CASES = (
    Case(
        "short",
        3,
        3,
        "3",
        True,
        0,
        (
            "False",
            "Unschedulable",
            f"minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, {NO_VICTIMS}",
        ),
    ),
    Case("waiting", 3, 2, "100m", True, 0, None),
    Case("missing", 2, 2, "100m", False, 0, None),
    Case("fits", 2, 2, "500m", True, 2, ("True", "Scheduled", "")),
    Case(
        "basic",
        None,
        2,
        "5",
        True,
        0,
        (
            "False",
            "Unschedulable",
            f"minCount (1) cannot be satisfied: 0 scheduled, 0 remaining, {NO_VICTIMS}",
        ),
    ),
)


async def _outcome(api: ApiClient, namespace: str, side: str) -> dict[str, Any]:
    bound = await bound_by_group(api, namespace)
    out: dict[str, Any] = {}
    for case in CASES:
        name = f"{side}-{case.group}"
        cond = await group_condition(api, namespace, name) if case.create_group else None
        out[case.group] = (
            len(bound.get(name, [])),
            (cond["status"], cond["reason"], cond["message"]) if cond else None,
        )
    return out


async def test_issue_cases_match_kube_scheduler(
    control_plane: ControlPlane,
    api_client: ApiClient,
    namespace: str,
    node_factory: Any,
    kube_scheduler: Any,
    podium: Any,
) -> None:
    sides = {"kube": f"{namespace[:30]}-k", "podium": f"{namespace[:30]}-p"}
    kube = await kube_scheduler(sides["kube"], feature_gates=WORKLOAD_GATES)
    # With the gate, kube-scheduler's default profile adds GangScheduling, last; the
    # alpha TopologyAwareWorkloadScheduling plugins stay out.
    (profile,) = logged_config(kube.log_path)["profiles"]
    names = [p["name"] for p in profile["plugins"]["multiPoint"]["enabled"]]
    assert names[-2:] == ["NodeDeclaredFeatures", "GangScheduling"]
    assert not {"TopologyPlacementGenerator", "PodGroupPodsCount"} & set(names)
    podium_proc = await podium("--scheduler-name", sides["podium"], "--log-level", "DEBUG")
    core = client.CoreV1Api(api_client)
    for side in sides.values():
        await node_factory(
            [make_node(f"{side}-n{i}", cpu="4", labels={SIDE: side}) for i in range(2)]
        )
    for case in CASES:
        for side in sides.values():
            name = f"{side}-{case.group}"
            if case.create_group:
                await create_group(api_client, namespace, pod_group(name, case.min_count))
            for i in range(case.members):
                body = member(f"{name}-{i}", name, side, case.cpu, {SIDE: side})
                await core.create_namespaced_pod(namespace, cast(Any, body))
    expected = {c.group: (c.bound, c.condition) for c in CASES}

    async def settled() -> dict[str, dict[str, Any]] | None:
        got = {k: await _outcome(api_client, namespace, s) for k, s in sides.items()}
        return got if all(g == expected for g in got.values()) else None

    try:
        await wait_for(settled, timeout=20, interval=0.5, message="the expected gang outcomes")
    except TimeoutError:
        got = {k: await _outcome(api_client, namespace, s) for k, s in sides.items()}
        raise AssertionError(f"expected {expected}, got {got}") from None
    # Waiting groups stay unbound and without a condition: checked again once both
    # schedulers' PreEnqueue has turned each of their members away.
    waits = [
        f"{sides['podium']}-{c.group}-{i}"
        for c in CASES
        if c.group in ("waiting", "missing")
        for i in range(c.members)
    ]

    async def turned_away() -> bool:
        told = {
            json.loads(line).get("pod")
            for line in podium_proc.log_lines()
            if '"pre_enqueue_waiting"' in line and '"GangScheduling"' in line
        }
        # missing group: gated; below minCount: incomplete
        parked = pending_pods(await scrape_kube(kube))
        return told >= set(waits) and parked.get("gated", 0) + parked.get("incomplete", 0) == 4

    await wait_for(turned_away, timeout=20, interval=0.5, message="waiting members turned away")
    for side in sides.values():
        assert await _outcome(api_client, namespace, side) == expected

    # podium explain, read-only, predicts the condition and names the member that breaks it.
    short = next(c for c in CASES if c.group == "short")
    assert short.condition is not None
    exp = await explain_cluster(
        namespace, f"{sides['podium']}-short-0", str(control_plane.kubeconfig)
    )
    assert exp.group is not None and not exp.group.fits
    assert exp.group.message == short.condition[2]
    assert "Insufficient cpu" in exp.group.breaks
    waiting = await explain_cluster(
        namespace, f"{sides['podium']}-waiting-0", str(control_plane.kubeconfig)
    )
    assert waiting.group is not None and waiting.group.waiting

    # The third member completes "waiting"; the missing group appears.
    for side in sides.values():
        name = f"{side}-waiting"
        await core.create_namespaced_pod(
            namespace, cast(Any, member(f"{name}-2", name, side, "100m", {SIDE: side}))
        )
        await create_group(api_client, namespace, pod_group(f"{side}-missing", 2))

    async def completed() -> bool:
        for side in sides.values():
            bound = await bound_by_group(api_client, namespace)
            if (
                len(bound.get(f"{side}-waiting", [])) != 3
                or len(bound.get(f"{side}-missing", [])) != 2
            ):
                return False
        return True

    await wait_for(completed, timeout=20, interval=0.5, message="late members and groups bound")


async def test_twenty_gangs_for_room_for_ten_never_partial(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any
) -> None:
    """20 gangs of 4 one-cpu members, 10 nodes of 4 cpu: 10 gangs bound, never a part of one.

    Members of a placed gang bind concurrently, so a sample may catch a gang mid-bind;
    such a gang must be complete within a few seconds, and at the end every gang is
    bound whole or not at all.
    """
    scheduler = f"{namespace[:30]}-p"
    proc = await podium("--scheduler-name", scheduler)
    await node_factory(
        [make_node(f"{scheduler}-n{i}", cpu="4", labels={SIDE: scheduler}) for i in range(10)]
    )
    core = client.CoreV1Api(api_client)
    gangs = [f"g{i:02d}" for i in range(20)]

    async def submit(gang: str) -> None:
        await create_group(api_client, namespace, pod_group(gang, 4))
        for i in range(4):
            await core.create_namespaced_pod(
                namespace, cast(Any, member(f"{gang}-{i}", gang, scheduler, "1", {SIDE: scheduler}))
            )

    await asyncio.gather(*(submit(g) for g in gangs))
    partial_since: dict[str, float] = {}
    stuck: list[str] = []
    samples = 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        bound = await bound_by_group(api_client, namespace)
        samples += 1
        now = time.monotonic()
        for gang in gangs:
            count = len(bound.get(gang, []))
            if 0 < count < 4:
                partial_since.setdefault(gang, now)
                if now - partial_since[gang] > 5:
                    stuck.append(f"{gang}: {count}/4 bound for over 5 s")
            else:
                partial_since.pop(gang, None)
        assert not stuck, stuck
        whole = sum(1 for g in gangs if len(bound.get(g, [])) == 4)
        if whole == 10 and not partial_since:
            break
        await asyncio.sleep(0.1)
    # Nothing more may bind: no gang fits in what is left. Checked once every member
    # left out has been tried again (its backoff is at most 10 s) and failed again.
    left = [f"{g}-{i}" for g in gangs if not bound.get(g) for i in range(4)]

    def failures() -> Counter[str]:
        records = read_records(proc.log_lines())
        return Counter(r["pod"] for r in records if r["result"] == "unschedulable")

    before = failures()

    def tried_again() -> bool:
        after = failures()
        return all(after[pod] > before[pod] for pod in left)

    await wait_for(tried_again, timeout=40, interval=0.5, message="every member left tried again")
    bound = await bound_by_group(api_client, namespace)
    counts = sorted(len(bound.get(g, [])) for g in gangs)
    assert counts == [0] * 10 + [4] * 10, f"bound members per gang: {counts} ({samples} samples)"


async def test_min_count_above_members_and_changed_after_scheduling_match_kube_scheduler(
    api_client: ApiClient,
    namespace: str,
    node_factory: Any,
    kube_scheduler: Any,
    podium: Any,
) -> None:
    """minCount is mutable in 1.37. On each scheduler's two nodes: "grow" (minCount 2, two
    members) is scheduled, then raised to 3 with a third member; "shrink" (minCount 4,
    three members) waits, then is lowered to 3; "over" (minCount 5, three members) waits
    throughout. Both schedulers bind grow's third member and all of shrink, and leave
    over unbound with no condition."""
    sides = {"kube": f"{namespace[:30]}-k", "podium": f"{namespace[:30]}-p"}
    kube = await kube_scheduler(sides["kube"], feature_gates=WORKLOAD_GATES)
    proc = await podium("--scheduler-name", sides["podium"], "--log-level", "DEBUG")
    core = client.CoreV1Api(api_client)
    custom = client.CustomObjectsApi(api_client)
    groups = {"grow": (2, 2), "shrink": (4, 3), "over": (5, 3)}  # minCount, members
    for side in sides.values():
        await node_factory(
            [make_node(f"{side}-n{i}", cpu="4", labels={SIDE: side}) for i in range(2)]
        )
        for group, (min_count, members) in groups.items():
            name = f"{side}-{group}"
            await create_group(api_client, namespace, pod_group(name, min_count))
            for i in range(members):
                body = member(f"{name}-{i}", name, side, "100m", {SIDE: side})
                await core.create_namespaced_pod(namespace, cast(Any, body))

    async def outcome() -> dict[str, dict[str, tuple[int, str | None]]]:
        bound = await bound_by_group(api_client, namespace)
        got: dict[str, dict[str, tuple[int, str | None]]] = {}
        for key, side in sides.items():
            got[key] = {}
            for group in groups:
                cond = await group_condition(api_client, namespace, f"{side}-{group}")
                got[key][group] = (
                    len(bound.get(f"{side}-{group}", [])),
                    cond["reason"] if cond else None,
                )
        return got

    first = {"grow": (2, "Scheduled"), "shrink": (0, None), "over": (0, None)}
    waiting = [f"{sides['podium']}-{g}-{i}" for g in ("shrink", "over") for i in range(3)]

    async def phase_one() -> bool:
        told = {
            json.loads(line).get("pod")
            for line in proc.log_lines()
            if '"pre_enqueue_waiting"' in line and '"GangScheduling"' in line
        }
        parked = pending_pods(await scrape_kube(kube))
        return (
            told >= set(waiting)
            and parked.get("gated", 0) + parked.get("incomplete", 0) == 6
            and all(o == first for o in (await outcome()).values())
        )

    await wait_for(phase_one, timeout=30, interval=0.5, message="grow bound, the others waiting")

    replace = [{"op": "replace", "path": "/spec/schedulingPolicy/gang/minCount", "value": 3}]
    for side in sides.values():
        for group in ("grow", "shrink"):
            await custom.patch_namespaced_custom_object(
                "scheduling.k8s.io", "v1beta1", namespace, "podgroups", f"{side}-{group}", replace
            )
        third = member(f"{side}-grow-2", f"{side}-grow", side, "100m", {SIDE: side})
        await core.create_namespaced_pod(namespace, cast(Any, third))
    second = {"grow": (3, "Scheduled"), "shrink": (3, "Scheduled"), "over": (0, None)}

    async def phase_two() -> bool:
        return all(o == second for o in (await outcome()).values())

    try:
        await wait_for(phase_two, timeout=60, interval=0.5, message="grow and shrink bound")
    except TimeoutError:
        raise AssertionError(f"expected {second} on both sides, got {await outcome()}") from None
