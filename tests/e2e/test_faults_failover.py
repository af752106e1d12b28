"""The leader killed with -9 while its claim allocations and gang binds are in flight.

Two ``podium run`` processes share a Lease. Claim pods and gangs are created at once on a
small cluster, and the leader is SIGKILLed right after the API server has answered one of
its writes (read from the audit log, which the server writes once the answer has gone
out), while the writes of the other pods are still going: a claim's finalizer, a claim's
allocation and reservation, a gang member's Binding. The standby, which watched every
write, takes the Lease once it expires; meanwhile some pods the leader left half-way are
deleted with their claims. Every check reads the API server only: no device
is ever in two claims' allocations (sampled throughout), and once the cluster is quiet no
claim is held or reserved for a pod that is gone, has no node or sits elsewhere, no gang
is bound below its minCount while there is room to complete it, and no claim pod waits
while a node has a free device and room.
"""

from __future__ import annotations

import asyncio
import functools
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.devcluster import ControlPlane
from podium.devcluster.objects import create_pod
from podium.framework.decision import read_records
from podium.kube.manifests import make_node, make_pod
from podium.state.dra import FINALIZER
from tests.e2e.dra import (
    Dra,
    allocated_devices,
    claim_spec,
    claim_template,
    device,
    device_class,
    exactly,
    resource_slice,
    with_claims,
)
from tests.e2e.faults import (
    check_invariants,
    claim_problems,
    gang_problems,
    stranded_claim_pods,
    wait_until,
)
from tests.e2e.gang import bound_by_group, create_group, member, pod_group
from tests.e2e.test_faults_apiserver_writes import Audited, AuditTail, _write
from tests.e2e.test_faults_claims_gangs import _pods
from tests.e2e.test_leader_election import LEASE
from tests.e2e.test_reliability import report
from tests.e2e.test_scheduling import all_pods_and_nodes

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

NODES, CPU, DEVICES = 8, "4", 3
CLAIM_PODS, GANGS, MEMBERS = 36, 12, 4

# The leader dies once the audit log shows this many of its writes of one kind:
# (verb, resource, subresource, pod name prefix for Bindings, count).
KILL_POINTS: dict[str, tuple[str, str, str, str, int]] = {
    "finalizer": ("update", "resourceclaims", "", "", 1),
    "allocation": ("update", "resourceclaims", "status", "", 6),
    "gang-binding": ("create", "pods", "binding", "g", 1),
}


def _counting(wanted: Audited, prefix: str) -> tuple[Audited, list[int]]:
    """``wanted`` narrowed to objects named ``prefix``..., and how many it has matched."""
    seen = [0]

    def match(event: dict[str, Any]) -> bool:
        name = str((event.get("objectRef") or {}).get("name") or "")
        if wanted(event) and name.startswith(prefix):
            seen[0] += 1
            return True
        return False

    return match, seen


async def _leader(procs: list[Any]) -> Any:
    for proc in procs:
        if "podium_leader 1.0" in await proc.metrics():
            return proc
    return None


