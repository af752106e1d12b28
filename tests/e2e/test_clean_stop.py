"""`podium run` stops cleanly: exit code 0 and no traceback on SIGTERM or SIGINT.

A Deployment rollout sends SIGTERM to every replica it replaces, so each
stop must be clean, including one that holds the Lease, which it hands over
on the way out (kube-scheduler's ReleaseOnCancel).
"""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.devcluster.objects import create_pod, wait_for
from podium.kube.manifests import make_node, make_pod
from tests.e2e.test_leader_election import LEASE

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

# (signal, with leader election): three SIGTERMs, as three rollouts would send, and a Ctrl+C.
STOPS = [
    (signal.SIGTERM, False),
    (signal.SIGTERM, True),
    (signal.SIGTERM, False),
    (signal.SIGINT, False),
]


@pytest.mark.parametrize(("sig", "elect"), STOPS, ids=["term-1", "term-2-leader", "term-3", "int"])
async def test_signal_stops_podium_with_exit_code_zero(
    api_client: ApiClient,
    namespace: str,
    node_factory: Any,
    podium: Any,
    sig: signal.Signals,
    elect: bool,
) -> None:
    sched = f"{namespace}-s"
    lease_name = f"podium-{namespace}"[:60]
    lease = ("--lease-name", lease_name, "--lease-namespace", namespace) if elect else ()
    await node_factory([make_node(f"{namespace}-n")])
    proc = await podium("--scheduler-name", sched, *(LEASE if elect else ()), *lease)
    if elect:
        await wait_for(
            lambda: _holder(api_client, namespace, lease_name), timeout=20, message="the Lease"
        )
    # Working when the signal comes: one pod bound, and its Events on their way.
    await create_pod(api_client, namespace, make_pod("p", scheduler_name=sched))
    core = client.CoreV1Api(api_client)

    async def bound() -> str:
        return str((await core.read_namespaced_pod("p", namespace)).spec.node_name or "")

    await wait_for(bound, timeout=30, message="the pod bound")

    started = time.monotonic()
    proc.process.send_signal(sig)
    code = await asyncio.to_thread(proc.process.wait, 30)
    took = time.monotonic() - started
    output = "\n".join(proc.log_lines())
    assert code == 0, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    assert "CancelledError" not in output, output[-3000:]
    assert '"podium_stopping"' in output
    if elect:  # released, so that a standby need not wait out the lease duration
        assert await _holder(api_client, namespace, lease_name) == ""
    print(f"RELIABILITY stop-{sig.name}{'-leader' if elect else ''}: exit 0 in {took:.2f}s")


async def _holder(api: ApiClient, namespace: str, name: str) -> str:
    try:
        lease = await client.CoordinationV1Api(api).read_namespaced_lease(name, namespace)
    except client.ApiException:
        return ""
    return str(lease.spec.holder_identity or "")
