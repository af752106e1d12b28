"""Kubernetes' own [sig-scheduling] [Conformance] tests, run by the upstream e2e suite
(built from hack/e2e) against a cluster whose only scheduler is Podium."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from podium.devcluster import BuildError
from podium.devcluster.build import ensure_e2e_suite
from podium.devcluster.conformance import (
    CONFORMANCE_FOCUS,
    conformance_cluster,
    format_table,
    run_suite,
)

CONFORMANCE_TESTS = 11
"""[sig-scheduling] [Conformance] specs in k8s.io/kubernetes v1.37.2: a selection that runs
fewer (none, say) is a broken harness, not a pass."""


@pytest.fixture(scope="session")
def e2e_suite(pytestconfig: pytest.Config) -> Path:
    """The suite binary; a cold build shows its progress live, uncaptured."""
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    quiet = capture.global_and_fixture_disabled() if capture else contextlib.nullcontext()
    with quiet:
        try:
            return ensure_e2e_suite()
        except BuildError as exc:
            pytest.fail(f"cannot build the e2e suite: {exc}", pytrace=False)


async def test_upstream_conformance_passes_with_podium(e2e_suite: Path, tmp_path: Path) -> None:
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    async with conformance_cluster("podium", workdir=cluster, log=print) as plane:
        results = await run_suite(plane, CONFORMANCE_FOCUS, tmp_path / "report", log=print)
    table = format_table(results)
    logs = f"suite output: {tmp_path / 'report' / 'e2e.log'}; cluster logs: {cluster / 'logs'}"
    assert len(results) == CONFORMANCE_TESTS, f"{len(results)} specs ran\n{table}\n{logs}"
    assert all(res.result == "passed" for res in results), f"\n{table}\n{logs}"