@pytest.mark.parametrize("point", list(KILL_POINTS))
async def test_leader_killed_mid_claim_and_gang_writes_standby_holds_no_device_twice(
    point: str,
    api_client: ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    node_factory: Any,
    podium: Any,
    dra: Dra,
) -> None:
    """36 claim pods (100m and a device) and 12 gangs of 4 (500m each) on 8 nodes of 4 cpu
    and 3 devices, created at once in a shuffled order under two replicas; the leader is
    SIGKILLed right after its first claim finalizer, its sixth allocation, or its sixth
    gang member Binding; while no replica leads, every other pod whose claim the leader
    allocated but which it did not bind is deleted with its claim. No device is ever
    allocated twice; once the standby has tried
    every pod left Pending, every claim is held by its own pod bound on the device's node,
    every gang is bound whole or has no room, and no claim pod waits beside a free
    device."""
    verb, resource, subresource, prefix, count = KILL_POINTS[point]
    sched = f"{namespace[:40]}-f"
    core = client.CoreV1Api(api_client)
    gangs = [f"g{i:02d}" for i in range(GANGS)]

    async def gang(name: str) -> None:
        await create_group(api_client, namespace, pod_group(name, MEMBERS))
        for i in range(MEMBERS):
            body = member(f"{name}-{i}", name, sched, "500m", {"suite": namespace})
            await core.create_namespaced_pod(namespace, cast(Any, body))

    async def claim_pod(name: str) -> None:
        body = make_pod(name, cpu="100m", scheduler_name=sched, node_selector={"suite": namespace})
        await create_pod(api_client, namespace, with_claims(body, {"gpu": "one"}))
        await dra.instantiate(name)

    klass = f"{namespace}-gpu"
    await dra.create("deviceclasses", device_class(klass))
    await dra.create(
        "resourceclaimtemplates", claim_template("one", claim_spec(exactly("gpu", klass)))
    )
    work: list[Callable[[], Awaitable[None]]] = [functools.partial(gang, g) for g in gangs]
    work += [functools.partial(claim_pod, f"c{i:02d}") for i in range(CLAIM_PODS)]
    random.Random(point).shuffle(work)
    gate = asyncio.Semaphore(8)

    async def create(make: Callable[[], Awaitable[None]]) -> None:
        async with gate:
            await make()

    await asyncio.gather(*(create(make) for make in work))

    lease = ("--lease-name", f"podium-{namespace}"[:60], "--lease-namespace", namespace)
    args = ("--scheduler-name", sched, *LEASE, *lease)
    first = await podium(*args)
    second = await podium(*args)
    await wait_until(lambda: _leader([first, second]), 30, 0.2, "a leader")
    leader = await _leader([first, second])
    standby = second if leader is first else first

    # Devices in two claims' allocations, sampled every 100 ms from here to the end.
    doubled: list[list[tuple[str, str, str]]] = []
    stop = asyncio.Event()

    async def sample() -> None:
        while not stop.is_set():
            taken = Counter(allocated_devices(await dra.claims()))
            twice = [d for d, n in taken.items() if n > 1]
            if twice:
                doubled.append(twice)
            await asyncio.sleep(0.1)

    sampler = asyncio.create_task(sample())
    wanted, seen = _counting(_write(namespace, verb, resource, subresource), prefix)
    tail = AuditTail(control_plane, namespace)
    try:
        # Every pod waits for a node until now: the nodes and their devices arrive at once,
        # and the leader has all of them to place, its writes for many in flight together.
        nodes = await node_factory(
            [
                make_node(f"{namespace}-n{i}", cpu=CPU, labels={"suite": namespace})
                for i in range(NODES)
            ]
        )
        for node in nodes:
            devices = [device(f"gpu-{i}") for i in range(DEVICES)]
            await dra.create("resourceslices", resource_slice(f"{node}-gpus", node, devices))
        await wait_until(lambda: tail.seen(wanted) and seen[0] >= count, 90, 0.01, point, leader)
        leader.kill()
        killed = time.monotonic()
        claims_at_kill = await dra.claims()
        pods_at_kill = await _pods(api_client, namespace)
        by_group = await bound_by_group(api_client, namespace)
        half_done = [
            c["metadata"]["name"]
            for c in claims_at_kill
            if "allocation" in (c.get("status") or {})
            and not (pods_at_kill.get(c["metadata"]["ownerReferences"][0]["uid"]) or {})
            .get("spec", {})
            .get("nodeName")
        ]
        # While no replica leads, every other such pod is deleted with its claim (the
        # resourceclaim controller's part): a device held for a pod that is gone.
        gone = half_done[::2]
        for claim in gone:
            pod = claim[: claim.index("-")]
            await core.delete_namespaced_pod(pod, namespace, grace_period_seconds=0)
            await dra.delete_claim(claim)
        await wait_until(lambda: _leader([standby]), 30, 0.2, "the standby leads", watch=standby)
        takeover = time.monotonic() - killed
        finalizer_only = sum(
            1
            for c in claims_at_kill
            if FINALIZER in (c["metadata"].get("finalizers") or [])
            and "allocation" not in (c.get("status") or {})
        )
        bound_at_kill = sum(1 for p in pods_at_kill.values() if p["spec"].get("nodeName"))
        partial_gangs = sum(1 for g in gangs if 0 < len(by_group.get(g, [])) < MEMBERS)

        async def quiet() -> list[str] | None:
            """None once the standby has tried every Pending pod and the state holds;
            else what is still wrong (the timeout's message)."""
            pods, all_nodes = await all_pods_and_nodes(api_client)
            ours = [p for p in pods if p["metadata"]["namespace"] == namespace]
            mine = [n for n in all_nodes if n["metadata"]["name"] in nodes]
            claims = await dra.claims()
            records = read_records(standby.log_lines())
            tried = {r["pod"] for r in records if r["result"] == "unschedulable"}
            pending = [p["metadata"]["name"] for p in ours if not p["spec"].get("nodeName")]
            problems = [f"{p} not yet tried by the standby" for p in pending if p not in tried]
            problems += claim_problems(claims, {p["metadata"]["uid"]: p for p in ours})
            problems += gang_problems(ours, mine, dict.fromkeys(gangs, MEMBERS))
            problems += stranded_claim_pods(ours, mine, claims, DEVICES)
            return problems or None

        last: list[list[str] | None] = [None]

        async def settled() -> bool:
            last[0] = await quiet()
            return last[0] is None

        try:
            await wait_until(settled, 90, 0.5, "a quiet cluster", watch=standby)
        except TimeoutError as exc:
            raise AssertionError(f"never quiet: {(last[0] or [])[:10]}") from exc
    finally:
        stop.set()
        await sampler
    assert not doubled, f"devices allocated twice: {doubled[:3]}"

    pods = await _pods(api_client, namespace)
    claims = await dra.claims()
    pending = sorted(p["metadata"]["name"] for p in pods.values() if not p["spec"].get("nodeName"))
    by_group = await bound_by_group(api_client, namespace)
    counts = sorted(len(by_group.get(g, [])) for g in gangs)
    assert set(counts) <= {0, MEMBERS}, f"bound members per gang: {counts}"
    result = await check_invariants(
        api_client, control_plane, namespace, expect_pending=pending, allow_unaudited=True
    )
    report(
        f"leader-kill-9-{point}",
        result,
        writes_at_kill=seen[0],
        bound_at_kill=bound_at_kill,
        claims_finalizer_only_at_kill=finalizer_only,
        claims_allocated_pod_unbound_at_kill=len(half_done),
        deleted_during_takeover=len(gone),
        gangs_part_bound_at_kill=partial_gangs,
        takeover_s=round(takeover, 1),
        gangs_bound=counts.count(MEMBERS),
        devices_held=len(allocated_devices(claims)),
    )
