"""A real node for tests: kubelet on a private containerd, plus kube-controller-manager.

kwok nodes only pretend to run pods. A RealNode runs them: containerd and runc from
Debian's packages (unpacked by hack/node-tools.sh into a private folder, never
installed), a bridge CNI this module creates, and the kubelet and
kube-controller-manager built from the pinned module. Everything it touches is its
own: containerd's root, state and socket, the kubelet's root dir, a cgroup parent
in every cgroup v1 hierarchy, a bridge with no route out (no masquerade, no
ip_forward). stop() removes all of it, restores the kernel settings the kubelet
changes, and removes the host paths the kubelet and containerd create even when
told otherwise.

Pods reach the API server through the `kubernetes` Service address, which sits on
the bridge and is forwarded to the API server on loopback; there is no kube-proxy.
The ControlPlane must be started with real_nodes=True.

Why one module of this size: bringing a real kubelet node up and, above all,
leaving nothing behind (processes, mounts, cgroups, the bridge, host paths,
kernel settings) is one sequence whose steps undo each other.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from .build import HACK_DIR
from .cluster import KUBERNETES_SERVICE_IP, SERVICE_CIDR, ControlPlane, _alive
from .oci import ImageLayout, file_layer, write_image_layout
from .process import (
    ComponentError,
    ManagedProcess,
    Service,
    free_ports,
    http_get,
    register_cleanup,
    unregister_cleanup,
)

PAUSE_IMAGE = "podium.local/pause:1"
_CGROUP_FS = Path("/sys/fs/cgroup")
_SYSCTLS = ("vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops")
# Created by the kubelet or containerd whatever their config says; removed on stop()
# when they did not exist before.
_HOST_PATHS = (
    Path("/var/log/containers"),
    Path("/var/log/pods"),
    Path("/var/lib/kubelet"),
    Path("/usr/libexec/kubernetes"),
    Path("/var/lib/cni"),
    Path("/run/nri"),
    Path("/var/run/netns"),
    Path("/run/netns"),
    Path("/etc/cni"),
    Path("/opt/cni"),
    Path("/opt/containerd"),
)
_NETNS_DIR = Path("/run/netns")
_HOST_STATE = "host-state.json"


@dataclass(frozen=True)
class NodeTools:
    """containerd, runc, the CNI plugins and debootstrap, unpacked from Debian's packages."""

    root: Path

    @property
    def bin_path(self) -> str:
        return f"{self.root / 'usr/bin'}:{self.root / 'usr/sbin'}"

    @property
    def containerd(self) -> Path:
        return self.root / "usr/bin/containerd"

    @property
    def ctr(self) -> Path:
        return self.root / "usr/bin/ctr"

    @property
    def runc(self) -> Path:
        return self.root / "usr/sbin/runc"

    @property
    def cni_bin(self) -> Path:
        return self.root / "usr/lib/cni"

    @property
    def versions(self) -> dict[str, str]:
        text = (self.root / "VERSIONS").read_text()
        return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def node_tools() -> NodeTools | None:
    """The unpacked packages (hack/node-tools.sh fetches them once), or None if unavailable."""
    proc = subprocess.run(
        [str(HACK_DIR / "node-tools.sh")], capture_output=True, text=True, check=False
    )
    folder = proc.stdout.strip()
    if proc.returncode != 0 or not folder:
        return None
    return NodeTools(Path(folder))


def unsupported_reason() -> str | None:
    """Why a RealNode cannot run on this machine, or None when it can."""
    if os.geteuid() != 0:
        return "a real node needs root (mounts, cgroups, a bridge)"
    missing = [c for c in ("cpu", "cpuset", "memory", "pids") if not (_CGROUP_FS / c).is_dir()]
    if missing:
        return f"a real node needs cgroup v1 controllers; missing: {', '.join(missing)}"
    if shutil.which("ip") is None:
        return "a real node needs iproute2 (`ip`) to create its bridge"
    if node_tools() is None:
        return "containerd/runc/CNI plugins could not be fetched with apt-get (hack/node-tools.sh)"
    return None


