"""A real etcd + kube-apiserver on 127.0.0.1, for tests, the demo and the benchmark.

This mirrors what envtest and k8s scheduler_perf run: no kubelets and no
controller-manager, so there is no namespace controller (deleted namespaces stay
Terminating), no GC and no node lifecycle. The admission plugins that need those
controllers (ServiceAccount, TaintNodesByCondition, Priority) are disabled, so
fake Nodes are schedulable as created and pods may set spec.priority directly.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import ssl
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client import ApiClient

from .build import Binaries, ensure_binaries
from .pki import Pki, write_pki
from .process import ComponentError, ManagedProcess, Service, free_ports, http_get

SERVICE_CIDR = "10.0.0.0/24"
KUBERNETES_SERVICE_IP = "10.0.0.1"
"""The `kubernetes` Service's ClusterIP: the first address of SERVICE_CIDR."""

WORKLOAD_GATES: Mapping[str, bool] = {"GenericWorkload": True}
"""The gate (beta, off by default) under which kube-apiserver and kube-scheduler serve and
use the Workload API: Workload, PodGroup and pods' spec.schedulingGroup."""
TOPOLOGY_WORKLOAD_GATES: Mapping[str, bool] = {
    **WORKLOAD_GATES,
    "TopologyAwareWorkloadScheduling": True,
}
"""WORKLOAD_GATES plus the alpha gate that keeps PodGroup.spec.schedulingConstraints (API
server) and places a group in one topology domain (kube-scheduler)."""
WORKLOAD_RUNTIME_CONFIG: Mapping[str, bool] = {"scheduling.k8s.io/v1beta1": True}
"""The API server's --runtime-config that serves scheduling.k8s.io/v1beta1."""


def flag_map(values: Mapping[str, bool]) -> str:
    """A map flag's value as the Kubernetes binaries parse it: `a=true,b=false`."""
    return ",".join(f"{key}={str(on).lower()}" for key, on in values.items())


# Reads are not audited: tests count writes such as pods/binding creates.
_AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "None", "verbs": ["get", "list", "watch"]},
        {"level": "Metadata"},
    ],
}


def _etcd_data_dir() -> Path:
    """A fresh etcd data dir, on tmpfs when there is one, so etcd never touches a disk.

    A SIGKILLed run cannot delete its dir, and on tmpfs that is lost memory, so dirs
    whose creator (the pid in the name) is gone are removed first.
    """
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    for stale in base.glob("podium-etcd-*-*"):
        pid = stale.name.split("-")[2]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"podium-etcd-{os.getpid()}-", dir=base))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, but belongs to another user
        pass
    return True


