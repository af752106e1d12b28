"""kube-apiserver killed with -9 in the middle of DRA pods' and gangs' multi-write sequences.

Podium keeps running; the API server dies right after it has answered the first write of
a kind (read from its audit log, which it writes once the answer has gone out), while
the writes of the other pods are in flight: a claim's finalizer, a claim's allocation and
reservation, a claim pod's Binding, a gang member's Binding. It is started again on the
same port a moment later. Then everything schedulable must be bound, and the API server's
state must hold: no device allocated twice, no claim allocated or reserved for a pod that
has no node or another one, no gang bound below its minCount.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, cast

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.devcluster import ControlPlane
from podium.devcluster.objects import create_pod
from podium.kube.manifests import make_node, make_pod
from tests.e2e.dra import Dra, allocated_devices, with_claims
from tests.e2e.faults import check_invariants, wait_bound, wait_until
from tests.e2e.gang import bound_by_group, create_group, member, pod_group
from tests.e2e.test_faults_claims_gangs import _pods
from tests.e2e.test_reliability import apiserver_guard, report  # noqa: F401

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

Audited = Callable[[dict[str, Any]], bool]

# The write after which the API server dies: (verb, resource, subresource) as audited.
WRITE_POINTS: dict[str, tuple[str, str, str]] = {
    "finalizer": ("update", "resourceclaims", ""),
    "allocation": ("update", "resourceclaims", "status"),
    "binding": ("create", "pods", "binding"),
}


class AuditTail:
    """Follows the audit log from its current end, counting the Bindings it passes."""

    def __init__(self, plane: ControlPlane, namespace: str) -> None:
        assert plane.audit_log is not None
        self.path = plane.audit_log
        self.offset = self.path.stat().st_size if self.path.exists() else 0
        self.bind = _write(namespace, "create", "pods", "binding")
        self.bound = 0

    def seen(self, wanted: Audited) -> bool:
        """Whether any new line matches ``wanted``; every line is offered to it, so a
        counting predicate counts each match, however many arrive in one read."""
        with self.path.open("rb") as handle:
            handle.seek(self.offset)
            chunk = handle.read()
        end = chunk.rfind(b"\n") + 1
        self.offset += end
        found = False
        for line in chunk[:end].splitlines():
            if line.strip():
                event = json.loads(line)
                self.bound += self.bind(event)
                found = wanted(event) or found
        return found


def _write(namespace: str, verb: str, resource: str, subresource: str) -> Audited:
    def wanted(event: dict[str, Any]) -> bool:
        ref = event.get("objectRef") or {}
        return (
            event.get("stage") == "ResponseComplete"
            and event.get("verb") == verb
            and ref.get("namespace") == namespace
            and ref.get("resource") == resource
            and (ref.get("subresource") or "") == subresource
            and 200 <= int((event.get("responseStatus") or {}).get("code") or 0) < 300
        )

    return wanted


def _kill_after(
    plane: ControlPlane, namespace: str, wanted: Audited, what: str
) -> asyncio.Task[tuple[float, int]]:
    """A task that SIGKILLs kube-apiserver once the audit log shows ``wanted`` and starts
    it again 1 s later. It follows the log from before Podium starts (the first writes
    come as soon as Podium has listed, before it reports ready). Its result: the
    monotonic time the server was ready again, and the Bindings audited before the kill."""
    tail = AuditTail(plane, namespace)

    async def kill() -> tuple[float, int]:
        await wait_until(lambda: tail.seen(wanted), 60, 0.01, what)
        await asyncio.to_thread(plane.stop_apiserver, kill=True)
        await asyncio.sleep(1)  # down for a moment: the writes in flight fail or hang up
        await plane.astart_apiserver()
        return time.monotonic(), tail.bound

    return asyncio.create_task(kill())


def _reports_lost(proc: Any, pods: list[str]) -> set[str]:
    """The pods whose PodScheduled report Podium logged as lost (``report_failed``)."""
    lost = set()
    for line in proc.log_lines():
        if '"report_failed"' not in line:
            continue
        path = str(json.loads(line).get("path", ""))
        lost.update(p for p in pods if path.endswith(f"/pods/{p}/status"))
    return lost


@pytest.mark.parametrize("point", list(WRITE_POINTS))
async def test_apiserver_killed_mid_claim_writes_every_device_held_once(
    point: str,
    api_client: ApiClient,
    namespace: str,
    node_factory: Any,
    podium: Any,
    dra: Dra,
    apiserver_guard: ControlPlane,  # noqa: F811  (last: torn down first)
) -> None:
    """30 claim pods race for 24 devices (6 nodes of 4); kube-apiserver is SIGKILLed just
    after the first claim finalizer, allocation, or claim pod Binding of the run. Once it
    is back: 24 pods bound, each claim allocated only for its own bound pod on that
    pod's node, no device allocated twice, and the 6 left Pending with nothing held."""
    plane = apiserver_guard
    sched = f"{namespace[:40]}-s"
    nodes = await node_factory(
        [make_node(f"{namespace}-n{i}", labels={"suite": namespace}) for i in range(6)]
    )
    await dra.gpus(nodes, 4, template="one")
    names = [f"p{i:02d}" for i in range(30)]
    for name in names:
        body = make_pod(name, scheduler_name=sched, node_selector={"suite": namespace})
        await create_pod(api_client, namespace, with_claims(body, {"gpu": "one"}))
    await asyncio.gather(*(dra.instantiate(n) for n in names))

    killer = _kill_after(plane, namespace, _write(namespace, *WRITE_POINTS[point]), point)
    proc = await podium("--scheduler-name", sched)
    back, at_kill = await killer
    # 24 devices for 30 pods: 24 bound means every device is held by a bound pod.
    await wait_bound(api_client, namespace, 24, 90, 0.3, "24 claim pods bound", watch=proc)
    recovered = time.monotonic() - back
    claims = await dra.claims()
    pods = await _pods(api_client, namespace)
    taken = allocated_devices(claims)
    pending = sorted(p["metadata"]["name"] for p in pods.values() if not p["spec"].get("nodeName"))
    held = {
        c["metadata"]["name"]: (
            c["status"]["allocation"]["devices"]["results"][0]["pool"][-3:],
            c["status"]["allocation"]["devices"]["results"][0]["device"],
            [r["name"] for r in c["status"].get("reservedFor") or []],
            (pods.get(c["metadata"]["ownerReferences"][0]["uid"]) or {})
            .get("spec", {})
            .get("nodeName", "")[-3:],
        )
        for c in claims
        if "allocation" in (c.get("status") or {})
    }
    assert len(taken) == 24, f"{len(taken)} devices allocated for 24 bound pods: {held}"
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
    unreported = _reports_lost(proc, pending)
    result = await check_invariants(
        api_client,
        plane,
        namespace,
        expect_pending=pending,
        allow_unaudited=True,
        unreported=unreported,
    )
    report(
        f"apiserver-kill-9-claims-{point}",
        result,
        bound_at_kill=at_kill,
        recover_s=round(recovered, 1),
        reports_lost=len(unreported),
    )


