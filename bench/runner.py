"""One benchmark run per (case, workload, scheduler), each on fresh state.

The shape of a run follows scheduler_perf: create the nodes, create the init pods
and wait until they are bound, then create the measured pods (with churn, if the
case has it) and measure until they are bound. Differences, and why:

* Each scheduler gets its own namespace and its own nodes, and everything the
  previous run created is deleted (grace 0) first. Nodes are cluster-scoped, so
  otherwise the second scheduler would schedule onto the first one's full nodes.
* The scheduler starts after its nodes exist and is ready (informers synced)
  before the first pod, so neither scheduler is measured while still ingesting
  thousands of node events.
* Only one scheduler runs at a time: on two cores a second one idling in the
  background would still take CPU from the one being measured.
* With --repeat N each workload runs N times, the schedulers alternating
  (kube-scheduler, Podium, kube-scheduler, Podium, ...), so that a slow spell of
  the machine falls on both rather than on all of one scheduler's runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import itertools
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import aiohttp
import yaml

from podium.devcluster import WORKLOAD_GATES, WORKLOAD_RUNTIME_CONFIG, ControlPlane
from podium.devcluster.dra import claim_from_template, template_refs

from . import report
from .api import Api, ApiFailure, request_key
from .apimetrics import attribute, scrape
from .cases import (
    BENCH_LABEL,
    DEFAULT_PRESET,
    ROLE_LABEL,
    RUN_LABEL,
    Case,
    Workload,
    load_cases,
    select,
    with_claim_template,
)
from .measure import (
    PodTracker,
    ProcessSample,
    Sampler,
    SchedulerExited,
    busy_cpu_seconds,
    find_pid,
    percentile,
    read_process,
    scheduler_perf_average,
)
from .progress import Progress
from .results import BenchResults
from .run_result import RunResult
from .schedulers import (
    KUBE,
    PODIUM,
    SCHEDULERS,
    BenchScheduler,
    KubeSchedulerUnderTest,
    PodiumUnderTest,
    PySpy,
    profile_top,
)
from .validate import check_placements

__all__ = ["BenchConfig", "run_bench"]

_SELECTOR = f"{BENCH_LABEL}=true"
_ROLES = ("init", "measure", "churn")
_CREATE_CONCURRENCY = 32
_UNSCHEDULABLE_GRACE = 30.0
"""Seconds a scheduler gets, after the measured pods, to mark the last never-fitting pods."""
_RESOURCE = "/apis/resource.k8s.io/v1"
_SCHEDULING = "/apis/scheduling.k8s.io/v1beta1"
_CLAIM_TEMPLATE = "bench-claim-template"
_GROUP_RESOURCE = "resource.k8s.io"
_GROUP_SCHEDULING = "scheduling.k8s.io"
# The profile of scheduler_perf's batching benchmarks (batching/scheduler-config-no-topology
# .yaml): without default spreading constraints a pod can be signed.
_BATCH_SPREAD = {"defaultingType": "List", "defaultConstraints": []}
_POLICY_CRD = Path(__file__).parents[1] / "charts/podium/crds/schedulerpolicies.podium.dev.yaml"
_CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
_POLICIES = "/apis/podium.dev/v1alpha1/schedulerpolicies"
_BATCH_POLICY = "bench-podium-batching"


@dataclass(slots=True)
class BenchConfig:
    """What to run. cases holds `Case` or `Case/Workload` names; empty means every case.

    A bare `Case`, or no name, means the workloads in preset (see cases.select).
    """

    cases: Sequence[str] = ()
    preset: str = DEFAULT_PRESET
    """Which workloads a bare case name (or no name) means: default or upstream."""
    scale: float = 1.0
    repeat: int = 1
    """Runs of each workload per scheduler, alternating the schedulers."""
    out: Path = Path("out/bench")
    schedulers: Sequence[str] = SCHEDULERS
    timeout: float = 600.0
    """Seconds per phase (nodes, init pods, measured pods) before the run gives up."""
    profile: bool = False
    """Record a py-spy profile of Podium over each measured phase."""
    podium_args: Sequence[str] = ()
    progress: TextIO | None = field(default_factory=lambda: sys.stderr)
    """Live status lines; None for silence."""
    report: TextIO | None = field(default_factory=lambda: sys.stdout)
    """Where the result tables are printed; None for silence."""


class _Bench:
    def __init__(
        self, config: BenchConfig, control_plane: ControlPlane, api: Api, progress: Progress
    ) -> None:
        self.config = config
        self.plane = control_plane
        self.api = api
        self.progress = progress
        self.logs = config.out / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)

    # -- cluster state -----------------------------------------------------------------

    async def cleanup(self) -> None:
        """Delete every pod, Service and node any benchmark run created, and wait until gone."""
        api = self.api
        namespaces = await api.list(
            "/api/v1/namespaces", "namespaces", {"labelSelector": _SELECTOR}
        )
        services = await api.list("/api/v1/services", "services", {"labelSelector": _SELECTOR})
        # The apiserver deletes a collection one object at a time, so the collections
        # (pods per namespace and role, nodes) are deleted side by side.
        async with asyncio.TaskGroup() as group:
            for ns in namespaces["items"]:
                for role in _ROLES:
                    group.create_task(
                        api.delete_collection(
                            f"/api/v1/namespaces/{ns['metadata']['name']}/pods",
                            "pods",
                            f"{_SELECTOR},{ROLE_LABEL}={role}",
                        )
                    )
            group.create_task(api.delete_collection("/api/v1/nodes", "nodes", _SELECTOR))
            for svc in services["items"]:
                meta = svc["metadata"]
                group.create_task(
                    api.delete(
                        f"/api/v1/namespaces/{meta['namespace']}/services/{meta['name']}",
                        "services",
                    )
                )
        for ns in namespaces["items"]:
            if not ns["metadata"].get("deletionTimestamp"):
                await api.delete(
                    f"/api/v1/namespaces/{ns['metadata']['name']}", "namespaces", False
                )
        await self.cleanup_dra_and_gangs([ns["metadata"]["name"] for ns in namespaces["items"]])
        deadline = time.monotonic() + self.config.timeout
        for path, resource_name in (("/api/v1/pods", "pods"), ("/api/v1/nodes", "nodes")):
            while (await api.list(path, resource_name, {"labelSelector": _SELECTOR, "limit": "1"}))[
                "items"
            ]:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"benchmark {resource_name} were not deleted in time")
                await asyncio.sleep(0.5)

    async def cleanup_dra_and_gangs(self, namespaces: Sequence[str]) -> None:
        """Delete the DRA objects and PodGroups of earlier runs; no controller would.

        Claims lose their finalizer first (the resourceclaim controller's job). A kind the
        API server does not serve (PodGroups without the Workload API) has nothing to delete.
        """
        api = self.api
        for ns in namespaces:
            claims_path = f"{_RESOURCE}/namespaces/{ns}/resourceclaims"
            claims = await api.list(claims_path, f"{_GROUP_RESOURCE}/resourceclaims")
            for claim in claims["items"]:
                if claim["metadata"].get("finalizers"):
                    await api.patch(
                        f"{claims_path}/{claim['metadata']['name']}",
                        f"{_GROUP_RESOURCE}/resourceclaims",
                        {"metadata": {"finalizers": None}},
                    )
            for path, resource_name in (
                (claims_path, f"{_GROUP_RESOURCE}/resourceclaims"),
                (f"{_RESOURCE}/namespaces/{ns}/resourceclaimtemplates",
                 f"{_GROUP_RESOURCE}/resourceclaimtemplates"),
                (f"{_SCHEDULING}/namespaces/{ns}/podgroups", f"{_GROUP_SCHEDULING}/podgroups"),
            ):  # fmt: skip
                await api.delete_collection(path, resource_name, "", allow=(404,))
        for path, resource_name in (
            (f"{_RESOURCE}/resourceslices", f"{_GROUP_RESOURCE}/resourceslices"),
            (f"{_RESOURCE}/deviceclasses", f"{_GROUP_RESOURCE}/deviceclasses"),
        ):
            await api.delete_collection(path, resource_name, _SELECTOR)

    async def create_all(
        self,
        path: str,
        resource_name: str,
        bodies: Iterable[dict[str, Any]],
        before_each: Callable[[dict[str, Any]], None] | None = None,
        after_each: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
    ) -> None:
        """Create objects with a fixed number of requests in flight, as fast as the server goes.

        after_each gets each created object (as the API server returned it).
        """
        items = iter(bodies)

        async def worker() -> None:
            for body in items:
                if before_each is not None:
                    before_each(body)
                made = await self.api.create(path, resource_name, body)
                if after_each is not None:
                    await after_each(made)

        async with asyncio.TaskGroup() as group:  # one failure stops the other workers
            for _ in range(_CREATE_CONCURRENCY):
                group.create_task(worker())

    async def foreign_nodes(self) -> int:
        """Nodes the benchmark did not create; both schedulers would see them too."""
        nodes = await self.api.list("/api/v1/nodes", "nodes", {"labelSelector": f"!{BENCH_LABEL}"})
        return len(nodes["items"])

    # -- one run ---------------------------------------------------------------------

    def scheduler(self, label: str, title: str, case: Case, workload: Workload) -> BenchScheduler:
        batching = workload.batching is not None
        if label == KUBE:
            # The gate adds GangScheduling to kube-scheduler's profile: in gang cases only.
            gates = dict(WORKLOAD_GATES) if case.gang else {}
            if workload.batching is not None:
                gates["OpportunisticBatching"] = workload.batching
            return KubeSchedulerUnderTest(
                self.plane,
                feature_gates=gates or None,
                plugin_config=[{"name": "PodTopologySpread", "args": _BATCH_SPREAD}]
                if batching
                else (),
            )
        return PodiumUnderTest(
            self.plane,
            self.logs / f"{title}.podium.log",
            extra_args=self.config.podium_args,
            policy_name=_BATCH_POLICY if batching else None,
        )

    async def batching_policy(self, batching: bool) -> None:
        """Podium's side of the batching profile: the SchedulerPolicy CRD (once) and a
        policy with PodTopologySpread ``defaultingType: List`` and opportunistic batching
        on or off, as kube-scheduler's configuration and gate have it."""
        crd = yaml.safe_load(_POLICY_CRD.read_text())
        name = crd["metadata"]["name"]
        crds = "apiextensions.k8s.io/customresourcedefinitions"
        await self.api.call("POST", _CRDS, request_key("POST", crds), crd, allow=(409,))

        async def established() -> bool:
            got = await self.api.call("GET", f"{_CRDS}/{name}", request_key("GET", crds))
            return _condition(got, "Established")

        await _poll(established, 30, "the SchedulerPolicy CRD established")
        policies = "podium.dev/schedulerpolicies"
        await self.api.delete(f"{_POLICIES}/{_BATCH_POLICY}", policies)
        spec = {
            "schedulerName": _BATCH_POLICY,
            "pluginArgs": {"podTopologySpread": {"defaultingType": "List"}},
            "opportunisticBatching": batching,
        }
        body = {
            "apiVersion": "podium.dev/v1alpha1",
            "kind": "SchedulerPolicy",
            "metadata": {"name": _BATCH_POLICY},
            "spec": spec,
        }
        await self.api.create(_POLICIES, policies, body)

    async def batching_policy_accepted(self) -> None:
        """Wait until the started Podium has applied the batching policy."""
        key = request_key("GET", "podium.dev/schedulerpolicies")

        async def accepted() -> bool:
            got = await self.api.call("GET", f"{_POLICIES}/{_BATCH_POLICY}", key)
            return _condition(got, "Accepted")

        await _poll(accepted, 60, "Podium's batching SchedulerPolicy accepted")

    async def run(
        self, case: Case, workload: Workload, label: str, seq: int, repeat: int
    ) -> RunResult:
        short = "kube" if label == KUBE else "podium"
        run_id = f"r{seq}-{short}"
        slug = re.sub(r"[^a-z0-9]+", "-", case.name.lower()).strip("-")[:30]
        namespace = f"bench-{slug}-{run_id}"
        title = f"{case.name}/{workload.name} {label}"
        if self.config.repeat > 1:
            title += f" #{repeat}"
        sched = self.scheduler(label, namespace, case, workload)
        result = RunResult(
            case=case.name,
            workload=workload.name,
            scheduler=label,
            scheduler_name=sched.scheduler_name,
            nodes=workload.nodes,
            init_pods=workload.init_pods,
            measure_pods=workload.measure_pods,
            repeat=repeat,
            log=str(sched.log_path),
        )
        self.progress.run(title)
        self.progress.note(
            f"{self.progress.position()} {title}: {workload.nodes} nodes, "
            f"{workload.init_pods} init pods, {workload.measure_pods} measured pods"
        )
        try:
            await self._run(case, workload, sched, run_id, namespace, result)
        except* (TimeoutError, RuntimeError, aiohttp.ClientError) as group:
            result.status = f"error: {group.exceptions[0]}"
        finally:
            self.progress.done()
        self.progress.note(f"  {title}: {_outcome(result)}")
        return result

    async def _run(
        self,
        case: Case,
        workload: Workload,
        sched: BenchScheduler,
        run_id: str,
        namespace: str,
        result: RunResult,
    ) -> None:
        api, timeout = self.api, self.config.timeout
        self.progress.phase("cleanup")
        await self.cleanup()
        await api.create(
            "/api/v1/namespaces",
            "namespaces",
            {"metadata": {"name": namespace, "labels": {BENCH_LABEL: "true", RUN_LABEL: run_id}}},
        )
        created_nodes = [0]

        def count_node(_: dict[str, Any]) -> None:
            created_nodes[0] += 1

        self.progress.phase("create nodes", workload.nodes, lambda: created_nodes[0])
        async with self.progress.ticking(), asyncio.timeout(timeout):
            await self.create_all(
                "/api/v1/nodes",
                "nodes",
                (
                    case.node.manifest(
                        _node_name(run_id, i),
                        i,
                        run_id,
                        case.extended.node_capacity(i) if case.extended else None,
                    )
                    for i in range(workload.nodes)
                ),
                count_node,
            )
        await self._dra_and_gang_objects(case, workload, run_id, namespace)
        tracker = PodTracker()
        pods_path = f"/api/v1/namespaces/{namespace}/pods"

        async def relist() -> str:
            listing = await api.list(pods_path, "pods")
            for pod in listing["items"]:
                tracker.on_event("MODIFIED", pod)
            return str(listing["metadata"]["resourceVersion"])

        watch = asyncio.create_task(
            api.watch(pods_path, "pods", await relist(), tracker.on_event, relist)
        )
        profiler: PySpy | None = None
        try:
            if case.backlog:
                self.progress.phase(
                    "create backlog", workload.measure_pods, lambda: len(tracker.of_role("measure"))
                )
                async with self.progress.ticking(), asyncio.timeout(timeout):
                    await self._create_measured(case, workload, sched, run_id, namespace, tracker)
            else:
                self.progress.phase("start scheduler")
                policy = sched.label == PODIUM and workload.batching is not None
                if policy:
                    assert workload.batching is not None
                    await self.batching_policy(workload.batching)
                await sched.astart()
                if policy:
                    await self.batching_policy_accepted()
                await self._init_phase(case, workload, sched, run_id, namespace, tracker, result)
            if sched.label == PODIUM and self.config.profile and not case.backlog:
                profiler = PySpy(sched.pid, self.config.out / "profiles" / f"{namespace}.raw")
            churned = await self._measure_phase(
                case, workload, sched, run_id, namespace, tracker, result
            )
            if profiler is not None:
                profiler.stop()
                top = profiler.output.with_suffix(".txt")
                top.write_text(profile_top(profiler.output))
                result.profile = str(top)
                profiler = None
            await self._check_unschedulable(case, sched, tracker, churned, result)
            if workload.batching is not None:
                result.batch_attempts = batch_attempts(await asyncio.to_thread(sched.metrics_text))
            sample = read_process(sched.pid)
            result.cpu_seconds_total = sample.cpu_seconds
            result.peak_rss_mib = sample.peak_rss_bytes / 2**20
        finally:
            if profiler is not None:
                profiler.stop()
            await sched.astop()
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError, ApiFailure):
                await watch
        self.progress.phase("check placements")
        pods = await api.list(pods_path, "pods")
        nodes = await api.list("/api/v1/nodes", "nodes")
        claims: list[dict[str, Any]] = []
        classes: list[dict[str, Any]] = []
        groups: list[dict[str, Any]] = []
        if case.dra is not None:
            claims = (
                await api.list(
                    f"{_RESOURCE}/namespaces/{namespace}/resourceclaims",
                    f"{_GROUP_RESOURCE}/resourceclaims",
                )
            )["items"]
            classes = (
                await api.list(
                    f"{_RESOURCE}/deviceclasses",
                    f"{_GROUP_RESOURCE}/deviceclasses",
                    {"labelSelector": f"{RUN_LABEL}={run_id}"},
                )
            )["items"]
        if case.gang is not None:
            groups = (
                await api.list(
                    f"{_SCHEDULING}/namespaces/{namespace}/podgroups",
                    f"{_GROUP_SCHEDULING}/podgroups",
                )
            )["items"]
        check = await asyncio.to_thread(
            check_placements, pods["items"], nodes["items"], claims, groups, classes
        )
        result.correctness.violations = dict(check.violations)
        result.correctness.examples = check.examples
        result.correctness.quality = check.quality
        result.correctness.on_deleted_nodes = check.on_deleted_nodes

    async def _dra_and_gang_objects(
        self, case: Case, workload: Workload, run_id: str, namespace: str
    ) -> None:
        """The DeviceClasses, slices and claim template, and the PodGroups, before any pod.

        An extended-resource case gets its classes with extendedResourceName and no
        claim template: the scheduler writes each pod's claim itself.
        """
        if case.dra is not None:
            dra = case.dra
            class_name = f"{run_id}-class"
            await self.create_all(
                f"{_RESOURCE}/deviceclasses",
                f"{_GROUP_RESOURCE}/deviceclasses",
                case.extended.device_classes(dra.driver, run_id)
                if case.extended is not None
                else [dra.device_class(class_name, run_id)],
            )
            self.progress.phase("create resource slices")
            await self.create_all(
                f"{_RESOURCE}/resourceslices",
                f"{_GROUP_RESOURCE}/resourceslices",
                (dra.resource_slice(_node_name(run_id, i), run_id) for i in range(workload.nodes)),
            )
            if case.claim_template:
                await self.api.create(
                    f"{_RESOURCE}/namespaces/{namespace}/resourceclaimtemplates",
                    f"{_GROUP_RESOURCE}/resourceclaimtemplates",
                    dra.claim_template(_CLAIM_TEMPLATE, class_name, run_id),
                )
        if case.gang is not None:
            await self.create_all(
                f"{_SCHEDULING}/namespaces/{namespace}/podgroups",
                f"{_GROUP_SCHEDULING}/podgroups",
                case.gang.pod_groups(workload.measure_pods, run_id),
            )

    def _measured_pod(
        self, case: Case, index: int, sched: BenchScheduler, run_id: str
    ) -> dict[str, Any]:
        pod = case.measure.manifest(
            f"pod-{index:05d}",
            sched.scheduler_name,
            run_id,
            "measure",
            {case.extended.resource(index): 1} if case.extended else None,
        )
        if case.claim_template:
            with_claim_template(pod, _CLAIM_TEMPLATE)
        if case.gang is not None:
            pod["spec"]["schedulingGroup"] = {"podGroupName": case.gang.group_of(index)}
        return pod

    async def _create_measured(
        self,
        case: Case,
        workload: Workload,
        sched: BenchScheduler,
        run_id: str,
        namespace: str,
        tracker: PodTracker,
    ) -> None:
        """The measured pods, each with its claims where the case has a claim template."""
        after_each: Callable[[dict[str, Any]], Awaitable[None]] | None = None
        if case.claim_template:
            claim_template = await self.api.call(
                "GET",
                f"{_RESOURCE}/namespaces/{namespace}/resourceclaimtemplates/{_CLAIM_TEMPLATE}",
                request_key("GET", "resourceclaimtemplates", group=_GROUP_RESOURCE),
            )

            async def after_each(pod: dict[str, Any]) -> None:
                await self._make_claims(pod, claim_template)

        await self.create_all(
            f"/api/v1/namespaces/{namespace}/pods",
            "pods",
            (self._measured_pod(case, i, sched, run_id) for i in range(workload.measure_pods)),
            lambda body: tracker.creating(body["metadata"]["name"], "measure"),
            after_each,
        )

    async def _make_claims(self, pod: dict[str, Any], template: dict[str, Any]) -> None:
        """The resourceclaim controller's work for one created pod (there is none here)."""
        meta = pod["metadata"]
        namespace = meta["namespace"]
        statuses = []
        for claim_name, _ in template_refs(pod):
            claim = claim_from_template(pod, claim_name, template)
            made = await self.api.create(
                f"{_RESOURCE}/namespaces/{namespace}/resourceclaims",
                f"{_GROUP_RESOURCE}/resourceclaims",
                claim,
            )
            statuses.append({"name": claim_name, "resourceClaimName": made["metadata"]["name"]})
        await self.api.patch(
            f"/api/v1/namespaces/{namespace}/pods/{meta['name']}",
            "pods",
            {"status": {"resourceClaimStatuses": statuses}},
            "status",
        )

    async def _wait_bound(
        self, tracker: PodTracker, role: str, target: int, sched: BenchScheduler, deadline: float
    ) -> bool:
        try:
            return await tracker.wait(lambda: tracker.bound[role] >= target, deadline, sched.alive)
        except SchedulerExited:
            raise SchedulerExited(f"{sched.label} exited; see {sched.log_path}") from None

    async def _init_phase(
        self,
        case: Case,
        workload: Workload,
        sched: BenchScheduler,
        run_id: str,
        namespace: str,
        tracker: PodTracker,
        result: RunResult,
    ) -> None:
        if not workload.init_pods:
            return
        template = case.init
        self.progress.phase("init pods", workload.init_pods, lambda: tracker.bound["init"])
        deadline = time.monotonic() + self.config.timeout
        async with self.progress.ticking():
            await self.create_all(
                f"/api/v1/namespaces/{namespace}/pods",
                "pods",
                (
                    template.manifest(f"init-{i:05d}", sched.scheduler_name, run_id, "init")
                    for i in range(workload.init_pods)
                ),
                lambda body: tracker.creating(body["metadata"]["name"], "init"),
            )
            bound = await self._wait_bound(tracker, "init", workload.init_pods, sched, deadline)
        result.correctness.init_unbound = workload.init_pods - tracker.bound["init"]
        if not bound:
            raise TimeoutError(
                f"{result.correctness.init_unbound} of {workload.init_pods} init pods "
                f"unbound after {self.config.timeout:.0f}s"
            )

    async def _measure_phase(
        self,
        case: Case,
        workload: Workload,
        sched: BenchScheduler,
        run_id: str,
        namespace: str,
        tracker: PodTracker,
        result: RunResult,
    ) -> dict[str, str]:
        """Returns the churn pods created, name -> template name."""
        api, plane = self.api, self.plane
        others = {
            "apiserver": find_pid(
                str(plane.binaries.kube_apiserver), f"--secure-port={plane.api_port}"
            ),
            "etcd": find_pid(str(plane.binaries.etcd)),
        }
        before_server = await scrape(plane)
        before_harness = dict(api.counts)
        # A backlog's scheduler starts inside the phase: all of its CPU counts.
        before = ProcessSample(0.0, 0) if case.backlog else read_process(sched.pid)
        before_others = {name: read_process(pid) for name, pid in others.items() if pid is not None}
        before_self = resource.getrusage(resource.RUSAGE_SELF)
        before_busy = busy_cpu_seconds()

        churned: dict[str, str] = {}
        target = workload.measure_pods
        sampler = Sampler(time.monotonic())
        deadline = sampler.started + self.config.timeout
        self.progress.phase(
            "drain backlog" if case.backlog else "measured pods",
            target,
            lambda: tracker.bound["measure"],
        )

        async def sample() -> None:
            while True:
                await asyncio.sleep(1.0)
                sampler.sample(tracker.bound["measure"])

        async def create() -> float:
            if case.backlog:
                await sched.astart()
            else:
                await self._create_measured(case, workload, sched, run_id, namespace, tracker)
            return time.monotonic()

        background = [asyncio.create_task(sample())]
        if case.churn is not None:
            background.append(
                asyncio.create_task(self._churn(case, sched, run_id, namespace, tracker, churned))
            )
        try:
            async with self.progress.ticking():
                creating = asyncio.create_task(create())
                if case.backlog:
                    await creating  # binds go on during the start; the tracker counts them
                complete = await self._wait_bound(tracker, "measure", target, sched, deadline)
                created_at = await creating
        finally:
            for task in background:
                task.cancel()
            for task in background:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

        after = read_process(sched.pid)
        after_others = {name: read_process(pid) for name, pid in others.items() if pid is not None}
        after_self = resource.getrusage(resource.RUSAGE_SELF)
        after_busy = busy_cpu_seconds()
        after_harness = dict(api.counts)
        after_server = await scrape(plane)

        measured = tracker.of_role("measure")
        bound_times = [s.bound_at for s in measured if s.bound_at is not None]
        end = max(bound_times) if complete and bound_times else time.monotonic()
        elapsed = end - sampler.started
        if complete:
            sampler.samples.append((elapsed, target))
        else:
            result.status = "timeout"
        result.bound = tracker.bound["measure"]
        result.correctness.measure_unbound = target - result.bound
        result.timeline = _timeline(sorted(t - sampler.started for t in bound_times))
        rates = scheduler_perf_average(sampler.samples)
        result.throughput_samples = [round(rate, 2) for rate in rates]
        result.throughput = sum(rates) / len(rates) if rates else None
        result.throughput_overall = result.bound / elapsed if elapsed > 0 else None
        if case.backlog:
            # Nothing is created while the clock runs: the drain rate is the throughput.
            result.throughput = result.throughput_overall
        else:
            result.create_rate = target / (created_at - sampler.started)
        result.measure_seconds = elapsed
        latencies = tracker.latencies("measure")
        result.latency_ms = {
            f"p{q}": None if (v := percentile(latencies, q)) is None else round(v * 1000, 1)
            for q in (50, 90, 99, 100)
        }
        result.cpu_seconds = after.cpu_seconds - before.cpu_seconds
        result.cpu_ms_per_pod = _ms_per_pod(result.cpu_seconds, result.bound)
        if "apiserver" in before_others:
            result.apiserver_cpu_seconds = (
                after_others["apiserver"].cpu_seconds - before_others["apiserver"].cpu_seconds
            )
            result.apiserver_cpu_ms_per_pod = _ms_per_pod(
                result.apiserver_cpu_seconds, result.bound
            )
        if "etcd" in before_others:
            result.etcd_cpu_seconds = (
                after_others["etcd"].cpu_seconds - before_others["etcd"].cpu_seconds
            )
            result.etcd_cpu_ms_per_pod = _ms_per_pod(result.etcd_cpu_seconds, result.bound)
        result.harness_cpu_seconds = (after_self.ru_utime + after_self.ru_stime) - (
            before_self.ru_utime + before_self.ru_stime
        )
        accounted = result.cpu_seconds + result.harness_cpu_seconds
        accounted += (result.apiserver_cpu_seconds or 0.0) + (result.etcd_cpu_seconds or 0.0)
        result.background_cpu_seconds = max(0.0, after_busy - before_busy - accounted)
        attribution = attribute(before_server, after_server, before_harness, after_harness)
        result.requests = attribution.scheduler
        result.requests_internal = attribution.internal
        result.requests_mismatch = attribution.mismatch
        result.requests_per_pod = attribution.total / result.bound if result.bound else None
        return churned

    async def _churn(
        self,
        case: Case,
        sched: BenchScheduler,
        run_id: str,
        namespace: str,
        tracker: PodTracker,
        churned: dict[str, str],
    ) -> None:
        """Create (and in recreate mode, first delete) the churn objects every interval."""
        churn = case.churn
        assert churn is not None
        api = self.api
        previous: list[tuple[str, str]] = []
        tick = 0
        next_at = time.monotonic()
        while True:
            if churn.mode == "recreate":
                for path, resource_name in previous:
                    await api.delete(path, resource_name)
                previous.clear()
            for i in range(churn.nodes):
                name = f"{run_id}-churn-{tick}-{i}"
                await api.create(
                    "/api/v1/nodes", "nodes", case.node.manifest(name, tick + i, run_id)
                )
                previous.append((f"/api/v1/nodes/{name}", "nodes"))
            for template_name in churn.pods:
                name = f"churn-{tick:05d}-{template_name}"
                body = case.templates[template_name].manifest(
                    name, sched.scheduler_name, run_id, "churn"
                )
                tracker.creating(name, "churn")
                await api.create(f"/api/v1/namespaces/{namespace}/pods", "pods", body)
                # Only once created: the measured phase's end cancels this task, maybe
                # inside the create, and a pod never created is never marked Unschedulable.
                churned[name] = template_name
                previous.append((f"/api/v1/namespaces/{namespace}/pods/{name}", "pods"))
            for i in range(churn.services):
                name = f"churn-{tick}-{i}"
                await api.create(
                    f"/api/v1/namespaces/{namespace}/services",
                    "services",
                    {
                        "metadata": {
                            "name": name,
                            "labels": {BENCH_LABEL: "true", RUN_LABEL: run_id},
                        },
                        "spec": {"selector": {"app": name}, "ports": [{"port": 80}]},
                    },
                )
                previous.append((f"/api/v1/namespaces/{namespace}/services/{name}", "services"))
            tick += 1
            next_at += churn.interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    async def _check_unschedulable(
        self,
        case: Case,
        sched: BenchScheduler,
        tracker: PodTracker,
        churned: dict[str, str],
        result: RunResult,
    ) -> None:
        """Never-fitting churn pods must stay unbound and say PodScheduled=False/Unschedulable."""
        expected = [
            tracker.pods[name]
            for name, template in churned.items()
            if case.templates[template].expect == "unschedulable" and name in tracker.pods
        ]
        fitting = [
            tracker.pods[name]
            for name, template in churned.items()
            if case.templates[template].expect == "bound" and name in tracker.pods
        ]
        if not expected and not fitting:
            return
        correctness = result.correctness

        def unreported() -> int:
            return sum(
                1
                for s in expected
                if not s.deleted
                and s.bound_at is None
                and s.condition != ("False", "Unschedulable")
            )

        self.progress.phase(
            "never-fitting pods marked", len(expected), lambda: len(expected) - unreported()
        )
        deadline = time.monotonic() + min(_UNSCHEDULABLE_GRACE, self.config.timeout)
        with contextlib.suppress(SchedulerExited):
            await tracker.wait(lambda: not unreported(), deadline, sched.alive)
        correctness.churn_wrongly_bound = sum(1 for s in expected if s.bound_at is not None)
        correctness.churn_not_reported = unreported()
        correctness.churn_unschedulable_checked = sum(1 for s in expected if not s.deleted)
        correctness.measure_unbound += sum(
            1 for s in fitting if s.bound_at is None and not s.deleted
        )


