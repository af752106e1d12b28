"""Typed views of the Pod and Node objects the scheduler reads.

Watch events carry raw JSON. Each object is parsed once, when its event
arrives, into a slotted dataclass; plugins then read fields instead of
walking dicts on every scheduling cycle. Parsing never raises for shapes the
API server can produce: unknown or malformed values become a recorded
``problem`` so that one poison object cannot stop the scheduler.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from podium.kube.quantity import parse_resource_list, whole
from podium.kube.resource_memo import kept_pod_resources

__all__ = [
    "HostPort",
    "NodeInfo",
    "PodClaim",
    "PodInfo",
    "Taint",
    "Toleration",
    "normalize_image",
    "parse_node",
    "parse_pod",
    "requirements_changed",
    "slim_node",
    "slim_pod",
    "usage_changed",
]

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
Json = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: Taint) -> bool:
        """Toleration.ToleratesTaint; tolerationSeconds does not matter for scheduling."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"


@dataclass(frozen=True, slots=True)
class HostPort:
    protocol: str
    host_ip: str
    port: int


@dataclass(frozen=True, slots=True)
class PodClaim:
    """spec.resourceClaims[i], with the generated name from status.resourceClaimStatuses.

    ``generated`` is None while the status has no entry for a template claim, and ''
    when the entry says no claim was needed (resourceClaimName null).
    """

    name: str
    claim_name: str = ""
    template: str = ""
    generated: str | None = None


