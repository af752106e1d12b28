"""What a pod asks of a node: kube-scheduler v1.37's request model, in one place.

A port of ``PodRequests`` from k8s.io/component-helpers v0.37.2
(``resource/helpers.go``) with the options kube-scheduler passes, and of the
QoS class from ``pkg/apis/core/v1/helper/qos``. Every consumer (the cache's
node usage, the incoming pod, filters and scores, preemption, explain,
simulate and the benchmark's validator) reads the numbers computed here, so
that two parts of Podium can never count one pod differently.

- Containers add up; init containers count at their peak, with restartable
  init containers (sidecars) running beside later ones and beside the app.
- Pod-level ``spec.resources.requests`` replace the container sum for cpu,
  memory and hugepages-* (the resources that may be set at pod level).
- Overhead (set from the RuntimeClass) is added on top.
- For a pod bound to a node (``UseStatusResources``), each value is the
  largest of spec, ``allocatedResources`` and the actuated
  ``resources.requests``, at container and at pod level; while a resize is
  ``Infeasible`` the spec does not count, only what is allocated and running.
- The non-zero requests of a node's pods (100m cpu, 200Mi memory for a
  container that names neither) fill only what pod-level requests leave open.
- NodeResourcesFit's score counts the pod being scheduled by its containers
  alone, with those defaults and the spec only: Go's Fit never turns on its
  scorer's pod-level and status options (``calculatePodResourceRequest``).

Quantities are summed exactly, as ``resource.Quantity`` does, and rounded up
once at the end.

Why one module of this size: it is one port of component-helpers'
``resource/helpers.go`` (PodRequests and its helpers), kept whole so that it
reads against the Go file line by line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from podium.kube.quantity import parse_resource_list, whole
from podium.kube.resource_names import counted_resource, pod_level_resource

__all__ = [
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "PodResources",
    "pod_resources",
    "request_sources",
    "requests_decreased",
    "resize_infeasible",
]

# pkg/scheduler/util/pod_resources.go: what scoring assumes for a container that
# names no cpu or memory request, so that empty pods still spread out.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

_NON_MISSING: dict[str, Decimal] = {
    "cpu": Decimal(DEFAULT_MILLI_CPU_REQUEST) / 1000,
    "memory": Decimal(DEFAULT_MEMORY_REQUEST),
}

Json = Mapping[str, Any]
ResourceList = dict[str, Decimal]


@dataclass(slots=True)
class PodResources:
    """One pod's requests as kube-scheduler counts them.

    ``requests`` holds the resources NodeResourcesFit compares (cpu in
    millicores, the rest in whole units). ``nonzero_*`` is what the pod adds
    to a node's non-zero totals (NodeInfo.NonZeroRequested). ``score_*`` is
    what the pod brings to NodeResourcesFit's score when it is scheduled:
    its containers with the non-zero defaults and overhead, never pod-level
    requests nor the resize status, as Go's Fit leaves its scorer's
    ``enablePodLevelResources`` and ``enableInPlacePodVerticalScaling`` unset
    (``NewFit``; ``calculatePodResourceRequest``). ``score_requests`` is that
    view of every resource, kept only for pods with pod-level requests: for a
    pending pod without them it equals ``requests`` beyond cpu and memory.
    """

    requests: dict[str, int]
    nonzero_cpu: int
    nonzero_memory: int
    score_cpu: int
    score_memory: int
    score_requests: dict[str, int] | None
    qos: str
    problems: list[str] = field(default_factory=list)


def _mapping(value: object) -> Json | None:
    """A Go map that may be nil: None when absent or not an object."""
    return value if isinstance(value, Mapping) else None


def _resource_list(value: object, where: str, problems: list[str]) -> ResourceList | None:
    return parse_resource_list(value, f"{where}." if where else "", problems)


def _add(total: ResourceList, extra: ResourceList | None) -> None:
    for name, amount in (extra or {}).items():
        total[name] = total.get(name, Decimal(0)) + amount


def _max_into(total: ResourceList, other: ResourceList | None) -> None:
    for name, amount in (other or {}).items():
        if name not in total or amount > total[name]:
            total[name] = amount


def _max(first: ResourceList | None, *others: ResourceList | None) -> ResourceList:
    result = dict(first or {})
    for other in others:
        _max_into(result, other)
    return result


def _with_defaults(reqs: ResourceList | None, defaults: ResourceList) -> ResourceList:
    """applyNonMissing: a default only where the name is absent, never over an explicit 0."""
    out = dict(reqs or {})
    for name, amount in defaults.items():
        if name not in out:
            out[name] = amount
    return out


@dataclass(slots=True)
class _Container:
    requests: ResourceList | None
    restartable: bool
    allocated: ResourceList | None = None
    actuated: ResourceList | None = None
    has_status: bool = False


# The three views of one container's requests (containerSpecRequests,
# containerAllocatedRequests, containerActuatedRequests).
Getter = Callable[[_Container, bool], "ResourceList | None"]


def _spec(c: _Container, infeasible: bool) -> ResourceList | None:
    return c.requests


def _allocated(c: _Container, infeasible: bool) -> ResourceList | None:
    if c.allocated is not None:
        return c.allocated
    return None if infeasible else c.requests


def _actuated(c: _Container, infeasible: bool) -> ResourceList | None:
    if c.actuated is not None:
        return c.actuated
    if c.allocated is not None:
        return c.allocated
    return None if infeasible else c.requests


@dataclass(slots=True)
class _Pod:
    containers: list[_Container]
    init_containers: list[_Container]
    pod_requests: ResourceList | None
    pod_limits: ResourceList | None
    overhead: ResourceList | None
    status_allocated: ResourceList | None
    status_requests: ResourceList | None
    status_resources: bool
    infeasible: bool
    has_status_resources: bool

    def pod_level_requests_set(self) -> bool:
        """IsPodLevelRequestsSet."""
        return any(pod_level_resource(n) for n in self.pod_requests or {})

    def pod_level_resources_set(self) -> bool:
        """IsPodLevelResourcesSet: requests or limits name a pod-level resource."""
        names = list(self.pod_requests or {}) + list(self.pod_limits or {})
        return any(pod_level_resource(n) for n in names)


def resize_infeasible(conditions: object) -> bool:
    """IsPodResizeInfeasible: the first PodResizePending condition says Infeasible."""
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, Mapping) and condition.get("type") == "PodResizePending":
            return condition.get("reason") == "Infeasible"
    return False


def _read_pod(spec: Json, status: Json, problems: list[str]) -> _Pod:
    statuses: dict[str, Json] = {}
    for key in ("initContainerStatuses", "containerStatuses"):
        # findContainerStatus looks at app containers first.
        for item in reversed(_list(status.get(key))):
            if isinstance(item, Mapping):
                statuses[str(item.get("name") or "")] = item
    has_status = False

    def container(raw: object, where: str) -> _Container:
        nonlocal has_status
        item = raw if isinstance(raw, Mapping) else {}
        resources = _mapping(item.get("resources")) or {}
        name = str(item.get("name") or "")
        out = _Container(
            _resource_list(resources.get("requests"), f"{where}[{name}].requests", problems),
            item.get("restartPolicy") == "Always",
        )
        cs = statuses.get(name)
        if cs is not None:
            out.allocated = _resource_list(
                cs.get("allocatedResources"), f"status[{name}].allocatedResources", problems
            )
            actual = _mapping(cs.get("resources"))
            if actual is not None:
                out.actuated = _resource_list(
                    actual.get("requests"), f"status[{name}].resources.requests", problems
                )
            has_status |= out.allocated is not None or out.actuated is not None
        return out

    containers = [container(c, "containers") for c in _list(spec.get("containers"))]
    inits = [container(c, "initContainers") for c in _list(spec.get("initContainers"))]
    pod_resources = _mapping(spec.get("resources")) or {}
    status_resources = _mapping(status.get("resources"))
    status_allocated = _resource_list(
        status.get("allocatedResources"), "status.allocatedResources", problems
    )
    status_requests = (
        _resource_list(status_resources.get("requests"), "status.resources.requests", problems)
        if status_resources is not None
        else None
    )
    infeasible = resize_infeasible(status.get("conditions"))
    return _Pod(
        containers=containers,
        init_containers=inits,
        pod_requests=_resource_list(pod_resources.get("requests"), "resources.requests", problems),
        pod_limits=_resource_list(pod_resources.get("limits"), "resources.limits", []),
        overhead=_resource_list(spec.get("overhead"), "overhead", problems),
        status_allocated=status_allocated,
        status_requests=status_requests,
        status_resources=status_resources is not None,
        infeasible=infeasible,
        has_status_resources=has_status
        or infeasible
        or status_resources is not None
        or status_allocated is not None,
    )


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _aggregate(
    pod: _Pod, getter: Getter, infeasible: bool, defaults: ResourceList | None
) -> ResourceList:
    """aggregateContainerResourcesByFn: app containers, then the init-container peak."""
    result: ResourceList = {}
    for c in pod.containers:
        reqs = getter(c, infeasible)
        _add(result, _with_defaults(reqs, defaults) if defaults else reqs)
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for c in pod.init_containers:
        reqs = getter(c, infeasible)
        if defaults:
            reqs = _with_defaults(reqs, defaults)
        if c.restartable:
            _add(result, reqs)
            _add(sidecars, reqs)
            step = sidecars
        else:
            step = {}
            _add(step, reqs)
            _add(step, sidecars)
        _max_into(init_peak, step)
    _max_into(result, init_peak)
    return result


def _container_requests(pod: _Pod, use_status: bool, defaults: ResourceList | None) -> ResourceList:
    """AggregateContainerRequests with InPlacePodLevelResourcesVerticalScaling on."""
    specs = _aggregate(pod, _spec, False, defaults)
    if not use_status:
        return specs
    infeasible = pod.infeasible
    if pod.status_allocated is not None and pod.status_requests is not None:
        # Pod-level status already holds the aggregate over all containers.
        allocated, actuated = pod.status_allocated, pod.status_requests
    else:
        allocated = _aggregate(pod, _allocated, infeasible, defaults)
        actuated = _aggregate(pod, _actuated, infeasible, defaults)
    if infeasible:
        return _max(actuated, allocated)
    return _max(specs, actuated, allocated)


def _pod_requests(
    pod: _Pod, use_status: bool, defaults: ResourceList | None, pod_level: bool = True
) -> ResourceList:
    """PodRequests: containers, then pod-level values (unless skipped), then overhead."""
    reqs = _container_requests(pod, use_status and pod.has_status_resources, defaults)
    if pod_level and pod.pod_level_requests_set():
        effective = pod.pod_requests or {}
        if use_status and pod.status_resources:
            spec = None if pod.infeasible else effective
            effective = _max(spec, pod.status_requests, pod.status_allocated)
        for name, amount in effective.items():
            if pod_level_resource(name):
                reqs[name] = amount
    _add(reqs, pod.overhead)
    return reqs


def _requirements_qos(requests: ResourceList | None, limits: ResourceList | None) -> str:
    """requirementsQOS over cpu and memory."""
    if not requests and not limits:
        return "BestEffort"
    qos = ""
    for name in ("cpu", "memory"):
        req = (requests or {}).get(name, Decimal(0))
        lim = (limits or {}).get(name, Decimal(0))
        if req != lim:
            return "Burstable"
        this = "BestEffort" if req == 0 else "Guaranteed"
        if not qos:
            qos = this
        elif qos != this:
            return "Burstable"
    return qos


def _qos(spec: Json, status: Json, pod: _Pod) -> str:
    """GetPodQOS: the API server's status.qosClass, else ComputePodQOS."""
    stored = status.get("qosClass")
    if isinstance(stored, str) and stored:
        return stored
    if pod.pod_level_resources_set():
        return _requirements_qos(pod.pod_requests, pod.pod_limits)
    qos = ""
    for raw in _list(spec.get("initContainers")) + _list(spec.get("containers")):
        resources = _mapping(_mapping(raw) and raw.get("resources")) or {}
        this = _requirements_qos(
            _resource_list(resources.get("requests"), "", []),
            _resource_list(resources.get("limits"), "", []),
        )
        if this == "Burstable":
            return this
        if not qos:
            qos = this
        elif qos != this:
            return "Burstable"
    return qos or "BestEffort"


