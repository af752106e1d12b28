"""A real local Kubernetes control plane (etcd, kube-apiserver, kube-scheduler, KWOK),
and a real kubelet node (RealNode).

Podium's integration tests, demo and benchmark run against real binaries built
from pinned Go modules (see build.py), never against mocks.
"""

from .build import Binaries, BuildError, ensure_binaries
from .cluster import (
    TOPOLOGY_WORKLOAD_GATES,
    WORKLOAD_GATES,
    WORKLOAD_RUNTIME_CONFIG,
    ControlPlane,
)
from .kwok import KWOK_NODE_ANNOTATION, Kwok
from .node import RealNode
from .process import ComponentError
from .scheduler import KubeScheduler

__all__ = [
    "KWOK_NODE_ANNOTATION",
    "TOPOLOGY_WORKLOAD_GATES",
    "WORKLOAD_GATES",
    "WORKLOAD_RUNTIME_CONFIG",
    "Binaries",
    "BuildError",
    "ComponentError",
    "ControlPlane",
    "KubeScheduler",
    "Kwok",
    "RealNode",
    "ensure_binaries",
]
