"""Podium killed with -9 in the middle of DRA pods' and gangs' multi-write sequences.

A claim pod takes three writes (the claim's allocation, its reservedFor, the Binding) and a
gang binds its members one Binding each. A SIGKILL between two of them leaves the cluster
half-way: a claim allocated and reserved for a pod that has no node, or a gang with some
members bound. The restarted Podium must finish each one, as kube-scheduler's would: a pod
whose claim is already allocated goes to the allocation's node, and a gang with bound
members needs only the rest. Every invariant is read from the API server.

To kill at that exact point, an admission policy refuses the Bindings concerned: the
writes before the Binding land, the Binding cannot, and Podium is killed once the API
server shows the half-way state. The policy goes, and a new Podium starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.devcluster import ControlPlane
from podium.devcluster.objects import create_pod, pod_events, wait_for
from podium.framework.decision import read_records
from podium.kube.manifests import make_node, make_pod
from tests.e2e.dra import (
    DRIVER,
    GROUP,
    VERSION,
    Dra,
    allocated_devices,
    claim_spec,
    device,
    device_class,
    exactly,
    resource_claim,
    resource_slice,
    with_claims,
)
from tests.e2e.faults import check_invariants, deny_admission, wait_bound, wait_until
from tests.e2e.gang import bound_by_group, create_group, member, pod_group
from tests.e2e.test_leader_election import LEASE
from tests.e2e.test_reliability import report

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]


async def _pods(api: ApiClient, namespace: str) -> dict[str, dict[str, Any]]:
    raw: Any = await client.CoreV1Api(api).list_namespaced_pod(namespace, _preload_content=False)
    return {p["metadata"]["uid"]: p for p in (await raw.json())["items"]}


@contextlib.asynccontextmanager
async def refused_bindings(
    api: ApiClient, namespace: str, match_condition: str = ""
) -> AsyncIterator[None]:
    """Bindings in ``namespace`` (those matching the CEL ``match_condition``) are refused
    inside the block: it is entered once the API server refuses a Binding, and left once
    it accepts one again."""
    admission = client.AdmissionregistrationV1Api(api)
    core = client.CoreV1Api(api)
    policy, binding = deny_admission(
        f"{namespace}-no-bind",
        resource="pods/binding",
        operation="CREATE",
        validation="false",
        message="binding refused by the test",
        match_condition=match_condition,
        namespace=namespace,
    )
    # Dry-run Bindings skip admission, so a real one is tried on a pod of no scheduler;
    # the probe is deleted at once.
    tries = iter(range(10**6))

    async def refused() -> bool:
        name = f"probe{next(tries)}-3"
        await core.create_namespaced_pod(
            namespace, cast(Any, make_pod(name, scheduler_name="nobody"))
        )
        body = {"target": {"kind": "Node", "name": "anywhere"}, "metadata": {"name": name}}
        try:
            answer = await core.create_namespaced_pod_binding(
                name, namespace, cast(Any, body), _preload_content=False
            )
        finally:
            await core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        return int(answer.status) in (403, 422)

    async def allowed() -> bool:
        return not await refused()

    await admission.create_validating_admission_policy(policy)
    await admission.create_validating_admission_policy_binding(binding)
    try:
        await wait_for(refused, timeout=30, interval=0.2, message="Bindings refused")
        yield
    finally:
        await admission.delete_validating_admission_policy_binding(binding["metadata"]["name"])
        await admission.delete_validating_admission_policy(policy["metadata"]["name"])
        # The API server unloads the policy asynchronously too.
        await wait_for(allowed, timeout=30, interval=0.2, message="Bindings allowed again")


def _half_done(claims: list[dict[str, Any]], pods: dict[str, dict[str, Any]]) -> int:
    """Claims allocated for their pod while the pod has no node yet.

    After a refused Binding, Unreserve takes the pod out of ``reservedFor`` and leaves the
    allocation, as kube-scheduler does: the next attempt is held to that node.
    """
    count = 0
    for claim in claims:
        status = claim.get("status") or {}
        owner = claim["metadata"]["ownerReferences"][0]["uid"]
        pod = pods.get(owner)
        if "allocation" in status and pod is not None and not pod["spec"].get("nodeName"):
            count += 1
    return count


@pytest.mark.parametrize("takeover", ["restart", "standby"])
async def test_podium_killed_mid_claim_writes_restarts_and_holds_no_device_twice(
    takeover: str,
    api_client: ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    node_factory: Any,
    podium: Any,
    dra: Dra,
) -> None:
    """30 claim pods race for 24 devices (6 nodes of 4). Bindings are refused, and Podium is
    SIGKILLed once a claim is allocated for a pod with no node; the refusal
    is lifted and Podium started again (``restart``), or its standby, which watched every
    write, takes the Lease (``standby``). Then 24
    pods are bound, each with its own device on its own node; the 6 left are Pending with
    no device held, and no claim is allocated or reserved for a pod without a node."""
    sched = f"{namespace}-s"
    nodes = await node_factory(
        [make_node(f"{namespace}-n{i}", labels={"suite": namespace}) for i in range(6)]
    )
    await dra.gpus(nodes, 4, template="one")
    names = [f"p{i:02d}" for i in range(30)]
    for name in names:
        body = make_pod(name, scheduler_name=sched, node_selector={"suite": namespace})
        await create_pod(api_client, namespace, with_claims(body, {"gpu": "one"}))
    await asyncio.gather(*(dra.instantiate(n) for n in names))

    args: tuple[str, ...] = ("--scheduler-name", sched)
    if takeover == "standby":
        args += (*LEASE, "--lease-name", f"podium-{namespace}"[:60], "--lease-namespace", namespace)
    async with refused_bindings(api_client, namespace):
        first = await podium(*args)
        second = None
        if takeover == "standby":

            async def leads() -> bool:
                return "podium_leader 1.0" in await first.metrics()

            await wait_until(leads, 30, 0.1, "the first replica leads", watch=first)
            # The standby watches everything the leader writes, and takes over with that cache.
            second = await podium(*args)

        async def half_done() -> int:
            return _half_done(await dra.claims(), await _pods(api_client, namespace))

        await wait_for(half_done, timeout=60, interval=0.05, message="a claim allocated, no node")
        first.kill()
        claims_at_kill = await dra.claims()
        allocated_unbound_at_kill = await half_done()
        allocated_at_kill = len(allocated_devices(claims_at_kill))
    assert allocated_unbound_at_kill > 0

    if second is None:
        second = await podium(*args)
    await wait_bound(api_client, namespace, 24, 60, 0.2, "24 claim pods bound", watch=second)

    pods = await _pods(api_client, namespace)
    pending = sorted(p["metadata"]["name"] for p in pods.values() if not p["spec"].get("nodeName"))
    assert len(pending) == 6, pending

    def tried_after_restart() -> bool:  # each pending pod got a verdict from the new Podium
        records = read_records(second.log_lines())
        tried = {r["pod"] for r in records if r["result"] == "unschedulable"}
        return set(pending) <= tried

    await wait_until(tried_after_restart, 60, 0.2, "each pending pod tried after the restart")

    claims = await dra.claims()
    pods = await _pods(api_client, namespace)
    taken = allocated_devices(claims)
    assert len(taken) == 24, f"{len(taken)} devices allocated for 24 bound pods"
    assert Counter(taken).most_common(1)[0][1] == 1, "a device was allocated twice"
    for claim in claims:
        status = claim.get("status") or {}
        reserved = [r["uid"] for r in status.get("reservedFor") or []]
        if "allocation" not in status:
            assert not reserved, claim["metadata"]["name"]
            continue
        (uid,) = reserved
        node = pods[uid]["spec"].get("nodeName")
        assert node, f"{claim['metadata']['name']} holds a device for a pod with no node"
        (result,) = status["allocation"]["devices"]["results"]
        assert result["pool"] == node, "the device is not on the pod's node"
    result = await check_invariants(
        api_client, control_plane, namespace, expect_pending=pending, allow_unaudited=True
    )
    report(
        f"podium-kill-9-claims-{takeover}",
        result,
        allocated_at_kill=allocated_at_kill,
        allocated_unbound_at_kill=allocated_unbound_at_kill,
    )


async def test_podium_killed_mid_gang_binds_restarts_and_completes_every_gang(
    api_client: ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    node_factory: Any,
    podium: Any,
) -> None:
    """15 gangs of 4 one-cpu members on 12 nodes of 4 cpu (room for 12 gangs). The Bindings
    of each gang's last member are refused, and Podium is SIGKILLed once a gang is bound in
    part; the refusal is lifted and Podium started again. Then 12 gangs
    are bound whole and 3 not at all: no gang is left below its minCount."""
    sched = f"{namespace[:30]}-g"
    await node_factory(
        [make_node(f"{namespace}-n{i}", cpu="4", labels={"suite": namespace}) for i in range(12)]
    )
    core = client.CoreV1Api(api_client)
    gangs = [f"g{i:02d}" for i in range(15)]
    for gang in gangs:
        await create_group(api_client, namespace, pod_group(gang, 4))
        for i in range(4):
            body = member(f"{gang}-{i}", gang, sched, "1", {"suite": namespace})
            await core.create_namespaced_pod(namespace, cast(Any, body))

    # Each gang's last member cannot bind: the first three of a placed gang do.
    async with refused_bindings(api_client, namespace, "object.metadata.name.endsWith('-3')"):
        first = await podium("--scheduler-name", sched)

        async def partial() -> int:
            bound = await bound_by_group(api_client, namespace)
            return sum(1 for g in gangs if 0 < len(bound.get(g, [])) < 4)

        await wait_until(partial, 60, 0.02, "a gang bound in part", watch=first)
        first.kill()
        partial_at_kill = await partial()
    assert partial_at_kill > 0

    second = await podium("--scheduler-name", sched)
    await wait_bound(api_client, namespace, 48, 60, 0.2, "12 gangs bound", watch=second)
    bound = await bound_by_group(api_client, namespace)
    left = [f"{g}-{i}" for g in gangs if not bound.get(g) for i in range(4)]

    def tried_after_restart() -> bool:
        records = read_records(second.log_lines())
        tried = {r["pod"] for r in records if r["result"] == "unschedulable"}
        return set(left) <= tried

    await wait_until(tried_after_restart, 60, 0.2, "every member left tried after the restart")
    bound = await bound_by_group(api_client, namespace)
    counts = sorted(len(bound.get(g, [])) for g in gangs)
    assert counts == [0] * 3 + [4] * 12, f"bound members per gang: {counts}"
    result = await check_invariants(
        api_client, control_plane, namespace, expect_pending=left, allow_unaudited=True
    )
    report("podium-kill-9-gangs", result, partial_gangs_at_kill=partial_at_kill)


async def test_refused_claim_writes_hold_no_device_and_bind_once_lifted(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any, dra: Dra
) -> None:
    """An admission policy refuses every ResourceClaim status write in the namespace, so
    the allocation cannot be written. The pod is reported with the server's words and is
    not bound; no allocation reaches the server, and the device Podium had in flight is
    released: once the refusal is lifted, that pod and a second one take the node's two
    devices."""
    (node,) = await node_factory([make_node(f"{namespace}-n0")])
    klass = await dra.gpus([node], 2)
    for name in ("a", "b"):
        await dra.create("resourceclaims", resource_claim(name, claim_spec(exactly("gpu", klass))))
    admission = client.AdmissionregistrationV1Api(api_client)
    policy, binding = deny_admission(
        f"{namespace}-no-claim",
        group=GROUP,
        resource="resourceclaims/status",
        operation="UPDATE",
        validation="!has(object.status.allocation)",
        message="claim write refused by the test",
        namespace=namespace,
    )
    await admission.create_validating_admission_policy(cast(Any, policy))
    await admission.create_validating_admission_policy_binding(cast(Any, binding))
    custom = client.CustomObjectsApi(api_client)
    try:

        async def refused() -> bool:
            claim = (await dra.claims())[0]
            claim["status"] = {"allocation": {"devices": {"results": []}}}
            try:
                await custom.replace_namespaced_custom_object_status(
                    GROUP,
                    VERSION,
                    namespace,
                    "resourceclaims",
                    claim["metadata"]["name"],
                    claim,
                    dry_run="All",
                )
            except client.ApiException as exc:
                return "claim write refused by the test" in str(exc.body)
            return False

        await wait_for(refused, timeout=30, interval=0.2, message="claim writes refused")
        await podium()
        await create_pod(api_client, namespace, with_claims(make_pod("a"), claims={"gpu": "a"}))

        async def reported() -> str:
            events = await pod_events(api_client, namespace, "a", "FailedScheduling")
            return next((e.message for e in events if "claim write refused" in e.message), "")

        message = await wait_for(reported, timeout=30, message="the refused write reported")
        assert message.startswith('running PreBind plugin "DynamicResources"'), message
        assert allocated_devices(await dra.claims()) == []
    finally:
        await admission.delete_validating_admission_policy_binding(binding["metadata"]["name"])
        await admission.delete_validating_admission_policy(policy["metadata"]["name"])

    await create_pod(api_client, namespace, with_claims(make_pod("b"), claims={"gpu": "b"}))
    await wait_bound(api_client, namespace, 2, 60, 0.2, "both claim pods bound")
    taken = allocated_devices(await dra.claims())
    assert sorted(taken) == [(DRIVER, node, "gpu-0"), (DRIVER, node, "gpu-1")]


def _kind_device(name: str, kind: str, **extra: Any) -> dict[str, Any]:
    return {**device(name, kind=kind), **extra}


def _slice(name: str, node: str, pool: str, count: int, devices: list[dict[str, Any]]) -> Any:
    body = resource_slice(name, node, devices)
    body["spec"]["pool"] = {"name": pool, "generation": 1, "resourceSliceCount": count}
    return body


async def test_bad_slices_are_judged_as_kube_scheduler_judges_them(
    api_client: ApiClient,
    namespace: str,
    node_factory: Any,
    podium: Any,
    kube_scheduler: Any,
    dra: Dra,
) -> None:
    """Bad ResourceSlices, on a node for each scheduler: what the API server refuses is
    refused; a pool whose two slices name the same device, and a device that consumes more
    of a shared counter than its slice has, stay on the server. A claim on either leaves
    its pod Pending with kube-scheduler's own message, a good device on the same node is
    still allocated, and Podium keeps running."""
    sides = {"p": "podium", "k": f"{namespace[:40]}-kube"}
    nodes = await node_factory(
        [make_node(f"{namespace}-{side}", labels={"side": side}) for side in sides]
    )
    refused: dict[str, int] = {}
    for side, node in zip(sides, nodes, strict=True):
        dup, ctr, good = f"{node}-dup", f"{node}-ctr", f"{node}-good"
        for half in ("a", "b"):  # one pool, two slices, the same device name in both
            await dra.create(
                "resourceslices",
                _slice(f"{dup}-{half}", node, dup, 2, [_kind_device("d-0", "dup")]),
            )
        # A device that consumes 1Ei of a counter the pool has 1Gi of.
        counters = _slice(f"{ctr}-counters", node, ctr, 2, [])
        del counters["spec"]["devices"]
        counters["spec"]["sharedCounters"] = [
            {"name": "mem", "counters": {"memory": {"value": "1Gi"}}}
        ]
        await dra.create("resourceslices", counters)
        uses = [{"counterSet": "mem", "counters": {"memory": {"value": "1Ei"}}}]
        await dra.create(
            "resourceslices",
            _slice(
                f"{ctr}-devices", node, ctr, 2, [_kind_device("c-0", "ctr", consumesCounters=uses)]
            ),
        )
        await dra.create(
            "resourceslices", _slice(good, node, good, 1, [_kind_device("g-0", "good")])
        )
        if side == "p":  # what validation refuses, once
            twice = _slice(f"{node}-twice", node, f"{node}-twice", 1, [device("t-0")] * 2)
            bad_version = _slice(
                f"{node}-ver",
                node,
                f"{node}-ver",
                1,
                [{"name": "v-0", "attributes": {"firmware": {"version": "not-a-version"}}}],
            )
            for label, body in (("duplicate-name", twice), ("bad-version", bad_version)):
                try:
                    await dra.create("resourceslices", body)
                    refused[label] = 201
                except client.ApiException as exc:
                    refused[label] = int(exc.status)
    assert refused == {"duplicate-name": 422, "bad-version": 422}, refused
    for kind in ("dup", "ctr", "good"):
        selector = f'device.attributes["{DRIVER}"].kind == "{kind}"'
        await dra.create("deviceclasses", device_class(f"{namespace}-{kind}", selector))

    await podium()
    await kube_scheduler(sides["k"])
    for side, scheduler in sides.items():
        for kind in ("dup", "ctr", "good"):
            name = f"{side}-{kind}"
            spec = claim_spec(exactly("gpu", f"{namespace}-{kind}"))
            await dra.create("resourceclaims", resource_claim(name, spec))
            pod = make_pod(name, scheduler_name=scheduler, node_selector={"side": side})
            await create_pod(api_client, namespace, with_claims(pod, claims={"gpu": name}))

    async def decided() -> dict[str, dict[str, Any]] | None:
        pods = {p["metadata"]["name"]: p for p in (await _pods(api_client, namespace)).values()}
        for name, pod in pods.items():
            conditions = (pod.get("status") or {}).get("conditions") or []
            scheduled = next((c for c in conditions if c["type"] == "PodScheduled"), None)
            if scheduled is None or (name.endswith("good") and scheduled["status"] != "True"):
                return None
        return pods if len(pods) == 6 else None

    pods = await wait_for(decided, timeout=60, interval=0.3, message="all six pods decided")

    def message(name: str) -> str:
        conditions = pods[name]["status"]["conditions"]
        return str(next(c for c in conditions if c["type"] == "PodScheduled").get("message", ""))

    for kind in ("dup", "ctr"):
        assert not pods[f"p-{kind}"]["spec"].get("nodeName"), kind
        assert not pods[f"k-{kind}"]["spec"].get("nodeName"), kind
        assert message(f"p-{kind}") == message(f"k-{kind}"), kind
    for side, node in zip(sides, nodes, strict=True):
        assert pods[f"{side}-good"]["spec"]["nodeName"] == node
    taken = allocated_devices(await dra.claims())
    assert sorted(taken) == sorted((DRIVER, f"{n}-good", "g-0") for n in nodes)
    report(
        "bad-resource-slices",
        refused=refused,
        dup=message("p-dup"),
        ctr=message("p-ctr"),
    )


@pytest.mark.parametrize("round_", range(5))
async def test_gangs_and_claim_pods_race_while_churn_frees_devices(
    round_: int,
    api_client: ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    node_factory: Any,
    podium: Any,
    dra: Dra,
) -> None:
    """12 gangs of 4 (500m each) and 60 claim pods (100m and a device) race for 6 nodes of
    4 cpu and 3 devices, created at once, while every 200 ms for 5 s a bound claim pod and
    its claim are deleted (the resourceclaim controller's part), freeing a device for the
    next. Once every pod left Pending has been tried again: no device is held twice or for
    a pod that is gone or elsewhere, no node is over its cpu, every gang is bound whole or
    not at all, and no claim pod waits while a node has both a free device and room."""
    rng = random.Random(round_)
    sched = f"{namespace[:40]}-r"
    nodes = await node_factory(
        [make_node(f"{namespace}-n{i}", cpu="4", labels={"suite": namespace}) for i in range(6)]
    )
    await dra.gpus(nodes, 3, template="one")
    proc = await podium("--scheduler-name", sched)
    core = client.CoreV1Api(api_client)
    gangs = [f"g{i:02d}" for i in range(12)]

    async def gang(name: str) -> None:
        await create_group(api_client, namespace, pod_group(name, 4))
        for i in range(4):
            body = member(f"{name}-{i}", name, sched, "500m", {"suite": namespace})
            await core.create_namespaced_pod(namespace, cast(Any, body))

    async def claim_pod(name: str) -> None:
        body = make_pod(name, cpu="100m", scheduler_name=sched, node_selector={"suite": namespace})
        await create_pod(api_client, namespace, with_claims(body, {"gpu": "one"}))
        await dra.instantiate(name)

    work = [gang(g) for g in gangs] + [claim_pod(f"c{i:02d}") for i in range(60)]
    rng.shuffle(work)
    await asyncio.gather(*work)

    deleted: list[str] = []
    for _ in range(25):
        pods = await _pods(api_client, namespace)
        bound = [
            p["metadata"]["name"]
            for p in pods.values()
            if p["metadata"]["name"].startswith("c") and p["spec"].get("nodeName")
        ]
        if bound:
            victim = rng.choice(bound)
            await core.delete_namespaced_pod(victim, namespace, grace_period_seconds=0)
            for claim in await dra.claims():
                if claim["metadata"]["name"].startswith(f"{victim}-"):
                    await dra.delete_claim(claim["metadata"]["name"])
            deleted.append(victim)
        await asyncio.sleep(0.2)  # the churn's pace, not a wait for an outcome

    def failures() -> Counter[str]:
        records = read_records(proc.log_lines())
        return Counter(r["pod"] for r in records if r["result"] == "unschedulable")

    before = failures()

    async def quiet() -> bool:
        pods = await _pods(api_client, namespace)
        pending = [p["metadata"]["name"] for p in pods.values() if not p["spec"].get("nodeName")]
        after = failures()
        return all(after[name] > before[name] for name in pending)

    await wait_until(quiet, 60, 0.5, "every pending pod tried after the churn", watch=proc)

    pods = await _pods(api_client, namespace)
    claims = await dra.claims()
    taken = allocated_devices(claims)
    assert len(taken) == len(set(taken)), "a device was allocated twice"
    for claim in claims:
        status = claim.get("status") or {}
        if "allocation" not in status:
            continue
        owner = pods.get(claim["metadata"]["ownerReferences"][0]["uid"])
        (result,) = status["allocation"]["devices"]["results"]
        assert owner is not None, f"{claim['metadata']['name']} holds a device for a gone pod"
        assert owner["spec"].get("nodeName") == result["pool"], claim["metadata"]["name"]
    by_group = await bound_by_group(api_client, namespace)
    counts = sorted(len(by_group.get(g, [])) for g in gangs)
    assert set(counts) <= {0, 4}, f"bound members per gang: {counts}"
    cpu_used: Counter[str] = Counter()
    devices_used: Counter[str] = Counter(result[1] for result in taken)
    for pod in pods.values():
        node = pod["spec"].get("nodeName")
        if node:
            cpu_used[node] += 500 if pod["metadata"]["name"].startswith("g") else 100
    waiting = [
        p["metadata"]["name"]
        for p in pods.values()
        if p["metadata"]["name"].startswith("c") and not p["spec"].get("nodeName")
    ]
    room = [n for n in nodes if devices_used[n] < 3 and cpu_used[n] <= 3900]
    assert not (waiting and room), f"{waiting} wait while {room} have a device and room"
    pending = [p["metadata"]["name"] for p in pods.values() if not p["spec"].get("nodeName")]
    result = await check_invariants(
        api_client, control_plane, namespace, expect_pending=pending, allow_unaudited=False
    )
    report(
        f"race-gangs-claims-{round_}",
        result,
        gangs_bound=counts.count(4),
        claim_pods_deleted=len(deleted),
        devices_taken=len(taken),
    )
