"""NodeDeclaredFeatures: the node must declare every feature the pod needs.

kube-scheduler v1.37.2 runs it last among the default filters (its gate is GA
and locked on). PreFilter infers the pod's needs as component-helpers'
nodedeclaredfeatures registry does for scheduling (InferForPodScheduling);
Filter rejects, as UnschedulableAndUnresolvable, every node whose
``status.declaredFeatures`` lacks one of them.

Of the registered features only three infer anything for scheduling, and the
scheduler applies them whatever its own gates say; the API server's gates
decide which pod fields can exist at all:

- RestartAllContainersOnContainerExits: a container or init container with a
  ``restartPolicyRules`` action RestartAllContainers (gate beta, on);
- UserNamespacesHostNetworkSupport: ``hostNetwork`` with ``hostUsers: false``
  (gate alpha, off: the API server rejects such pods);
- VolumeBindMountOptions: a volume mount of a container, init or ephemeral
  container with ``bindMountOptions`` (gate alpha, off: the field is dropped).

The rest (DRA, in-place resize, ExtendWebSocketsToKubelet) infer only for
pod updates, which the scheduler never asks about. A pod's needs come from
immutable spec fields, so only node events can make a rejected pod fit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from podium.framework import signers
from podium.framework.plugin import (
    ClusterEvent,
    Cycle,
    FilterPlugin,
    IndexArray,
    Rejection,
    SignFragments,
)
from podium.framework.registry import register

__all__ = [
    "REASON",
    "RESTART_ALL_CONTAINERS",
    "USER_NAMESPACES_HOST_NETWORK",
    "VOLUME_BIND_MOUNT_OPTIONS",
    "NodeDeclaredFeatures",
    "required_features",
]

REASON = "node(s) didn't match Pod's required features"
RESTART_ALL_CONTAINERS = "RestartAllContainersOnContainerExits"
USER_NAMESPACES_HOST_NETWORK = "UserNamespacesHostNetworkSupport"
VOLUME_BIND_MOUNT_OPTIONS = "VolumeBindMountOptions"
_STATE = "NodeDeclaredFeatures/needs"
_NONE: frozenset[str] = frozenset()


def _restarts_all(rules: object) -> bool:
    return isinstance(rules, list) and any(
        isinstance(rule, Mapping) and rule.get("action") == "RestartAllContainers" for rule in rules
    )


def _bind_mount_options(mounts: object) -> bool:
    return isinstance(mounts, list) and any(
        isinstance(mount, Mapping) and mount.get("bindMountOptions") for mount in mounts
    )


def required_features(pod: Mapping[str, Any]) -> frozenset[str]:
    """The declared features a raw Pod needs from its node; empty for almost every pod.

    One pass over the containers that only looks for two keys, so a pod without
    restart rules, bind mount options or a host-network user namespace costs a
    few dict lookups per container.
    """
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        return _NONE
    restart_all = bind_mounts = False
    for kind in ("containers", "initContainers", "ephemeralContainers"):
        containers = spec.get(kind)
        if not containers or not isinstance(containers, list):
            continue
        for container in containers:
            if not isinstance(container, Mapping):
                continue
            rules = container.get("restartPolicyRules")
            # Ephemeral containers' rules do not count (InferForScheduling skips them).
            if rules and not restart_all and kind != "ephemeralContainers":
                restart_all = _restarts_all(rules)
            mounts = container.get("volumeMounts")
            if mounts and not bind_mounts:
                bind_mounts = _bind_mount_options(mounts)
    user_namespace = spec.get("hostNetwork") is True and spec.get("hostUsers") is False
    if not (restart_all or bind_mounts or user_namespace):
        return _NONE
    needs = (
        (RESTART_ALL_CONTAINERS, restart_all),
        (USER_NAMESPACES_HOST_NETWORK, user_namespace),
        (VOLUME_BIND_MOUNT_OPTIONS, bind_mounts),
    )
    return frozenset(name for name, needed in needs if needed)


def _needs(cycle: Cycle) -> frozenset[str]:
    needs = cycle.state.get(_STATE)
    if needs is None:
        needs = cycle.state[_STATE] = required_features(cycle.pod.raw)
    result: frozenset[str] = needs
    return result


@register
class NodeDeclaredFeatures(FilterPlugin):
    name = "NodeDeclaredFeatures"
    description = (
        "Rejects nodes whose status.declaredFeatures lack a feature the pod needs "
        "(e.g. RestartAllContainersOnContainerExits for a RestartAllContainers restart rule)."
    )
    events = ClusterEvent.NODE_ADD | ClusterEvent.NODE_DECLARED_FEATURES

    def sign_pod(self, cycle: Cycle) -> SignFragments | None:
        """NodeDeclaredFeatures.SignPod: the features the pod needs from its node."""
        pod = cycle.pod
        return {signers.FEATURES: sorted(required_features(pod.raw))}

    def pre_filter(self, cycle: Cycle) -> None:
        _needs(cycle)

    def filter(self, cycle: Cycle, nodes: IndexArray) -> list[Rejection]:
        needs = _needs(cycle)
        if not needs:
            return []
        snap = cycle.snapshot
        lacking = np.zeros(len(nodes), dtype=bool)
        for feature in needs:
            lacking |= ~snap.feature_column(feature)[nodes]
        return [Rejection(REASON, lacking, unresolvable=True)] if lacking.any() else []

    def explain(self, cycle: Cycle, node: int) -> str:
        missing = sorted(_needs(cycle) - cycle.snapshot.nodes[node].declared_features)
        if not missing:
            return ""
        return f"node does not declare {', '.join(missing)} in status.declaredFeatures"