def _node_name(run_id: str, index: int) -> str:
    """The run's index-th node; its ResourceSlice (DRA cases) names it too."""
    return f"{run_id}-n{index:05d}"


def _ms_per_pod(cpu_seconds: float, bound: int) -> float | None:
    return 1000 * cpu_seconds / bound if bound else None


def _outcome(run: RunResult) -> str:
    """One line on a finished run, so a long benchmark's log shows the figures as they come."""
    if run.status.startswith("error"):
        return run.status
    figures = [
        f"{run.bound}/{run.measure_pods} bound",
        "-" if run.throughput is None else f"{run.throughput:.1f} pods/s",
        "-" if run.cpu_ms_per_pod is None else f"{run.cpu_ms_per_pod:.2f} CPU ms/pod",
        f"correctness {run.correctness.summary()}",
    ]
    if run.batch_attempts:
        attempts = " ".join(f"{k}={v}" for k, v in sorted(run.batch_attempts.items()))
        figures.append(f"batch attempts {attempts}")
    return f"{run.status}, " + ", ".join(figures)


def batch_attempts(metrics: str) -> dict[str, int]:
    """scheduler_batch_attempts_total summed by its result label (over profiles)."""
    totals: dict[str, int] = {}
    for line in metrics.splitlines():
        if not line.startswith("scheduler_batch_attempts_total{"):
            continue
        labels, _, value = line.rpartition(" ")
        found = re.search(r'result="([^"]*)"', labels)
        if found:
            totals[found.group(1)] = totals.get(found.group(1), 0) + int(float(value))
    return totals


