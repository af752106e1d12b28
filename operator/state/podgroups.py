"""Workloads and PodGroups (scheduling.k8s.io/v1beta1), as the gang plugin reads them.

The API is beta and off by default (the GenericWorkload gate): the scheduler watches
these kinds only when discovery shows them served (``WORKLOAD_API``). A PodGroup's
``schedulingPolicy`` is ``basic`` (min count 1) or ``gang`` with ``minCount``; pods join
with ``spec.schedulingGroup.podGroupName`` in the same namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from podium.kube.kinds import Kind, paths
from podium.kube.objects import PodInfo

__all__ = [
    "INITIALLY_SCHEDULED",
    "KINDS",
    "POD_GROUPS",
    "RESOURCES",
    "WORKLOAD_API",
    "PodGroup",
    "PodGroupStore",
    "parse_pod_group",
]

WORKLOAD_API = "/apis/scheduling.k8s.io/v1beta1"
# The kinds this store holds (watched only where discovery shows them served).
RESOURCES: tuple[Kind, ...] = (
    Kind("scheduling.k8s.io", "v1beta1", "workloads", "Workload", namespaced=True),
    Kind("scheduling.k8s.io", "v1beta1", "podgroups", "PodGroup", namespaced=True),
)
KINDS = paths(RESOURCES)
# The kind of a queueing hint for a group: its PodGroup changed, or a member arrived.
POD_GROUPS = "podgroups"
INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"


@dataclass(frozen=True, slots=True)
class PodGroup:
    namespace: str
    name: str
    # None for the basic policy; the gang's minCount otherwise.
    min_count: int | None
    generation: int
    resource_version: str
    conditions: tuple[Mapping[str, Any], ...] = ()
    # spec.priority; unset is 0 (Go's PodGroupPriority). Every member must have it.
    priority: int = 0
    # spec.schedulingConstraints.topology[0].key: one domain for the whole group.
    topology_key: str = ""
    # spec.disruptionMode.all: preemption evicts the group's pods together (unset: single).
    disruption_all: bool = False
    uid: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def gang(self) -> bool:
        return self.min_count is not None

    @property
    def required(self) -> int:
        """Members placed together: minCount, or 1 for a basic group (Go's getMinCount)."""
        return self.min_count if self.min_count is not None else 1

    def condition(self, kind: str = INITIALLY_SCHEDULED) -> Mapping[str, Any] | None:
        return next((c for c in self.conditions if c.get("type") == kind), None)


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def parse_pod_group(body: Mapping[str, Any]) -> PodGroup:
    meta = _dict(body.get("metadata"))
    spec = _dict(body.get("spec"))
    gang = _dict(spec.get("schedulingPolicy")).get("gang")
    min_count: int | None = None
    if isinstance(gang, Mapping):
        raw = gang.get("minCount")
        min_count = raw if isinstance(raw, int) and not isinstance(raw, bool) else 0
    generation = meta.get("generation")
    priority = spec.get("priority")
    raw_topology = _dict(spec.get("schedulingConstraints")).get("topology")
    topology = raw_topology if isinstance(raw_topology, list) else []
    conditions = _dict(body.get("status")).get("conditions")
    return PodGroup(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
        min_count=min_count,
        generation=generation if isinstance(generation, int) else 0,
        resource_version=str(meta.get("resourceVersion") or ""),
        conditions=tuple(c for c in conditions or () if isinstance(c, Mapping)),
        priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else 0,
        topology_key=str(_dict(topology[0]).get("key") or "") if topology else "",
        uid=str(meta.get("uid") or ""),
        disruption_all=isinstance(_dict(spec.get("disruptionMode")).get("all"), Mapping),
    )


@dataclass(slots=True)
class PodGroupStore:
    """PodGroups by namespace/name, and Workload names (nothing is scheduled from them)."""

    groups: dict[str, PodGroup] = field(default_factory=dict)
    workloads: dict[str, str] = field(default_factory=dict)  # key -> resourceVersion
    # Whether the API server serves the Workload API (set once, from discovery).
    served: bool = False
    # Every known pod of each group, pending or placed: a group's members in O(its size).
    _members: dict[str, set[str]] = field(default_factory=dict)
    _group_of: dict[str, str] = field(default_factory=dict)

    def get(self, namespace: str, name: str) -> PodGroup | None:
        return self.groups.get(f"{namespace}/{name}")

    def join(self, pod: PodInfo) -> bool:
        """Index a pod of a group (spec.schedulingGroup is immutable); True if new."""
        if pod.uid in self._group_of:
            return False
        self._group_of[pod.uid] = pod.group_key
        self._members.setdefault(pod.group_key, set()).add(pod.uid)
        return True

    def leave(self, uid: str) -> None:
        key = self._group_of.pop(uid, None)
        if key is not None:
            members = self._members[key]
            members.discard(uid)
            if not members:
                del self._members[key]

    def member_uids(self, key: str) -> frozenset[str]:
        return frozenset(self._members.get(key, ()))

    def apply(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> PodGroup | None:
        """Apply one watch event; returns the PodGroup when one was added or changed."""
        meta = _dict(body.get("metadata"))
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"
        if kind == "workloads":
            if event_type == "DELETED":
                self.workloads.pop(key, None)
            else:
                self.workloads[key] = str(meta.get("resourceVersion") or "")
            return None
        if event_type == "DELETED":
            self.groups.pop(key, None)
            return None
        group = parse_pod_group(body)
        old = self.groups.get(key)
        self.groups[key] = group
        if old is not None and (old.min_count, old.generation) == (
            group.min_count,
            group.generation,
        ):
            return None  # a status write (ours included) changes no decision
        return group

    def written(self, key: str, conditions: tuple[Mapping[str, Any], ...]) -> None:
        """Conditions this scheduler is writing: the next cycle must see them before the
        watch brings them back (a late member must not set a scheduled group to False)."""
        group = self.groups.get(key)
        if group is not None:
            self.groups[key] = replace(group, conditions=conditions)

    def cached_versions(self, kind: str) -> dict[str, str]:
        if kind == "workloads":
            return dict(self.workloads)
        return {key: group.resource_version for key, group in self.groups.items()}
