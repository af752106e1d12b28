"""The pod selectors of Services, ReplicationControllers, ReplicaSets and StatefulSets.

PodTopologySpread's default constraints count the pods that
``helper.DefaultSelector`` selects: kube-scheduler builds it from its
informers on these four kinds. ``SelectorStore`` is the same for Podium:
watch events and LISTs go in through ``apply``, and only what
DefaultSelector reads is kept (namespace, name, the selector), parsed
into records that never raise on malformed input.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from podium.kube.kinds import Kind, object_kinds, paths
from podium.kube.labels import (
    NOTHING,
    Requirement,
    Selector,
    parse_label_selector,
    selector_from_set,
)

if TYPE_CHECKING:
    from podium.kube.objects import PodInfo

__all__ = [
    "KINDS",
    "OBJECT_KINDS",
    "RESOURCES",
    "PodSelector",
    "SelectorStore",
    "controller_of",
    "parse_selector",
]

# The kinds this store holds; KINDS (plural -> LIST path) and OBJECT_KINDS derive from it.
RESOURCES: tuple[Kind, ...] = (
    Kind("", "v1", "services", "Service", namespaced=True),
    Kind("", "v1", "replicationcontrollers", "ReplicationController", namespaced=True),
    Kind("apps", "v1", "replicasets", "ReplicaSet", namespaced=True),
    Kind("apps", "v1", "statefulsets", "StatefulSet", namespaced=True),
)
KINDS = paths(RESOURCES)
OBJECT_KINDS = object_kinds(RESOURCES)

# The controllers DefaultSelector follows, by exact group, version and kind.
_CONTROLLERS: dict[tuple[str, str, str], str] = {
    ("", "v1", "ReplicationController"): "replicationcontrollers",
    ("apps", "v1", "ReplicaSet"): "replicasets",
    ("apps", "v1", "StatefulSet"): "statefulsets",
}
_LABEL_MAPS = frozenset({"services", "replicationcontrollers"})


def _dict(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True, slots=True)
class PodSelector:
    """One object's ``spec.selector``, as DefaultSelector reads it."""

    # Services and ReplicationControllers: the label map; None when unset.
    labels: Mapping[str, str] | None = None
    # ReplicaSets and StatefulSets: the parsed LabelSelector; NOTHING when unset or invalid.
    selector: Selector = NOTHING
    resource_version: str = ""


def parse_selector(kind: str, body: Mapping[str, Any]) -> PodSelector:
    """The ``spec.selector`` of one object of store kind ``kind``; never raises."""
    raw = _dict(body.get("spec")).get("selector")
    version = str(_dict(body.get("metadata")).get("resourceVersion") or "")
    if kind in _LABEL_MAPS:
        labels = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else None
        return PodSelector(labels=labels, resource_version=version)
    parsed = parse_label_selector(raw)
    # LabelSelectorAsSelector errors and nil both leave the selector out.
    return PodSelector(
        selector=NOTHING if isinstance(parsed, str) else parsed, resource_version=version
    )


def _group_version(text: str) -> tuple[str, str] | None:
    """schema.ParseGroupVersion; None where it returns an error."""
    if text in ("", "/"):
        return "", ""
    slashes = text.count("/")
    if slashes == 0:
        return "", text
    if slashes == 1:
        group, _, version = text.partition("/")
        return group, version
    return None


def controller_of(pod: PodInfo) -> tuple[str, str] | None:
    """GetControllerOfNoCopy as (store kind, name); None unless DefaultSelector follows it."""
    refs = _dict(pod.raw.get("metadata")).get("ownerReferences")
    for ref in refs if isinstance(refs, list) else []:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            gv = _group_version(str(ref.get("apiVersion") or ""))
            kind = _CONTROLLERS.get((*gv, str(ref.get("kind") or ""))) if gv else None
            return (kind, str(ref.get("name") or "")) if kind else None
    return None


class SelectorStore:
    """The four kinds' selectors, by kind, namespace and name."""

    def __init__(self) -> None:
        self.tables: dict[str, dict[str, dict[str, PodSelector]]] = {kind: {} for kind in KINDS}

    # -- updates -------------------------------------------------------------------
    def apply(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> None:
        """One watch event or LIST item."""
        meta = _dict(body.get("metadata"))
        name = str(meta.get("name") or "")
        if not name or kind not in KINDS:
            return
        namespace = str(meta.get("namespace") or "")
        table = self.tables[kind]
        if event_type == "DELETED":
            by_name = table.get(namespace)
            if by_name is not None:
                by_name.pop(name, None)
                if not by_name:
                    del table[namespace]
            return
        table.setdefault(namespace, {})[name] = parse_selector(kind, body)

    def load(self, docs: Iterable[Mapping[str, Any]]) -> None:
        """Objects with a ``kind`` (other kinds are ignored), as if listed."""
        for doc in docs:
            kind = OBJECT_KINDS.get(str(doc.get("kind") or ""))
            if kind is not None:
                self.apply(kind, None, doc)

    def cached_versions(self, kind: str) -> dict[str, str]:
        """namespace/name -> resourceVersion."""
        return {
            f"{namespace}/{name}": obj.resource_version
            for namespace, by_name in self.tables[kind].items()
            for name, obj in by_name.items()
        }

    # -- reads ------------------------------------------------------------------------
    def default_selector(self, pod: PodInfo) -> Selector:
        """helper.DefaultSelector: the pod's Services and its controller, ANDed.

        The label maps of the pod's namespace's Services whose selector is set
        and matches the pod, merged with the map of its controlling
        ReplicationController; then the requirements of its controlling
        ReplicaSet or StatefulSet. The controller is found by name and need
        not select the pod. Empty (selects everything) when none applies.
        """
        merged: dict[str, str] = {}
        for service in self.tables["services"].get(pod.namespace, {}).values():
            labels = service.labels
            if labels is not None and all(pod.labels.get(k) == v for k, v in labels.items()):
                merged.update(labels)
        extra: tuple[Requirement, ...] = ()
        owner = controller_of(pod)
        if owner is not None:
            kind, name = owner
            found = self.tables[kind].get(pod.namespace, {}).get(name)
            if found is not None:
                merged.update(found.labels or {})
                extra = found.selector.requirements or ()
        base = selector_from_set(merged).requirements or ()
        return Selector(base + extra)