class _Forwarder:
    """TCP from the `kubernetes` Service address (on the bridge) to the API server on loopback.

    Stands in for kube-proxy for that one Service, so in-cluster clients connect as
    they would anywhere: KUBERNETES_SERVICE_HOST:443, verified against the cluster CA.
    """

    def __init__(self, listen: tuple[str, int], target: tuple[str, int]) -> None:
        self._target = target
        self._server = socket.create_server(listen)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="svc-forwarder", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        self._server.settimeout(0.2)
        while not self._stopped.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._pipe_both, args=(conn,), daemon=True).start()

    def _pipe_both(self, conn: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self._target, timeout=5)
        except OSError:
            conn.close()
            return
        upstream.settimeout(None)
        threading.Thread(target=_pipe, args=(upstream, conn), daemon=True).start()
        _pipe(conn, upstream)

    def stop(self) -> None:
        self._stopped.set()
        self._server.close()
        self._thread.join(timeout=5)


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            dst.sendall(data)
    for sock in (src, dst):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()


def _ip(*args: str, check: bool = True) -> None:
    subprocess.run(["ip", *args], check=check, capture_output=True)


def _mounts_under(prefixes: Sequence[Path]) -> list[str]:
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if any(point == str(p) or point.startswith(f"{p}/") for p in prefixes):
            found.append(point)
    return sorted(found, key=len, reverse=True)


def _rmdir_tree(path: Path) -> None:
    """Remove a cgroup directory tree bottom-up (cgroupfs allows rmdir only)."""
    if not path.is_dir():
        return
    for child in sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        with contextlib.suppress(OSError):
            child.rmdir()
    with contextlib.suppress(OSError):
        path.rmdir()


def _kill_processes_mentioning(needle: bytes) -> None:
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(proc.name), 9)


def _kill_cgroup_tree(path: Path) -> None:
    for procs in path.rglob("cgroup.procs"):
        with contextlib.suppress(OSError):
            for pid in procs.read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), 9)


def _delete_pod_netns(bridge: str) -> None:
    """Delete the network namespaces whose veths hang off bridge (and so the veths)."""
    links = subprocess.run(
        ["ip", "-o", "-d", "link", "show", "master", bridge],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    ids = {
        line.split("link-netnsid ")[1].split()[0]
        for line in links.splitlines()
        if "link-netnsid " in line
    }
    listing = subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True, check=False
    ).stdout
    for line in listing.splitlines():
        name, _, rest = line.partition(" ")
        if rest.startswith("(id: ") and rest[5:].rstrip(")") in ids:
            _ip("netns", "delete", name, check=False)


def _restore_host(sysctls: dict[str, str], preexisting: set[Path]) -> None:
    """Put back the kernel settings and remove the host paths a node created."""
    for key, value in sysctls.items():
        with contextlib.suppress(OSError):
            (Path("/proc/sys") / key).write_text(value)
    for path in _HOST_PATHS:
        if path in preexisting or not (path.exists() or path.is_symlink()):
            continue
        for point in _mounts_under([path]):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _remove_stale_nodes() -> None:
    """Remove what the RealNodes of SIGKILLed processes left behind.

    Their shims and containers, mounts, work dirs, cgroups and bridges all carry the
    creating process's pid in their names; only those of dead processes are touched.
    """

    def dead(pid: str) -> bool:
        return pid.isdigit() and not _alive(int(pid))

    for link in Path("/sys/class/net").glob("pdm*"):
        if dead(link.name[3:]):
            _delete_pod_netns(link.name)
    for workdir in Path(tempfile.gettempdir()).glob("podium-node-*-*"):
        if dead(workdir.name.split("-")[2]):
            _kill_processes_mentioning(f"{workdir}/".encode())
            for point in _mounts_under([workdir]):
                subprocess.run(["umount", "-l", point], capture_output=True, check=False)
            with contextlib.suppress(OSError, ValueError):
                state = json.loads((workdir / _HOST_STATE).read_text())
                _restore_host(state["sysctls"], {Path(p) for p in state["preexisting"]})
            shutil.rmtree(workdir, ignore_errors=True)
    for hierarchy in _CGROUP_FS.iterdir():
        for group in hierarchy.glob("podium-node-*"):
            if dead(group.name.rsplit("-", 1)[1]):
                _kill_cgroup_tree(group)
                time.sleep(0.1)
                _rmdir_tree(group)
    for link in Path("/sys/class/net").glob("pdm*"):
        if dead(link.name[3:]):
            _ip("link", "del", link.name, check=False)


