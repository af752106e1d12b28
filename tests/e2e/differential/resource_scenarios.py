"""Random resource-accounting states for differential runs against kube-scheduler.

Each scenario is a few nodes (cpu, memory, sometimes hugepages-2Mi, sometimes
``status.declaredFeatures``), pods bound to them and one incoming pod. Pods
mix the ways v1.37 counts a request: container requests (some missing, so the
non-zero defaults apply), pod-level ``spec.resources`` requests and limits
(cpu, memory, hugepages-2Mi) with or without container requests, plain and
restartable (sidecar) init containers, hugepages, and pod overhead from a
RuntimeClass. Some bound pods get a resize status written through pods/status:
container and pod-level allocated and actuated resources above or below the
spec, with every combination of the PodResizePending (Infeasible, Deferred)
and PodResizeInProgress conditions. Incoming pods may carry a
``RestartAllContainers`` restart rule, which requires a node to declare
RestartAllContainersOnContainerExits.

A share of scenarios (``split_view``) takes issue 31's shape: a small empty
node beside larger, partly used ones, and an incoming pod whose pod-level
requests fill most of the least free room over containers that ask for little
or nothing. NodeResourcesFit's score counts such a pod by its containers,
BalancedAllocation by its pod level, so the best node depends on each view.

Nodes are filled close to capacity and the incoming pod is sized around one
node's free room, so whether and where it fits depends on exact accounting.
Every object is valid for the API server by construction (pod-level requests
cover the containers', limits cover requests, hugepages come with cpu or
memory and with equal limits). Scenarios are pure data made from a seed, so a
disagreement can be replayed exactly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

IMAGE = "registry.k8s.io/pause:3.10"
HUGEPAGES = "hugepages-2Mi"
# RuntimeClass name -> overhead.podFixed. The test creates these once.
RUNTIME_CLASSES: dict[str, dict[str, str]] = {
    "resdiff-light": {"cpu": "100m", "memory": "64Mi"},
    "resdiff-heavy": {"cpu": "450m", "memory": "320Mi"},
}
# How full a node is made, as a share of its allocatable.
FILLS = (0.0, 0.3, 0.6, 0.8, 0.9, 0.95)
# The share of scenarios whose incoming pod is _split_view_spec's, and the fills
# of their larger nodes.
SPLIT_VIEW_SHARE = 0.4
SPLIT_VIEW_FILLS = (0.1, 0.25, 0.4, 0.6)
RESTART_ALL = "RestartAllContainersOnContainerExits"
# Sorted, as the API requires; the last is a name no scheduler knows.
DECLARABLE = ("InPlacePodLevelResourcesVerticalScaling", RESTART_ALL, "VendorExampleFeature")
RESIZE_CONDITIONS: tuple[tuple[tuple[str, str], ...], ...] = (
    (),
    (("PodResizePending", "Infeasible"),),
    (("PodResizePending", "Deferred"),),
    (("PodResizeInProgress", ""),),
    (("PodResizePending", "Deferred"), ("PodResizeInProgress", "")),
    (("PodResizePending", "Infeasible"), ("PodResizeInProgress", "")),
)


@dataclass
class ResourceScenario:
    seed: int
    nodes: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    # bound pod name -> the status written through pods/status after creation
    statuses: dict[str, dict[str, Any]] = field(default_factory=dict)
    incoming: dict[str, Any] = field(default_factory=dict)
    # The incoming pod's pod-level requests far exceed its containers' (_split_view_spec).
    split_view: bool = False


@dataclass
class _Size:
    """What a pod is meant to ask for in total (millicores, MiB, hugepage MiB)."""

    cpu: int
    memory: int
    hugepages: int = 0


def _cpu(milli: int) -> str:
    return f"{milli}m"


def _mem(mib: int) -> str:
    return f"{mib}Mi"


def _node(
    rng: random.Random, name: str, cpus: tuple[int, ...] = (2, 4), gib: tuple[int, ...] = (4, 8)
) -> dict[str, Any]:
    allocatable = {
        "cpu": str(rng.choice(cpus)),
        "memory": f"{rng.choice(gib)}Gi",
        "pods": "110",
    }
    if rng.random() < 0.5:
        allocatable[HUGEPAGES] = _mem(rng.choice([64, 128, 256]))
    status: dict[str, Any] = {
        "capacity": dict(allocatable),
        "allocatable": allocatable,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
    }
    if rng.random() < 0.6:
        status["declaredFeatures"] = sorted(rng.sample(DECLARABLE, rng.randint(1, 2)))
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": status,
    }


def _split(rng: random.Random, total: int, parts: int, step: int) -> list[int]:
    """``total`` cut into ``parts`` multiples of ``step`` (the last takes the rest)."""
    out = []
    left = total
    for _ in range(parts - 1):
        share = rng.randint(0, left // step) * step
        out.append(share)
        left -= share
    out.append(left)
    return out


def _container(name: str, requests: dict[str, str], limits: dict[str, str]) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": IMAGE}
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
    if resources:
        container["resources"] = resources
    return container


def _restart_all_rule() -> list[dict[str, Any]]:
    return [{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}]


def _pod_spec(rng: random.Random, size: _Size, incoming: bool) -> dict[str, Any]:
    """Containers, init containers and pod-level resources that add up to about ``size``.

    With pod-level requests the containers share at most the pod-level value,
    so the API's consistency check holds whatever the init container layout.
    """
    pod_level = rng.random() < 0.5
    n_containers = rng.randint(1, 2)
    n_sidecars = rng.choice([0, 0, 1, 2])
    n_inits = rng.choice([0, 0, 1])
    # Container-level cpu/memory: all of it, part of it (under pod level), or none.
    share = 1.0 if not pod_level else rng.choice([0.0, 0.0, 0.5, 1.0])
    cpu_parts = _split(rng, int(size.cpu * share) // 50 * 50, n_containers + n_sidecars, 50)
    mem_parts = _split(rng, int(size.memory * share) // 32 * 32, n_containers + n_sidecars, 32)
    huge_in_containers = size.hugepages and (not pod_level or rng.random() < 0.5)
    huge_parts = _split(rng, size.hugepages if huge_in_containers else 0, n_containers, 2)

    def requests(cpu: int, mem: int, huge: int) -> tuple[dict[str, str], dict[str, str]]:
        req: dict[str, str] = {}
        lim: dict[str, str] = {}
        # A missing request (not zero) is what the scheduler fills with its defaults.
        if cpu or rng.random() < 0.15:
            req["cpu"] = _cpu(cpu)
        if mem or rng.random() < 0.15:
            req["memory"] = _mem(mem)
        if huge:
            req[HUGEPAGES] = lim[HUGEPAGES] = _mem(huge)
            if "cpu" not in req and "memory" not in req:
                req["cpu"] = _cpu(0)  # hugepages need cpu or memory beside them
        if req.get("cpu") and rng.random() < 0.3:
            lim["cpu"] = req["cpu"]
        return req, lim

    containers = []
    for i in range(n_containers):
        req, lim = requests(cpu_parts[i], mem_parts[i], huge_parts[i])
        containers.append(_container(f"c{i}", req, lim))
    init_containers = []
    for i in range(n_sidecars):
        req, lim = requests(cpu_parts[n_containers + i], mem_parts[n_containers + i], 0)
        sidecar = _container(f"s{i}", req, lim)
        sidecar["restartPolicy"] = "Always"
        init_containers.append(sidecar)
    for i in range(n_inits):
        # A plain init container runs alone (beside earlier sidecars): only its max counts.
        cpu = rng.choice([0, size.cpu // 2, size.cpu]) // 50 * 50 if not pod_level else 0
        mem = rng.choice([0, size.memory // 2, size.memory]) // 32 * 32 if not pod_level else 0
        req, lim = requests(cpu, mem, 0)
        # Put it between the sidecars, or after them.
        init_containers.insert(rng.randint(0, len(init_containers)), _container(f"i{i}", req, lim))
    spec: dict[str, Any] = {"containers": containers}
    if init_containers:
        spec["initContainers"] = init_containers
    if pod_level:
        pod_requests: dict[str, str] = {}
        pod_limits: dict[str, str] = {}
        which = rng.choice(["cpu", "memory", "both", "both"])
        if which in ("cpu", "both"):
            pod_requests["cpu"] = _cpu(size.cpu)
        if which in ("memory", "both"):
            pod_requests["memory"] = _mem(size.memory)
        if size.hugepages:
            pod_limits[HUGEPAGES] = _mem(size.hugepages)
            if rng.random() < 0.5:
                pod_requests[HUGEPAGES] = pod_limits[HUGEPAGES]
        if rng.random() < 0.3:
            for key in ("cpu", "memory"):
                if key in pod_requests:
                    pod_limits[key] = pod_requests[key]
        if rng.random() < 0.2 and "cpu" in pod_requests:
            # Limits alone: the server defaults the pod-level request from them.
            pod_limits["cpu"] = pod_requests.pop("cpu")
        if not pod_requests and not ({"cpu", "memory"} & pod_limits.keys()):
            pod_requests["cpu"] = _cpu(size.cpu)
        spec["resources"] = {
            k: v for k, v in (("requests", pod_requests), ("limits", pod_limits)) if v
        }
    if rng.random() < 0.25:
        spec["runtimeClassName"] = rng.choice(sorted(RUNTIME_CLASSES))
    if incoming and rng.random() < 0.25:
        target = rng.choice(containers + [c for c in init_containers if "restartPolicy" not in c])
        target["restartPolicy"] = "Never"
        target["restartPolicyRules"] = _restart_all_rule()
    return spec


def _split_view_spec(rng: random.Random, size: _Size) -> dict[str, Any]:
    """Pod-level cpu and memory of ``size`` over containers that ask for little or nothing.

    NodeResourcesFit's score counts this pod as its containers (100m / 200Mi for
    each without a request) while BalancedAllocation and the Filter count
    ``size``, so the best node turns on which view each score takes.
    """
    containers = []
    for i in range(rng.randint(1, 2)):
        requests: dict[str, str] = {}
        # Each at most a quarter of the pod level (an explicit zero gets no default).
        if rng.random() < 0.3:
            requests["cpu"] = _cpu(rng.randint(0, size.cpu // 200) * 50)
        if rng.random() < 0.3:
            requests["memory"] = _mem(rng.randint(0, size.memory // 128) * 32)
        containers.append(_container(f"c{i}", requests, {}))
    spec: dict[str, Any] = {
        "containers": containers,
        "resources": {"requests": {"cpu": _cpu(size.cpu), "memory": _mem(size.memory)}},
    }
    if rng.random() < 0.25:
        spec["initContainers"] = [{**_container("s0", {}, {}), "restartPolicy": "Always"}]
    if rng.random() < 0.25:
        spec["runtimeClassName"] = rng.choice(sorted(RUNTIME_CLASSES))
    return spec


def _scaled(rng: random.Random, resources: dict[str, str]) -> dict[str, str]:
    """The same cpu and memory above or below the given values (hugepages kept)."""
    out = {}
    for key, value in resources.items():
        if key == "cpu":
            out[key] = _cpu(max(0, int(int(value.rstrip("m")) * rng.choice([0.5, 0.75, 1.5, 2]))))
        elif key == "memory":
            out[key] = _mem(max(0, int(int(value.rstrip("Mi")) * rng.choice([0.5, 0.75, 1.5, 2]))))
        else:
            out[key] = value
    return out


def _pick(rng: random.Random, base: dict[str, str], size: _Size) -> dict[str, str]:
    """A status resource list: the spec's values scaled, or fresh ones where spec has none."""
    if base and rng.random() < 0.8:
        return _scaled(rng, base)
    return {
        "cpu": _cpu(rng.randint(1, max(1, size.cpu // 50)) * 50),
        "memory": _mem(rng.randint(1, max(1, size.memory // 32)) * 32),
    }


def _resize_status(rng: random.Random, spec: dict[str, Any], size: _Size) -> dict[str, Any]:
    """A pods/status body as a kubelet in the middle of some resize would write it."""
    status: dict[str, Any] = {}
    for key, containers in (
        ("containerStatuses", spec["containers"]),
        ("initContainerStatuses", spec.get("initContainers", [])),
    ):
        entries = []
        for container in containers:
            if rng.random() < 0.25:
                continue  # no status for this container (yet)
            requests = container.get("resources", {}).get("requests", {})
            entry: dict[str, Any] = {
                "name": container["name"],
                "image": IMAGE,
                "imageID": "",
                "ready": False,
                "restartCount": 0,
            }
            if rng.random() < 0.7:
                entry["allocatedResources"] = _pick(rng, requests, size)
            if rng.random() < 0.6:
                entry["resources"] = {"requests": _pick(rng, requests, size)}
            entries.append(entry)
        if entries:
            status[key] = entries
    pod_requests = spec.get("resources", {}).get("requests", {})
    if rng.random() < (0.7 if pod_requests else 0.25):
        status["allocatedResources"] = _pick(rng, pod_requests, size)
    if rng.random() < (0.7 if pod_requests else 0.25):
        status["resources"] = {"requests": _pick(rng, pod_requests, size)}
    conditions = rng.choice(RESIZE_CONDITIONS)
    if conditions:
        status["conditions"] = [
            {"type": kind, "status": "True", **({"reason": reason} if reason else {})}
            for kind, reason in conditions
        ]
    return status


def _pod(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"terminationGracePeriodSeconds": 0, **spec},
    }


def _capacity(node: dict[str, Any]) -> _Size:
    alloc = node["status"]["allocatable"]
    return _Size(
        int(alloc["cpu"]) * 1000,
        int(alloc["memory"].removesuffix("Gi")) * 1024,
        int(alloc.get(HUGEPAGES, "0Mi").removesuffix("Mi")),
    )


def generate(seed: int, prefix: str) -> ResourceScenario:
    """One scenario; node names start with ``prefix`` so runs never collide."""
    rng = random.Random(seed)
    scenario = ResourceScenario(seed, split_view=rng.random() < SPLIT_VIEW_SHARE)
    names = [f"{prefix}-n{i}" for i in range(rng.randint(2, 5))]
    if scenario.split_view:
        # One small empty node beside larger, partly used ones (issue 31's shape).
        scenario.nodes = [_node(rng, names[0], (1, 2), (4, 8))]
        scenario.nodes += [_node(rng, name, (4, 8), (8, 16)) for name in names[1:]]
    else:
        scenario.nodes = [_node(rng, name) for name in names]
    free: dict[str, _Size] = {}
    for node in scenario.nodes:
        name = node["metadata"]["name"]
        room = _capacity(node)
        if not scenario.split_view:
            fill = rng.choice(FILLS)
        else:
            fill = rng.choice(SPLIT_VIEW_FILLS) if name != names[0] else 0.0
        used = _Size(int(room.cpu * fill), int(room.memory * fill), room.hugepages // 2)
        count = rng.randint(1, 3) if fill else 0
        cpu_shares = _split(rng, used.cpu // 50 * 50, count, 50) if count else []
        mem_shares = _split(rng, used.memory // 32 * 32, count, 32) if count else []
        huge_shares = _split(rng, used.hugepages // 2 * 2, count, 2) if count else []
        for i in range(count):
            size = _Size(max(cpu_shares[i], 50), max(mem_shares[i], 32), huge_shares[i])
            if rng.random() < 0.5:
                size.hugepages = 0
            pod_name = f"{name.removeprefix(prefix + '-')}-p{i}"
            spec = _pod_spec(rng, size, incoming=False)
            spec.update(schedulerName="none", nodeName=name)
            scenario.pods.append(_pod(pod_name, spec))
            status = _resize_status(rng, spec, size) if rng.random() < 0.5 else {}
            if status:  # an empty write changes nothing, so no watch would report it
                scenario.statuses[pod_name] = status
        free[name] = _Size(room.cpu - used.cpu, room.memory - used.memory, room.hugepages)
    if scenario.split_view:
        # Most of the least free room: it fits on every node, and fills the small one.
        cpu = min(f.cpu for f in free.values()) * rng.uniform(0.7, 1.0)
        memory = min(f.memory for f in free.values()) * rng.uniform(0.7, 1.0)
        size = _Size(max(50, int(cpu) // 50 * 50), max(32, int(memory) // 32 * 32))
        scenario.incoming = _pod("incoming", _split_view_spec(rng, size))
        return scenario
    target = free[rng.choice(names)]
    roll = rng.random()
    if roll < 0.2:
        size = _Size(rng.randint(1, 4) * 50, rng.randint(1, 4) * 64)  # fits nearly anywhere
    elif roll < 0.3:
        size = _Size(rng.randint(5, 9) * 1000, rng.randint(9, 12) * 1024)  # fits nowhere
    else:
        jitter = rng.choice([-300, -150, -50, 0, 50, 150])
        size = _Size(
            max(50, (target.cpu + jitter) // 50 * 50),
            max(32, (target.memory + jitter) // 32 * 32),
        )
    if rng.random() < 0.3:
        size.hugepages = rng.choice([16, 32, 64, 128])
    scenario.incoming = _pod("incoming", _pod_spec(rng, size, incoming=True))
    return scenario
