"""Cluster objects and policies from files: what simulate, replay, explain and policy tests read.

Files are JSON or (multi-document) YAML, such as ``kubectl get nodes,pods -A -o
yaml``; List wrappers are unpacked, and kinds Podium does not read are ignored.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from podium.framework.profile import Profile
from podium.policy import PolicyError, build_profile, default_profile
from podium.state.dra import OBJECT_KINDS as DRA_KINDS
from podium.state.selectors import OBJECT_KINDS as SELECTOR_KINDS
from podium.state.volumes import OBJECT_KINDS


class InputError(RuntimeError):
    """A bad input file or policy; the CLI prints it and exits 1."""


@dataclass(slots=True)
class ClusterObjects:
    """Raw Node, Pod, SchedulerPolicy, storage and selector bodies read from files or generated."""

    nodes: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    policies: list[dict[str, Any]] = field(default_factory=list)
    # PersistentVolumes, PersistentVolumeClaims, StorageClasses and CSINodes.
    storage: list[dict[str, Any]] = field(default_factory=list)
    # Services, ReplicationControllers, ReplicaSets and StatefulSets.
    selectors: list[dict[str, Any]] = field(default_factory=list)
    # PodGroups (scheduling.k8s.io/v1beta1), for gang scheduling.
    pod_groups: list[dict[str, Any]] = field(default_factory=list)
    # PodDisruptionBudgets, which preemption respects where it can.
    pdbs: list[dict[str, Any]] = field(default_factory=list)


_LIST_KINDS = {
    "NodeList": "Node",
    "PodList": "Pod",
    "SchedulerPolicyList": "SchedulerPolicy",
    "PodGroupList": "PodGroup",
    "PodDisruptionBudgetList": "PodDisruptionBudget",
    **{f"{kind}List": kind for kind in OBJECT_KINDS},
    **{f"{kind}List": kind for kind in SELECTOR_KINDS},
    **{f"{kind}List": kind for kind in DRA_KINDS},
}


def _flatten(doc: Any, kind: str = "") -> Iterable[dict[str, Any]]:
    if doc is None:
        return
    if isinstance(doc, list):
        for item in doc:
            yield from _flatten(item, kind)
        return
    if not isinstance(doc, dict):
        raise InputError(f"expected a Kubernetes object or list, got {type(doc).__name__}")
    doc_kind = str(doc.get("kind") or "")
    if "items" in doc and (doc_kind.endswith("List") or not doc_kind):
        yield from _flatten(doc.get("items") or [], _LIST_KINDS.get(doc_kind, ""))
        return
    if not doc_kind and kind:
        doc = {**doc, "kind": kind}
    yield doc


def parse_documents(text: str, source: str = "<input>") -> list[dict[str, Any]]:
    """Objects from JSON or (multi-document) YAML text, with List wrappers unpacked."""
    stripped = text.lstrip()
    try:
        if stripped.startswith(("{", "[")):
            try:
                docs: list[Any] = [json.loads(text)]
            except json.JSONDecodeError:
                docs = list(yaml.safe_load_all(text))
        else:
            docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise InputError(f"{source}: not valid YAML or JSON: {exc}") from exc
    return list(_flatten(docs))


def read_documents(path: str) -> list[dict[str, Any]]:
    if path == "-":
        return parse_documents(sys.stdin.read(), "<stdin>")
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    return parse_documents(text, path)


def load_objects(paths: Iterable[str]) -> ClusterObjects:
    """Nodes, pods, policies, storage, selector, PodGroup and PodDisruptionBudget objects
    from files; other kinds are ignored."""
    out = ClusterObjects()
    for path in paths:
        for doc in read_documents(path):
            kind = doc.get("kind")
            if kind == "Node":
                out.nodes.append(doc)
            elif kind == "Pod":
                out.pods.append(doc)
            elif kind == "SchedulerPolicy":
                out.policies.append(doc)
            elif kind in OBJECT_KINDS or kind in DRA_KINDS:
                out.storage.append(doc)
            elif kind in SELECTOR_KINDS:
                out.selectors.append(doc)
            elif kind == "PodGroup":
                out.pod_groups.append(doc)
            elif kind == "PodDisruptionBudget":
                out.pdbs.append(doc)
    return out


def profile_from_policy(doc: Mapping[str, Any], source: str = "") -> Profile:
    """A Profile from one SchedulerPolicy object (or a bare spec), validated like the live one."""
    is_object = "spec" in doc and isinstance(doc.get("spec"), Mapping)
    spec = doc["spec"] if is_object else doc
    meta = doc.get("metadata") if is_object else None
    meta = meta if isinstance(meta, Mapping) else {}
    name = str(meta.get("name") or source or "policy")
    generation = meta.get("generation")
    try:
        return build_profile(
            spec, policy=name, generation=generation if isinstance(generation, int) else 0
        )
    except PolicyError as exc:
        raise InputError(f"policy {name}: {exc}") from exc


def load_policy(path: str | None) -> Profile:
    """The SchedulerPolicy in ``path``, or kube-scheduler's default profile when None."""
    if path is None:
        return default_profile()
    docs = read_documents(path)
    policies = [d for d in docs if d.get("kind") == "SchedulerPolicy"]
    if not policies:
        policies = [d for d in docs if not d.get("kind")]
    if not policies:
        raise InputError(f"{path}: no SchedulerPolicy found")
    if len(policies) > 1:
        raise InputError(f"{path}: {len(policies)} SchedulerPolicies; give one per file")
    return profile_from_policy(policies[0], Path(path).stem)
