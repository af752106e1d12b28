"""Did the scheduler place pods correctly? Checked from the API server's final state.

A fast scheduler that ignores a constraint is not faster, it is wrong, so every
run ends with a check of the hard constraints the cases use (resources, node
selectors and required node affinity, required inter-pod (anti-)affinity and
DoNotSchedule topology spread, DRA claims, DRA-backed extended resources and gangs)
against what the API server recorded. Soft constraints cannot be violated; for them
the check reports a quality number instead. The check is written from the Kubernetes
API semantics, independently of Podium's own plugins, so it can judge them.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from podium.kube.resources import pod_resources

__all__ = ["Check", "check_placements", "node_selector_matches", "parse_quantity"]

_QUANTITY = re.compile(
    r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:[eE]([+-]?\d+))?(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?$"
)
_MULTIPLIER = {
    None: 1.0, "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
    "P": 1e15, "E": 1e18, "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40,
    "Pi": 2.0**50, "Ei": 2.0**60,
}  # fmt: skip
_MAX_EXAMPLES = 10
_IMPLICIT_EXTENDED = "deviceclass.resource.kubernetes.io/"
"""Every DeviceClass backs the extended resource of this prefix and its own name."""


def parse_quantity(text: str | int | float) -> float:
    """A Kubernetes quantity ("100m", "32Gi", "4") as a number of base units."""
    match = _QUANTITY.match(str(text).strip())
    if match is None:
        raise ValueError(f"not a quantity: {text!r}")
    value = float(match[1]) * (10.0 ** int(match[2]) if match[2] else 1.0)
    return value * _MULTIPLIER[match[3]]


@dataclass(slots=True)
class Check:
    """Violations by constraint kind (each counts pods), a few examples, and quality numbers."""

    violations: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)
    quality: dict[str, float] = field(default_factory=dict)
    on_deleted_nodes: int = 0
    """Pods bound to a node that no longer exists (churn deleted it); not checked further."""

    def add(self, kind: str, example: str) -> None:
        self.violations[kind] += 1
        if len(self.examples) < _MAX_EXAMPLES:
            self.examples.append(f"{kind}: {example}")

    @property
    def total(self) -> int:
        return sum(self.violations.values())


# -- selectors ---------------------------------------------------------------------------


def _expression_matches(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op, values = expr.get("key", ""), expr.get("operator"), expr.get("values") or []
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and values:
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def label_selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics: nil matches nothing, {} matches everything."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(_expression_matches(e, labels) for e in selector.get("matchExpressions") or ())


def _node_term_matches(term: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False  # an empty term matches no node
    labels = node["labels"]
    name_field = {"metadata.name": node["name"]}
    return all(_expression_matches(e, labels) for e in expressions) and all(
        _expression_matches(f, name_field) for f in fields
    )


def node_selector_matches(selector: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """v1.NodeSelector semantics (terms ORed, expressions ANDed), as in PV node affinity."""
    return any(_node_term_matches(term, node) for term in selector.get("nodeSelectorTerms") or ())


def node_allowed(spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """nodeSelector and required node affinity."""
    labels = node["labels"]
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    if required.get("nodeSelectorTerms") is None:
        return True
    return node_selector_matches(required, node)


# -- the check ---------------------------------------------------------------------------


@dataclass(slots=True)
class _Pod:
    name: str
    namespace: str
    labels: Mapping[str, str]
    spec: Mapping[str, Any]
    node: Mapping[str, Any]
    requests: Mapping[str, int]
    uid: str = ""
    delegated: Mapping[str, int] = field(default_factory=dict)
    """Extended resources its node does not list and a DeviceClass backs: DRA serves them."""
    extended_claim: Mapping[str, Any] = field(default_factory=dict)
    """status.extendedResourceClaimStatus: the scheduler's claim for delegated resources."""

    def domain(self, key: str) -> str | None:
        value = self.node["labels"].get(key)
        return None if value is None else str(value)


class _Index:
    """Pods matching one (selector, namespaces) pair, counted per topology domain."""

    def __init__(self, pods: Sequence[_Pod]) -> None:
        self._pods = pods
        self._cache: dict[str, tuple[set[int], dict[str, Counter[str | None]]]] = {}

    def matching(
        self, selector: Mapping[str, Any] | None, namespaces: Iterable[str] | None
    ) -> tuple[set[int], dict[str, Counter[str | None]]]:
        spaces = None if namespaces is None else sorted(namespaces)
        key = json.dumps([selector, spaces], sort_keys=True)
        if key not in self._cache:
            ids = {
                i
                for i, pod in enumerate(self._pods)
                if (spaces is None or pod.namespace in spaces)
                and label_selector_matches(selector, pod.labels)
            }
            self._cache[key] = (ids, {})
        return self._cache[key]

    def count(
        self, ids: set[int], per_key: dict[str, Counter[str | None]], key: str
    ) -> Counter[str | None]:
        if key not in per_key:
            per_key[key] = Counter(self._pods[i].domain(key) for i in ids)
        return per_key[key]


