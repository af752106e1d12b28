"""`podium policy test DIR`: fixture files that pin what a policy decides, like `opa test`.

Each ``*.yaml`` file in DIR is one or more test documents::

    name: gpu pods land on gpu nodes
    policy: gpu-policy.yaml        # optional, relative to the file; else --policy or default
    nodes:                         # Node objects, or shorthand {name, cpu, memory, pods,
      - {name: gpu-1, cpu: "8", extended: {nvidia.com/gpu: 1}}   #  labels, taints, ...}
      - {name: cpu-1, cpu: "8"}
    pods:                          # pods already bound (objects, or shorthand with `node`)
      - {name: web, cpu: "1", node: cpu-1}
    place:                         # placed in order; each placement is assumed for the next
      - pod: {name: train, cpu: "1", extended: {nvidia.com/gpu: 1}}
        expect: {node: gpu-1}
      - pod: {name: huge, cpu: "64"}
        expect:
          unschedulable: true
          message: "0/2 nodes are available: 2 Insufficient cpu. preemption: ..."
          reason: Insufficient cpu  # a substring of the message, when the whole is too brittle

The scheduling code is the live scheduler's, so a passing suite means the
policy decides this way in a cluster in the same state.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from podium.algorithms.default_preemption import offline_message
from podium.framework.cycle import Scheduler
from podium.framework.profile import Profile
from podium.kube.manifests import make_node, make_pod
from podium.kube.objects import parse_node, parse_pod
from podium.policy import default_profile
from podium.state.snapshot import build_snapshot
from podium.tools.inputs import InputError, load_policy

__all__ = ["CaseResult", "run_directory", "run_document"]

_NODE_KEYS = {
    "name",
    "cpu",
    "memory",
    "pods",
    "labels",
    "taints",
    "conditions",
    "unschedulable",
    "extended",
    "annotations",
}
_POD_KEYS = {
    "name",
    "cpu",
    "memory",
    "scheduler_name",
    "node_selector",
    "tolerations",
    "affinity",
    "labels",
    "priority",
    "extended",
    "annotations",
    "topology_spread_constraints",
    "preemption_policy",
    "node",
}


@dataclass(slots=True)
class CaseResult:
    source: str
    name: str
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


class FixtureError(ValueError):
    """A fixture that cannot be read as written."""


def _node(entry: Mapping[str, Any]) -> dict[str, Any]:
    if "metadata" in entry:
        return dict(entry)
    unknown = set(entry) - _NODE_KEYS
    if unknown or "name" not in entry:
        raise FixtureError(f"node shorthand needs a name; unknown keys: {sorted(unknown)}")
    return make_node(**entry)


def _pod(entry: Mapping[str, Any], index: int) -> dict[str, Any]:
    if "metadata" in entry:
        body = dict(entry)
    else:
        unknown = set(entry) - _POD_KEYS
        if unknown or "name" not in entry:
            raise FixtureError(f"pod shorthand needs a name; unknown keys: {sorted(unknown)}")
        args = {k: v for k, v in entry.items() if k != "node"}
        body = make_pod(**args, node_name=entry.get("node"))
    meta = body.setdefault("metadata", {})
    meta.setdefault("namespace", "default")
    meta.setdefault("uid", f"fixture-{index}-{meta.get('name')}")
    return body


def _check(expect: Mapping[str, Any], node: str, message: str) -> list[str]:
    problems: list[str] = []
    if "node" in expect and node != expect["node"]:
        got = node or f"unschedulable ({message})"
        problems.append(f"expected node {expect['node']!r}, got {got}")
    if expect.get("unschedulable") and node:
        problems.append(f"expected unschedulable, placed on {node!r}")
    if "message" in expect and message != expect["message"]:
        problems.append(f"expected message {expect['message']!r}, got {message!r}")
    if "reason" in expect and str(expect["reason"]) not in message:
        problems.append(f"expected a reason containing {expect['reason']!r}, got {message!r}")
    return problems


def run_document(doc: Mapping[str, Any], source: str, fallback: Profile) -> CaseResult:
    """Run one test document; a malformed one is a failure that says why, never a crash."""
    result = CaseResult(source, str(doc.get("name") or "unnamed"))
    try:
        profile = fallback
        if doc.get("policy"):
            profile = load_policy(str(Path(source).parent / str(doc["policy"])))
        nodes = [parse_node(_node(entry)) for entry in doc.get("nodes") or []]
        bound = []
        for i, entry in enumerate(doc.get("pods") or []):
            pod = parse_pod(_pod(entry, i))
            if not pod.bound:
                raise FixtureError(f"pods[{i}] ({pod.name}) is not bound; give it a node")
            bound.append(pod)
        cache, snapshot = build_snapshot(nodes, bound)
        scheduler = Scheduler(random.Random(0))
        for i, step in enumerate(doc.get("place") or []):
            pod = parse_pod(_pod(step["pod"], 10_000 + i))
            snapshot.update(cache)
            placement = scheduler.schedule(profile, snapshot, pod)
            message = ""
            if placement.node:
                cache.assume_pod(pod, placement.node)
            elif placement.diagnosis is not None:
                placement.diagnosis.post_filter_msg = offline_message(
                    profile, snapshot, pod, placement.diagnosis, random.Random(0)
                )
                message = placement.diagnosis.message()
            for problem in _check(step.get("expect") or {}, placement.node, message):
                result.failures.append(f"place[{i}] {pod.name}: {problem}")
    except (FixtureError, InputError, KeyError, TypeError, ValueError) as exc:
        result.failures.append(f"invalid fixture: {exc}")
    return result


def run_directory(directory: str, policy: str | None = None) -> list[CaseResult]:
    fallback = load_policy(policy) if policy else default_profile()
    files = sorted(Path(directory).glob("*.yaml")) + sorted(Path(directory).glob("*.yml"))
    if not files:
        raise InputError(f"{directory}: no *.yaml fixture files")
    results: list[CaseResult] = []
    for path in files:
        try:
            docs: Iterable[Any] = list(yaml.safe_load_all(path.read_text()))
        except yaml.YAMLError as exc:
            results.append(CaseResult(str(path), path.name, [f"invalid YAML: {exc}"]))
            continue
        for doc in docs:
            if isinstance(doc, Mapping) and ("place" in doc or "nodes" in doc):
                results.append(run_document(doc, str(path), fallback))
    return results


def report(results: list[CaseResult]) -> str:
    lines = []
    for result in results:
        lines.append(
            f"{'PASS' if result.ok else 'FAIL'}: {Path(result.source).name}: {result.name}"
        )
        lines.extend(f"    {failure}" for failure in result.failures)
    passed = sum(r.ok for r in results)
    lines.append(f"{passed} passed, {len(results) - passed} failed")
    return "\n".join(lines)
