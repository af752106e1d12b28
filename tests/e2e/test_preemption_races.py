"""Preemption interrupted half-way, side by side with kube-scheduler v1.37.2.

Go's async preemption (``Executor.prepareCandidateAsync``) clears the node's
lower-priority nominations, then deletes the victims; a refused deletion ends the
attempt and activates the preemptor. An admission policy refuses the deletion of each
node's ``-v1`` victim, which holds both schedulers in the middle of an eviction, and a
second cluster change lands there: a higher-priority preemptor for the same node
(kube's ``TestAsyncPreemption`` case "Higher priority Pod takes over the place for lower
priority Pod that is running the preemption"), or the preemptor's own deletion. Each
scheduler has a node of 2 cpu holding two 1-cpu victims (priorities 1 and 2); every
state compared is read from the API server.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
import pytest_asyncio
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.devcluster import ControlPlane
from podium.devcluster.objects import wait_for
from podium.kube.manifests import make_node, make_pod
from tests.e2e.faults import deny_admission, scheduled_condition
from tests.e2e.test_preemption import names_left, read_pod
from tests.e2e.test_reliability import report

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

SIDES = ("p", "k")


class Race:
    """Both schedulers, their nodes and victims, and the policy refusing ``-v1`` deletions."""

    def __init__(self, api: ApiClient, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self.core = client.CoreV1Api(api)
        self.admission = client.AdmissionregistrationV1Api(api)
        self.nodes = {side: f"{namespace}-{side}" for side in SIDES}
        self.schedulers = {"p": "podium", "k": f"{namespace[:40]}-kube"}
        self.policy, self.binding = deny_admission(
            f"{namespace}-no-delete",
            resource="pods",
            operation="DELETE",
            validation="false",
            message="deletion refused by the test",
            match_condition="oldObject.metadata.name.endsWith('-v1')",
            namespace=namespace,
        )
        self.refusing = False

    async def refused(self) -> bool:  # a dry run changes nothing and sends no pod event
        try:
            await self.core.delete_namespaced_pod("p-v1", self.namespace, dry_run="All")
        except client.ApiException as exc:
            return "deletion refused by the test" in str(exc.body)
        return False

    async def refuse(self) -> None:
        await self.admission.create_validating_admission_policy(cast(Any, self.policy))
        await self.admission.create_validating_admission_policy_binding(cast(Any, self.binding))
        self.refusing = True
        await wait_for(self.refused, timeout=30, interval=0.2, message="deletions refused")

    async def allow(self) -> None:
        if not self.refusing:
            return
        self.refusing = False
        await self.admission.delete_validating_admission_policy_binding(
            self.binding["metadata"]["name"]
        )
        await self.admission.delete_validating_admission_policy(self.policy["metadata"]["name"])

        async def allowed() -> bool:  # the API server unloads the policy asynchronously too
            return not await self.refused()

        await wait_for(allowed, timeout=30, interval=0.2, message="deletions allowed again")

    async def preemptor(self, side: str, name: str, priority: int) -> None:
        body = make_pod(
            f"{side}-{name}",
            cpu="2",
            priority=priority,
            scheduler_name=self.schedulers[side],
            node_selector={"side": side},
        )
        await self.core.create_namespaced_pod(self.namespace, cast(Any, body))

    async def pod(self, name: str) -> dict[str, Any]:
        return await read_pod(self.api, self.namespace, name) or {}

    async def nominated(self, name: str) -> str:
        return str((await self.pod(name)).get("status", {}).get("nominatedNodeName") or "")

    async def disruption_target(self, name: str) -> bool:
        conditions = (await self.pod(name)).get("status", {}).get("conditions") or []
        return any(c["type"] == "DisruptionTarget" for c in conditions)

    async def evicting(self, name: str) -> bool:
        """On both sides, preemptor ``name`` is nominated and its ``-v1`` victim's deletion
        was tried (Go sets DisruptionTarget just before the DELETE)."""
        for side in SIDES:
            if await self.nominated(f"{side}-{name}") != self.nodes[side]:
                return False
            if not await self.disruption_target(f"{side}-v1"):
                return False
        return True


@pytest_asyncio.fixture(loop_scope="session")
async def race(
    api_client: ApiClient, namespace: str, node_factory: Any, podium: Any, kube_scheduler: Any
) -> AsyncIterator[Race]:
    made = Race(api_client, namespace)
    await node_factory(
        make_node(name, cpu="2", memory="8Gi", labels={"suite": namespace, "side": side})
        for side, name in made.nodes.items()
    )
    for side, node in made.nodes.items():
        for i in range(2):
            body = make_pod(f"{side}-v{i}", cpu="1", priority=i + 1)
            body["spec"]["nodeName"] = node
            await made.core.create_namespaced_pod(namespace, cast(Any, body))
    await made.refuse()
    try:
        await podium()
        await kube_scheduler(made.schedulers["k"])
        yield made
    finally:
        await made.allow()


def _deletions(plane: ControlPlane, namespace: str) -> Counter[str]:
    """Pod DELETEs the API server answered 200, per pod name, from the audit log."""
    counts: Counter[str] = Counter()
    for event in plane.audit_events():
        ref = event.get("objectRef") or {}
        if (
            event.get("verb") == "delete"
            and ref.get("resource") == "pods"
            and not ref.get("subresource")
            and ref.get("namespace") == namespace
            and "dryRun" not in str(event.get("requestURI"))  # the test's own probes
            and (event.get("responseStatus") or {}).get("code") == 200
        ):
            counts[str(ref.get("name"))] += 1
    return counts


async def test_higher_preemptor_takes_the_node_of_a_lower_one_mid_eviction(
    race: Race, api_client: ApiClient, control_plane: ControlPlane, namespace: str
) -> None:
    """While ``hi`` (priority 100) is evicting, ``top`` (200) picks the same node: the
    lower nomination is cleared and ``top`` is nominated. Once deletions are allowed,
    ``top`` binds, each victim was deleted once, and ``hi`` stays Pending, not
    nominated, with the same message on both schedulers."""
    for side in SIDES:
        await race.preemptor(side, "hi", 100)
    await wait_for(lambda: race.evicting("hi"), timeout=30, interval=0.2, message="hi evicting")
    for side in SIDES:
        await race.preemptor(side, "top", 200)

    async def taken_over() -> bool:
        for side in SIDES:
            if await race.nominated(f"{side}-top") != race.nodes[side]:
                return False
            if await race.nominated(f"{side}-hi"):
                return False
        return True

    await wait_for(taken_over, timeout=30, interval=0.2, message="top nominated, hi cleared")
    for side in SIDES:  # still refused: nothing gone, nothing bound
        assert await names_left(api_client, namespace) >= {f"{side}-v0", f"{side}-v1"}
        assert not (await race.pod(f"{side}-top"))["spec"].get("nodeName")
    await race.allow()

    async def settled() -> dict[str, str] | None:
        messages = {}
        for side in SIDES:
            top, hi = await race.pod(f"{side}-top"), await race.pod(f"{side}-hi")
            if top["spec"].get("nodeName") != race.nodes[side]:
                return None
            cond = scheduled_condition(hi)
            if hi["spec"].get("nodeName") or hi["status"].get("nominatedNodeName"):
                return None
            if cond.get("status") != "False" or "preemption:" not in cond.get("message", ""):
                return None
            messages[side] = str(cond["message"])
        return messages if messages["p"] == messages["k"] else None

    messages = await wait_for(settled, timeout=60, interval=0.3, message="top bound, hi parked")
    assert await names_left(api_client, namespace) == {
        f"{s}-{n}" for s in SIDES for n in ("hi", "top")
    }
    deleted = _deletions(control_plane, namespace)
    assert deleted == Counter({f"{s}-v{i}": 1 for s in SIDES for i in range(2)}), deleted
    report("preemptor-overtaken-mid-eviction", hi_message=repr(messages["p"]))


async def test_preemptor_deleted_mid_eviction_leaves_the_remaining_victims(
    race: Race, api_client: ApiClient, namespace: str, node_factory: Any
) -> None:
    """``hi`` is deleted while its eviction of ``-v1`` is refused. Once deletions are
    allowed, no scheduler goes on with it: both victims stay on each node (``-v1``
    keeps the DisruptionTarget condition written before the refused DELETE, ``-v0`` was
    never tried, as Go's last victim is not tried after an error) and nothing is
    nominated there. A pod created afterwards for each scheduler binds first, so the
    schedulers have handled every event from before it."""
    for side in SIDES:
        await race.preemptor(side, "hi", 100)
    await wait_for(lambda: race.evicting("hi"), timeout=30, interval=0.2, message="hi evicting")
    for side in SIDES:
        await race.core.delete_namespaced_pod(f"{side}-hi", namespace, grace_period_seconds=0)
    await race.allow()
    (spare,) = await node_factory(
        [make_node(f"{namespace}-spare", cpu="2", labels={"suite": namespace})]
    )
    for side in SIDES:
        body = make_pod(
            f"{side}-after",
            cpu="100m",
            scheduler_name=race.schedulers[side],
            node_selector={"kubernetes.io/hostname": spare},
        )
        await race.core.create_namespaced_pod(namespace, cast(Any, body))

    async def after_bound() -> bool:
        for side in SIDES:
            if (await race.pod(f"{side}-after"))["spec"].get("nodeName") != spare:
                return False
        return True

    await wait_for(after_bound, timeout=30, interval=0.2, message="the later pods bound")
    left = await names_left(api_client, namespace)
    assert left == {f"{s}-{n}" for s in SIDES for n in ("v0", "v1", "after")}, left
    outcome = {}
    for side in SIDES:
        v0, v1 = await race.pod(f"{side}-v0"), await race.pod(f"{side}-v1")
        assert v0["spec"]["nodeName"] == v1["spec"]["nodeName"] == race.nodes[side]
        outcome[side] = (
            await race.disruption_target(f"{side}-v0"),
            await race.disruption_target(f"{side}-v1"),
        )
    assert outcome["p"] == outcome["k"] == (False, True), outcome
    report("preemptor-deleted-mid-eviction", victims_left=2, disruption_target=outcome["p"])
