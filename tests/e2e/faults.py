"""Fault-injection helpers for the reliability tests (issue 7).

- ``check_invariants``: the end-of-test check every fault test runs.
- ``StallProxy``: a TCP proxy in front of kube-apiserver that can silently stop
  forwarding server→client bytes while keeping connections open.
- ``FaultyClient``: a ``KubeClient`` whose Binding POSTs fail on purpose.
- ``deny_admission``: a ValidatingAdmissionPolicy that makes chosen writes fail.
- small tools: fast bulk pod creation, Podium's RSS, a metric sample, etcd compaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio.client import ApiClient

from podium.devcluster import ControlPlane
from podium.kube.client import ApiError, KubeClient
from podium.kube.credentials import load_credentials
from podium.kube.objects import parse_node, parse_pod
from tests.e2e.test_scheduling import all_pods_and_nodes, overcommitted, pods_in

__all__ = [
    "BIND_FAULTS",
    "FaultyClient",
    "InvariantReport",
    "StallProxy",
    "bound_count",
    "check_invariants",
    "claim_problems",
    "create_fast",
    "deny_admission",
    "etcd_compact",
    "gang_problems",
    "metric",
    "proxied_kubeconfig",
    "rss_bytes",
    "scheduled_condition",
    "stranded_claim_pods",
    "successful_bindings",
    "wait_bound",
    "wait_until",
]

# -- the invariants ------------------------------------------------------------------------


def successful_bindings(plane: ControlPlane, namespace: str) -> Counter[str]:
    """pods/binding creates answered 201, per pod UID, from the apiserver audit log.

    The log holds the whole session, so lines are filtered as text before parsing.
    """
    counts: Counter[str] = Counter()
    assert plane.audit_log is not None, "the control plane must run with audit=True"
    if not plane.audit_log.exists():
        return counts
    with plane.audit_log.open() as handle:
        for line in handle:
            if '"subresource":"binding"' not in line or namespace not in line:
                continue
            event = json.loads(line)
            ref = event.get("objectRef") or {}
            if (
                event.get("stage") == "ResponseComplete"
                and event.get("verb") == "create"
                and ref.get("subresource") == "binding"
                and ref.get("namespace") == namespace
                and (event.get("responseStatus") or {}).get("code") == 201
            ):
                counts[str(ref.get("uid") or ref.get("name"))] += 1
    return counts


@dataclass
class InvariantReport:
    pods: int = 0
    bound: int = 0
    pending: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    double_bound: dict[str, int] = field(default_factory=dict)
    unaudited: list[str] = field(default_factory=list)
    on_missing_nodes: list[str] = field(default_factory=list)
    bad_conditions: list[str] = field(default_factory=list)
    overcommitted: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"pods={self.pods} bound={self.bound} pending={len(self.pending)} "
            f"lost={len(self.lost)} double_bound={len(self.double_bound)} "
            f"unaudited={len(self.unaudited)}"
        )


def scheduled_condition(body: Mapping[str, Any]) -> dict[str, Any]:
    for cond in (body.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled":
            return dict(cond)
    return {}


async def _audited_bindings(
    plane: ControlPlane,
    namespace: str,
    pods: list[dict[str, Any]],
    prebound: Collection[str],
    within: float = 10.0,
) -> Counter[str]:
    """The audit counts, once the log has caught up with the pods seen bound.

    kube-apiserver writes a request's ResponseComplete audit event after the
    response has gone out, so the newest Bindings can be missing for a moment.
    """
    wanted = {
        body["metadata"]["uid"]
        for body in pods
        if body["metadata"]["namespace"] == namespace
        and body["spec"].get("nodeName")
        and body["metadata"]["name"] not in prebound
    }
    deadline = time.monotonic() + within
    while True:
        audited = successful_bindings(plane, namespace)
        if wanted <= audited.keys() or time.monotonic() > deadline:
            return audited
        await asyncio.sleep(0.5)


async def check_invariants(
    api: ApiClient,
    plane: ControlPlane,
    namespace: str,
    *,
    expect_pending: Collection[str] = (),
    prebound: Collection[str] = (),
    allow_missing_nodes: bool = False,
    allow_unaudited: bool = False,
    unreported: Collection[str] = (),
) -> InvariantReport:
    """Assert the end state of a fault test, from the API server's data only.

    1. Every pod in ``namespace`` is bound to an existing node (unless
       ``allow_missing_nodes``), or is one of ``expect_pending`` and then Pending
       with ``PodScheduled=False`` and a kube-scheduler reason and message. A pod
       neither bound nor expected pending is *lost*.
    2. Bound pods carry ``PodScheduled=True`` (the Binding sets it).
    3. No node's summed requests (all namespaces) exceed its allocatable, pods included.
    4. No pod was the subject of two Bindings the server answered 201 (audit log),
       and every bound pod except ``prebound`` ones (created with spec.nodeName) had
       one; ``allow_unaudited`` waives that half for runs that SIGKILL the
       apiserver, which can die between committing a Binding and logging it, or
       SIGKILL Podium: a Binding whose client vanished mid-request can be
       committed with no audit event at all (seen here on v1.37.2).

    ``unreported`` pods, among ``expect_pending``, may have no PodScheduled condition at
    all: their report was lost while the API server was down (a lost report is not
    written again until the pod's next attempt, as in kube-scheduler).
    """
    pods, nodes = await all_pods_and_nodes(api)
    report = InvariantReport()
    node_names = {n["metadata"]["name"] for n in nodes}
    audited = await _audited_bindings(plane, namespace, pods, prebound)
    expected = set(expect_pending)
    for body in pods:
        meta = body["metadata"]
        if meta["namespace"] != namespace:
            continue
        report.pods += 1
        name, uid = meta["name"], meta["uid"]
        node = body["spec"].get("nodeName") or ""
        cond = scheduled_condition(body)
        if node:
            report.bound += 1
            if node not in node_names:
                report.on_missing_nodes.append(name)
            if cond and cond.get("status") != "True":
                report.bad_conditions.append(f"{name}: bound but {cond}")
            if audited.get(uid, 0) == 0 and name not in prebound:
                report.unaudited.append(name)
            continue
        report.pending.append(name)
        if name not in expected:
            report.lost.append(name)
        elif name in unreported and not cond:
            continue
        elif not (
            cond.get("status") == "False"
            and cond.get("reason") in ("Unschedulable", "SchedulerError")
            and cond.get("message")
        ):
            report.bad_conditions.append(f"{name}: pending with {cond or 'no PodScheduled'}")
    report.double_bound = {uid: n for uid, n in audited.items() if n > 1}

    report.overcommitted = overcommitted(pods, nodes)

    assert not report.lost, f"lost pods: {sorted(report.lost)[:20]} ({report.summary()})"
    assert not report.double_bound, f"double-bound pods: {report.double_bound}"
    assert not report.overcommitted, f"overcommitted: {report.overcommitted}"
    assert not report.bad_conditions, f"bad conditions: {report.bad_conditions[:10]}"
    if not allow_unaudited:
        assert not report.unaudited, f"bound without an audited Binding: {report.unaudited[:10]}"
    if not allow_missing_nodes:
        assert not report.on_missing_nodes, f"bound to missing nodes: {report.on_missing_nodes}"
    return report


def claim_problems(
    claims: Collection[Mapping[str, Any]], pods: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    """What is wrong with the API server's claims once the cluster is quiet, ``pods`` keyed
    by uid: a device in two claims' allocations, a reservation without an allocation, an
    allocated claim reserved for no pod, or for a pod that is gone, has no node, sits on
    another node than the device (a pool is named after its node), or is not the claim's
    owner (claims from a template name their pod as owner)."""
    problems = []
    held: Counter[tuple[str, str, str]] = Counter()
    for claim in claims:
        name = claim["metadata"]["name"]
        status = claim.get("status") or {}
        reserved = [r["uid"] for r in status.get("reservedFor") or []]
        if "allocation" not in status:
            if reserved:
                problems.append(f"{name} reserved for {reserved} without an allocation")
            continue
        results = status["allocation"]["devices"]["results"]
        held.update((r["driver"], r["pool"], r["device"]) for r in results)
        owners = [o["uid"] for o in claim["metadata"].get("ownerReferences") or []]
        if not reserved:
            problems.append(f"{name} holds a device for no pod")
        for uid in reserved:
            pod = pods.get(uid)
            node = (pod or {}).get("spec", {}).get("nodeName") or ""
            if pod is None:
                problems.append(f"{name} reserved for a pod that is gone")
            elif owners and uid not in owners:
                problems.append(f"{name} reserved for {pod['metadata']['name']}, not its owner")
            elif not node:
                problems.append(f"{name} reserved for {pod['metadata']['name']}, which has no node")
            elif any(r["pool"] != node for r in results):
                problems.append(f"{name}'s device is not on {node}, where its pod is")
    problems += [f"{device} allocated {n} times" for device, n in held.items() if n > 1]
    return problems


def gang_problems(
    pods: Collection[Mapping[str, Any]],
    nodes: Collection[Mapping[str, Any]],
    min_counts: Mapping[str, int],
) -> list[str]:
    """Gangs left waiting although ``nodes`` have room for them, once the cluster is quiet: a
    gang bound below its minCount whose missing members fit in the cpu left, or a gang not
    bound at all that fits whole. Members ask cpu only, alike within a gang."""
    names = {n["metadata"]["name"] for n in nodes}
    free = {parse_node(n).name: parse_node(n).allocatable.get("cpu", 0) for n in nodes}
    bound: Counter[str] = Counter()
    asks: dict[str, int] = {}
    for body in pods:
        info = parse_pod(body)
        group = (body["spec"].get("schedulingGroup") or {}).get("podGroupName", "")
        if info.node_name in names and not info.terminal:
            free[info.node_name] -= info.requests.get("cpu", 0)
        if group in min_counts:
            asks[group] = info.requests.get("cpu", 0)
            bound[group] += bool(info.node_name)
    problems = []
    for group, min_count in min_counts.items():
        if bound[group] >= min_count or not asks.get(group):
            continue
        slots = sum(max(0, left) // asks[group] for left in free.values())
        missing = min_count - bound[group]
        if slots >= missing:
            problems.append(
                f"gang {group}: {bound[group]} of {min_count} bound, room for {slots} more"
            )
    return problems


def stranded_claim_pods(
    pods: Collection[Mapping[str, Any]],
    nodes: Collection[Mapping[str, Any]],
    claims: Collection[Mapping[str, Any]],
    devices: int,
) -> list[str]:
    """Pods asking one device (``spec.resourceClaims``) left Pending, once the cluster is
    quiet, although one of ``nodes`` (``devices`` devices each, its pool named after it)
    has a device no claim holds and the cpu the pod asks."""
    free = {parse_node(n).name: parse_node(n).allocatable.get("cpu", 0) for n in nodes}
    held: Counter[str] = Counter()
    for claim in claims:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        held.update(r["pool"] for r in allocation.get("devices", {}).get("results", []))
    waiting = []
    for body in pods:
        info = parse_pod(body)
        if info.node_name in free and not info.terminal:
            free[info.node_name] -= info.requests.get("cpu", 0)
        elif not info.node_name and body["spec"].get("resourceClaims"):
            waiting.append(info)
    room = [n for n, left in free.items() if held[n] < devices and left > 0]
    return [
        f"{p.name} waits while {room} have a free device"
        for p in waiting
        if any(free[n] >= p.requests.get("cpu", 0) for n in room)
    ]


def deny_admission(
    name: str,
    *,
    resource: str,
    operation: str,
    validation: str,
    message: str,
    match_condition: str = "",
    namespace: str = "",
    group: str = "",
    reason: str = "",
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A ValidatingAdmissionPolicy and its Deny binding, named ``name``.

    ``operation`` on ``resource`` of API ``group`` (core by default) is refused with ``message``
    wherever the CEL ``validation`` is false, narrowed to objects matching the
    CEL ``match_condition`` and to one ``namespace`` when given. ``reason`` picks the
    answer's status (``Forbidden``: 403; the default, ``Invalid``: 422). The API server
    loads new policies asynchronously: callers wait until a dry run is refused.
    """
    spec: dict[str, Any] = {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": [group],
                    "apiVersions": ["*"],
                    "operations": [operation],
                    "resources": [resource],
                }
            ]
        },
        "validations": [{"expression": validation, "message": message}],
    }
    if reason:
        spec["validations"][0]["reason"] = reason
    if match_condition:
        spec["matchConditions"] = [{"name": "only", "expression": match_condition}]
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }
    bind_spec: dict[str, Any] = {"policyName": name, "validationActions": ["Deny"]}
    if namespace:
        bind_spec["matchResources"] = {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
        }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": bind_spec,
    }
    return policy, binding


