"""Shared fixtures: a real etcd + kube-apiserver, started once and only when a test asks.

Unit tests request none of these fixtures, so they never build or start anything.
Nothing here skips: if the binaries cannot be built or the cluster cannot start,
the tests that need it fail with the reason.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio import client

from podium.devcluster import (
    TOPOLOGY_WORKLOAD_GATES,
    WORKLOAD_RUNTIME_CONFIG,
    Binaries,
    BuildError,
    ComponentError,
    ControlPlane,
    KubeScheduler,
    Kwok,
    ensure_binaries,
)
from podium.devcluster.objects import create_nodes, delete_nodes, delete_pods

_TESTS = Path(__file__).parent


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("podium")
    group.addoption(
        "--soak", action="store_true", default=False, help="also run long tests marked soak"
    )
    group.addoption(
        "--chart-rbac",
        action="store_true",
        default=False,
        help="run every e2e test's Podium as the Helm chart's ServiceAccount, under its "
        "ClusterRole only; the session fails if the API server refused one of its writes",
    )
    group.addoption(
        "--scenarios",
        type=int,
        default=200,
        metavar="N",
        help="number of generated scenarios for randomised comparisons (default: 200)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark tests by folder (integration/, e2e/) and skip soak tests unless --soak."""
    skip_soak = pytest.mark.skip(reason="soak test: run with --soak")
    for item in items:
        for folder in ("integration", "e2e"):
            if (_TESTS / folder) in item.path.parents:
                item.add_marker(folder)
        if "soak" in item.keywords and not config.getoption("--soak"):
            item.add_marker(skip_soak)


@pytest.fixture(scope="session")
def binaries(pytestconfig: pytest.Config) -> Binaries:
    """The control-plane binaries; a cold build shows its progress live, uncaptured."""
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    quiet = capture.global_and_fixture_disabled() if capture else contextlib.nullcontext()
    with quiet:
        try:
            return ensure_binaries()
        except BuildError as exc:
            pytest.fail(f"cannot build the control plane: {exc}", pytrace=False)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def control_plane(
    binaries: Binaries, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ControlPlane]:
    """One cluster for the session, with the audit log on (tests count Binding calls).

    It serves the Workload API (GenericWorkload and TopologyAwareWorkloadScheduling, for
    gang scheduling); kube-scheduler runs without them unless a test passes
    ``feature_gates``.

    Logs, PKI and kubeconfig stay under pytest's basetemp for post-mortems.
    """
    plane = ControlPlane(
        binaries,
        workdir=tmp_path_factory.mktemp("control-plane"),
        audit=True,
        feature_gates=TOPOLOGY_WORKLOAD_GATES,
        runtime_config=WORKLOAD_RUNTIME_CONFIG,
    )
    try:
        await plane.astart()
    except ComponentError as exc:
        pytest.fail(f"cannot start the control plane: {exc}", pytrace=False)
    yield plane
    await plane.astop()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def api_client(control_plane: ControlPlane) -> AsyncIterator[Any]:
    """kubernetes_asyncio ApiClient for the admin user of the session cluster."""
    api = await control_plane.api_client()
    yield api
    await api.close()


@pytest_asyncio.fixture(loop_scope="session")
async def namespace(api_client: Any, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A fresh namespace named after the test; its pods are force-deleted at the end.

    There is no namespace controller, so the deleted namespace stays Terminating.
    """
    prefix = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40]
    core = client.CoreV1Api(api_client)
    created = await core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(generate_name=f"{prefix}-"))
    )
    name: str = created.metadata.name
    yield name
    await delete_pods(api_client, name)
    await core.delete_namespace(name)


@pytest_asyncio.fixture(loop_scope="session")
async def node_factory(api_client: Any) -> AsyncIterator[Callable[..., Awaitable[list[str]]]]:
    """`await node_factory([make_node(...), ...])` creates Nodes and deletes them after the test.

    Nodes are cluster-scoped and the scheduler sees all of them, so give them names
    unique to the test (prefix them with the namespace name).
    """
    created: list[str] = []

    async def create(nodes: Iterable[Mapping[str, Any]]) -> list[str]:
        batch = list(nodes)
        names = [node["metadata"]["name"] for node in batch]
        created.extend(names)
        await create_nodes(api_client, batch)
        return names

    yield create
    await delete_nodes(api_client, created)


@pytest_asyncio.fixture(loop_scope="session")
async def kube_scheduler(
    control_plane: ControlPlane,
) -> AsyncIterator[Callable[..., Awaitable[KubeScheduler]]]:
    """`await kube_scheduler("name", **KubeScheduler options)` starts the real kube-scheduler.

    It is ready (informers synced) when the call returns and is stopped after the test.
    """
    started: list[KubeScheduler] = []

    async def start(scheduler_name: str, **options: Any) -> KubeScheduler:
        scheduler = KubeScheduler(control_plane, scheduler_name, **options)
        await scheduler.astart()
        started.append(scheduler)
        return scheduler

    yield start
    for scheduler in reversed(started):
        await scheduler.astop()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def kwok(control_plane: ControlPlane) -> AsyncIterator[Kwok]:
    """KWOK for the session; it manages only nodes annotated kwok.x-k8s.io/node=fake."""
    runner = Kwok(control_plane)
    await runner.astart()
    yield runner
    await runner.astop()
