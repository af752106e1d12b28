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
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.devcluster import ControlPlane
from podium.devcluster.dra import claim_from_template
from podium.devcluster.objects import create_pod, pod_events, wait_for
from podium.framework.decision import read_records
from podium.kube.client import KubeClient
from podium.kube.credentials import load_credentials
from podium.kube.manifests import make_node, make_pod
from podium.state.dra import FINALIZER
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
from tests.e2e.faults import (
    InvariantReport,
    check_invariants,
    claim_problems,
    deny_admission,
    gang_problems,
    scheduled_condition,
    stranded_claim_pods,
    wait_bound,
    wait_until,
)
from tests.e2e.gang import bound_by_group, create_group, member, pod_group
from tests.e2e.test_leader_election import LEASE
from tests.e2e.test_reliability import report
from tests.e2e.test_scheduling import all_pods_and_nodes

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]


async def _pods(api: ApiClient, namespace: str) -> dict[str, dict[str, Any]]:
    raw: Any = await client.CoreV1Api(api).list_namespaced_pod(namespace, _preload_content=False)
    return {p["metadata"]["uid"]: p for p in (await raw.json())["items"]}


@contextlib.asynccontextmanager
async def refused_bindings(
    api: ApiClient, namespace: str, match_condition: str = "", probe_suffix: str = "-3"
) -> AsyncIterator[None]:
    """Bindings in ``namespace`` (those matching the CEL ``match_condition``) are refused
    inside the block: it is entered once the API server refuses a Binding, and left once
    it accepts one again. The probe pods' names end in ``probe_suffix``, which the
    condition must match."""
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
        name = f"probe{next(tries)}{probe_suffix}"
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
    part; the refusal is lifted and Podium started again. Then 12 gangs are bound whole and
    3 not at all: no gang is left below its minCount. The first Podium may have bound three
    members of more than 12 gangs before the kill (each refused fourth frees a cpu, and
    four of them make room for another gang): with ``p`` such gangs, 48 - 3p are
    completed and the rest stay at three members with every cpu taken, as any scheduler
    must leave them (none unbinds a pod); none is left below minCount while there is room."""
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
    pods = await _pods(api_client, namespace)
    left = sorted(p["metadata"]["name"] for p in pods.values() if not p["spec"].get("nodeName"))

    def tried_after_restart() -> bool:
        records = read_records(second.log_lines())
        tried = {r["pod"] for r in records if r["result"] == "unschedulable"}
        return set(left) <= tried

    await wait_until(tried_after_restart, 60, 0.2, "every member left tried after the restart")
    bound = await bound_by_group(api_client, namespace)
    counts = sorted(len(bound.get(g, [])) for g in gangs)
    p = partial_at_kill
    expected = [0] * 3 + [4] * 12
    if p > 12:
        expected = [0] * (15 - p) + [3] * (4 * p - 48) + [4] * (48 - 3 * p)
    assert counts == expected, f"bound members per gang: {counts}, {p} bound in part at the kill"
    listed, nodes = await all_pods_and_nodes(api_client)
    ours = [body for body in listed if body["metadata"]["namespace"] == namespace]
    mine = [n for n in nodes if n["metadata"].get("labels", {}).get("suite") == namespace]
    assert not gang_problems(ours, mine, dict.fromkeys(gangs, 4))
    result = await check_invariants(
        api_client, control_plane, namespace, expect_pending=left, allow_unaudited=True
    )
    report(
        "podium-kill-9-gangs",
        result,
        partial_gangs_at_kill=partial_at_kill,
        left_at_three=counts.count(3),
    )


@pytest.mark.parametrize(("reason", "code"), [("Invalid", 422), ("Forbidden", 403)])
async def test_refused_claim_writes_hold_no_device_and_bind_once_lifted(
    reason: str,
    code: int,
    api_client: ApiClient,
    namespace: str,
    node_factory: Any,
    podium: Any,
    dra: Dra,
) -> None:
    """An admission policy refuses every ResourceClaim status write in the namespace, so
    the allocation cannot be written: answered 422 (a policy's default), or 403 (as a
    webhook that forbids it). The pod is reported with the server's words and is
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
        reason=reason,
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
                return exc.status == code and "claim write refused by the test" in str(exc.body)
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


