"""Two replicas, one Lease: the standby takes over when the leader is killed mid-run."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.devcluster import ControlPlane
from podium.devcluster.objects import make_node, make_pod, wait_for
from tests.e2e.test_scheduling import assert_no_overcommit, create_pods, pods_in

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

LEASE = ("--leader-elect", "--lease-duration", "6", "--renew-deadline", "4", "--retry-period", "1")


def successful_binds(plane: ControlPlane, namespace: str) -> Counter[str]:
    """pods/binding creates that the server accepted, per pod, from the audit log."""
    counts: Counter[str] = Counter()
    for event in plane.audit_events():
        ref = event.get("objectRef") or {}
        if (
            event.get("stage") == "ResponseComplete"
            and event.get("verb") == "create"
            and ref.get("subresource") == "binding"
            and ref.get("namespace") == namespace
            and (event.get("responseStatus") or {}).get("code", 0) < 300
        ):
            counts[ref.get("name", "")] += 1
    return counts


async def test_standby_takes_over_without_double_binds(
    api_client: ApiClient,
    control_plane: ControlPlane,
    namespace: str,
    node_factory: Any,
    podium: Any,
) -> None:
    name = f"{namespace}-sched"
    lease = ("--lease-name", f"podium-{namespace}"[:60], "--lease-namespace", namespace)
    await node_factory(make_node(f"{namespace}-n{i}") for i in range(10))
    first = await podium("--scheduler-name", name, *LEASE, *lease)
    second = await podium("--scheduler-name", name, *LEASE, *lease)

    async def leader_of(procs: list[Any]) -> Any:
        for proc in procs:
            if "podium_leader 1.0" in await proc.metrics():
                return proc
        return None

    leader = await wait_for(lambda: leader_of([first, second]), timeout=20, message="a leader")
    standby = second if leader is first else first
    assert "podium_leader 1.0" not in await standby.metrics()

    total = 200
    create = asyncio.create_task(
        create_pods(
            api_client,
            namespace,
            [make_pod(f"p{i}", cpu="10m", scheduler_name=name) for i in range(total)],
        )
    )

    async def some_bound() -> bool:
        return any(p["spec"].get("nodeName") for p in await pods_in(api_client, namespace))

    await wait_for(some_bound, timeout=30, message="first bindings")
    leader.kill()
    killed_at = time.monotonic()
    await create
    await wait_for(lambda: leader_of([standby]), timeout=20, message="takeover")
    takeover = time.monotonic() - killed_at
    assert takeover <= 6 + 1 + 3  # lease duration + retry period + scheduling slack

    async def all_bound() -> bool:
        return all(p["spec"].get("nodeName") for p in await pods_in(api_client, namespace))

    await wait_for(all_bound, timeout=60, interval=0.5, message="all pods bound")
    await assert_no_overcommit(api_client)

    # The audit log is written after each response; give the last lines a moment.
    def logged() -> Counter[str] | None:
        counts = successful_binds(control_plane, namespace)
        return counts if len(counts) >= total else None

    try:
        binds = await wait_for(logged, timeout=30, message="every binding in the audit log")
    except TimeoutError:
        binds = successful_binds(control_plane, namespace)
        names = {p["metadata"]["name"] for p in await pods_in(api_client, namespace)}
        missing = sorted(names - set(binds))
        events = [
            (e.get("stage"), e.get("verb"), (e.get("responseStatus") or {}).get("code"))
            for e in control_plane.audit_events()
            if (e.get("objectRef") or {}).get("name") in missing[:3]
        ]
        raise AssertionError(f"no successful binding logged for {missing[:10]}: {events}") from None
    assert len(binds) == total
    assert max(binds.values()) == 1
    leases = client.CoordinationV1Api(api_client)
    held = await leases.read_namespaced_lease(f"podium-{namespace}"[:60], namespace)
    assert held.spec.holder_identity and held.spec.lease_transitions >= 1