class ControlPlane(Service):
    """etcd and kube-apiserver as child processes, with an admin kubeconfig.

    perf=True lifts the apiserver's inflight limits and turns off API priority and
    fairness, as kwokctl and scheduler_perf do, so the benchmark measures the
    scheduler rather than throttling. audit=True writes an audit log of every
    write request (see audit_events()). real_nodes=True prepares the API server for a
    kubelet (see RealNode): ServiceAccount admission on, kubelets reached by their
    InternalIP only (never a DNS lookup of a node name), and the `kubernetes` Service
    address in the serving certificate. feature_gates and runtime_config become the API
    server's --feature-gates and --runtime-config, e.g. WORKLOAD_GATES and
    WORKLOAD_RUNTIME_CONFIG to serve the Workload API (scheduling.k8s.io/v1beta1).
    admission names admission plugins to keep on that are otherwise off (ServiceAccount,
    Priority): the conformance cluster, whose tests set only priorityClassName, needs
    Priority; the project's own tests set spec.priority directly, which Priority forbids.
    """

    def __init__(
        self,
        binaries: Binaries | None = None,
        *,
        workdir: Path | None = None,
        perf: bool = False,
        audit: bool = False,
        real_nodes: bool = False,
        feature_gates: Mapping[str, bool] | None = None,
        runtime_config: Mapping[str, bool] | None = None,
        admission: Sequence[str] = (),
        startup_timeout: float = 120.0,
    ) -> None:
        self._binaries = binaries
        self._owns_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="podium-cluster-"))
        self.perf = perf
        self.audit_log: Path | None = self.workdir / "audit.log" if audit else None
        self.real_nodes = real_nodes
        self.feature_gates = dict(feature_gates or {})
        self.runtime_config = dict(runtime_config or {})
        self.admission = tuple(admission)
        self.startup_timeout = startup_timeout
        self.kubeconfig = self.workdir / "kubeconfig"
        self.api_port, self._etcd_port, self._etcd_peer_port = free_ports(3)
        self.server = f"https://127.0.0.1:{self.api_port}"
        self._etcd_data: Path | None = None
        self._pki: Pki | None = None
        self._ssl: ssl.SSLContext | None = None
        self._etcd: ManagedProcess | None = None
        self._apiserver: ManagedProcess | None = None

    @property
    def binaries(self) -> Binaries:
        if self._binaries is None:
            raise ComponentError("ControlPlane is not started")
        return self._binaries

    @property
    def token(self) -> str:
        """Bearer token of the admin user (group system:masters)."""
        return self._require_pki().admin_token

    @property
    def pki(self) -> Pki:
        """CA, serving cert and service-account key (for kube-controller-manager)."""
        return self._require_pki()

    @property
    def ca_cert(self) -> Path:
        return self._require_pki().ca_cert

    def _require_pki(self) -> Pki:
        if self._pki is None:
            raise ComponentError("ControlPlane is not started")
        return self._pki

    # -- lifecycle -------------------------------------------------------------------------

    def _resolve_binaries(self) -> None:
        if self._binaries is None:
            self._binaries = ensure_binaries()

    def _start_steps(self) -> Iterator[Callable[[], None]]:
        yield self._resolve_binaries
        self._prepare()
        assert self._etcd is not None
        self._etcd.spawn()
        yield self._wait_etcd
        yield from self._apiserver_steps()

    def _apiserver_steps(self) -> Iterator[Callable[[], None]]:
        assert self._apiserver is not None
        self._apiserver.spawn()
        yield self._wait_apiserver

    def stop(self) -> None:
        """Stop kube-apiserver, then etcd, and delete etcd's data (and an owned workdir)."""
        for proc in (self._apiserver, self._etcd):
            if proc is not None:
                proc.stop()
        if self._etcd_data is not None:
            shutil.rmtree(self._etcd_data, ignore_errors=True)
            self._etcd_data = None
        if self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def stop_apiserver(self, *, kill: bool = False) -> None:
        """Stop only kube-apiserver (SIGKILL with kill=True); etcd keeps the state."""
        if self._apiserver is not None:
            self._apiserver.stop(kill=kill)

    def start_apiserver(self) -> None:
        """Start kube-apiserver again on the same port and wait until it is ready."""
        for wait in self._apiserver_steps():
            wait()

    async def astart_apiserver(self) -> None:
        for wait in self._apiserver_steps():
            await asyncio.to_thread(wait)

    def restart_apiserver(self, *, kill: bool = False) -> None:
        self.stop_apiserver(kill=kill)
        self.start_apiserver()

    async def arestart_apiserver(self, *, kill: bool = False) -> None:
        await asyncio.to_thread(self.stop_apiserver, kill=kill)
        await self.astart_apiserver()

    @property
    def apiserver_running(self) -> bool:
        return self._apiserver is not None and self._apiserver.running

    # -- setup -----------------------------------------------------------------------------

    def _prepare(self) -> None:
        """Write PKI, kubeconfig and audit policy, and build both command lines."""
        binaries = self.binaries
        logs = self.workdir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        extra_ips = (KUBERNETES_SERVICE_IP,) if self.real_nodes else ()
        pki = self._pki = write_pki(self.workdir / "pki", extra_ips)
        self._ssl = ssl.create_default_context(cafile=str(pki.ca_cert))
        self._write_kubeconfig(pki)
        self._etcd_data = _etcd_data_dir()

        peer = f"http://127.0.0.1:{self._etcd_peer_port}"
        client = f"http://127.0.0.1:{self._etcd_port}"
        self._etcd = ManagedProcess(
            "etcd",
            [
                str(binaries.etcd),
                f"--data-dir={self._etcd_data}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=default={peer}",
                "--unsafe-no-fsync",
                "--log-level=warn",
                "--quota-backend-bytes=8589934592",
                "--auto-compaction-retention=1",
            ],
            logs / "etcd.log",
        )

        args = [
            str(binaries.kube_apiserver),
            f"--etcd-servers={client}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            # The `kubernetes` Service may not point at loopback; nothing here needs it.
            "--endpoint-reconciler-type=none",
            f"--secure-port={self.api_port}",
            f"--cert-dir={pki.ca_cert.parent}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}",
            f"--token-auth-file={pki.token_file}",
            f"--service-account-issuer={self.server}",
            f"--service-account-key-file={pki.sa_key}",
            f"--service-account-signing-key-file={pki.sa_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=RBAC",
            "--allow-privileged=true",
        ]
        disabled = ["TaintNodesByCondition", "Priority"]
        if self.real_nodes:
            args.append("--kubelet-preferred-address-types=InternalIP")
        else:
            disabled.insert(0, "ServiceAccount")
        kept = [plugin for plugin in disabled if plugin not in self.admission]
        args.append(f"--disable-admission-plugins={','.join(kept)}")
        if self.perf:
            args += [
                "--max-requests-inflight=0",
                "--max-mutating-requests-inflight=0",
                "--enable-priority-and-fairness=false",
            ]
        if self.feature_gates:
            args.append(f"--feature-gates={flag_map(self.feature_gates)}")
        if self.runtime_config:
            args.append(f"--runtime-config={flag_map(self.runtime_config)}")
        if self.audit_log is not None:
            policy = self.workdir / "audit-policy.yaml"
            policy.write_text(yaml.safe_dump(_AUDIT_POLICY))
            args += [f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}"]
        self._apiserver = ManagedProcess("kube-apiserver", args, logs / "kube-apiserver.log")

    def _write_kubeconfig(self, pki: Pki) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "podium-dev",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority": str(pki.ca_cert),
                    },
                }
            ],
            "users": [{"name": "podium-admin", "user": {"token": pki.admin_token}}],
            "contexts": [
                {"name": "podium-dev", "context": {"cluster": "podium-dev", "user": "podium-admin"}}
            ],
            "current-context": "podium-dev",
        }
        self.kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False))
        self.kubeconfig.chmod(0o600)

    # -- readiness -------------------------------------------------------------------------

    def _wait_etcd(self) -> None:
        assert self._etcd is not None
        url = f"http://127.0.0.1:{self._etcd_port}/health"
        self._etcd.wait_ready(lambda: http_get(url, None, None)[0] == 200, 30.0, "healthy")

    def _wait_apiserver(self) -> None:
        assert self._apiserver is not None
        self._apiserver.wait_ready(
            lambda: self.request("/readyz")[0] == 200, self.startup_timeout, "ready (/readyz)"
        )
        # The default namespace appears shortly after readiness; clients assume it.
        self._apiserver.wait_ready(
            lambda: self.request("/api/v1/namespaces/default")[0] == 200,
            30.0,
            "serving the default namespace",
        )

    def request(self, path: str) -> tuple[int, bytes]:
        """GET a path as admin; (0, b"") if the server does not answer."""
        return http_get(self.server + path, self.token, self._ssl)

    def audit_events(self) -> list[dict[str, Any]]:
        """Parsed audit log (audit=True only): one dict per audited write request."""
        if self.audit_log is None:
            raise ComponentError("ControlPlane was started without audit=True")
        if not self.audit_log.exists():
            return []
        with self.audit_log.open() as handle:
            return [json.loads(line) for line in handle if line.strip()]

    async def api_client(self) -> ApiClient:
        """A kubernetes_asyncio ApiClient for the admin user; the caller closes it."""
        configuration = client.Configuration()
        await config.load_kube_config(
            config_file=str(self.kubeconfig), client_configuration=configuration
        )
        return client.ApiClient(configuration=configuration)