class _RaceClient:
    """The race's writes and reads through one orjson client, 32 at a time: the
    kubernetes_asyncio client's per-object serialisation would take most of a round."""

    def __init__(self, api: KubeClient, namespace: str) -> None:
        self.api = api
        self.gate = asyncio.Semaphore(32)
        self.pods = f"/api/v1/namespaces/{namespace}/pods"
        self.claims = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/resourceclaims"
        self.groups = f"/apis/scheduling.k8s.io/v1beta1/namespaces/{namespace}/podgroups"
        self.selector = {"suite": namespace}
        self.claim_of: dict[str, str] = {}

    async def create(self, sched: str, objects: list[tuple[str, str]]) -> None:
        """Gangs of 4 (a PodGroup, then its 500m members) and claim pods (100m, a claim
        made from template ``one`` as the resourceclaim controller makes it, named in the
        pod's status), in the order given."""
        template = await self.api.get(self.claims.replace("claims", "claimtemplates/one"))

        async def one(kind: str, name: str) -> None:
            async with self.gate:
                if kind == "gang":
                    await self.api.post(self.groups, pod_group(name, 4))
                    bodies = [
                        member(f"{name}-{i}", name, sched, "500m", self.selector) for i in range(4)
                    ]
                    await asyncio.gather(*(self.api.post(self.pods, b) for b in bodies))
                    return
                body = make_pod(name, cpu="100m", scheduler_name=sched, node_selector=self.selector)
                pod = await self.api.post(self.pods, with_claims(body, {"gpu": "one"}))
                made = await self.api.post(self.claims, claim_from_template(pod, "gpu", template))
                self.claim_of[name] = made["metadata"]["name"]
                statuses = [{"name": "gpu", "resourceClaimName": self.claim_of[name]}]
                patch = {"status": {"resourceClaimStatuses": statuses}}
                await self.api.patch(f"{self.pods}/{name}/status", patch, kind="merge-patch")

        await asyncio.gather(*(one(kind, name) for kind, name in objects))

    async def bound(self) -> tuple[list[str], list[str]]:
        """The claim pods bound, and the gangs with a member bound."""
        listed = await self.api.get(self.pods, params={"fieldSelector": "spec.nodeName!="})
        pods = listed["items"]
        groups = {(p["spec"].get("schedulingGroup") or {}).get("podGroupName") for p in pods}
        claim_pods = [p["metadata"]["name"] for p in pods]
        return [n for n in claim_pods if n in self.claim_of], sorted(g for g in groups if g)

    async def free(self, name: str) -> None:
        """Delete a claim pod and its claim, as the resourceclaim controller would once the
        pod is gone (no controller here drops the finalizer)."""
        await self.api.delete(f"{self.pods}/{name}", {"gracePeriodSeconds": 0})
        claim = f"{self.claims}/{self.claim_of.pop(name)}"
        await self.api.patch(claim, {"metadata": {"finalizers": None}}, kind="merge-patch")
        await self.api.delete(claim)

    async def free_gang(self, name: str) -> None:
        """Delete a gang's members, then its PodGroup: the podgroup-protection controller
        drops the finalizer once the members are gone (no controller runs here)."""
        now = {"gracePeriodSeconds": 0}
        await asyncio.gather(*(self.api.delete(f"{self.pods}/{name}-{i}", now) for i in range(4)))
        group = f"{self.groups}/{name}"
        await self.api.patch(group, {"metadata": {"finalizers": None}}, kind="merge-patch")
        await self.api.delete(group)

    async def listed_claims(self) -> list[dict[str, Any]]:
        return list((await self.api.get(self.claims))["items"])


