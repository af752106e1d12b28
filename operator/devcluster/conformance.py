"""Kubernetes' own scheduling e2e suite (hack/e2e), run against a cluster whose only
scheduler is Podium, or kube-scheduler for the control run.

The suite reads API state only (docs/conformance.md), so KWOK nodes serve it. The
cluster provides what a real one would and the suite relies on: Priority admission,
the controllers of CONFORMANCE_CONTROLLERS, pods that finish deleting when their grace
period ends, allocatable that follows capacity, four nodes in two zones, and the
per-node system pods whose absence makes each preemption test wait a minute.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import yaml
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from .build import ensure_e2e_suite
from .cluster import WORKLOAD_GATES, WORKLOAD_RUNTIME_CONFIG, ControlPlane
from .controller_manager import (
    CONFORMANCE_CONTROLLERS,
    WORKLOAD_CONTROLLERS,
    KubeControllerManager,
)
from .kwok import KWOK_NODE_ANNOTATION, Kwok
from .objects import create_nodes
from .process import ManagedProcess, Service, die_with_parent, free_ports, http_get
from .scheduler import KubeScheduler

SCHEDULING_FOCUS = r"\[sig-scheduling\]"
DEFAULT_SKIP = r"\[Feature:|\[FeatureGate:GenericWorkload\]"
"""Upstream's default selection: no [Feature:...] test, no test of a beta gate that is off."""
FEATURE_FOCUS = r"\[sig-scheduling\].*\[Feature:"
"""The rest: the GenericWorkload specs and async preemption (a beta gate, on by default)."""
CONFORMANCE_FOCUS = r"\[sig-scheduling\].*\[Conformance\]"

SCHEDULERS = ("podium", "kube-scheduler")

NODES = 4
ZONES = ("zone-a", "zone-b")
_NODE_CAPACITY = {"cpu": "4", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"}
# One pod per node stands for the node daemons (kube-proxy, fluentd-elasticsearch,
# node-problem-detector) whose names the framework's WaitForTotalHealthy looks for.
_NODE_AGENT = "kube-proxy-fluentd-elasticsearch-node-problem-detector"
_NODE_AGENT_SCHEDULER = "node-agent-binder"

# Like a kubelet: a bound pod that is being deleted goes away when its grace period ends
# (its deletionTimestamp), and not before its finalizers are removed. KWOK's fast stage
# deletes at once; its general stage at a random time before the deadline. A pod deleted
# with grace 0 is left to the API server, which removes it itself: KWOK deletes by name, so
# doing it too could delete a new pod of the same name created meanwhile.
_POD_DELETE_STAGE: dict[str, Any] = {
    "apiVersion": "kwok.x-k8s.io/v1alpha1",
    "kind": "Stage",
    "metadata": {"name": "pod-delete"},
    "spec": {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": {
            "matchExpressions": [
                {"key": ".metadata.deletionTimestamp", "operator": "Exists"},
                {"key": ".metadata.finalizers", "operator": "DoesNotExist"},
                {
                    "key": ".metadata.deletionGracePeriodSeconds > 0",
                    "operator": "In",
                    "values": ["true"],
                },
            ]
        },
        "delay": {
            "durationMilliseconds": 0,
            "durationFrom": {"expressionFrom": ".metadata.deletionTimestamp"},
        },
        "next": {"delete": True},
    },
}

Log = Callable[[str], None]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _write_stages(default: Path, out: Path) -> Path:
    """KWOK's default stages with pod-delete replaced by _POD_DELETE_STAGE."""
    docs = [doc for doc in yaml.safe_load_all(default.read_text()) if doc]
    docs = [_POD_DELETE_STAGE if d["metadata"]["name"] == "pod-delete" else d for d in docs]
    out.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return out


def conformance_node(index: int) -> dict[str, Any]:
    """A KWOK node as a cloud node registers: hostname/os/arch/zone labels and addresses."""
    name = f"node-{index}"
    zone = ZONES[index % len(ZONES)]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_NODE_ANNOTATION: "fake"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/zone": zone,
            },
        },
        "status": {
            "capacity": dict(_NODE_CAPACITY),
            "allocatable": dict(_NODE_CAPACITY),
            "addresses": [
                {"type": "InternalIP", "address": f"10.1.0.{index + 10}"},
                {"type": "Hostname", "address": name},
            ],
        },
    }


def _node_agent(node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{_NODE_AGENT}-{node}", "namespace": "kube-system"},
        "spec": {
            "schedulerName": _NODE_AGENT_SCHEDULER,
            "priorityClassName": "system-node-critical",
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "agent",
                    "image": "registry.k8s.io/pause:3.10.2",
                    "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}},
                }
            ],
        },
    }


async def _start_node_agents(api: ApiClient, nodes: list[str]) -> None:
    """Create one agent pod per node and bind it there, as a DaemonSet would."""
    core = client.CoreV1Api(api)
    for node in nodes:
        pod = _node_agent(node)
        name = pod["metadata"]["name"]
        await core.create_namespaced_pod("kube-system", body=cast(Any, pod))
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        # The client cannot parse the Status a binding answers with; it is not needed.
        response: Any = await core.create_namespaced_pod_binding(
            name, "kube-system", body=cast(Any, binding), _preload_content=False
        )
        response.release()


