"""Random DRA states for differential runs against kube-scheduler.

Each scenario is a few nodes, one ResourceSlice per node (its own pool) with
0-4 devices whose attributes (``model`` string, ``mem`` int, ``ok`` bool)
vary, some tainted (in the slice, or by a DeviceTaintRule), some already taken
by claims allocated beforehand, and one incoming pod whose claim comes from a
template: one or two requests, each exact count 1-3 or ``All`` or a
``firstAvailable`` list of two subrequests, through one of two DeviceClasses,
with a CEL selector or none, sometimes tolerating the taint, sometimes with a
``matchAttribute`` or ``distinctAttribute`` constraint; now and then a selector
that fails at run time (a missing attribute), which must abort the attempt the
same way on both sides.
Scenarios are pure data made from a seed, so a disagreement can be replayed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from podium.kube.manifests import make_node
from tests.e2e.dra import DRIVER, claim_spec, device, resource_slice

ATTR = f'device.attributes["{DRIVER}"]'
MODELS = ("a", "b", "c")
SELECTORS = (
    "",
    "",
    f'{ATTR}.model == "a"',
    f'{ATTR}.model != "c"',
    f"{ATTR}.mem >= 16",
    f"{ATTR}.ok",
    f'{ATTR}.model in ["b", "c"] && {ATTR}.mem <= 16',
    f'device.driver == "{DRIVER}"',
)
FAILING = f"{ATTR}.missing == 1"
TAINT = {"key": "example.com/broken", "value": "yes", "effect": "NoSchedule"}
TOLERATION = {"key": "example.com/broken", "operator": "Exists", "effect": "NoSchedule"}


@dataclass
class DraScenario:
    seed: int
    nodes: list[dict[str, Any]] = field(default_factory=list)
    slices: list[dict[str, Any]] = field(default_factory=list)
    # Claims allocated before the pod comes: (name, spec, allocation).
    taken: list[tuple[str, dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    template: dict[str, Any] = field(default_factory=dict)
    # DeviceTaintRules: (name, spec).
    taint_rules: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def _body(rng: random.Random, classes: tuple[str, str], all_ok: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": rng.choice(classes)}
    if all_ok and rng.random() < 0.1:
        body["allocationMode"] = "All"
    else:
        body["count"] = rng.choice((1, 1, 1, 1, 2, 3))
    roll = rng.random()
    selector = FAILING if roll < 0.04 else rng.choice(SELECTORS)
    if selector:
        body["selectors"] = [{"cel": {"expression": selector}}]
    if rng.random() < 0.3:
        body["tolerations"] = [dict(TOLERATION)]
    return body


def _request(rng: random.Random, name: str, classes: tuple[str, str]) -> dict[str, Any]:
    if rng.random() < 0.25:
        subs = [{"name": f"s{i}", **_body(rng, classes, False)} for i in range(2)]
        return {"name": name, "firstAvailable": subs}
    return {"name": name, "exactly": _body(rng, classes, True)}


def generate(seed: int, prefix: str, classes: tuple[str, str]) -> DraScenario:
    """One scenario; node, slice and claim names start with ``prefix``."""
    rng = random.Random(seed)
    scenario = DraScenario(seed)
    names = [f"{prefix}-n{i}" for i in range(rng.randint(1, 4))]
    # Different sizes, so that resource scores often make one node the single best.
    scenario.nodes = [make_node(name, cpu=rng.choice(("2", "4", "8", "16"))) for name in names]
    free: list[tuple[str, str]] = []
    for name in names:
        count = rng.choice((0, 1, 2, 3, 4, 5, 6))
        devices = [
            device(
                f"gpu-{i}",
                model=rng.choice(MODELS),
                mem=rng.choice((8, 16, 32)),
                ok=rng.random() < 0.7,
            )
            for i in range(count)
        ]
        for item in devices:
            if rng.random() < 0.1:
                item["taints"] = [dict(TAINT)]
        scenario.slices.append(resource_slice(f"{name}-gpus", name, devices))
        free.extend((name, d["name"]) for d in devices)
        if devices and rng.random() < 0.15:
            target = rng.choice(devices)["name"]
            selector = {"driver": DRIVER, "pool": name, "device": target}
            rule = {"deviceSelector": selector, "taint": dict(TAINT)}
            scenario.taint_rules.append((f"{name}-taint", rule))
    rng.shuffle(free)
    for i in range(rng.choice((0, 0, 1, 2))):
        if not free:
            break
        node, taken = free.pop()
        spec = claim_spec({"name": "gpu", "exactly": {"deviceClassName": classes[0]}})
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        allocation = {
            "devices": {
                "results": [{"request": "gpu", "driver": DRIVER, "pool": node, "device": taken}]
            },
            "nodeSelector": {"nodeSelectorTerms": [term]},
        }
        scenario.taken.append((f"{prefix}-taken{i}", spec, allocation))
    requests = [_request(rng, f"r{i}", classes) for i in range(rng.choice((1, 1, 2)))]
    scenario.template = claim_spec(*requests)
    if len(requests) == 2 and rng.random() < 0.4:
        kind = rng.choice(("matchAttribute", "distinctAttribute"))
        constraint = {"requests": ["r0", "r1"], kind: f"{DRIVER}/model"}
        scenario.template["devices"]["constraints"] = [constraint]
    return scenario


# -- DRA-backed extended resources ------------------------------------------------------------

# Where a pod's extended resource can come from: devices in ResourceSlices (through a
# DeviceClass's extendedResourceName), device plugins (the node's capacity), both on
# different nodes, or the class's implicit name deviceclass.resource.kubernetes.io/<class>.
EXTENDED_MODES = ("dra", "plugin", "both", "implicit")


@dataclass
class ExtendedScenario:
    seed: int
    mode: str
    nodes: list[dict[str, Any]] = field(default_factory=list)
    slices: list[dict[str, Any]] = field(default_factory=list)
    # The pod's containers: (name, amount, init?, sidecar?) in spec order, inits first.
    containers: list[tuple[str, int, bool, bool]] = field(default_factory=list)


def generate_extended(seed: int, prefix: str, resource: str) -> ExtendedScenario:
    """One scenario for ``resource`` (the explicit name, or an implicit one in mode
    ``implicit``): 1-4 nodes, each offering 0-4 devices in a slice or 0-4 units of
    device-plugin capacity in its status; a pod whose main container asks 1-3, now and
    then with a second container, an init container or a sidecar asking too."""
    rng = random.Random(seed)
    mode = EXTENDED_MODES[seed // 4 % len(EXTENDED_MODES)]
    scenario = ExtendedScenario(seed, mode)
    names = [f"{prefix}-n{i}" for i in range(rng.randint(1, 4))]
    for i, name in enumerate(names):
        plugin = mode == "plugin" or (mode == "both" and i % 2 == 1)
        count = rng.choice((0, 1, 2, 3, 4))
        extended = {resource: count} if plugin else None
        cpu = rng.choice(("2", "4", "8", "16"))
        scenario.nodes.append(make_node(name, cpu=cpu, extended=extended))
        devices = [] if plugin else [device(f"gpu-{d}", model="a") for d in range(count)]
        scenario.slices.append(resource_slice(f"{name}-gpus", name, devices))
    roll = rng.random()
    if roll < 0.15:
        scenario.containers.append(("init", rng.randint(1, 3), True, False))
    elif roll < 0.25:
        scenario.containers.append(("sidecar", 1, True, True))
    scenario.containers.append(("main", rng.randint(1, 3), False, False))
    if rng.random() < 0.2:
        scenario.containers.append(("second", 1, False, False))
    return scenario