# The race's sizes: 50 gangs of 4 (500m each) and 200 claim pods (100m and a device) on
# 10 nodes of 4 cpu and 4 devices: room for fewer than half the gangs and a fifth of the
# claim pods. Five rounds in make test; with --soak, 20 more, each churning for 30 s.
RACE_NODES, RACE_DEVICES, RACE_GANGS, RACE_CLAIM_PODS = 10, 4, 50, 200
RACE_ROUNDS = [
    *((r, 5.0) for r in range(5)),
    *(pytest.param(r, 30.0, marks=pytest.mark.soak) for r in range(5, 25)),
]


@pytest.mark.parametrize(("round_", "churn_s"), RACE_ROUNDS)
async def test_gangs_and_claim_pods_race_while_churn_frees_devices(
    round_: int,
    churn_s: float,
    api_client: ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    node_factory: Any,
    podium: Any,
    dra: Dra,
) -> None:
    """50 gangs of 4 and 200 claim pods race for 10 nodes of 4 cpu and 4 devices, created
    at once in an order drawn per round, while every 200 ms a bound claim pod and its
    claim are deleted (the resourceclaim controller's part), freeing a device for the next,
    and every second a bound gang with its PodGroup, freeing 2 cpu.
    No device is ever in two claims (sampled every 100 ms); once quiet, every claim is held
    by its own pod bound on the device's node, no node is over its cpu, every gang is bound
    whole or has no room, and no claim pod waits while a node has a free device and room."""
    rng = random.Random(round_)
    sched = f"{namespace[:40]}-r"
    nodes = await node_factory(
        [
            make_node(f"{namespace}-n{i}", cpu="4", labels={"suite": namespace})
            for i in range(RACE_NODES)
        ]
    )
    await dra.gpus(nodes, RACE_DEVICES, template="one")
    proc = await podium("--scheduler-name", sched)
    gangs = [f"g{i:02d}" for i in range(RACE_GANGS)]
    objects = [("gang", g) for g in gangs]
    objects += [("claim", f"c{i:03d}") for i in range(RACE_CLAIM_PODS)]
    rng.shuffle(objects)
    api = KubeClient(await load_credentials(str(control_plane.kubeconfig)), pool_size=32)
    race = _RaceClient(api, namespace)

    doubled: list[list[tuple[str, str, str]]] = []
    stop = asyncio.Event()

    async def sample() -> None:
        while not stop.is_set():
            taken = Counter(allocated_devices(await race.listed_claims()))
            twice = [d for d, n in taken.items() if n > 1]
            if twice:
                doubled.append(twice)
            await asyncio.sleep(0.1)

    sampler = asyncio.create_task(sample())
    deleted: list[str] = []
    gangs_deleted: list[str] = []
    freeing: list[asyncio.Task[None]] = []
    try:
        began = time.monotonic()
        await race.create(sched, objects)
        created_s = time.monotonic() - began
        churn_end = time.monotonic() + churn_s
        ticks = 0
        while time.monotonic() < churn_end:
            tick = time.monotonic()
            claim_pods, placed = await race.bound()
            bound = sorted(set(claim_pods) - set(deleted))
            if bound:
                victim = rng.choice(bound)
                freeing.append(asyncio.create_task(race.free(victim)))
                deleted.append(victim)
            placed = sorted(set(placed) - set(gangs_deleted))
            ticks += 1
            if placed and ticks % 5 == 0:  # a gang a second: 2 cpu freed
                victim = rng.choice(placed)
                freeing.append(asyncio.create_task(race.free_gang(victim)))
                gangs_deleted.append(victim)
            await asyncio.sleep(max(0.0, 0.2 - (time.monotonic() - tick)))  # the churn's pace
        await asyncio.gather(*freeing)

        last: list[list[str]] = [[]]

        async def quiet() -> bool:
            """Every claim held rightly, no gang or claim pod left waiting beside room."""
            listed, all_nodes = await all_pods_and_nodes(api_client)
            ours = [p for p in listed if p["metadata"]["namespace"] == namespace]
            mine = [n for n in all_nodes if n["metadata"]["name"] in nodes]
            claims = await race.listed_claims()
            last[0] = claim_problems(claims, {p["metadata"]["uid"]: p for p in ours})
            left = set(gangs) - set(gangs_deleted)
            last[0] += gang_problems(ours, mine, dict.fromkeys(left, 4))
            last[0] += stranded_claim_pods(ours, mine, claims, RACE_DEVICES)
            return not last[0]

        try:
            settle_s = await wait_until(quiet, 90, 0.5, "a quiet cluster", watch=proc)
        except TimeoutError as exc:
            raise AssertionError(f"never quiet: {last[0][:10]}") from exc
    finally:
        stop.set()
        await asyncio.gather(sampler, *freeing, return_exceptions=True)
        await api.close()
    assert not doubled, f"devices allocated twice: {doubled[:3]}"

    pods = await _pods(api_client, namespace)
    taken = allocated_devices(await dra.claims())
    by_group = await bound_by_group(api_client, namespace)
    counts = sorted(len(by_group.get(g, [])) for g in set(gangs) - set(gangs_deleted))
    assert set(counts) <= {0, 4}, f"bound members per gang: {counts}"
    pending = [p["metadata"]["name"] for p in pods.values() if not p["spec"].get("nodeName")]
    result = await check_invariants(
        api_client, control_plane, namespace, expect_pending=pending, allow_unaudited=False
    )
    report(
        f"race-gangs-claims-{round_}",
        result,
        gangs_bound=counts.count(4),
        gangs_deleted=len(gangs_deleted),
        claim_pods_deleted=len(deleted),
        devices_taken=len(taken),
        created_s=round(created_s, 1),
        settle_s=round(settle_s, 1),
        total_s=round(time.monotonic() - began, 1),
    )