async def _follow_capacity(api: ApiClient) -> None:
    """Keep every node's allocatable equal to its capacity, as a kubelet republishes it.

    A test that adds an extended resource writes status.capacity only (as a device
    plugin's kubelet would); KWOK does not copy it, so this does.
    """
    core = client.CoreV1Api(api)
    while True:
        nodes = await core.list_node()
        for node in nodes.items:
            await _sync_allocatable(core, node)
        with contextlib.suppress(ApiException):  # 410 Gone and the like: list again
            async with watch.Watch().stream(
                core.list_node, resource_version=nodes.metadata.resource_version
            ) as stream:
                async for event in stream:
                    if event["type"] in ("ADDED", "MODIFIED"):
                        await _sync_allocatable(core, event["object"])


async def _sync_allocatable(core: client.CoreV1Api, node: Any) -> None:
    capacity = node.status.capacity or {}
    allocatable = node.status.allocatable or {}
    missing = {key: value for key, value in capacity.items() if allocatable.get(key) != value}
    if missing:
        with contextlib.suppress(ApiException):  # deleted meanwhile
            body = {"status": {"allocatable": missing}}
            await core.patch_node_status(node.metadata.name, body=cast(Any, body))


class PodiumScheduler(Service):
    """`python -m podium run` as a subprocess, the cluster's default-scheduler."""

    def __init__(self, control_plane: ControlPlane, startup_timeout: float = 60.0) -> None:
        self.control_plane = control_plane
        self.startup_timeout = startup_timeout
        (self.port,) = free_ports(1)
        self.log_path = control_plane.workdir / "logs" / "podium.log"
        self._proc: ManagedProcess | None = None

    def _start_steps(self) -> Iterator[Callable[[], None]]:
        argv = [
            sys.executable, "-m", "podium", "run",
            "--kubeconfig", str(self.control_plane.kubeconfig),
            "--scheduler-name", "default-scheduler",
            "--metrics-host", "127.0.0.1",
            "--metrics-port", str(self.port),
        ]  # fmt: skip
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self._proc = ManagedProcess("podium", argv, self.log_path, env)
        self._proc.spawn()
        yield self._wait_ready

    def _wait_ready(self) -> None:
        assert self._proc is not None
        url = f"http://127.0.0.1:{self.port}/readyz"
        self._proc.wait_ready(
            lambda: http_get(url, None, None)[0] == 200, self.startup_timeout, "ready (/readyz)"
        )

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.stop()


@contextlib.asynccontextmanager
async def conformance_cluster(
    scheduler: str, *, workload: bool = False, workdir: Path | None = None, log: Log = _stderr
) -> AsyncIterator[ControlPlane]:
    """A running cluster for the suite, with `scheduler` ("podium" or "kube-scheduler") as
    its only default-scheduler; workload=True turns GenericWorkload on everywhere."""
    if scheduler not in SCHEDULERS:
        raise ValueError(f"scheduler must be one of {SCHEDULERS}, not {scheduler!r}")
    gates = dict(WORKLOAD_GATES) if workload else {}
    plane = ControlPlane(
        workdir=workdir,
        feature_gates=gates,
        runtime_config=WORKLOAD_RUNTIME_CONFIG if workload else None,
        admission=("ServiceAccount", "Priority"),
    )
    controllers = CONFORMANCE_CONTROLLERS + (WORKLOAD_CONTROLLERS if workload else ())
    started = time.monotonic()
    log(f"starting etcd and kube-apiserver (logs in {plane.workdir / 'logs'}) ...")
    async with plane:
        kcm = KubeControllerManager(plane, controllers, feature_gates=gates)
        stages = _write_stages(plane.binaries.kwok_stages, plane.workdir / "kwok-stages.yaml")
        kwok = Kwok(plane, stages=stages)
        sched: Service = (
            PodiumScheduler(plane)
            if scheduler == "podium"
            else KubeScheduler(plane, "default-scheduler", feature_gates=gates)
        )
        log("starting kube-controller-manager and KWOK ...")
        async with kcm, kwok:
            api = await plane.api_client()
            follower = asyncio.create_task(_follow_capacity(api))
            try:
                nodes = [conformance_node(i) for i in range(NODES)]
                await create_nodes(api, nodes)
                await _start_node_agents(api, [n["metadata"]["name"] for n in nodes])
                log(f"starting {scheduler} as default-scheduler ...")
                async with sched:
                    log(f"cluster ready in {time.monotonic() - started:.0f}s")
                    yield plane
            finally:
                follower.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await follower
                await api.close()


@dataclass(frozen=True)
class TestResult:
    name: str
    result: str
    """passed, failed or skipped."""
    seconds: float
    message: str


