"""Podium as a real subprocess (`python -m podium run`) against the session cluster, and
the checks that end every e2e test using that cluster: no overbooking, no policy left."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
import pytest_asyncio
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from podium.devcluster import Binaries, ControlPlane
from podium.devcluster.objects import wait_for
from tests.e2e import chart_rbac
from tests.e2e.dra import Dra
from tests.e2e.overbooking import assert_no_overbooking
from tests.e2e.queues import pending_pods

_E2E = Path(__file__).parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PodiumProcess:
    process: subprocess.Popen[bytes]
    metrics_port: int
    log: Path

    async def metrics(self) -> str:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{self.metrics_port}/metrics") as resp,
        ):
            return await resp.text()

    async def pending(self) -> dict[str, float]:
        """Its queues' sizes, as last sampled (once a second)."""
        return pending_pods(await self.metrics())

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        self.process.wait(timeout=30)

    def log_lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()


async def _wait_ready(proc: PodiumProcess, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    url = f"http://127.0.0.1:{proc.metrics_port}/readyz"
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if proc.process.poll() is not None:
                tail = "\n".join(proc.log_lines()[-30:])
                raise RuntimeError(f"podium exited with {proc.process.returncode}:\n{tail}")
            try:
                async with session.get(url) as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise TimeoutError("podium did not become ready")


@pytest_asyncio.fixture(loop_scope="session")
async def dra(api_client: ApiClient, namespace: str) -> AsyncIterator[Dra]:
    """DRA objects for one test; cluster-scoped ones and claim finalizers go afterwards."""
    made = Dra(api_client, namespace)
    yield made
    await made.cleanup()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def chart_rbac_identity(
    request: pytest.FixtureRequest,
    control_plane: ControlPlane,
    api_client: ApiClient,
    binaries: Binaries,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[chart_rbac.ChartIdentity | None]:
    """With ``--chart-rbac``: the chart's RBAC for a release in namespace podium-chart-rbac,
    under which ``podium`` runs every Podium; at the end of the session, none of its writes
    may have been refused (403). Tests that give Podium a kubeconfig of their own keep it.
    Without the option: None, and nothing is installed."""
    if not request.config.getoption("--chart-rbac"):
        yield None
        return
    namespace = "podium-chart-rbac"
    body = {"metadata": {"name": namespace}}
    await client.CoreV1Api(api_client).create_namespace(cast(Any, body))
    workdir = tmp_path_factory.mktemp("chart-rbac")
    identity = await chart_rbac.install(
        api_client, control_plane, binaries, "podium", namespace, workdir
    )
    yield identity
    await chart_rbac.uninstall(api_client, identity)
    refused = chart_rbac.refused(control_plane, identity.user)
    assert not refused, f"writes refused under the chart's RBAC: {refused}"


@pytest_asyncio.fixture(loop_scope="session")
async def podium(
    control_plane: ControlPlane,
    tmp_path: Path,
    chart_rbac_identity: chart_rbac.ChartIdentity | None,
) -> AsyncIterator[Callable[..., Awaitable[PodiumProcess]]]:
    """`await podium(*extra_args)` starts Podium; every process is stopped after the test.

    With ``--chart-rbac`` it runs as the chart's ServiceAccount unless the test passes a
    ``--kubeconfig`` of its own (the last one given wins)."""
    started: list[PodiumProcess] = []
    identity = chart_rbac_identity
    kubeconfig = identity.kubeconfig if identity is not None else control_plane.kubeconfig

    async def start(*args: str) -> PodiumProcess:
        port = _free_port()
        log = tmp_path / f"podium-{len(started)}.log"
        with log.open("wb") as out:
            # Popen returns at once; the process is awaited through /readyz.
            process = subprocess.Popen(  # noqa: ASYNC220
                [
                    sys.executable,
                    "-m",
                    "podium",
                    "run",
                    "--kubeconfig",
                    str(kubeconfig),
                    "--metrics-host",
                    "127.0.0.1",
                    "--metrics-port",
                    str(port),
                    *args,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        proc = PodiumProcess(process, port, log)
        started.append(proc)
        await _wait_ready(proc)
        return proc

    yield start
    unclean = []
    for proc in started:
        if proc.process.poll() is None:
            # A Deployment stops Podium with SIGTERM on every rollout: that must be a
            # clean exit (0, no traceback), as the README promises.
            proc.kill(signal.SIGTERM)
            if proc.process.returncode != 0:
                tail = "\n".join(proc.log_lines()[-20:])
                unclean.append(f"exit {proc.process.returncode} on SIGTERM:\n{tail}")
    assert not unclean, "\n\n".join(unclean)


@pytest_asyncio.fixture(loop_scope="session")
async def no_overbooking(api_client: ApiClient) -> AsyncIterator[None]:
    """After the test, no node may be over allocatable because a scheduler put a pod there.

    Every e2e test whose fixtures include ``control_plane`` gets this fixture
    (``pytest_collection_modifyitems`` below): tests that start Podium through
    ``podium``, tests that drive an in-process Podium, and tests that run the
    real kube-scheduler, whose binds are held to the same rule (which also
    checks the port against the real thing). It is appended last, so it is set
    up last and torn down first: the check sees the test's final state before
    ``namespace`` deletes its pods and ``node_factory`` its nodes, with the
    schedulers still running. A failure is reported as an error at teardown.

    The rule (``tests.kube_accounting.overbookings``), over every Node and Pod:
    a pod counts on its node as in kube-scheduler's cache (spec.nodeName set,
    phase not Succeeded/Failed; pods being deleted still count), its requests as
    ``PodInfo.CalculateResource`` computes them, and the node offers
    ``status.allocatable``. A node is at fault on a resource (pod count
    included) when the total is over allocatable AND at least one pod that a
    scheduler bound there (Binding API: ``PodScheduled=True``) asks for that
    resource. Pods created with spec.nodeName carry no such condition: a node
    overbooked by them alone is the test's own doing and passes, but no
    scheduler may add a pod asking for the resource in excess (for the pod
    count: any pod), as kube-scheduler's NodeResourcesFit refuses exactly that.

    Limits: it assumes nothing shrinks a node's allocatable or adds
    spec.nodeName pods to a node after a scheduler bound there (the rule would
    blame the scheduler's pods), and NodeResourcesFit's default arguments (no
    ignored extended resources, no DRA-backed extended resources).
    """
    yield
    await assert_no_overbooking(api_client)


@pytest_asyncio.fixture(loop_scope="session")
async def no_leftover_policies(api_client: ApiClient) -> AsyncIterator[None]:
    """After the test, no SchedulerPolicy may remain: a policy left behind is applied by every
    later Podium and changes what the next test counts (its reloads, its profiles). The
    leftovers are deleted, so one leak fails one test, the one that made it."""
    yield
    objects = client.CustomObjectsApi(api_client)
    kind = ("podium.dev", "v1alpha1", "schedulerpolicies")

    async def listing() -> dict[str, Any] | None:
        """The policies; None while an API server restarted by the test answers 429
        ("storage is (re)initializing") for the custom resource."""
        try:
            return cast(dict[str, Any], await objects.list_cluster_custom_object(*kind))
        except ApiException as exc:
            if exc.status == 429:
                return None
            if exc.status == 404:  # the CRD is not installed
                return {"items": []}
            raise

    listed = await wait_for(listing, timeout=60, interval=0.5, message="SchedulerPolicies listed")
    names = sorted(p["metadata"]["name"] for p in listed.get("items") or [])
    for name in names:
        await objects.delete_cluster_custom_object(*kind, name)
    assert not names, f"the test left SchedulerPolicy objects behind: {names}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give the teardown checks to every e2e test that uses the cluster: ``no_overbooking``
    after its own fixtures (torn down first, while its schedulers run), and
    ``no_leftover_policies`` before them (torn down last, after a fixture deleted its own)."""
    for item in items:
        names = getattr(item, "fixturenames", None)
        if _E2E in item.path.parents and names is not None and "control_plane" in names:
            if "no_overbooking" not in names:
                names.append("no_overbooking")
            if "no_leftover_policies" not in names:
                names.insert(0, "no_leftover_policies")