async def _race_claims(dra: Dra, raced: list[int], stop: asyncio.Event, names: list[str]) -> None:
    """Another writer on the pods' unallocated claims until ``stop``: each claim's metadata
    is changed again and again, so that a write lands between Podium's read of the claim
    and its own write, which the server then answers 409."""
    custom = client.CustomObjectsApi(dra.api)

    async def one(name: str) -> None:
        while not stop.is_set():
            claim = await custom.get_namespaced_custom_object(
                GROUP, VERSION, dra.namespace, "resourceclaims", name
            )
            if "allocation" in (claim.get("status") or {}):
                await asyncio.sleep(0.01)
                continue
            value = {"raced": str(raced[0])}
            body = [{"op": "add", "path": "/metadata/annotations", "value": value}]
            await custom.patch_namespaced_custom_object(
                GROUP, VERSION, dra.namespace, "resourceclaims", name, body
            )
            raced[0] += 1

    await asyncio.gather(*(one(n) for n in names))


def _claim_conflicts(plane: ControlPlane, namespace: str) -> int:
    """ResourceClaim writes the server answered 409, all Podium's: the test's own
    patches carry no resourceVersion."""
    return sum(
        1
        for e in plane.audit_events()
        if (e.get("objectRef") or {}).get("resource") == "resourceclaims"
        and (e.get("objectRef") or {}).get("namespace") == namespace
        and (e.get("responseStatus") or {}).get("code") == 409
    )


async def _claim_pods(
    api: ApiClient, namespace: str, node_factory: Any, dra: Dra, sched: str
) -> list[str]:
    """8 claim pods for 6 devices (2 nodes of 3); the names of their claims."""
    nodes = await node_factory(
        [make_node(f"{namespace}-n{i}", labels={"suite": namespace}) for i in range(2)]
    )
    await dra.gpus(nodes, 3, template="one")
    names = [f"p{i}" for i in range(8)]
    for name in names:
        body = make_pod(name, scheduler_name=sched, node_selector={"suite": namespace})
        await create_pod(api, namespace, with_claims(body, {"gpu": "one"}))
    return [n for name in names for n in await dra.instantiate(name)]


