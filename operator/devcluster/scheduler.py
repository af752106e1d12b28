"""The real kube-scheduler, run against a local ControlPlane.

It is the reference Podium is compared with: tests and the benchmark run both
side by side under different schedulerNames.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from .cluster import ControlPlane, flag_map
from .process import ManagedProcess, Service, free_ports, http_get

_NO_VERIFY = ssl.create_default_context()
_NO_VERIFY.check_hostname = False
_NO_VERIFY.verify_mode = ssl.CERT_NONE  # kube-scheduler serves a self-signed cert


class KubeScheduler(Service):
    """kube-scheduler with one profile, configured by a generated KubeSchedulerConfiguration.

    Leader election is off and client QPS/burst are 5000 (as in scheduler_perf), so
    several instances with different scheduler names can share one cluster.
    feature_gates become --feature-gates (WORKLOAD_GATES turns gang scheduling on). Ready
    means /readyz is ok, which includes the scheduler's informer sync.
    """

    def __init__(
        self,
        control_plane: ControlPlane,
        scheduler_name: str = "default-scheduler",
        *,
        percentage_of_nodes_to_score: int | None = None,
        plugins: Mapping[str, Any] | None = None,
        plugin_config: Sequence[Mapping[str, Any]] = (),
        feature_gates: Mapping[str, bool] | None = None,
        verbosity: int = 2,
        startup_timeout: float = 60.0,
    ) -> None:
        self.control_plane = control_plane
        self.scheduler_name = scheduler_name
        self.startup_timeout = startup_timeout
        (self.port,) = free_ports(1)
        profile: dict[str, Any] = {"schedulerName": scheduler_name}
        if percentage_of_nodes_to_score is not None:
            profile["percentageOfNodesToScore"] = percentage_of_nodes_to_score
        if plugins is not None:
            profile["plugins"] = dict(plugins)
        if plugin_config:
            profile["pluginConfig"] = [dict(entry) for entry in plugin_config]
        self.config: dict[str, Any] = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {
                "kubeconfig": str(control_plane.kubeconfig.resolve()),
                "qps": 5000,
                "burst": 5000,
            },
            "leaderElection": {"leaderElect": False},
            "profiles": [profile],
        }
        self.config_path = control_plane.workdir / f"kube-scheduler-{scheduler_name}.yaml"
        self._verbosity = verbosity
        self.feature_gates = dict(feature_gates or {})
        self._proc: ManagedProcess | None = None

    def _start_steps(self) -> Iterator[Callable[[], None]]:
        self.config_path.write_text(yaml.safe_dump(self.config, sort_keys=False))
        self._proc = ManagedProcess(
            f"kube-scheduler[{self.scheduler_name}]",
            [
                str(self.control_plane.binaries.kube_scheduler),
                f"--config={self.config_path}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.port}",
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
                f"--v={self._verbosity}",
                *(
                    [f"--feature-gates={flag_map(self.feature_gates)}"]
                    if self.feature_gates
                    else []
                ),
            ],
            self.log_path,
        )
        self._proc.spawn()
        yield self._wait_ready

    def _wait_ready(self) -> None:
        assert self._proc is not None
        url = f"https://127.0.0.1:{self.port}/readyz"
        self._proc.wait_ready(
            lambda: http_get(url, None, _NO_VERIFY)[0] == 200,
            self.startup_timeout,
            "ready (/readyz)",
        )

    @property
    def log_path(self) -> Path:
        """Its stdout and stderr, appended to across restarts (tests read its -v=10 scores)."""
        return self.control_plane.workdir / "logs" / f"kube-scheduler-{self.scheduler_name}.log"

    @property
    def metrics_url(self) -> str:
        return f"https://127.0.0.1:{self.port}/metrics"

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.stop()