async def test_apiserver_killed_mid_gang_binds_every_gang_whole_or_not_at_all(
    api_client: ApiClient,
    namespace: str,
    node_factory: Any,
    podium: Any,
    apiserver_guard: ControlPlane,  # noqa: F811  (last: torn down first)
) -> None:
    """15 gangs of 4 one-cpu members on 12 nodes of 4 cpu (room for 12 gangs);
    kube-apiserver is SIGKILLed just after the first member's Binding. Once it is back,
    12 gangs are bound whole and 3 not at all."""
    plane = apiserver_guard
    sched = f"{namespace[:40]}-g"
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

    bind = _write(namespace, "create", "pods", "binding")
    killer = _kill_after(plane, namespace, bind, "a member bound")
    proc = await podium("--scheduler-name", sched)
    back, at_kill = await killer
    # 12 nodes of 4 cpu: 48 bound members fill every node.
    await wait_bound(api_client, namespace, 48, 90, 0.3, "12 gangs bound", watch=proc)
    recovered = time.monotonic() - back
    bound = await bound_by_group(api_client, namespace)
    left = [f"{g}-{i}" for g in gangs if not bound.get(g) for i in range(4)]
    counts = sorted(len(bound.get(g, [])) for g in gangs)
    assert counts == [0] * 3 + [4] * 12, f"bound members per gang: {counts}"
    result = await check_invariants(
        api_client,
        plane,
        namespace,
        expect_pending=left,
        allow_unaudited=True,
        unreported=_reports_lost(proc, left),
    )
    report(
        "apiserver-kill-9-gangs",
        result,
        bound_at_kill=at_kill,
        recover_s=round(recovered, 1),
        binds_retried=sum('"bind_retried_in_place"' in line for line in proc.log_lines()),
    )
