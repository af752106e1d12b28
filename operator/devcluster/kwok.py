"""KWOK, the fake kubelet, run against a local ControlPlane.

Tests that need pods to reach Running, or bound pods to finish deleting, start
it; nothing else needs it, since the scheduler only reads Node objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from .cluster import ControlPlane
from .process import ManagedProcess, Service, free_ports, http_get

KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
"""Nodes annotated with this key = "fake" are the ones a Kwok runner manages."""


class Kwok(Service):
    """KWOK controller managing only nodes annotated kwok.x-k8s.io/node=fake.

    It marks those nodes Ready and moves pods bound to them to Running, and finishes
    their deletion, which otherwise waits forever for a kubelet. stages replaces the
    default Stage file (binaries.kwok_stages).
    """

    def __init__(
        self,
        control_plane: ControlPlane,
        *,
        stages: Path | None = None,
        startup_timeout: float = 60.0,
    ) -> None:
        self.control_plane = control_plane
        self.stages = stages
        self.startup_timeout = startup_timeout
        (self.port,) = free_ports(1)
        self._proc: ManagedProcess | None = None

    def _start_steps(self) -> Iterator[Callable[[], None]]:
        binaries = self.control_plane.binaries
        self._proc = ManagedProcess(
            "kwok",
            [
                str(binaries.kwok),
                f"--kubeconfig={self.control_plane.kubeconfig}",
                f"--config={self.stages or binaries.kwok_stages}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
                "--manage-nodes-with-label-selector=",
                "--manage-single-node=",
                "--cidr=10.244.0.0/16",
                "--node-ip=10.0.0.1",
                f"--server-address=127.0.0.1:{self.port}",
            ],
            self.control_plane.workdir / "logs" / "kwok.log",
        )
        self._proc.spawn()
        yield self._wait_ready

    def _wait_ready(self) -> None:
        assert self._proc is not None
        url = f"http://127.0.0.1:{self.port}/healthz"
        self._proc.wait_ready(
            lambda: http_get(url, None, None)[0] == 200, self.startup_timeout, "healthy"
        )

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.stop()
