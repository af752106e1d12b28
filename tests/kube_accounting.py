"""kube-scheduler v1.37.2's resource accounting, ported independently of Podium.

Tests use this to judge Podium from the outside, so it imports nothing from
``podium``. It follows the Go source:

- quantities: ``ParseQuantity``, ``MilliValue`` and ``Value`` (apimachinery
  ``api/resource``), exact decimal arithmetic until the final rounding up;
- ``PodRequests`` (component-helpers ``resource/helpers.go``) with the options
  ``PodInfo.CalculateResource`` passes for pods already on a node
  (``framework/types.go``): UseStatusResources and
  InPlacePodLevelResourcesVerticalScalingEnabled on, pod-level resources on,
  DRA node-allocatable claim status off;
- ``Resource.Add`` and ``IsScalarResourceName`` (which names count at all);
- NodeResourcesFit's ``fitsRequest`` for the node totals, default plugin args
  (no ignored extended resources, no DRA-backed extended resources).

Pods and nodes are the JSON dicts the API server returns. A Go field that is
``nil`` is a key that is absent (or null); a present empty map is non-nil, as
when Go decodes it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

ResourceList = dict[str, Fraction]
"""v1.ResourceList with exact values."""

Pod = Mapping[str, Any]
Node = Mapping[str, Any]

_INT64_MAX = 2**63 - 1
_NUMBER = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)", re.DOTALL)
_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)")
_SUFFIXES = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_NANO = 10**9


def parse_quantity(text: str) -> Fraction:
    """``resource.ParseQuantity``: the exact value, non-zero values rounded up to 1n.

    The binary-format cap at 2^63-1 is not modelled: such values fail in
    ``milli_value``/``value`` instead.
    """
    match = _NUMBER.fullmatch(text)
    if match is None or not (match[2] or match[3]):
        raise ValueError(f"quantity {text!r}: no number")
    sign, whole, frac, suffix = match.groups()
    number = Fraction(int(whole or "0")) + (
        Fraction(int(frac), 10 ** len(frac)) if frac else Fraction(0)
    )
    if suffix in _SUFFIXES:
        number *= _SUFFIXES[suffix]
    elif exponent := _EXPONENT.fullmatch(suffix):
        number *= Fraction(10) ** int(exponent[1])
    else:
        raise ValueError(f"quantity {text!r}: bad suffix {suffix!r}")
    # inf.RoundUp rounds away from zero; the sign is applied afterwards as in Go.
    number = Fraction(math.ceil(number * _NANO), _NANO)
    return -number if sign == "-" else number


def _scaled(value: Fraction, scale: int) -> int:
    """``Quantity.ScaledValue``: ceil(value * scale), away from zero for negatives."""
    magnitude = math.ceil(abs(value) * scale)
    if magnitude > _INT64_MAX:
        raise ValueError(f"{value} overflows int64 at scale {scale}")
    return -magnitude if value < 0 else magnitude


def milli_value(value: Fraction) -> int:
    """``Quantity.MilliValue``."""
    return _scaled(value, 1000)


def value_of(value: Fraction) -> int:
    """``Quantity.Value``."""
    return _scaled(value, 1)


def resource_list(raw: Mapping[str, Any] | None) -> ResourceList:
    """A JSON resource map parsed; quantities arrive as strings (numbers are tolerated)."""
    return {name: parse_quantity(str(q)) for name, q in (raw or {}).items()}


# -- resource names ---------------------------------------------------------------------

_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def _is_qualified_name(name: str) -> bool:
    """``validation.IsQualifiedName``: [prefix/]name, prefix a DNS-1123 subdomain."""
    parts = name.split("/")
    if len(parts) > 2:
        return False
    if len(parts) == 2:
        prefix, name = parts
        if not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix):
            return False
    return 0 < len(name) <= 63 and _QUALIFIED_NAME_PART.fullmatch(name) is not None


def _is_prefixed_native(name: str) -> bool:
    return "kubernetes.io/" in name


def is_extended_resource_name(name: str) -> bool:
    """``v1helper.IsExtendedResourceName``."""
    native = "/" not in name or _is_prefixed_native(name)
    if native or name.startswith("requests."):
        return False
    return _is_qualified_name(f"requests.{name}")


def is_scalar_resource_name(name: str) -> bool:
    """``schedutil.IsScalarResourceName``: extended, hugepages, prefixed native, attachable."""
    return (
        is_extended_resource_name(name)
        or name.startswith("hugepages-")
        or _is_prefixed_native(name)
        or name.startswith("attachable-volumes-")
    )


def is_supported_pod_level_resource(name: str) -> bool:
    return name in ("cpu", "memory") or name.startswith("hugepages-")


# -- PodRequests ------------------------------------------------------------------------


def _add(into: ResourceList, other: Mapping[str, Fraction] | None) -> None:
    for name, quantity in (other or {}).items():
        into[name] = into.get(name, Fraction(0)) + quantity


def _max_into(into: ResourceList, other: Mapping[str, Fraction] | None) -> None:
    for name, quantity in (other or {}).items():
        if name not in into or quantity > into[name]:
            into[name] = quantity


def _max(
    first: Mapping[str, Fraction] | None, *rest: Mapping[str, Fraction] | None
) -> ResourceList:
    result = dict(first or {})
    for other in rest:
        _max_into(result, other)
    return result


def _requests_in(requirements: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """``requirements.Requests``, nil when either is nil."""
    return None if requirements is None else requirements.get("requests")


def is_pod_resize_infeasible(pod: Pod) -> bool:
    """The first PodResizePending condition decides; reason Infeasible."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodResizePending":
            return bool(condition.get("reason") == "Infeasible")
    return False