def parse_junit(path: Path) -> list[TestResult]:
    """The [sig-scheduling] specs in a JUnit report that the selection ran or skipped."""
    results = []
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name", "")
        if "[sig-scheduling]" not in name:
            continue
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        skipped = case.find("skipped")
        if failure is not None:
            result, message = "failed", failure.get("message", "")
        elif skipped is not None:
            message = skipped.get("message", "")
            if message == "skipped":
                continue  # not in this selection (a spec that skips itself says why)
            result = "skipped"
        else:
            result, message = "passed", ""
        name = re.sub(r"^\[It\]\s*", "", name)
        results.append(TestResult(name, result, float(case.get("time", "0")), message))
    return results


_SPEC_DONE = re.compile(r"\[(\d+\.\d+) seconds\]\s*$")
_WILL_RUN = re.compile(r"Will run (\d+) of \d+ specs")
_PROGRESS_EVERY_S = 30.0


async def run_suite(
    plane: ControlPlane,
    focus: str,
    report_dir: Path,
    *,
    skip: str | None = None,
    log: Log = _stderr,
) -> list[TestResult]:
    """Run e2e.test against plane with one selection; its JUnit report's results.

    The suite's output goes to report_dir/e2e.log; a line every 30 s says how far it got.
    """
    suite = await asyncio.to_thread(ensure_e2e_suite, log)
    await asyncio.to_thread(report_dir.mkdir, parents=True, exist_ok=True)
    argv = [
        str(suite),
        f"--kubeconfig={plane.kubeconfig}",
        "--provider=local",
        f"--ginkgo.focus={focus}",
        "--ginkgo.timeout=4h",
        "--ginkgo.no-color",
        "--ginkgo.v",
        "--allowed-not-ready-nodes=0",
        "--prepull-images=false",
        "--disable-log-dump",
        f"--report-dir={report_dir}",
    ]
    if skip:
        argv.append(f"--ginkgo.skip={skip}")
    started = time.monotonic()
    total, done = "?", 0

    async def tick() -> None:
        while True:
            await asyncio.sleep(_PROGRESS_EVERY_S)
            elapsed = time.monotonic() - started
            log(f"e2e: {done} of {total} specs done, {elapsed:.0f}s")

    with (report_dir / "e2e.log").open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=report_dir,
            preexec_fn=die_with_parent(os.getpid()),
        )
        assert proc.stdout is not None
        ticker = asyncio.create_task(tick())
        try:
            async for raw in proc.stdout:
                out.write(raw)
                line = raw.decode(errors="replace")
                if match := _WILL_RUN.search(line):
                    total = match[1]
                    log(f"e2e: running {total} specs (output: {report_dir / 'e2e.log'})")
                elif _SPEC_DONE.search(line):
                    done += 1
                    if "[FAILED]" in line:
                        log(f"e2e: spec {done} of {total} failed")
            await proc.wait()
        finally:
            ticker.cancel()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    junit = report_dir / "junit_01.xml"
    if not junit.exists():
        raise RuntimeError(f"e2e.test wrote no JUnit report; see {report_dir / 'e2e.log'}")
    log(f"e2e: finished in {time.monotonic() - started:.0f}s (exit {proc.returncode})")
    return parse_junit(junit)


def format_table(results: list[TestResult], width: int = 100) -> str:
    """Result, time and test name, the name wrapped to fit `width` columns."""
    name_width = width - 17
    lines = [f"{'result':<7} {'time':>7}  test", f"{'-' * 7} {'-' * 7}  {'-' * name_width}"]
    for res in results:
        wrapped = textwrap.wrap(res.name, name_width) or [""]
        lines.append(f"{res.result:<7} {res.seconds:>6.0f}s  {wrapped[0]}")
        lines += [f"{'':<16}  {rest}" for rest in wrapped[1:]]
    counts: Mapping[str, int] = {
        kind: sum(r.result == kind for r in results) for kind in ("passed", "failed", "skipped")
    }
    lines.append(", ".join(f"{n} {kind}" for kind, n in counts.items()) + f" of {len(results)}")
    return "\n".join(lines)


PHASES = ("default", "feature")


async def run_conformance(
    scheduler: str, report_dir: Path, log: Log = _stderr, phase: str = "all"
) -> list[TestResult]:
    """Every [sig-scheduling] spec: upstream's default selection on a cluster without
    GenericWorkload, then the rest (all tagged [Feature:...]) on a cluster with it;
    ``phase`` ("default", "feature" or "all") runs one of the two, or both.

    Each phase's report, suite output and cluster logs go to report_dir/<phase>/.
    """
    results: list[TestResult] = []
    for name, workload, focus, skip in (
        ("default", False, SCHEDULING_FOCUS, DEFAULT_SKIP),
        ("feature", True, FEATURE_FOCUS, None),
    ):
        if phase not in ("all", name):
            continue
        log(f"== {name} selection, {scheduler} ==")
        phase_dir = report_dir / name
        workdir = phase_dir / "cluster"
        await asyncio.to_thread(workdir.mkdir, parents=True, exist_ok=True)
        async with conformance_cluster(
            scheduler, workload=workload, workdir=workdir, log=log
        ) as plane:
            results += await run_suite(plane, focus, phase_dir, skip=skip, log=log)
    return results