def _sources(pod: _Pod, requests: ResourceList, spec_only: ResourceList) -> dict[str, str]:
    pod_level = (pod.pod_requests or {}) if pod.pod_level_requests_set() else {}
    out: dict[str, str] = {}
    for name, amount in requests.items():
        if name in pod_level and pod_level_resource(name):
            where = "pod level"
        elif amount != spec_only.get(name, Decimal(0)):
            where = "resize status"
        else:
            where = "containers"
        if (pod.overhead or {}).get(name):
            where += " + overhead"
        out[name] = where
    return out


def pod_resources(spec: Json, status: Json, bound: bool) -> PodResources:
    """The request model for one pod.

    ``bound`` selects kube-scheduler's view of a pod already on a node
    (NodeInfo's CalculateResource, which reads the resize status) over its
    view of the pod being scheduled (NodeResourcesFit's PreFilter, spec only).
    """
    problems: list[str] = []
    pod = _read_pod(spec, status, problems)
    requests = _pod_requests(pod, bound, None)
    pod_level = pod.pod_level_requests_set()
    # getNonMissingContainerRequests: with pod-level requests, defaults fill only the gaps.
    gaps = (
        {n: a for n, a in _NON_MISSING.items() if n not in requests} if pod_level else _NON_MISSING
    )
    nonzero = _pod_requests(pod, bound, gaps) if gaps else requests
    # The Fit score's view (SkipPodLevelResources, no status): the non-zero view
    # already is it unless pod-level requests or a read status went into that.
    same_view = not pod_level and not (bound and pod.has_status_resources)
    score = nonzero if same_view else _pod_requests(pod, False, _NON_MISSING, pod_level=False)
    return PodResources(
        requests={n: whole(n, a) for n, a in requests.items() if counted_resource(n)},
        nonzero_cpu=whole("cpu", nonzero.get("cpu", Decimal(0))),
        nonzero_memory=whole("memory", nonzero.get("memory", Decimal(0))),
        score_cpu=whole("cpu", score.get("cpu", Decimal(0))),
        score_memory=whole("memory", score.get("memory", Decimal(0))),
        score_requests=(
            {n: whole(n, a) for n, a in score.items() if counted_resource(n)} if pod_level else None
        ),
        qos=_qos(spec, status, pod),
        problems=problems,
    )


def requests_decreased(old: Mapping[str, int], new: Mapping[str, int]) -> bool:
    """extractPodScaleDown: some request of the old pod is gone or smaller now."""
    return any(name not in new or new[name] < amount for name, amount in old.items())


def request_sources(spec: Json, status: Json, bound: bool) -> dict[str, str]:
    """Where each of the pod's requests came from: ``pod level``, ``resize status`` or
    ``containers``, with ``+ overhead`` where overhead adds to it. For explain and
    simulate, so that parsing every pod event does not pay for it."""
    pod = _read_pod(spec, status, [])
    requests = _pod_requests(pod, bound, None)
    spec_only = _pod_requests(pod, False, None) if bound and pod.has_status_resources else requests
    return _sources(pod, requests, spec_only)
