"""Two replicas, one Lease: the standby takes over when the leader is killed mid-run."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.devcluster import ControlPlane
from podium.devcluster.objects import wait_for
from podium.kube.manifests import make_node, make_pod
from tests.e2e.test_scheduling import assert_no_overcommit, create_pods, pods_in

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

LEASE = ("--leader-elect", "--lease-duration", "6", "--renew-deadline", "4", "--retry-period", "1")


def _bindings(plane: ControlPlane, namespace: str, codes: Callable[[int], bool]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for event in plane.audit_events():
        ref = event.get("objectRef") or {}
        code = (event.get("responseStatus") or {}).get("code", 0)
        if (
            event.get("stage") == "ResponseComplete"
            and event.get("verb") == "create"
            and ref.get("subresource") == "binding"
            and ref.get("namespace") == namespace
            and codes(code)
        ):
            counts[ref.get("name", "")] += 1
    return counts


def binding_attempts(plane: ControlPlane, namespace: str) -> Counter[str]:
    """Accepted Bindings plus those whose outcome was unknown (5xx), per pod."""
    return _bindings(plane, namespace, lambda code: code < 300 or code >= 500)


def refused_binds(plane: ControlPlane, namespace: str) -> Counter[str]:
    """Bindings the server refused with 409: an attempt to bind a pod already bound."""
    return _bindings(plane, namespace, lambda code: code == 409)


def scheduling_attempts(metrics: str) -> float:
    """The sum of scheduler_schedule_attempts_total over results and profiles."""
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("scheduler_schedule_attempts_total{")
    )


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
    # While the leader binds, the standby keeps its cache warm and decides nothing.
    assert scheduling_attempts(await standby.metrics()) == 0
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

    # At most one Binding per pod can succeed. A 5xx (e.g. a 504 when etcd is slow)
    # may still have been applied, so every pod needs one attempt, not one 201.
    def attempts() -> Counter[str] | None:
        counts = binding_attempts(control_plane, namespace)
        return counts if len(counts) >= total else None

    await wait_for(attempts, timeout=30, message="a binding attempt per pod in the audit log")
    # The server would refuse a second Binding anyway; what matters is that the new
    # leader, from its own cache, never tried to bind a pod the old one had bound.
    assert not refused_binds(control_plane, namespace)
    assert scheduling_attempts(await standby.metrics()) > 0
    leases = client.CoordinationV1Api(api_client)
    held = await leases.read_namespaced_lease(f"podium-{namespace}"[:60], namespace)
    assert held.spec.holder_identity and held.spec.lease_transitions >= 1