def _timeline(offsets: Sequence[float], points: int = 400) -> list[tuple[float, int]]:
    """(seconds, bound so far) at every bind, thinned to about `points` for the plot."""
    step = max(1, len(offsets) // points)
    marks = [(round(offsets[i], 3), i + 1) for i in range(step - 1, len(offsets), step)]
    if offsets and marks[-1][1] != len(offsets):
        marks.append((round(offsets[-1], 3), len(offsets)))
    return marks


def _version(binary: Path) -> str:
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    except OSError:
        return "unknown"
    return (out.stdout or out.stderr).strip()


async def run_bench(config: BenchConfig, control_plane: ControlPlane | None = None) -> BenchResults:
    """Run the selected cases for each scheduler; write results.json and the plot under out.

    control_plane may be one already running (the test session's); otherwise a
    ControlPlane with perf=True is started for the benchmark and stopped after it. Gang
    cases need the Workload API, which adds watches and a pod field the other cases
    must not pay for, so they get their own control plane with its gate: consecutive
    cases of one kind share a plane, in the order selected.
    """
    if config.repeat < 1:
        raise ValueError(f"repeat must be at least 1, got {config.repeat}")
    chosen = select(load_cases(), list(config.cases), config.preset)
    results = BenchResults(
        meta={
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "preset": config.preset,
            "scale": config.scale,
            "repeat": config.repeat,
            "timeout_s": config.timeout,
            "schedulers": list(config.schedulers),
            "podium_version": importlib.metadata.version("podium"),
            "podium_args": list(config.podium_args),
            "python": platform.python_version(),
            "cpus": len(os.sched_getaffinity(0)),
            "apiserver_perf_flags": control_plane.perf if control_plane else True,
            "workload_api_cases": [case.name for case, _ in chosen if case.gang is not None],
            "foreign_nodes": 0,
        }
    )
    progress = Progress(config.progress)
    progress.plan(
        sum(len(workloads) for _, workloads in chosen) * config.repeat * len(config.schedulers)
    )
    seq = 0
    parts = itertools.groupby(chosen, key=lambda item: item[0].gang is not None)
    for index, (workload_api, part) in enumerate(parts):
        if control_plane is not None:
            seq = await _run_part(config, control_plane, list(part), results, progress, seq)
            continue
        # Its logs (apiserver, etcd, kube-scheduler) belong to this benchmark run only.
        workdir = (config.out / ("cluster" if index == 0 else f"cluster-{index + 1}")).resolve()
        shutil.rmtree(workdir, ignore_errors=True)
        plane = ControlPlane(
            workdir=workdir,
            perf=True,
            feature_gates=WORKLOAD_GATES if workload_api else None,
            runtime_config=WORKLOAD_RUNTIME_CONFIG if workload_api else None,
        )
        gates = " with the Workload API" if workload_api else ""
        progress.note(f"starting etcd and kube-apiserver (perf flags{gates}) ...")
        await plane.astart()
        try:
            seq = await _run_part(config, plane, list(part), results, progress, seq)
        finally:
            await plane.astop()
    results.meta["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    results.write(config.out / "results.json")
    sweep_cases = {case.name for case, _ in chosen if case.sweep}
    report.plot(results, config.out / "bound_over_time.png", sweep_cases)
    sweep = report.sweep_table(results, sweep_cases)
    if sweep:
        _emit(config.report, sweep)
    return results


async def _run_part(
    config: BenchConfig,
    plane: ControlPlane,
    chosen: Sequence[tuple[Case, Sequence[Workload]]],
    results: BenchResults,
    progress: Progress,
    seq: int,
) -> int:
    """Run chosen on one control plane; returns the last run's sequence number."""
    api = await Api.connect(str(plane.kubeconfig), _CREATE_CONCURRENCY)
    bench = _Bench(config, plane, api, progress)
    try:
        results.meta["kube_scheduler_version"] = _version(plane.binaries.kube_scheduler)
        foreign = await bench.foreign_nodes()
        results.meta["foreign_nodes"] = max(foreign, results.meta["foreign_nodes"])
        if foreign:
            bench.progress.note(
                f"warning: {foreign} node(s) not created by the benchmark exist; both "
                "schedulers will see them"
            )
        for case, workloads in chosen:
            for workload in workloads:
                scaled = workload.scaled(config.scale)
                for repeat in range(1, config.repeat + 1):
                    for label in config.schedulers:
                        seq += 1
                        results.runs.append(await bench.run(case, scaled, label, seq, repeat))
                        results.write(config.out / "results.json")
                group = [r for r in results.runs if r.key == f"{case.name}/{workload.name}"]
                _emit(config.report, report.table(group))
        await bench.cleanup()
    finally:
        await api.close()
    return seq


def _emit(stream: TextIO | None, text: str) -> None:
    if stream is not None:
        stream.write(text + "\n")
        stream.flush()


def _condition(obj: Any, kind: str) -> bool:
    """Whether ``obj``'s status has condition ``kind`` with status True."""
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


async def _poll(check: Callable[[], Awaitable[bool]], limit: float, what: str) -> None:
    """Wait until ``check()`` holds; after ``limit`` seconds, a RuntimeError naming ``what``."""
    deadline = time.monotonic() + limit
    while not await check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {limit:.0f}s waiting for {what}")
        await asyncio.sleep(0.2)