async def _six_bound_each_device_once(
    api: ApiClient, plane: ControlPlane, namespace: str, dra: Dra, proc: Any
) -> InvariantReport:
    """6 pods bound, each claim allocated once, with the finalizer, for its own bound pod
    on that node; the 2 others Pending with nothing held."""
    await wait_bound(api, namespace, 6, 60, 0.2, "6 claim pods bound", watch=proc)
    claims = await dra.claims()
    pods = await _pods(api, namespace)
    taken = allocated_devices(claims)
    assert len(taken) == len(set(taken)) == 6, taken
    for claim in claims:
        status = claim.get("status") or {}
        reserved = [r["uid"] for r in status.get("reservedFor") or []]
        if "allocation" not in status:
            assert not reserved, claim["metadata"]["name"]
            continue
        assert FINALIZER in (claim["metadata"].get("finalizers") or []), claim["metadata"]
        (uid,) = reserved
        (result,) = status["allocation"]["devices"]["results"]
        assert pods[uid]["spec"].get("nodeName") == result["pool"], claim["metadata"]["name"]
    pending = sorted(p["metadata"]["name"] for p in pods.values() if not p["spec"].get("nodeName"))
    return await check_invariants(api, plane, namespace, expect_pending=pending)


async def test_claim_writes_raced_by_another_writer_land_once(
    api_client: ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    node_factory: Any,
    podium: Any,
    dra: Dra,
) -> None:
    """8 claim pods for 6 devices while another writer changes their claims under
    Podium, so that its updates are answered 409 (a conflicting write landed first).
    Once that has happened twice the writer stops, and each claim is written once."""
    sched = f"{namespace[:40]}-c"
    claims = await _claim_pods(api_client, namespace, node_factory, dra, sched)
    raced = [0]
    stop = asyncio.Event()
    racer = asyncio.create_task(_race_claims(dra, raced, stop, claims))
    try:
        proc = await podium("--scheduler-name", sched)

        def contested() -> bool:
            if racer.done():
                racer.result()  # its error, if it failed
            return _claim_conflicts(control_plane, namespace) >= 2

        await wait_until(contested, 60, 0.1, "Podium's claim writes answered 409", watch=proc)
    finally:
        stop.set()
        await racer
    conflicts = _claim_conflicts(control_plane, namespace)
    result = await _six_bound_each_device_once(api_client, control_plane, namespace, dra, proc)
    report("claim-writes-conflict-409", result, conflicts=conflicts, racing_writes=raced[0])


