"""DRA-backed extended resources (DRAExtendedResource, GA in v1.37).

A DeviceClass with ``spec.extendedResourceName`` (explicit), and every DeviceClass
under its implicit name ``deviceclass.resource.kubernetes.io/<class>``, backs an
extended resource: a pod asking ``resources.requests: {example.com/gpu: 1}`` gets
its devices from ResourceSlices on a node whose allocatable does not list the
resource, through one ResourceClaim the scheduler writes for the pod. The pure
parts of kube-scheduler v1.37.2's ``extendeddynamicresources.go`` are here:

- ``resolver``: the ExtendedResourceCache's name -> class map;
- ``pod_extended``: preFilterExtendedResources (the pod's DRA-named requests, and
  the claim a prior cycle created for it, found by annotation and controller);
- ``for_node``: filterExtendedResources (what the node's device-plugin capacity
  covers and what must come from DRA there);
- ``requests_and_mappings``: createRequestsAndMappings (one device request per
  container and resource, init containers reusing later ones' devices);
- ``claim_body``: the claim PreBind creates (generateName, annotation, ownerRef).

NodeResourcesFit leaves a resource to DynamicResources on a node where the class
exists and the node's allocatable for it is zero (``delegated``, Go's
``shouldDelegateResourceToDRA``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from podium.kube.objects import NodeInfo, PodInfo
from podium.kube.quantity import QuantityError, parse_quantity
from podium.kube.resource_names import is_extended_resource
from podium.state.dra import Claim, DraStore, parse_claim

__all__ = [
    "ANNOTATION",
    "DELETED",
    "IMPLICIT_PREFIX",
    "IN_MEMORY_NAME",
    "NO_FIT",
    "STALE",
    "Extended",
    "NodeExtended",
    "claim_body",
    "delegated",
    "find_claim",
    "for_node",
    "is_dra_extended_name",
    "is_extended_claim",
    "pod_extended",
    "requests_and_mappings",
    "resolver",
    "uses_dra",
]

# resourceapi.ExtendedResourceClaimAnnotation and ResourceDeviceClassPrefix.
ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
# specialClaimInMemName: not a valid object name, so it never names a real claim.
IN_MEMORY_NAME = "<extended-resources>"
# Go's statusUnschedulable texts in filterExtendedResources and PostFilter's deletion.
STALE = "cannot schedule extended resource claim"
NO_FIT = "cannot fit resource"
DELETED = "deletion of ResourceClaim completed"


def _dict(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def is_dra_extended_name(name: str) -> bool:
    """schedutil.IsDRAExtendedResourceName: an extended name, or a class's implicit one."""
    return is_extended_resource(name) or name.startswith(IMPLICIT_PREFIX)


