"""Random cluster states and pods for differential runs against kube-scheduler.

Each scenario is a handful of nodes (capacities, zones, labels, taints,
cordons, images), pods already bound to them, and one incoming pod that uses
a random mix of the default profile's features: requests, nodeSelector,
required and preferred node affinity (every operator, matchFields),
tolerations, host ports, topology spread, and required and preferred pod
(anti-)affinity. Scenarios are pure data, generated from a seed, so a
disagreement can be replayed exactly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

ZONES = ("zone-a", "zone-b", "zone-c")
APPS = ("web", "db", "cache")
TAINTS = (
    {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
    {"key": "spot", "value": "true", "effect": "PreferNoSchedule"},
    {"key": "maintenance", "value": "", "effect": "NoExecute"},
)
IMAGE = "registry.k8s.io/nginx:1.25"
IMAGE_SIZE = 300 * 2**20


@dataclass
class Scenario:
    seed: int
    nodes: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    incoming: dict[str, Any] = field(default_factory=dict)


def _node(rng: random.Random, name: str) -> dict[str, Any]:
    cpu = rng.choice(["1", "2", "4", "8"])
    memory = rng.choice(["2Gi", "4Gi", "8Gi", "16Gi"])
    pods = rng.choice(["110", "110", "110", "3"])
    labels = {
        "kubernetes.io/hostname": name,
        "topology.kubernetes.io/zone": rng.choice(ZONES),
    }
    if rng.random() < 0.7:
        labels["disk"] = rng.choice(["ssd", "hdd"])
    if rng.random() < 0.7:
        labels["tier"] = str(rng.randint(1, 5))
    spec: dict[str, Any] = {}
    if rng.random() < 0.25:
        spec["taints"] = [dict(rng.choice(TAINTS))]
    if rng.random() < 0.1:
        spec["unschedulable"] = True
    status: dict[str, Any] = {
        "capacity": {"cpu": cpu, "memory": memory, "pods": pods},
        "allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
    }
    if rng.random() < 0.4:
        # One image has one size everywhere, as with a real digest.
        status["images"] = [{"names": [IMAGE], "sizeBytes": IMAGE_SIZE}]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": status,
    }


def _container(rng: random.Random, cpu_max: int, with_ports: bool) -> dict[str, Any]:
    requests: dict[str, str] = {}
    if rng.random() < 0.85:
        requests["cpu"] = f"{rng.randint(1, cpu_max) * 100}m"
    if rng.random() < 0.8:
        requests["memory"] = f"{rng.randint(1, 16) * 128}Mi"
    container: dict[str, Any] = {
        "name": "c",
        "image": rng.choice([IMAGE, "registry.k8s.io/pause:3.10"]),
    }
    if requests:
        container["resources"] = {"requests": requests, "limits": dict(requests)}
    if with_ports:
        container["ports"] = [{"containerPort": 80, "hostPort": rng.choice([8080, 9090])}]
    return container


def _selector(rng: random.Random) -> dict[str, Any]:
    return {"matchLabels": {"app": rng.choice(APPS)}}


def _pod_term(rng: random.Random) -> dict[str, Any]:
    return {
        "labelSelector": _selector(rng),
        "topologyKey": rng.choice(["topology.kubernetes.io/zone", "kubernetes.io/hostname"]),
    }


def _node_requirement(rng: random.Random, names: list[str]) -> dict[str, Any]:
    op = rng.choice(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])
    if op in ("Gt", "Lt"):
        return {"key": "tier", "operator": op, "values": [str(rng.randint(1, 5))]}
    key = rng.choice(["disk", "topology.kubernetes.io/zone", "tier"])
    if op in ("Exists", "DoesNotExist"):
        return {"key": key, "operator": op}
    values = {"disk": ["ssd", "hdd"], "tier": ["1", "2", "3"]}.get(key, list(ZONES))
    return {"key": key, "operator": op, "values": rng.sample(values, rng.randint(1, 2))}


def _affinity(rng: random.Random, names: list[str]) -> dict[str, Any]:
    affinity: dict[str, Any] = {}
    node_affinity: dict[str, Any] = {}
    if rng.random() < 0.3:
        terms = []
        for _ in range(rng.randint(1, 2)):
            term: dict[str, Any] = {"matchExpressions": [_node_requirement(rng, names)]}
            if rng.random() < 0.15:
                term = {
                    "matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": [rng.choice(names)]}
                    ]
                }
            terms.append(term)
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": terms
        }
    if rng.random() < 0.3:
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {
                "weight": rng.randint(1, 100),
                "preference": {"matchExpressions": [_node_requirement(rng, names)]},
            }
            for _ in range(rng.randint(1, 2))
        ]
    if node_affinity:
        affinity["nodeAffinity"] = node_affinity
    for kind in ("podAffinity", "podAntiAffinity"):
        section: dict[str, Any] = {}
        if rng.random() < 0.2:
            section["requiredDuringSchedulingIgnoredDuringExecution"] = [_pod_term(rng)]
        if rng.random() < 0.2:
            section["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": rng.randint(1, 100), "podAffinityTerm": _pod_term(rng)}
            ]
        if section:
            affinity[kind] = section
    return affinity


def _pod(
    rng: random.Random, name: str, scheduler: str, names: list[str], incoming: bool
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "terminationGracePeriodSeconds": 0,
        "containers": [_container(rng, 30 if incoming else 8, incoming and rng.random() < 0.15)],
    }
    labels = {"app": rng.choice(APPS)}
    if incoming:
        if rng.random() < 0.25:
            spec["nodeSelector"] = {"disk": rng.choice(["ssd", "hdd"])}
        affinity = _affinity(rng, names)
        if affinity:
            spec["affinity"] = affinity
        if rng.random() < 0.4:
            spec["tolerations"] = [
                rng.choice(
                    [
                        {
                            "key": "dedicated",
                            "operator": "Equal",
                            "value": "gpu",
                            "effect": "NoSchedule",
                        },
                        {"key": "dedicated", "operator": "Exists"},
                        {"operator": "Exists"},
                        {"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"},
                        {"key": "maintenance", "operator": "Exists", "effect": "NoExecute"},
                    ]
                )
            ]
        if rng.random() < 0.3:
            spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": rng.randint(1, 2),
                    "topologyKey": rng.choice(
                        ["topology.kubernetes.io/zone", "kubernetes.io/hostname"]
                    ),
                    "whenUnsatisfiable": rng.choice(["DoNotSchedule", "ScheduleAnyway"]),
                    "labelSelector": {"matchLabels": {"app": labels["app"]}},
                }
            ]
    elif rng.random() < 0.15:
        spec["affinity"] = {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_pod_term(rng)]}
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }


def generate(seed: int, prefix: str) -> Scenario:
    """One scenario; node names start with ``prefix`` so runs never collide."""
    rng = random.Random(seed)
    scenario = Scenario(seed)
    names = [f"{prefix}-n{i}" for i in range(rng.randint(3, 7))]
    scenario.nodes = [_node(rng, name) for name in names]
    for i in range(rng.randint(0, 8)):
        pod = _pod(rng, f"existing-{i}", "none", names, incoming=False)
        pod["spec"]["nodeName"] = rng.choice(names)
        scenario.pods.append(pod)
    scenario.incoming = _pod(rng, "incoming", "", names, incoming=True)
    return scenario