async def test_claim_finalizer_removed_mid_cycle_is_written_again(
    api_client: ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    node_factory: Any,
    podium: Any,
    dra: Dra,
) -> None:
    """8 claim pods for 6 devices. An admission policy refuses the allocation writes, so
    each attempt stops between Podium's finalizer write and its allocation write; there
    another writer removes the finalizer (conditional on the version it read). Once the
    refusal is lifted, Podium writes the finalizer again before each allocation: every
    allocated claim carries it, and each claim is written once."""
    sched = f"{namespace[:40]}-f"
    await _claim_pods(api_client, namespace, node_factory, dra, sched)
    admission = client.AdmissionregistrationV1Api(api_client)
    custom = client.CustomObjectsApi(api_client)
    policy, binding = deny_admission(
        f"{namespace}-no-alloc",
        group=GROUP,
        resource="resourceclaims/status",
        operation="UPDATE",
        validation="!has(object.status.allocation)",
        message="allocation refused by the test",
        namespace=namespace,
    )
    await admission.create_validating_admission_policy(cast(Any, policy))
    await admission.create_validating_admission_policy_binding(cast(Any, binding))
    removed: set[str] = set()
    try:

        async def refused() -> bool:  # the API server loads a policy asynchronously
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
                return "allocation refused by the test" in str(exc.body)
            return False

        await wait_until(refused, 30, 0.2, "allocation writes refused")
        proc = await podium("--scheduler-name", sched)

        async def remove_finalizers() -> bool:
            for claim in await dra.claims():
                name, version = claim["metadata"]["name"], claim["metadata"]["resourceVersion"]
                if not claim["metadata"].get("finalizers") or name in removed:
                    continue
                if "allocation" in (claim.get("status") or {}):
                    raise AssertionError(f"{name} allocated while refused")
                body = [
                    {"op": "test", "path": "/metadata/resourceVersion", "value": version},
                    {"op": "remove", "path": "/metadata/finalizers"},
                ]
                try:
                    await custom.patch_namespaced_custom_object(
                        GROUP, VERSION, namespace, "resourceclaims", name, body
                    )
                    removed.add(name)
                except client.ApiException as exc:
                    if exc.status != 422:  # the version test failed: Podium wrote meanwhile
                        raise
            return len(removed) >= 6

        await wait_until(remove_finalizers, 60, 0.1, "6 finalizers removed", watch=proc)
    finally:
        await admission.delete_validating_admission_policy_binding(binding["metadata"]["name"])
        await admission.delete_validating_admission_policy(policy["metadata"]["name"])
    result = await _six_bound_each_device_once(api_client, control_plane, namespace, dra, proc)
    report("claim-finalizer-removed-mid-cycle", result, finalizers_removed=len(removed))