def resolver(classes: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """ExtendedResourceCache.GetDeviceClass as a map: resource name -> class name.

    Every class under its implicit name; an explicit name shared by several classes goes
    to the newest (creationTimestamp), the smallest name among equals
    (updateResourceName2class). Implicit names are set after explicit ones, as Go sets
    the default mapping last."""
    explicit: dict[str, tuple[str, str]] = {}
    for name in sorted(classes):
        body = classes[name]
        wanted = _dict(body.get("spec")).get("extendedResourceName")
        if not isinstance(wanted, str) or not wanted:
            continue
        created = str(_dict(body.get("metadata")).get("creationTimestamp") or "")
        held = explicit.get(wanted)
        if held is None or created > held[0]:
            explicit[wanted] = (created, name)
    out = {resource: name for resource, (_, name) in explicit.items()}
    out.update({IMPLICIT_PREFIX + name: name for name in classes})
    return out


def is_extended_claim(claim: Claim) -> bool:
    annotations = _dict(_dict(claim.raw.get("metadata")).get("annotations"))
    return annotations.get(ANNOTATION) == "true"


def find_claim(store: DraStore, pod: PodInfo) -> Claim | None:
    """findExtendedResourceClaim: a claim annotated as the pod's, with the pod as controller."""
    prefix = pod.namespace + "/"
    for key, claim in store.claims.items():
        if key.startswith(prefix) and claim.controller == pod.uid and is_extended_claim(claim):
            owners = _list(_dict(claim.raw.get("metadata")).get("ownerReferences"))
            if any(_dict(o).get("name") == pod.name for o in owners):
                return claim
    return None


def uses_dra(store: DraStore, pod: PodInfo) -> bool:
    """Whether DynamicResources has work for ``pod``: claims, or an extended resource a
    DeviceClass backs (hasDeviceClassMappedExtendedResource)."""
    if pod.resource_claims:
        return True
    names = [r for r, q in pod.requests.items() if q > 0 and is_dra_extended_name(r)]
    return bool(names) and any(r in resolver(store.classes) for r in names)


@dataclass(slots=True)
class NodeExtended:
    """filterExtendedResources on one node: the node's variant of the claim (None when
    device plugins cover every request there) and the pod's request mappings. Nodes that
    delegate the same requests share one variant; ``spec_json`` is its claim's spec as
    the allocator cache's key reads it (None when not plain JSON: never cached)."""

    claim: dict[str, Any] | None
    mappings: list[dict[str, str]] = field(default_factory=list)
    spec_json: str | None = None


@dataclass(slots=True)
class Extended:
    """preFilterExtendedResources' state: the pod's DRA-named scalar requests, the class
    map, and the claim (in memory until PreBind creates it, or one a prior cycle made)."""

    pod: PodInfo
    requests: dict[str, int]
    classes: dict[str, str]
    claim: Claim
    nodes: dict[int, NodeExtended | str] = field(default_factory=dict)
    variants: dict[tuple[tuple[str, int], ...], NodeExtended] = field(default_factory=dict)
    """By the delegated requests: a variant depends on nothing else of the node."""

    @property
    def stale(self) -> bool:
        """A claim from a prior cycle: Filter rejects every node, PostFilter deletes it."""
        return self.claim.name != IN_MEMORY_NAME


def _in_memory(pod: PodInfo) -> Claim:
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "namespace": pod.namespace,
            "name": IN_MEMORY_NAME,
            # A temporary uid, for the in-flight allocation (SignalClaimPendingAllocation).
            "uid": str(uuid.uuid4()),
            "generateName": f"{pod.name}-extended-resources-",
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod.name,
                    "uid": pod.uid,
                    "controller": True,
                }
            ],
            "annotations": {ANNOTATION: "true"},
        },
        "spec": {},
    }
    return parse_claim(body)


def pod_extended(store: DraStore, pod: PodInfo) -> Extended | None:
    """preFilterExtendedResources: None unless some request has a class behind it."""
    named = {r: q for r, q in pod.requests.items() if is_dra_extended_name(r)}
    if not any(q > 0 for q in named.values()):
        return None
    classes = resolver(store.classes)
    if not any(q > 0 and r in classes for r, q in named.items()):
        return None
    claim = find_claim(store, pod) or _in_memory(pod)
    return Extended(pod, named, classes, claim)


def delegated(resource: str, allocatable: int, classes: Mapping[str, str]) -> bool:
    """shouldDelegateResourceToDRA: no device-plugin capacity, and a class backs it."""
    return allocatable <= 0 and resource in classes


def for_node(ext: Extended, node: NodeInfo) -> NodeExtended | str:
    """filterExtendedResources: the node's claim variant, or why the pod cannot go there."""
    if ext.stale:
        return STALE
    needed: dict[str, int] = {}
    for resource, amount in ext.requests.items():
        if amount == 0:
            continue
        present = resource in node.allocatable
        if resource in ext.classes and node.allocatable.get(resource, 0) == 0:
            needed[resource] = amount
        elif not present:
            return NO_FIT
    key = tuple(sorted(needed.items()))
    known = ext.variants.get(key)
    if known is not None:
        return known
    if not needed:
        variant = NodeExtended(None)
    else:
        requests, mappings = requests_and_mappings(ext.pod.raw, needed, ext.classes)
        body = {k: v for k, v in ext.claim.raw.items() if k != "status"}
        body["spec"] = {"devices": {"requests": requests}}
        try:
            spec_json: str | None = json.dumps(body["spec"], separators=(",", ":"))
        except (TypeError, ValueError):
            spec_json = None
        variant = NodeExtended(body, mappings, spec_json)
    ext.variants[key] = variant
    return variant


