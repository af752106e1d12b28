"""Random DRA states for differential runs against kube-scheduler.

Each scenario is a few nodes, one ResourceSlice per node (its own pool) with
0-4 devices whose attributes (``model`` string, ``mem`` int, ``ok`` bool)
vary, some devices already taken by claims allocated beforehand, and one
incoming pod whose claim comes from a template: one or two requests, each
exact count 1-3 or ``All``, through one of two DeviceClasses, with a CEL
selector or none; now and then a selector that fails at run time (a missing
attribute), which must abort the attempt the same way on both sides.
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


@dataclass
class DraScenario:
    seed: int
    nodes: list[dict[str, Any]] = field(default_factory=list)
    slices: list[dict[str, Any]] = field(default_factory=list)
    # Claims allocated before the pod comes: (name, spec, allocation).
    taken: list[tuple[str, dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    template: dict[str, Any] = field(default_factory=dict)


def _request(rng: random.Random, name: str, classes: tuple[str, str]) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": rng.choice(classes)}
    if rng.random() < 0.1:
        body["allocationMode"] = "All"
    else:
        body["count"] = rng.choice((1, 1, 1, 2, 3))
    roll = rng.random()
    selector = FAILING if roll < 0.04 else rng.choice(SELECTORS)
    if selector:
        body["selectors"] = [{"cel": {"expression": selector}}]
    return {"name": name, "exactly": body}


def generate(seed: int, prefix: str, classes: tuple[str, str]) -> DraScenario:
    """One scenario; node, slice and claim names start with ``prefix``."""
    rng = random.Random(seed)
    scenario = DraScenario(seed)
    names = [f"{prefix}-n{i}" for i in range(rng.randint(1, 4))]
    scenario.nodes = [make_node(name) for name in names]
    free: list[tuple[str, str]] = []
    for name in names:
        count = rng.choice((0, 1, 2, 2, 3, 4))
        devices = [
            device(
                f"gpu-{i}",
                model=rng.choice(MODELS),
                mem=rng.choice((8, 16, 32)),
                ok=rng.random() < 0.7,
            )
            for i in range(count)
        ]
        scenario.slices.append(resource_slice(f"{name}-gpus", name, devices))
        free.extend((name, d["name"]) for d in devices)
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
    return scenario
