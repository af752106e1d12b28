"""Random bursts for the burst differential family: one cluster, N pods at once.

A burst is a cluster of 20 to 1,000 nodes in one to three zones, of mixed sizes,
and N pods made from one pod template (one signature) or from two or three
interleaved (mixed signatures), all for one scheduler. Sizes above 100 nodes make
both schedulers stop their Filter search after the adaptive
percentageOfNodesToScore. Pure data from a seed, so a disagreement replays exactly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from podium.kube.manifests import make_node, make_pod

ZONES = ("zone-a", "zone-b", "zone-c")
# Cluster sizes and how often each comes up: most bursts stay small enough to be cheap,
# some cross the 100 nodes above which the Filter search stops early.
SIZES = ((20, 4), (40, 4), (80, 3), (150, 3), (300, 2), (1000, 1))
BIG = ((12000, 24576), (9000, 18432), (7000, 14336))  # millicores, MiB


@dataclass
class Burst:
    seed: int
    nodes: list[dict[str, Any]] = field(default_factory=list)
    zone_of: dict[str, str] = field(default_factory=dict)
    templates: list[dict[str, str]] = field(default_factory=list)
    # Template index of each pod, in creation order.
    order: list[int] = field(default_factory=list)

    def pods(self, prefix: str, scheduler: str) -> list[dict[str, Any]]:
        """The burst's pods for one run, named ``prefix-<i>``, in creation order."""
        out = []
        for i, which in enumerate(self.order):
            t = self.templates[which]
            pod = make_pod(
                f"{prefix}-{i}",
                cpu=t["cpu"],
                memory=t["memory"],
                scheduler_name=scheduler,
                labels={"burst": prefix, "app": t["app"]},
            )
            out.append(pod)
        return out


def generate(seed: int, prefix: str) -> Burst:
    rng = random.Random(seed)
    size = rng.choices([s for s, _ in SIZES], weights=[w for _, w in SIZES])[0]
    zones = ZONES[: rng.randint(1, 3)]
    burst = Burst(seed=seed)
    for i in range(size):
        name = f"{prefix}-n{i}"
        zone = rng.choice(zones)
        burst.zone_of[name] = zone
        # Below 100 nodes, three big nodes of distinct sizes, then small ones drawn fine:
        # the first pods' best node is unique by kube-scheduler's integer scores, later
        # ones tie. Above, small nodes only: whether a search window holds a big node
        # would decide the burst, and the two schedulers' windows start apart.
        big = size < 100 and i < len(BIG)
        cpu, memory = (
            BIG[i]
            if big
            else (
                rng.randrange(1500, 4001, 50),
                rng.randrange(2048, 8193, 64),
            )
        )
        burst.nodes.append(
            make_node(
                name,
                cpu=f"{cpu}m",
                memory=f"{memory}Mi",
                labels={"topology.kubernetes.io/zone": zone},
            )
        )
    kinds = 1 if rng.random() < 0.5 else rng.randint(2, 3)
    for k in range(kinds):
        burst.templates.append(
            {
                "cpu": rng.choice(["250m", "500m", "1"]),
                "memory": rng.choice(["256Mi", "512Mi", "1Gi"]),
                "app": f"app{k}",
            }
        )
    count = rng.randint(10, 40)
    burst.order = [rng.randrange(kinds) for _ in range(count)]
    return burst