def is_pod_level_requests_set(pod: Pod) -> bool:
    requests = ((pod.get("spec") or {}).get("resources") or {}).get("requests") or {}
    return any(is_supported_pod_level_resource(name) for name in requests)


def _container_status(pod: Pod, name: str) -> Mapping[str, Any] | None:
    status = pod.get("status") or {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in status.get(key) or []:
            if cs.get("name") == name:
                return dict(cs)
    return None


def _spec_requests(container: Mapping[str, Any]) -> ResourceList | None:
    requests = (container.get("resources") or {}).get("requests")
    return None if requests is None else resource_list(requests)


def _requests_by(pod: Pod, source: str, infeasible: bool) -> ResourceList:
    """``aggregateContainerResourcesByFn`` with the spec, allocated or actuated getter."""

    def of(container: Mapping[str, Any]) -> ResourceList | None:
        cs = _container_status(pod, str(container.get("name", "")))
        if source in ("allocated", "actuated") and cs is not None:
            actual = _requests_in(cs.get("resources"))
            if source == "actuated" and actual is not None:
                return resource_list(actual)
            if cs.get("allocatedResources") is not None:
                return resource_list(cs["allocatedResources"])
        if source in ("allocated", "actuated") and infeasible:
            return None
        return _spec_requests(container)

    spec = pod.get("spec") or {}
    result: ResourceList = {}
    for container in spec.get("containers") or []:
        _add(result, of(container))
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for container in spec.get("initContainers") or []:
        own = of(container)
        if container.get("restartPolicy") == "Always":
            _add(result, own)
            _add(sidecars, own)
            during = dict(sidecars)
        else:
            during = dict(own or {})
            _add(during, sidecars)
        _max_into(init_peak, during)
    _max_into(result, init_peak)
    return result


def _aggregate_container_requests(pod: Pod) -> ResourceList:
    """``AggregateContainerRequests`` with UseStatusResources and pod-level resize on."""
    infeasible = is_pod_resize_infeasible(pod)
    spec_reqs = _requests_by(pod, "spec", infeasible)
    status = pod.get("status") or {}
    pod_actual = _requests_in(status.get("resources"))
    if status.get("allocatedResources") is not None and pod_actual is not None:
        allocated = resource_list(status["allocatedResources"])
        actuated = resource_list(pod_actual)
    else:
        allocated = _requests_by(pod, "allocated", infeasible)
        actuated = _requests_by(pod, "actuated", infeasible)
    if infeasible:
        return _max(actuated, allocated)
    return _max(spec_reqs, actuated, allocated)


def pod_requests(pod: Pod) -> ResourceList:
    """``PodRequests`` with the options kube-scheduler uses for a pod on a node."""
    reqs = _aggregate_container_requests(pod)
    spec = pod.get("spec") or {}
    if is_pod_level_requests_set(pod):
        spec_level = resource_list(spec["resources"]["requests"])
        effective = spec_level
        status = pod.get("status") or {}
        if status.get("resources") is not None:
            # A nil status list adds nothing to the max, like an empty one.
            effective = _max(
                {} if is_pod_resize_infeasible(pod) else spec_level,
                resource_list(_requests_in(status["resources"])),
                resource_list(status.get("allocatedResources")),
            )
        for name, quantity in effective.items():
            if is_supported_pod_level_resource(name):
                reqs[name] = quantity
    if spec.get("overhead") is not None:
        _add(reqs, resource_list(spec["overhead"]))
    return reqs


# -- Resource ---------------------------------------------------------------------------


def to_resource(resources: Mapping[str, Fraction]) -> dict[str, int]:
    """``Resource.Add``: cpu in millicores, the rest in units; other names are dropped.

    Keys are resource names ("pods" is AllowedPodNumber).
    """
    result: dict[str, int] = {}
    for name, quantity in resources.items():
        if name == "cpu":
            amount = milli_value(quantity)
        elif name in ("memory", "pods", "ephemeral-storage") or is_scalar_resource_name(name):
            amount = value_of(quantity)
        else:
            continue
        result[name] = result.get(name, 0) + amount
    return result


def pod_resource(pod: Pod) -> dict[str, int]:
    """``PodInfo.CalculateResource().Resource``: what the pod adds to its node's Requested."""
    return to_resource(pod_requests(pod))


def node_allocatable(node: Node) -> dict[str, int]:
    """``NodeInfo.SetNode``: Allocatable from status.allocatable."""
    return to_resource(resource_list((node.get("status") or {}).get("allocatable")))


def counted_on_node(pod: Pod) -> bool:
    """In kube-scheduler's cache: assigned (spec.nodeName) and not Succeeded/Failed.

    The informer's field selector drops terminal pods; pods being deleted stay
    counted until they are gone.
    """
    phase = (pod.get("status") or {}).get("phase")
    return bool((pod.get("spec") or {}).get("nodeName")) and phase not in ("Succeeded", "Failed")


def bound_by_scheduler(pod: Pod) -> bool:
    """Bound through the Binding API, which sets PodScheduled=True.

    A pod created with spec.nodeName never gets that condition (no scheduler saw it).
    """
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled":
            return bool(condition.get("status") == "True")
    return False


# -- the invariant ------------------------------------------------------------------------


@dataclass(frozen=True)
class Overbooking:
    """One resource of one node over allocatable, and the scheduler-bound pods asking for it."""

    node: str
    resource: str
    requested: int
    allocatable: int
    scheduler_bound: tuple[str, ...]
    prebound: int

    def __str__(self) -> str:
        return (
            f"node {self.node}: {self.resource} requested {self.requested} > allocatable "
            f"{self.allocatable} ({self.prebound} of it from pods created with spec.nodeName); "
            f"placed there by a scheduler: {', '.join(self.scheduler_bound)}"
        )


def _served_by_claim(pod: Pod) -> set[str]:
    """The extended resources the pod's status says its ResourceClaim serves."""
    status = (pod.get("status") or {}).get("extendedResourceClaimStatus") or {}
    return {str(m.get("resourceName")) for m in status.get("requestMappings") or []}


def overbookings(nodes: Iterable[Node], pods: Iterable[Pod]) -> list[Overbooking]:
    """Resources over allocatable on some node because a scheduler placed a pod there.

    For each node and resource (the pod count included), the counted pods'
    requests are summed as kube-scheduler's NodeInfo does. A resource over
    allocatable is reported when at least one scheduler-bound pod on that node
    asks for it (every pod "asks" for one pod slot): kube-scheduler only places
    a pod asking for r where r still fits, so the total can only end up over
    allocatable without such a pod when the test built that state itself.
    """
    on_node: dict[str, list[Pod]] = {}
    for pod in pods:
        if counted_on_node(pod):
            on_node.setdefault(pod["spec"]["nodeName"], []).append(pod)
    found: list[Overbooking] = []
    for node in nodes:
        name = node["metadata"]["name"]
        allocatable = node_allocatable(node)
        placed = on_node.get(name, [])
        requested: dict[str, int] = {}
        prebound: dict[str, int] = {}
        asked: dict[str, list[str]] = {}
        for pod in placed:
            # DRA-backed extended resources come from the pod's claim, not allocatable
            # (NodeResourcesFit's shouldDelegateResourceToDRA).
            served = _served_by_claim(pod)
            amounts = {
                key: n
                for key, n in pod_resource(pod).items()
                if key != "pods" and key not in served
            }
            amounts["pods"] = 1
            by_scheduler = bound_by_scheduler(pod)
            for key, amount in amounts.items():
                requested[key] = requested.get(key, 0) + amount
                if not by_scheduler:
                    prebound[key] = prebound.get(key, 0) + amount
                elif amount > 0:
                    meta = pod["metadata"]
                    asked.setdefault(key, []).append(f"{meta.get('namespace', '')}/{meta['name']}")
        for key in sorted(requested):
            if requested[key] > allocatable.get(key, 0) and asked.get(key):
                found.append(
                    Overbooking(
                        node=name,
                        resource=key,
                        requested=requested[key],
                        allocatable=allocatable.get(key, 0),
                        scheduler_bound=tuple(sorted(asked[key])),
                        prebound=prebound.get(key, 0),
                    )
                )
    return found