def _term_namespaces(term: Mapping[str, Any], pod: _Pod) -> list[str] | None:
    """The namespaces a pod affinity term selects; None means all (namespaceSelector: {})."""
    names = list(term.get("namespaces") or [])
    selector = term.get("namespaceSelector")
    if selector is not None and not (
        selector.get("matchLabels") or selector.get("matchExpressions")
    ):
        return None
    return names or [pod.namespace]


def _check_fit(pods: Sequence[_Pod], nodes: Mapping[str, Mapping[str, Any]], check: Check) -> None:
    """Requests counted by kube-scheduler's model (pod level, sidecars, overhead, resizes)."""
    used: dict[str, Counter[str]] = defaultdict(Counter)
    for pod in pods:
        total = used[pod.node["name"]]
        total["pods"] += 1
        total.update({r: n for r, n in pod.requests.items() if r not in pod.delegated})
    for name, total in used.items():
        allocatable = nodes[name]["allocatable"]
        for resource, amount in total.items():
            scale = 1000 if resource == "cpu" else 1
            if amount > allocatable.get(resource, 0.0) * scale * (1 + 1e-9):
                shown = amount / scale
                check.add("NodeResourcesFit", f"node {name} has {resource} {shown:g} requested")


def _check_pod_affinity(pods: Sequence[_Pod], index: _Index, check: Check) -> None:
    satisfied_preferences = preferences = 0
    for i, pod in enumerate(pods):
        affinity = pod.spec.get("affinity") or {}
        anti = (affinity.get("podAntiAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or []
        for term in anti:
            ids, per_key = index.matching(term.get("labelSelector"), _term_namespaces(term, pod))
            key = term.get("topologyKey", "")
            domain = pod.domain(key)
            others = index.count(ids, per_key, key)[domain] - (1 if i in ids else 0)
            if domain is not None and others > 0:
                check.add("InterPodAntiAffinity", f"{pod.name} shares {key}={domain} with {others}")
        required = (affinity.get("podAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or []
        for term in required:
            ids, per_key = index.matching(term.get("labelSelector"), _term_namespaces(term, pod))
            key = term.get("topologyKey", "")
            domain = pod.domain(key)
            counts = index.count(ids, per_key, key)
            itself = 1 if i in ids else 0
            alone = itself == 1 and len(ids) == 1
            if not alone and (domain is None or counts[domain] - itself == 0):
                check.add("InterPodAffinity", f"{pod.name} has no matching pod in {key}={domain}")
            elif itself and len([d for d in counts if d is not None]) > 1:
                # A self-matching group must end in one domain: the first pod picks it,
                # every later pod needs an earlier one beside it.
                largest = max((d for d in counts if d is not None), key=lambda d: (counts[d], d))
                if domain != largest:
                    check.add(
                        "InterPodAffinity", f"{pod.name} in {key}={domain}, group is in {largest}"
                    )
        preferred = (affinity.get("podAffinity") or {}).get(
            "preferredDuringSchedulingIgnoredDuringExecution"
        ) or []
        for weighted in preferred:
            term = weighted.get("podAffinityTerm") or {}
            ids, per_key = index.matching(term.get("labelSelector"), _term_namespaces(term, pod))
            key = term.get("topologyKey", "")
            others = index.count(ids, per_key, key)[pod.domain(key)] - (1 if i in ids else 0)
            preferences += 1
            satisfied_preferences += others > 0
    if preferences:
        check.quality["preferred_pod_affinity_satisfied"] = satisfied_preferences / preferences


def _check_spread(
    pods: Sequence[_Pod], nodes: Mapping[str, Mapping[str, Any]], index: _Index, check: Check
) -> None:
    seen: set[str] = set()
    for pod in pods:
        for constraint in pod.spec.get("topologySpreadConstraints") or ():
            group = json.dumps([pod.namespace, constraint, pod.spec.get("nodeSelector"),
                                pod.spec.get("affinity")], sort_keys=True)  # fmt: skip
            if group in seen:
                continue
            seen.add(group)
            key = constraint.get("topologyKey", "")
            eligible = {
                name
                for name, node in nodes.items()
                if key in node["labels"] and node_allowed(pod.spec, node)
            }
            domains = {str(nodes[name]["labels"][key]) for name in eligible}
            if not domains:
                continue
            ids, _ = index.matching(constraint.get("labelSelector"), [pod.namespace])
            counts = Counter(pods[i].domain(key) for i in ids if pods[i].node["name"] in eligible)
            per_domain = {d: counts.get(d, 0) for d in domains}
            skew = max(per_domain.values()) - min(per_domain.values())
            max_skew = int(constraint.get("maxSkew", 1))
            hard = constraint.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"
            label = "topology_skew" if hard else "preferred_topology_skew"
            check.quality[f"{label}[{key}]"] = float(skew)
            if hard and skew > max_skew:
                floor = min(per_domain.values())
                excess = sum(max(0, n - floor - max_skew) for n in per_domain.values())
                for _ in range(excess):
                    check.add(
                        "PodTopologySpread",
                        f"skew {skew} > maxSkew {max_skew} on {key}: {per_domain}",
                    )


def _check_claims(
    pods: Sequence[Mapping[str, Any]],
    nodes: Mapping[str, Mapping[str, Any]],
    claim_bodies: Iterable[Mapping[str, Any]],
    check: Check,
) -> None:
    """Each bound pod's claims are allocated on its node and reserved for it; no device twice."""
    claims = {(c["metadata"].get("namespace", ""), c["metadata"]["name"]): c for c in claim_bodies}
    owners: dict[tuple[str, str, str], str] = {}
    for claim in claims.values():
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            device = (result["driver"], result["pool"], result["device"])
            name = claim["metadata"]["name"]
            if device in owners:
                check.add("DRA device allocated twice", f"{device} to {owners[device]} and {name}")
            else:
                owners[device] = name
    for pod in pods:
        spec, meta = pod["spec"], pod["metadata"]
        node = nodes.get(spec.get("nodeName") or "")
        if node is None:
            continue
        made = {
            s["name"]: s.get("resourceClaimName")
            for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        }
        for ref in spec.get("resourceClaims") or []:
            claim_name = ref.get("resourceClaimName") or made.get(ref["name"])
            found = claims.get((meta.get("namespace", ""), claim_name or ""))
            where = f"{meta['name']} claim {ref['name']} ({claim_name}) on {node['name']}"
            status = (found or {}).get("status") or {}
            allocation = status.get("allocation")
            if found is None or not allocation:
                check.add("DRA claim not allocated", where)
                continue
            reserved = status.get("reservedFor") or []
            holders = {(r.get("resource"), r.get("name"), r.get("uid")) for r in reserved}
            if ("pods", meta["name"], meta.get("uid")) not in holders:
                check.add("DRA claim not reserved for its pod", where)
            selector = allocation.get("nodeSelector")
            if selector and not node_selector_matches(selector, node):
                check.add("DRA claim allocated off the pod's node", where)


def _backing_classes(class_bodies: Iterable[Mapping[str, Any]]) -> dict[str, set[str]]:
    """Extended resource -> the DeviceClasses that back it (Go's ExtendedResourceCache).

    A class backs its spec.extendedResourceName and the implicit name every class has.
    """
    backing: dict[str, set[str]] = defaultdict(set)
    for body in class_bodies:
        name = body["metadata"]["name"]
        backing[_IMPLICIT_EXTENDED + name].add(name)
        explicit = (body.get("spec") or {}).get("extendedResourceName")
        if explicit:
            backing[explicit].add(name)
    return backing


def _delegated(
    requests: Mapping[str, int], node: Mapping[str, Any], backing: Mapping[str, set[str]]
) -> dict[str, int]:
    """The requests DRA serves on node: no allocatable there, a class backs them.

    Go's shouldDelegateResourceToDRA (noderesources/fit.go).
    """
    allocatable = node["allocatable"]
    return {
        resource: amount
        for resource, amount in requests.items()
        if amount > 0 and resource in backing and allocatable.get(resource, 0.0) <= 0
    }


def _check_extended_claims(
    pods: Sequence[_Pod],
    claim_bodies: Iterable[Mapping[str, Any]],
    backing: Mapping[str, set[str]],
    check: Check,
) -> None:
    """A pod's DRA-backed extended resources come from its own allocated, reserved claim.

    Each regular container's request for such a resource must be mapped (requestMappings)
    to a request of the claim whose class backs the resource and which was allocated
    exactly that many devices. Devices given twice are caught with the other claims.
    """
    claims = {(c["metadata"].get("namespace", ""), c["metadata"]["name"]): c for c in claim_bodies}
    for pod in pods:
        if not pod.delegated:
            continue
        claim_name = pod.extended_claim.get("resourceClaimName") or ""
        where = f"{pod.name} extended claim ({claim_name or '-'}) on {pod.node['name']}"
        found = claims.get((pod.namespace, claim_name))
        status = (found or {}).get("status") or {}
        allocation = status.get("allocation")
        if found is None or not allocation:
            check.add("DRA extended resource claim not allocated", where)
            continue
        holders = {
            (r.get("resource"), r.get("name"), r.get("uid"))
            for r in status.get("reservedFor") or []
        }
        if ("pods", pod.name, pod.uid) not in holders:
            check.add("DRA claim not reserved for its pod", where)
        selector = allocation.get("nodeSelector")
        if selector and not node_selector_matches(selector, pod.node):
            check.add("DRA claim allocated off the pod's node", where)
        spec_requests = {
            r["name"]: r
            for r in ((found.get("spec") or {}).get("devices") or {}).get("requests") or []
        }
        given = Counter(
            r.get("request") for r in (allocation.get("devices") or {}).get("results") or []
        )
        mapped = {
            (m.get("containerName"), m.get("resourceName")): m.get("requestName")
            for m in pod.extended_claim.get("requestMappings") or []
        }
        for container in pod.spec.get("containers") or []:
            asked = (container.get("resources") or {}).get("requests") or {}
            for resource, quantity in asked.items():
                if resource not in pod.delegated:
                    continue
                request = mapped.get((container["name"], resource))
                klass = ((spec_requests.get(request or "") or {}).get("exactly") or {}).get(
                    "deviceClassName"
                )
                want, got = round(parse_quantity(quantity)), given[request]
                if request is None or klass not in backing[resource] or got != want:
                    check.add(
                        "DRA extended resource not served",
                        f"{where}: {container['name']} asks {want} {resource}, "
                        f"request {request} of class {klass} got {got}",
                    )


def _check_gangs(
    pods: Sequence[Mapping[str, Any]], group_bodies: Iterable[Mapping[str, Any]], check: Check
) -> None:
    """A gang is bound with at least minCount members, or not at all."""
    bound: Counter[tuple[str, str]] = Counter()
    for pod in pods:
        group = (pod["spec"].get("schedulingGroup") or {}).get("podGroupName")
        if group and pod["spec"].get("nodeName"):
            bound[(pod["metadata"].get("namespace", ""), group)] += 1
    for body in group_bodies:
        meta = body["metadata"]
        min_count = (
            ((body.get("spec") or {}).get("schedulingPolicy") or {}).get("gang", {}).get("minCount")
        )
        members = bound[(meta.get("namespace", ""), meta["name"])]
        if min_count is not None and 0 < members < min_count:
            check.add("partial gang", f"{meta['name']}: {members} of minCount {min_count} bound")


def check_placements(
    pod_bodies: Iterable[Mapping[str, Any]],
    node_bodies: Iterable[Mapping[str, Any]],
    claims: Iterable[Mapping[str, Any]] = (),
    pod_groups: Iterable[Mapping[str, Any]] = (),
    device_classes: Iterable[Mapping[str, Any]] = (),
) -> Check:
    """Check every bound pod in pod_bodies against the nodes in node_bodies.

    claims (ResourceClaims), pod_groups (PodGroups) and device_classes (DeviceClasses)
    are the pods' DRA and gang objects; the classes say which extended resources DRA
    serves where a node does not list them.
    """
    pod_bodies = list(pod_bodies)
    claims = list(claims)
    backing = _backing_classes(device_classes)
    check = Check()
    nodes: dict[str, dict[str, Any]] = {}
    for body in node_bodies:
        meta = body.get("metadata") or {}
        status = body.get("status") or {}
        nodes[meta["name"]] = {
            "name": meta["name"],
            "labels": dict(meta.get("labels") or {}),
            "allocatable": {
                key: parse_quantity(value)
                for key, value in (status.get("allocatable") or {}).items()
            },
        }
    pods: list[_Pod] = []
    for body in pod_bodies:
        spec = body.get("spec") or {}
        node_name = spec.get("nodeName")
        if not node_name or (body.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if node_name not in nodes:
            check.on_deleted_nodes += 1
            continue
        meta = body.get("metadata") or {}
        status = body.get("status") or {}
        requests = pod_resources(spec, status, bound=True).requests
        node = nodes[node_name]
        pods.append(_Pod(meta["name"], meta.get("namespace", ""), meta.get("labels") or {}, spec,
                         node, requests, meta.get("uid", ""), _delegated(requests, node, backing),
                         status.get("extendedResourceClaimStatus") or {}))  # fmt: skip
    for pod in pods:
        if not node_allowed(pod.spec, pod.node):
            check.add("NodeAffinity", f"{pod.name} on {pod.node['name']} {pod.node['labels']}")
    _check_fit(pods, nodes, check)
    index = _Index(pods)
    _check_pod_affinity(pods, index, check)
    _check_spread(pods, nodes, index, check)
    live = [
        body
        for body in pod_bodies
        if (body.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]
    _check_claims(live, nodes, claims, check)
    _check_extended_claims(pods, claims, backing, check)
    _check_gangs(live, pod_groups, check)
    return check