async def create_fast(
    plane: ControlPlane, namespace: str, bodies: list[dict[str, Any]], concurrency: int = 48
) -> float:
    """Create many pods through one orjson/aiohttp client; returns the seconds it took.

    kubernetes_asyncio's per-object serialisation makes thousands of creates slow.
    """
    creds = await load_credentials(str(plane.kubeconfig))
    api = KubeClient(creds, pool_size=concurrency)
    gate = asyncio.Semaphore(concurrency)
    started = time.monotonic()

    async def one(body: dict[str, Any]) -> None:
        async with gate:
            await api.post(f"/api/v1/namespaces/{namespace}/pods", body)

    try:
        await asyncio.gather(*(one(b) for b in bodies))
    finally:
        await api.close()
    return time.monotonic() - started


async def bound_count(api: ApiClient, namespace: str) -> int:
    return sum(1 for p in await pods_in(api, namespace) if p["spec"].get("nodeName"))


# -- Podium probes ------------------------------------------------------------------------


def rss_bytes(pid: int) -> int:
    """Resident set size of a process, from /proc/<pid>/status (VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def metric(text: str, name: str, labels: str = "") -> float:
    """One sample from a Prometheus text exposition; 0.0 when absent.

    ``labels`` is the exact label set as printed, e.g. ``'outcome="bound"'``.
    """
    wanted = f"{name}{{{labels}}}" if labels else name
    for line in text.splitlines():
        if line.startswith(wanted + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


# -- etcd ---------------------------------------------------------------------------------


def _etcd_post(plane: ControlPlane, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
    port = plane._etcd_port  # the v3 HTTP gateway listens on the client URL
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(), method="POST"
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return dict(json.loads(resp.read()))


def etcd_compact(plane: ControlPlane) -> int:
    """Physically compact etcd at its current revision; returns that revision."""
    revision = int(_etcd_post(plane, "/v3/kv/range", {"key": "AA=="})["header"]["revision"])
    _etcd_post(plane, "/v3/kv/compaction", {"revision": str(revision), "physical": True})
    return revision


# -- a TCP proxy that can stall ------------------------------------------------------------


@dataclass(eq=False)
class _Link:
    stalled: bool
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter | None = None


class StallProxy:
    """127.0.0.1 TCP proxy; TLS passes through untouched.

    ``stall()`` makes every open connection, and every new one, silently drop
    server→client bytes (and the server's close) while client→server bytes keep
    flowing, so requests reach the server but no answer and no FIN comes back:
    a half-dead connection, as behind a broken NAT or load balancer.
    ``heal_new()`` lets new connections through again; stalled ones stay stalled
    until the client gives up on them. ``dropped`` counts the bytes held back.
    """

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.links: set[_Link] = set()
        self.stall_new = False
        self.accepted = 0
        self.dropped = 0
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    def stall(self) -> None:
        self.stall_new = True
        for link in self.links:
            link.stalled = True

    def heal_new(self) -> None:
        self.stall_new = False

    @property
    def stalled_links(self) -> int:
        return sum(1 for link in self.links if link.stalled)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for link in list(self.links):
            for writer in (link.client, link.server):
                if writer is not None:
                    writer.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    async def _handle(self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        self.accepted += 1
        link = _Link(stalled=self.stall_new, client=cwriter)
        try:
            sreader, swriter = await asyncio.open_connection(*self.upstream)
        except OSError:
            cwriter.close()
            return
        link.server = swriter
        self.links.add(link)
        up = asyncio.create_task(self._pump(creader, swriter, link, downstream=False))
        down = asyncio.create_task(self._pump(sreader, cwriter, link, downstream=True))
        try:
            done, _ = await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
            if down in done and link.stalled:
                await up  # hide the server's close: wait for the client to give up
        finally:
            for task in (up, down):
                task.cancel()
            for writer in (cwriter, swriter):
                writer.close()
            self.links.discard(link)

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        link: _Link,
        downstream: bool,
    ) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while True:
                data = await reader.read(65536)
                if not data:
                    return
                if downstream and link.stalled:
                    self.dropped += len(data)
                    continue
                writer.write(data)
                await writer.drain()


def proxied_kubeconfig(plane: ControlPlane, port: int, path: Path) -> Path:
    """A copy of the admin kubeconfig that points at 127.0.0.1:<port>.

    The serving certificate has the SAN 127.0.0.1, so TLS verifies on any port.
    """
    config = yaml.safe_load(plane.kubeconfig.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{port}"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


# -- binding faults --------------------------------------------------------------------------

BIND_FAULTS = (
    "500",  # refused, not applied
    "503",  # refused with Retry-After, not applied
    "429",  # throttled, not applied
    "500-applied",  # applied, then answered 500 (etcd "request timed out" yet persisted)
    "timeout-applied",  # applied, then the client timed out
    "409-applied",  # applied, then POSTed again: the server's own 409
    "404-deleted",  # the pod is deleted first: the server's own 404
)


class FaultyClient(KubeClient):
    """A real KubeClient whose Binding POSTs fail on purpose.

    ``rate`` of the POST .../binding calls get a fault drawn from ``faults``
    (see ``BIND_FAULTS``; ``404-spurious`` answers 404 for a pod that exists).
    ``budget`` caps the number of faults injected in all.
    ``delay`` sleeps before every Binding is sent, and ``before_bind`` runs then,
    so a test can change the cluster while a bind is in flight.
    """

    def __init__(
        self,
        *args: Any,
        rate: float = 0.0,
        faults: Collection[str] = BIND_FAULTS,
        seed: int = 7,
        delay: float = 0.0,
        budget: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.rate = rate
        self.budget = budget
        self.faults = sorted(faults)
        self.rng = random.Random(seed)
        self.delay = delay
        self.injected: Counter[str] = Counter()
        self.bind_calls = 0
        self.before_bind: Callable[[str], Any] | None = None

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
    ) -> Any:
        real = super().request
        if method != "POST" or not path.endswith("/binding"):
            return await real(method, path, body, content_type, params)
        self.bind_calls += 1
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.before_bind is not None:
            await self.before_bind(path)
        spent = self.budget is not None and sum(self.injected.values()) >= self.budget
        if spent or self.rng.random() >= self.rate:
            return await real(method, path, body, content_type, params)
        kind = self.rng.choice(self.faults)
        self.injected[kind] += 1
        status = {"reason": "Injected", "message": f"injected {kind}"}
        if kind == "500":
            raise ApiError(500, {**status, "reason": "InternalError"})
        if kind == "503":
            raise ApiError(503, {**status, "reason": "ServiceUnavailable"}, retry_after=1.0)
        if kind == "429":
            raise ApiError(429, {**status, "reason": "TooManyRequests"}, retry_after=1.0)
        if kind == "404-spurious":
            raise ApiError(404, {**status, "reason": "NotFound"})
        if kind == "404-deleted":
            await real("DELETE", path.removesuffix("/binding"), {"gracePeriodSeconds": 0})
            return await real(method, path, body, content_type, params)  # the server's 404
        await real(method, path, body, content_type, params)
        if kind == "500-applied":
            raise ApiError(500, {**status, "reason": "InternalError"})
        if kind == "timeout-applied":
            raise TimeoutError("injected: timed out after the server applied the bind")
        assert kind == "409-applied", kind
        return await real(method, path, body, content_type, params)  # the server's 409


async def wait_bound(
    api: ApiClient,
    namespace: str,
    count: int,
    within: float,
    interval: float = 0.5,
    what: str = "",
    watch: Any = None,
) -> float:
    """Wait until exactly ``count`` pods of ``namespace`` are bound; returns the seconds."""

    async def bound() -> bool:
        return await bound_count(api, namespace) == count

    return await wait_until(bound, within, interval, what or f"{count} pods bound", watch=watch)


async def wait_until(
    predicate: Callable[[], Any],
    within: float,
    interval: float = 0.2,
    what: str = "condition",
    watch: Any = None,
) -> float:
    """Poll an async or sync predicate until truthy; returns the seconds it took.

    With ``watch`` (a PodiumProcess), fail at once, with its log tail, if it exits.
    """
    started = time.monotonic()
    while True:
        if watch is not None and watch.process.poll() is not None:
            tail = "\n".join(watch.log_lines()[-15:])
            raise AssertionError(
                f"Podium exited with {watch.process.returncode} while waiting for {what}:\n{tail}"
            )
        result = predicate()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return time.monotonic() - started
        if time.monotonic() - started > within:
            raise TimeoutError(f"timed out after {within:.0f}s waiting for {what}")
        await asyncio.sleep(interval)