def _whole(value: object) -> int:
    """Quantity.AsInt64: the value when it is a whole number that fits, else 0 (skipped)."""
    try:
        amount = parse_quantity(value)
    except QuantityError:
        return 0
    if amount != amount.to_integral_value() or abs(amount) >= Decimal(2**63):
        return 0
    return int(amount)


def _container_request(
    index: int,
    container: Mapping[str, Any],
    resource: str,
    class_name: str,
    reusable: Sequence[dict[str, Any] | None],
) -> tuple[dict[str, Any] | None, list[dict[str, str]]]:
    """createResourceRequestAndMappings: this container's request for ``resource`` (None
    when it asks none, or later long-lived containers' requests already cover it)."""
    requests = _dict(_dict(container.get("resources")).get("requests"))
    if resource not in requests:
        return None, []
    wanted = _whole(requests[resource])
    if wanted == 0:
        return None, []
    name = str(container.get("name") or "")
    mappings: list[dict[str, str]] = []
    covered = 0
    for other in reusable:
        if other is None:
            continue
        covered += int(other["exactly"]["count"])
        mappings.append(
            {"containerName": name, "resourceName": resource, "requestName": other["name"]}
        )
        if covered >= wanted:
            return None, mappings
    position = sorted(str(k) for k in requests).index(resource)
    request_name = f"container-{index}-request-{position}"
    request = {
        "name": request_name,
        "exactly": {
            "deviceClassName": class_name,
            "allocationMode": "ExactCount",
            "count": wanted - covered,
        },
    }
    mappings.append({"containerName": name, "resourceName": resource, "requestName": request_name})
    return request, mappings


def requests_and_mappings(
    pod: Mapping[str, Any], needed: Mapping[str, int], classes: Mapping[str, str]
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """createRequestsAndMappings: the claim's device requests (sorted by name) and the
    pod's ``requestMappings``, per resource in name order: long-lived containers
    (regular and sidecar) first, then init containers, which reuse the devices of
    long-lived containers after them and share the largest init request."""
    spec = _dict(pod.get("spec"))
    inits = [_dict(c) for c in _list(spec.get("initContainers"))]
    containers = inits + [_dict(c) for c in _list(spec.get("containers"))]
    long_lived = [
        i for i, c in enumerate(containers) if i >= len(inits) or c.get("restartPolicy") == "Always"
    ]
    short_lived = [i for i in range(len(inits)) if i not in long_lived]
    requests: list[dict[str, Any]] = []
    mappings: list[dict[str, str]] = []
    for resource in sorted(needed):
        class_name = classes.get(resource)
        if class_name is None:
            continue
        by_container: list[dict[str, Any] | None] = [None] * len(containers)
        long_mappings: list[dict[str, str]] = []
        for i in long_lived:
            request, found = _container_request(i, containers[i], resource, class_name, [])
            by_container[i] = request
            long_mappings.extend(found)
        largest: dict[str, Any] | None = None
        short_names: set[str] = set()
        short_mappings: list[dict[str, str]] = []
        for i in short_lived:
            request, found = _container_request(
                i, containers[i], resource, class_name, by_container[i:]
            )
            if request is not None:
                short_names.add(request["name"])
                if largest is None or largest["exactly"]["count"] < request["exactly"]["count"]:
                    largest = request
            short_mappings.extend(found)
        if largest is not None and len(short_names) > 1:
            short_names.discard(largest["name"])
            for mapping in short_mappings:
                if mapping["requestName"] in short_names:
                    mapping["requestName"] = largest["name"]
        if largest is not None:
            requests.append(largest)
        requests.extend(r for r in by_container if r is not None)
        mappings.extend(long_mappings)
        mappings.extend(short_mappings)
    requests.sort(key=lambda r: str(r["name"]))
    return requests, mappings


def claim_body(node_claim: Mapping[str, Any]) -> dict[str, Any]:
    """createExtendedResourceClaimInAPI: the node's claim variant without name, uid and
    status, so the API server names it from ``generateName``."""
    body = {key: value for key, value in node_claim.items() if key != "status"}
    meta = {k: v for k, v in _dict(body.get("metadata")).items() if k not in ("name", "uid")}
    body["metadata"] = meta
    return body