async def test_allocated_claim_losing_its_finalizer_ends_as_in_kube_scheduler(
    api_client: ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    node_factory: Any,
    podium: Any,
    kube_scheduler: Any,
    dra: Dra,
) -> None:
    """Side by side with kube-scheduler, each on a node of one device. Pod ``-a``'s Binding
    is refused, so its claim stays allocated (finalizer and allocation written) while the
    pod is retried, and another writer removes the finalizer from the allocated claim. Go's
    ``bindClaim`` writes the finalizer only with a new allocation; a claim already
    allocated only gains ``reservedFor``. On both schedulers: ``-b`` waits with the same
    message; once the refusal is lifted ``-a`` is bound and its claim allocated and
    reserved for it without the finalizer; that claim, unprotected, is deleted at once
    although its pod is bound, and ``-b`` takes the device. No device is ever in two
    claims."""
    sides = {"p": "podium", "k": f"{namespace[:40]}-kube"}
    nodes = dict(
        zip(
            sides,
            await node_factory(
                [make_node(f"{namespace}-{side}", labels={"side": side}) for side in sides]
            ),
            strict=True,
        )
    )
    klass = f"{namespace}-gpu"
    await dra.create("deviceclasses", device_class(klass))
    for node in nodes.values():
        await dra.create("resourceslices", resource_slice(f"{node}-gpus", node, [device("gpu-0")]))
    for side in sides:
        for name in ("a", "b"):
            spec = claim_spec(exactly("gpu", klass))
            await dra.create("resourceclaims", resource_claim(f"{side}-{name}", spec))
    await podium()
    await kube_scheduler(sides["k"])
    custom = client.CustomObjectsApi(api_client)

    async def claim(name: str) -> dict[str, Any]:
        found: dict[str, Any] = await custom.get_namespaced_custom_object(
            GROUP, VERSION, namespace, "resourceclaims", name
        )
        return found

    async def create(side: str, name: str) -> None:
        pod = make_pod(f"{side}-{name}", scheduler_name=sides[side], node_selector={"side": side})
        await create_pod(api_client, namespace, with_claims(pod, claims={"gpu": f"{side}-{name}"}))

    async def no_device_twice() -> None:
        taken = allocated_devices(await dra.claims())
        assert len(taken) == len(set(taken)), f"a device allocated twice: {taken}"

    stripped: set[str] = set()
    async with refused_bindings(api_client, namespace, "object.metadata.name.endsWith('-a')", "-a"):
        for side in sides:
            await create(side, "a")

        async def strip() -> bool:
            """Remove the finalizer of each allocated ``-a`` claim, conditional on the
            version read, as another controller would."""
            for side in set(sides) - stripped:
                body = await claim(f"{side}-a")
                meta = body["metadata"]
                if "allocation" not in (body.get("status") or {}):
                    continue
                assert FINALIZER in (meta.get("finalizers") or []), meta
                patch = [
                    {
                        "op": "test",
                        "path": "/metadata/resourceVersion",
                        "value": meta["resourceVersion"],
                    },
                    {"op": "remove", "path": "/metadata/finalizers"},
                ]
                try:
                    await custom.patch_namespaced_custom_object(
                        GROUP, VERSION, namespace, "resourceclaims", meta["name"], patch
                    )
                    stripped.add(side)
                except client.ApiException as exc:
                    if exc.status != 422:  # the version test failed: a scheduler wrote meanwhile
                        raise
            return stripped == set(sides)

        await wait_until(strip, 60, 0.1, "both allocated claims stripped of the finalizer")
        for side in sides:
            await create(side, "b")

        async def waiting() -> dict[str, str] | None:
            messages = {}
            for side in sides:
                pod = (await _pods(api_client, namespace)).values()
                (body,) = [p for p in pod if p["metadata"]["name"] == f"{side}-b"]
                cond = scheduled_condition(body)
                if cond.get("status") != "False":
                    return None
                messages[side] = str(cond.get("message") or "")
            return messages

        b_waiting = await wait_for(waiting, timeout=60, interval=0.3, message="-b waits")
        assert b_waiting is not None
        await no_device_twice()
    assert b_waiting["p"] == b_waiting["k"], b_waiting

    async def bound(name: str) -> bool:
        pods = {p["metadata"]["name"]: p for p in (await _pods(api_client, namespace)).values()}
        return all(pods[f"{side}-{name}"]["spec"].get("nodeName") for side in sides)

    await wait_until(lambda: bound("a"), 60, 0.3, "-a bound on both")
    pods = await _pods(api_client, namespace)
    uids = {p["metadata"]["name"]: uid for uid, p in pods.items()}
    ends = {}
    for side in sides:
        body = await claim(f"{side}-a")
        status = body["status"]
        ends[side] = (
            body["metadata"].get("finalizers") or [],
            [r["uid"] for r in status.get("reservedFor") or []] == [uids[f"{side}-a"]],
            [(r["pool"], r["device"]) for r in status["allocation"]["devices"]["results"]],
        )
        assert pods[uids[f"{side}-a"]]["spec"]["nodeName"] == nodes[side]
    assert ends["p"][:2] == ends["k"][:2] == ([], True), ends
    await no_device_twice()

    for side in sides:  # no finalizer: the claim goes at once, though its pod is bound
        await custom.delete_namespaced_custom_object(
            GROUP, VERSION, namespace, "resourceclaims", f"{side}-a"
        )
    await wait_until(lambda: bound("b"), 60, 0.3, "-b bound on both, on the freed device")
    claims = await dra.claims()
    pods = await _pods(api_client, namespace)
    assert not claim_problems(claims, pods), claim_problems(claims, pods)
    taken = sorted(allocated_devices(claims))
    assert taken == sorted((DRIVER, node, "gpu-0") for node in nodes.values()), taken
    result = await check_invariants(api_client, control_plane, namespace)
    report(
        "allocated-claim-finalizer-removed",
        result,
        finalizer_at_bind_podium=len(ends["p"][0]),
        finalizer_at_bind_kube=len(ends["k"][0]),
        b_message=repr(b_waiting["p"]),
    )
