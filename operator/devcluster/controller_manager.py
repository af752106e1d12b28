"""kube-controller-manager, run against a local ControlPlane, with a chosen set of controllers.

The project's own tests need none of it; Kubernetes' e2e suite does (see CONFORMANCE_CONTROLLERS).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterator, Mapping, Sequence

from .cluster import ControlPlane, flag_map
from .process import ManagedProcess, Service, free_ports, http_get

_NO_VERIFY = ssl.create_default_context()
_NO_VERIFY.check_hostname = False
_NO_VERIFY.verify_mode = ssl.CERT_NONE  # it serves a self-signed cert

CONFORMANCE_CONTROLLERS = (
    # Test namespaces are created and deleted per test; pods need the `default` account
    # (ServiceAccount admission) and the framework waits for it and its kube-root-ca.crt.
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    # Tests create ReplicaSets and ReplicationControllers and count their pods; GC removes
    # the pods of a deleted owner.
    "replicaset-controller",
    "replicationcontroller-controller",
    "garbage-collector-controller",
    # Volume tests bind PVCs to PVs; the protection finalizers are what a cluster has.
    "persistentvolume-binder-controller",
    "persistentvolume-protection-controller",
    "persistentvolumeclaim-protection-controller",
)
"""What Kubernetes' scheduling e2e suite relies on. Not node-lifecycle: KWOK nodes send no
heartbeats, so it would taint them not-ready and evict their pods."""

WORKLOAD_CONTROLLERS = ("podgroup-protection-controller",)
"""Added under GenericWorkload: a PodGroup in use by pods keeps its finalizer."""


class KubeControllerManager(Service):
    """kube-controller-manager running only `controllers`, leader election off.

    feature_gates become --feature-gates (the API server's gates, so both agree on which
    fields exist). Ready means /healthz is ok, which covers every started controller.
    """

    def __init__(
        self,
        control_plane: ControlPlane,
        controllers: Sequence[str] = CONFORMANCE_CONTROLLERS,
        *,
        feature_gates: Mapping[str, bool] | None = None,
        startup_timeout: float = 60.0,
    ) -> None:
        self.control_plane = control_plane
        self.controllers = tuple(controllers)
        self.feature_gates = dict(feature_gates or {})
        self.startup_timeout = startup_timeout
        (self.port,) = free_ports(1)
        self._proc: ManagedProcess | None = None

    def _start_steps(self) -> Iterator[Callable[[], None]]:
        plane = self.control_plane
        pki = plane.pki
        args = [
            str(plane.binaries.kube_controller_manager),
            f"--kubeconfig={plane.kubeconfig}",
            f"--controllers={','.join(self.controllers)}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--root-ca-file={pki.ca_cert}",
            f"--service-account-private-key-file={pki.sa_key}",
            "--v=2",
        ]
        if self.feature_gates:
            args.append(f"--feature-gates={flag_map(self.feature_gates)}")
        self._proc = ManagedProcess(
            "kube-controller-manager", args, plane.workdir / "logs" / "kube-controller-manager.log"
        )
        self._proc.spawn()
        yield self._wait_ready

    def _wait_ready(self) -> None:
        assert self._proc is not None
        url = f"https://127.0.0.1:{self.port}/healthz"
        self._proc.wait_ready(
            lambda: http_get(url, None, _NO_VERIFY)[0] == 200,
            self.startup_timeout,
            "healthy (/healthz)",
        )

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.stop()