class RealNode(Service):
    """One kubelet node (Ready, runs pods) plus kube-controller-manager, beside kwok nodes.

    images are OCI image-layout tars imported into containerd before the kubelet
    starts; pods use them with imagePullPolicy: Never. The node is labelled
    podium.dev/real-node=true so tests can place pods on it.
    """

    SUBNET_PREFIX = "10.89.0"

    def __init__(
        self,
        control_plane: ControlPlane,
        *,
        name: str = "podium-real-node",
        images: Sequence[Path] = (),
        startup_timeout: float = 120.0,
    ) -> None:
        if not control_plane.real_nodes:
            raise ComponentError("RealNode needs ControlPlane(real_nodes=True)")
        self.control_plane = control_plane
        self.name = name
        self.images = list(images)
        self.startup_timeout = startup_timeout
        self.address = f"{self.SUBNET_PREFIX}.1"
        self.bridge = f"pdm{os.getpid()}"
        self.cgroup_root = f"/podium-node-{os.getpid()}"
        self.kubelet_port, self.kubelet_healthz_port, self.kcm_port = free_ports(3)
        self.workdir = Path(tempfile.mkdtemp(prefix=f"podium-node-{os.getpid()}-"))
        self.socket = self.workdir / "containerd" / "containerd.sock"
        self.logs = control_plane.workdir / "logs"
        self.tools: NodeTools | None = None
        self._procs: dict[str, ManagedProcess] = {}
        self._forwarder: _Forwarder | None = None
        self._sysctls: dict[str, str] = {}
        self._sysctls_before: dict[str, str] = {}
        self._preexisting: set[Path] = set()
        self._netns_before: set[str] = set()
        self._bridge_made = False

    # -- start ----------------------------------------------------------------------------

    def _start_steps(self) -> Iterator[Callable[[], None]]:
        reason = unsupported_reason()
        if reason is not None:
            raise ComponentError(reason)
        self.tools = node_tools()
        assert self.tools is not None
        # A killed test run must not leave the bridge, mounts or cgroups behind.
        register_cleanup(self.stop)
        _remove_stale_nodes()
        self._remember_host()
        self._make_network()
        self._make_cgroups()
        self._write_containerd_config()
        self._spawn("containerd", self._containerd_argv(), env=self._tool_env())
        yield self._wait_containerd
        yield self._import_images
        self._spawn("kube-controller-manager", self._kcm_argv())
        self._spawn("kubelet", self._kubelet_argv(), env=self._tool_env())
        yield self._wait_kcm
        yield self._wait_node_ready

    def _tool_env(self) -> dict[str, str]:
        assert self.tools is not None
        env = dict(os.environ)
        env["PATH"] = f"{self.tools.bin_path}:{env.get('PATH', '/usr/bin:/bin')}"
        return env

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        proc = ManagedProcess(name, argv, self.logs / f"{name}.log", env=env)
        self._procs[name] = proc
        proc.spawn()

    def _remember_host(self) -> None:
        self._preexisting = {p for p in _HOST_PATHS if p.exists() or p.is_symlink()}
        self._netns_before = set(os.listdir(_NETNS_DIR)) if _NETNS_DIR.is_dir() else set()
        for key in _SYSCTLS:
            self._sysctls[key] = (Path("/proc/sys") / key).read_text().strip()
        self._sysctls_before = dict(self._sysctls)
        # Read back by _remove_stale_nodes() should this process die by SIGKILL.
        state = {"sysctls": self._sysctls, "preexisting": sorted(map(str, self._preexisting))}
        (self.workdir / _HOST_STATE).write_text(json.dumps(state))

    def _make_network(self) -> None:
        """A bridge holding the node address and the `kubernetes` Service address.

        Pods get a route to the Service range through the bridge and no default route;
        ip_forward stays as it is, so nothing from a pod leaves the machine.
        """
        _ip("link", "add", self.bridge, "type", "bridge")
        self._bridge_made = True
        _ip("addr", "add", f"{self.address}/24", "dev", self.bridge)
        _ip("addr", "add", f"{KUBERNETES_SERVICE_IP}/32", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        self._forwarder = _Forwarder(
            (KUBERNETES_SERVICE_IP, 443), ("127.0.0.1", self.control_plane.api_port)
        )
        net_d = self.workdir / "cni" / "net.d"
        net_d.mkdir(parents=True)
        conf = {
            "cniVersion": "0.4.0",
            "name": "podium-node",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.bridge,
                    "isGateway": False,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "dataDir": str(self.workdir / "cni" / "ipam"),
                        "ranges": [
                            [
                                {
                                    "subnet": f"{self.SUBNET_PREFIX}.0/24",
                                    "rangeStart": f"{self.SUBNET_PREFIX}.10",
                                    "gateway": self.address,
                                }
                            ]
                        ],
                        "routes": [{"dst": SERVICE_CIDR, "gw": self.address}],
                    },
                },
                {"type": "loopback"},
            ],
        }
        (net_d / "10-podium.conflist").write_text(json.dumps(conf, indent=2))

    def _cgroup_dirs(self) -> list[Path]:
        return [
            h / self.cgroup_root.lstrip("/")
            for h in sorted(_CGROUP_FS.iterdir())
            if h.is_dir() and not h.is_symlink()
        ]

    def _make_cgroups(self) -> None:
        for path in self._cgroup_dirs():
            path.mkdir(exist_ok=True)
            if path.parent.name == "cpuset":
                for knob in ("cpuset.cpus", "cpuset.mems"):
                    (path / knob).write_text((path.parent / knob).read_text())

    def _write_containerd_config(self) -> None:
        assert self.tools is not None
        base = self.workdir / "containerd"
        base.mkdir(parents=True, exist_ok=True)
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        config = f"""version = 2
root = "{base / "root"}"
state = "{base / "state"}"
disabled_plugins = ["io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "{self.socket}"

[ttrpc]
  address = "{base / "containerd.sock.ttrpc"}"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{base / "opt"}"

[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  enable_selinux = false
  disable_apparmor = true
  enable_cdi = false

[{cri}.cni]
  bin_dir = "{self.tools.cni_bin}"
  conf_dir = "{self.workdir / "cni" / "net.d"}"

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  BinaryName = "{self.tools.runc}"
  SystemdCgroup = false
"""
        (base / "config.toml").write_text(config)

    def _containerd_argv(self) -> list[str]:
        assert self.tools is not None
        return [
            str(self.tools.containerd),
            f"--config={self.workdir / 'containerd' / 'config.toml'}",
            "--log-level=info",
        ]

    def ctr(self, *args: str, timeout: float = 120.0) -> str:
        """Run `ctr -n k8s.io` against this node's containerd; raise with its output on failure."""
        assert self.tools is not None
        proc = subprocess.run(
            [str(self.tools.ctr), f"--address={self.socket}", "-n", "k8s.io", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if proc.returncode != 0:
            raise ComponentError(f"ctr {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    def _wait_containerd(self) -> None:
        def ready() -> bool:
            try:
                self.ctr("version", timeout=5)
            except (ComponentError, subprocess.TimeoutExpired):
                return False
            return True

        self._procs["containerd"].wait_ready(ready, 30.0, "serving on its socket")

    def _import_images(self) -> None:
        pause = self.control_plane.binaries.pause
        tar = self.workdir / "pause.oci.tar"
        write_image_layout(
            tar,
            ImageLayout(
                name=PAUSE_IMAGE,
                layers=[file_layer({"pause": pause})],
                entrypoint=["/pause"],
                user="65535:65535",
            ),
        )
        for image in [tar, *self.images]:
            self.ctr("images", "import", "--no-unpack=false", str(image), timeout=600)

    def _kubeconfig(self) -> Path:
        return self.control_plane.kubeconfig

    def _kcm_argv(self) -> list[str]:
        pki = self.control_plane.workdir / "pki"
        controllers = (
            "serviceaccount-token-controller",
            "serviceaccount-controller",
            "root-ca-certificate-publisher-controller",
            "deployment-controller",
            "replicaset-controller",
            "garbage-collector-controller",
            "disruption-controller",
            "namespace-controller",
        )
        return [
            str(self.control_plane.binaries.kube_controller_manager),
            f"--kubeconfig={self._kubeconfig()}",
            f"--authentication-kubeconfig={self._kubeconfig()}",
            f"--authorization-kubeconfig={self._kubeconfig()}",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez",
            f"--controllers={','.join(controllers)}",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--root-ca-file={pki / 'ca.crt'}",
            "--use-service-account-credentials=false",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.kcm_port}",
            f"--cert-dir={self.workdir / 'kcm-certs'}",
            "--concurrent-gc-syncs=5",
            "--v=1",
        ]

    def _kubelet_config(self) -> dict[str, object]:
        endpoint = f"unix://{self.socket}"
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup_root,
            "failSwapOn": False,
            "containerRuntimeEndpoint": endpoint,
            "imageServiceEndpoint": endpoint,
            "address": self.address,
            "port": self.kubelet_port,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": self.kubelet_healthz_port,
            # The API server has no kubelet client certificate (logs/exec come anonymous).
            "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"},
            "evictionHard": {
                "memory.available": "1Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
                "nodefs.inodesFree": "1%",
            },
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            # No resolv.conf: pods get no nameserver, so no DNS query leaves the machine.
            "resolvConf": "",
            "podLogsDir": str(self.workdir / "pod-logs"),
            "volumePluginDir": str(self.workdir / "volume-plugins"),
            "maxPods": 30,
            "registerWithTaints": [],
            "shutdownGracePeriod": "0s",
        }

    def _kubelet_argv(self) -> list[str]:
        config = self.workdir / "kubelet.yaml"
        config.write_text(yaml.safe_dump(self._kubelet_config(), sort_keys=False))
        return [
            str(self.control_plane.binaries.kubelet),
            f"--config={config}",
            f"--kubeconfig={self._kubeconfig()}",
            f"--root-dir={self.workdir / 'kubelet'}",
            f"--cert-dir={self.workdir / 'kubelet-pki'}",
            f"--hostname-override={self.name}",
            f"--node-ip={self.address}",
            "--node-labels=podium.dev/real-node=true",
            "--v=1",
        ]

    def _wait_kcm(self) -> None:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        url = f"https://127.0.0.1:{self.kcm_port}/healthz"
        self._procs["kube-controller-manager"].wait_ready(
            lambda: http_get(url, None, ctx)[0] == 200, self.startup_timeout, "healthy"
        )

    def _wait_node_ready(self) -> None:
        def ready() -> bool:
            code, body = self.control_plane.request(f"/api/v1/nodes/{self.name}")
            if code != 200:
                return False
            conditions = json.loads(body).get("status", {}).get("conditions", [])
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

        self._procs["kubelet"].wait_ready(ready, self.startup_timeout, "Ready (node condition)")

    # -- stop -----------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop everything and leave the host as it was; safe to call more than once."""
        unregister_cleanup(self.stop)
        kubelet = self._procs.pop("kubelet", None)
        if kubelet is not None:
            kubelet.stop()
        if "containerd" in self._procs:
            self._remove_containers()
        for name in ("containerd", "kube-controller-manager"):
            proc = self._procs.pop(name, None)
            if proc is not None:
                proc.stop()
        self._kill_shims()
        if self._forwarder is not None:
            self._forwarder.stop()
            self._forwarder = None
        self._unmount()
        for path in self._cgroup_dirs():
            _rmdir_tree(path)
        if self._bridge_made:
            self._remove_network()
        if self._sysctls:
            _restore_host(self._sysctls, self._preexisting)
        self._sysctls = {}
        # The containers' logs outlive the node, beside the other components' logs.
        with contextlib.suppress(OSError):
            shutil.copytree(self.workdir / "pod-logs", self.logs / "pods", dirs_exist_ok=True)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _remove_containers(self) -> None:
        """Kill and delete every task and container; the sandboxes' network goes with them."""
        with contextlib.suppress(ComponentError, subprocess.TimeoutExpired):
            for line in self.ctr("tasks", "ls", timeout=30).splitlines()[1:]:
                task = line.split()[0]
                with contextlib.suppress(ComponentError, subprocess.TimeoutExpired):
                    self.ctr("tasks", "kill", "-s", "SIGKILL", task, timeout=30)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                lines = self.ctr("tasks", "ls", timeout=30).splitlines()[1:]
                if all("STOPPED" in line for line in lines):
                    break
                time.sleep(0.2)
            for line in self.ctr("tasks", "ls", timeout=30).splitlines()[1:]:
                with contextlib.suppress(ComponentError, subprocess.TimeoutExpired):
                    self.ctr("tasks", "delete", "-f", line.split()[0], timeout=30)
            for container in self.ctr("containers", "ls", "-q", timeout=30).split():
                with contextlib.suppress(ComponentError, subprocess.TimeoutExpired):
                    self.ctr("containers", "delete", container, timeout=30)

    def _kill_shims(self) -> None:
        """SIGKILL any containerd shim (and so its container) still serving this node."""
        _kill_processes_mentioning(str(self.socket).encode())
        # Container processes live in the node's cgroups; kill what is left there.
        for path in self._cgroup_dirs():
            _kill_cgroup_tree(path)
        time.sleep(0.2)

    def _unmount(self) -> None:
        created_netns = []
        if _NETNS_DIR.is_dir():
            created_netns = [
                _NETNS_DIR / n for n in os.listdir(_NETNS_DIR) if n not in self._netns_before
            ]
        for point in _mounts_under([self.workdir, *created_netns]):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)
        for netns in created_netns:
            with contextlib.suppress(OSError):
                netns.unlink()

    def _remove_network(self) -> None:
        listing = subprocess.run(
            ["ip", "-o", "link", "show", "master", self.bridge],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        for line in listing.splitlines():
            veth = line.split(":")[1].strip().split("@")[0]
            _ip("link", "del", veth, check=False)
        _ip("link", "del", self.bridge, check=False)
        self._bridge_made = False

    def leftovers(self) -> list[str]:
        """What of this node is still on the host (empty after a clean stop()), for tests."""
        found = [f"mount {m}" for m in _mounts_under([self.workdir])]
        found += [f"cgroup {p}" for p in self._cgroup_dirs() if p.exists()]
        if Path(f"/sys/class/net/{self.bridge}").exists():
            found.append(f"bridge {self.bridge}")
        needle = str(self.socket).encode()
        for proc in Path("/proc").iterdir():
            with contextlib.suppress(OSError):
                if proc.name.isdigit() and needle in (proc / "cmdline").read_bytes():
                    found.append(f"process {proc.name}")
        found += [
            f"host path {p}"
            for p in _HOST_PATHS
            if p not in self._preexisting and (p.exists() or p.is_symlink())
        ]
        if self.workdir.exists():
            found.append(f"workdir {self.workdir}")
        for key, value in self._sysctls_before.items():
            now = (Path("/proc/sys") / key).read_text().strip()
            if now != value:
                found.append(f"sysctl {key}={now} (was {value})")
        return found
