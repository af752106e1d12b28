"""Generated clusters for ``podium simulate --nodes N --pods M`` and the benchmarks."""

from __future__ import annotations

import random
from typing import Any

from podium.tools.inputs import ClusterObjects
from podium.tools.simulation import ZONE_LABEL

GENERATED_ZONES = ("zone-a", "zone-b", "zone-c")


def generate_cluster(nodes: int, pods: int, seed: int = 0) -> ClusterObjects:
    """Benchmark-like nodes (4 cpu, 32Gi, 110 pods, three zones) and pending pods.

    Pods mostly ask for 100m and 500Mi, with some larger ones, a few labels,
    higher priorities and zone selectors, from a seeded generator.
    """
    rng = random.Random(seed)
    out = ClusterObjects()
    width = max(len(str(nodes - 1)), 1)
    for i in range(nodes):
        name = f"node-{i:0{width}d}"
        resources = {"cpu": "4", "memory": "32Gi", "pods": "110"}
        out.nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "uid": f"simulated-node-{i}",
                    "labels": {
                        "kubernetes.io/hostname": name,
                        "kubernetes.io/os": "linux",
                        ZONE_LABEL: GENERATED_ZONES[i % len(GENERATED_ZONES)],
                    },
                },
                "spec": {},
                "status": {
                    "capacity": dict(resources),
                    "allocatable": dict(resources),
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    cpus = ("100m", "100m", "100m", "100m", "200m", "250m", "500m")
    memories = ("500Mi", "500Mi", "500Mi", "256Mi", "512Mi", "1Gi", "2Gi")
    width = max(len(str(pods - 1)), 1)
    for i in range(pods):
        spec: dict[str, Any] = {
            "schedulerName": "podium",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {
                        "requests": {"cpu": rng.choice(cpus), "memory": rng.choice(memories)}
                    },
                }
            ],
        }
        roll = rng.random()
        if roll < 0.05:
            spec["priority"] = 1000
        elif roll < 0.10:
            spec["nodeSelector"] = {ZONE_LABEL: rng.choice(GENERATED_ZONES)}
        out.pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"pod-{i:0{width}d}",
                    "namespace": "default",
                    "uid": f"simulated-pod-{i}",
                    "labels": {"app": f"app-{rng.randrange(20)}"},
                },
                "spec": spec,
                "status": {"phase": "Pending"},
            }
        )
    return out