@dataclass(slots=True)
class PodInfo:
    uid: str
    namespace: str
    name: str
    scheduler_name: str
    node_name: str
    priority: int
    created: float
    labels: dict[str, str]
    # What the pod asks of a node, from podium.kube.resources (kube-scheduler's model).
    requests: dict[str, int]
    nonzero_cpu: int
    nonzero_memory: int
    score_cpu: int
    score_memory: int
    score_requests: dict[str, int] | None
    qos: str
    host_ports: tuple[HostPort, ...]
    node_selector: dict[str, str]
    affinity: dict[str, Any]
    tolerations: tuple[Toleration, ...]
    topology_spread: tuple[dict[str, Any], ...]
    volumes: tuple[dict[str, Any], ...]
    images: tuple[str, ...]
    scheduling_gates: tuple[str, ...]
    phase: str
    deleting: bool
    nominated_node: str
    preemption_policy: str
    resource_version: str
    conditions: dict[str, dict[str, Any]]
    # The body as received, less what ``slim_pod`` drops (managedFields, annotations):
    # plugins read spec, status and metadata.ownerReferences from it.
    raw: Json
    problem: str = ""
    # spec.schedulingGroup.podGroupName: the PodGroup (same namespace) the pod belongs to.
    pod_group: str = ""
    # spec.resourceClaims (DynamicResources); empty for almost every pod.
    resource_claims: tuple[PodClaim, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def group_key(self) -> str:
        return f"{self.namespace}/{self.pod_group}"

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def bound(self) -> bool:
        return bool(self.node_name)

    @property
    def best_effort(self) -> bool:
        return self.qos == "BestEffort"


# What the scheduler reads of a pod, in two views, kept here beside PodInfo so that a
# new field is added to the right one. The cache and the queue use them to skip work
# on updates that cannot change a decision (status writes, annotations).


def usage_changed(old: PodInfo, new: PodInfo) -> bool:
    """A bound pod changed what it holds on its node or what other pods' rules see of it:
    requests, host ports, labels (affinity and spreading), its own affinity terms, its
    deletion (spreading skips terminating pods) and its start time (preemption orders
    victims by it). Each of the last two changes once in a pod's life."""
    return (
        old.requests != new.requests
        or old.nonzero_cpu != new.nonzero_cpu
        or old.nonzero_memory != new.nonzero_memory
        or old.host_ports != new.host_ports
        or old.labels != new.labels
        or old.affinity != new.affinity
        or old.deleting != new.deleting
        or _start_time(old) != _start_time(new)
    )


def _start_time(pod: PodInfo) -> object:
    status = pod.raw.get("status") if isinstance(pod.raw, Mapping) else None
    return status.get("startTime") if isinstance(status, Mapping) else None


def requirements_changed(old: PodInfo, new: PodInfo) -> bool:
    """A pending pod changed what it asks of a node, so a rejected pod may now fit."""
    return (
        old.requests != new.requests
        or old.tolerations != new.tolerations
        or old.node_selector != new.node_selector
        or old.affinity != new.affinity
        or old.labels != new.labels
        or old.topology_spread != new.topology_spread
        or old.resource_claims != new.resource_claims
    )


@dataclass(slots=True)
class NodeInfo:
    """One Node as the API server reports it; usage lives in the cache."""

    name: str
    uid: str
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    allocatable: dict[str, int]
    conditions: dict[str, str]
    images: dict[str, int]
    # The body as received, less what ``slim_node`` drops (managedFields, status.images).
    raw: Json
    problems: list[str] = field(default_factory=list)
    # status.declaredFeatures, which NodeDeclaredFeatures matches pods against.
    declared_features: frozenset[str] = frozenset()

    @property
    def zone(self) -> str:
        region = self.labels.get("topology.kubernetes.io/region", "")
        zone = self.labels.get("topology.kubernetes.io/zone", "")
        return f"{region}:\x00:{zone}" if region or zone else ""


# Never read once parsed, yet often the largest part of a body: the field managers of
# every writer, and annotations (kubectl's last-applied copy of the whole object).
_POD_METADATA_DROPPED = ("managedFields", "annotations")


def _without(body: Json, part: str, dropped: tuple[str, ...]) -> Json:
    """``body`` with the keys ``dropped`` left out of ``body[part]``; shares everything else."""
    inner = body.get(part)
    if not isinstance(inner, Mapping) or not any(key in inner for key in dropped):
        return body
    return {**body, part: {k: v for k, v in inner.items() if k not in dropped}}


def slim_pod(body: Json) -> Json:
    """What a PodInfo keeps of its body (a cached pod costs about a third as much)."""
    return _without(body, "metadata", _POD_METADATA_DROPPED)


def slim_node(body: Json) -> Json:
    """What a NodeInfo keeps of its body: images are parsed into ``NodeInfo.images``;
    annotations stay (NodePreferAvoidPods reads one)."""
    return _without(_without(body, "metadata", ("managedFields",)), "status", ("images",))


def _parse_time(value: object) -> float:
    if not isinstance(value, str):
        return 0.0
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _dict(value: object) -> dict[str, Any]:
    # A parsed JSON object is a dict: the exact type check skips the ABC's slower one.
    if type(value) is dict or isinstance(value, Mapping):
        return dict(value)
    return {}


def _list(value: object) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _str_map(value: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in _dict(value).items()}


def _resource_list(value: object, problems: list[str]) -> dict[str, int]:
    amounts = parse_resource_list(value, "", problems) or {}
    return {name: whole(name, amount) for name, amount in amounts.items()}


def _host_ports(spec: Json) -> tuple[HostPort, ...]:
    ports: list[HostPort] = []
    containers = _list(spec.get("containers")) + [
        c for c in _list(spec.get("initContainers")) if _dict(c).get("restartPolicy") == "Always"
    ]
    for container in containers:
        for port in _list(_dict(container).get("ports")):
            port = _dict(port)
            host_port = port.get("hostPort")
            if isinstance(host_port, int) and host_port > 0:
                ports.append(
                    HostPort(
                        str(port.get("protocol") or "TCP"),
                        str(port.get("hostIP") or "0.0.0.0"),
                        host_port,
                    )
                )
    return tuple(ports)


_TOLERATIONS: dict[tuple[str, ...], Toleration] = {}
_KEPT_TOLERATIONS = 256


def parse_toleration(raw: object) -> Toleration:
    """The toleration, shared with every pod that carries an equal one: most pods carry
    the same two (the not-ready and unreachable ones admission adds)."""
    item = _dict(raw)
    fields = (
        str(item.get("key") or ""),
        str(item.get("operator") or ""),
        str(item.get("value") or ""),
        str(item.get("effect") or ""),
    )
    kept = _TOLERATIONS.get(fields)
    if kept is None:
        key, operator, value, effect = fields
        kept = Toleration(key=key, operator=operator, value=value, effect=effect)
        if len(_TOLERATIONS) >= _KEPT_TOLERATIONS:
            del _TOLERATIONS[next(iter(_TOLERATIONS))]
        _TOLERATIONS[fields] = kept
    return kept


def normalize_image(name: str) -> str:
    """Image names without a tag mean ``:latest`` (ImageLocality's normalizedImageName)."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def _pod_claims(spec: Json, status: Json) -> tuple[PodClaim, ...]:
    raw = _list(spec.get("resourceClaims"))
    if not raw:
        return ()
    generated: dict[str, str] = {}
    for entry in _list(status.get("resourceClaimStatuses")):
        entry = _dict(entry)
        generated[str(entry.get("name") or "")] = str(entry.get("resourceClaimName") or "")
    out = []
    for item in raw:
        item = _dict(item)
        name = str(item.get("name") or "")
        out.append(
            PodClaim(
                name=name,
                claim_name=str(item.get("resourceClaimName") or ""),
                template=str(item.get("resourceClaimTemplateName") or ""),
                generated=generated.get(name),
            )
        )
    return tuple(out)


def parse_pod(body: Json) -> PodInfo:
    meta = _dict(body.get("metadata"))
    spec = _dict(body.get("spec"))
    status = _dict(body.get("status"))
    node_name = str(spec.get("nodeName") or "")
    resources = kept_pod_resources(spec, status, bool(node_name))
    priority = spec.get("priority")
    containers = _list(spec.get("initContainers")) + _list(spec.get("containers"))
    conditions = {
        str(c.get("type")): dict(c) for c in _list(status.get("conditions")) if isinstance(c, dict)
    }
    return PodInfo(
        uid=str(meta.get("uid") or ""),
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
        node_name=node_name,
        priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else 0,
        created=_parse_time(meta.get("creationTimestamp")),
        labels=_str_map(meta.get("labels")),
        requests=resources.requests,
        nonzero_cpu=resources.nonzero_cpu,
        nonzero_memory=resources.nonzero_memory,
        score_cpu=resources.score_cpu,
        score_memory=resources.score_memory,
        score_requests=resources.score_requests,
        qos=resources.qos,
        host_ports=_host_ports(spec),
        node_selector=_str_map(spec.get("nodeSelector")),
        affinity=_dict(spec.get("affinity")),
        tolerations=tuple(parse_toleration(t) for t in _list(spec.get("tolerations"))),
        topology_spread=tuple(_dict(c) for c in _list(spec.get("topologySpreadConstraints"))),
        volumes=tuple(_dict(v) for v in _list(spec.get("volumes"))),
        images=tuple(
            normalize_image(str(_dict(c).get("image"))) for c in containers if _dict(c).get("image")
        ),
        scheduling_gates=tuple(
            str(_dict(g).get("name") or "") for g in _list(spec.get("schedulingGates"))
        ),
        phase=str(status.get("phase") or ""),
        deleting=bool(meta.get("deletionTimestamp")),
        nominated_node=str(status.get("nominatedNodeName") or ""),
        preemption_policy=str(spec.get("preemptionPolicy") or "PreemptLowerPriority"),
        resource_version=str(meta.get("resourceVersion") or ""),
        conditions=conditions,
        raw=slim_pod(body),
        problem="; ".join(resources.problems),
        pod_group=str(_dict(spec.get("schedulingGroup")).get("podGroupName") or ""),
        resource_claims=_pod_claims(spec, status),
    )


def parse_node(body: Json) -> NodeInfo:
    meta = _dict(body.get("metadata"))
    spec = _dict(body.get("spec"))
    status = _dict(body.get("status"))
    problems: list[str] = []
    taints = []
    for raw in _list(spec.get("taints")):
        item = _dict(raw)
        taints.append(
            Taint(
                key=str(item.get("key") or ""),
                value=str(item.get("value") or ""),
                effect=str(item.get("effect") or ""),
            )
        )
    images: dict[str, int] = {}
    for image in _list(status.get("images")):
        image = _dict(image)
        size = image.get("sizeBytes")
        size = size if isinstance(size, int) and size > 0 else 0
        # Node image names stay as reported; only the pod's names are normalised.
        for name in _list(image.get("names")):
            images[str(name)] = size
    conditions = {
        str(_dict(c).get("type")): str(_dict(c).get("status"))
        for c in _list(status.get("conditions"))
    }
    return NodeInfo(
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        labels=_str_map(meta.get("labels")),
        taints=tuple(taints),
        unschedulable=bool(spec.get("unschedulable")),
        allocatable=_resource_list(status.get("allocatable"), problems),
        conditions=conditions,
        images=images,
        raw=slim_node(body),
        problems=problems,
        declared_features=frozenset(
            f for f in _list(status.get("declaredFeatures")) if isinstance(f, str)
        ),
    )
