"""kube-scheduler's filter and score plugins, one module each, ported to the columnar snapshot.

Importing this package registers every built-in plugin under its
kube-scheduler name in ``podium.framework.registry``, where a SchedulerPolicy
finds it; the tables are re-exported here for the code that needs them filled.
"""

from __future__ import annotations

from importlib import import_module

from podium.framework.registry import EXTENSIONS, FILTERS, SCORES, load_entry_points

__all__ = ["EXTENSIONS", "FILTERS", "SCORES", "load_entry_points"]

_BUILTIN = (
    "node_unschedulable",
    "node_name",
    "node_conditions",
    "node_resources_fit",
    "balanced_allocation",
    "taint_toleration",
    "node_affinity",
    "node_ports",
    "inter_pod_affinity",
    "pod_topology_spread",
    "image_locality",
    "no_disk_conflict",
    "node_prefer_avoid_pods",
    "volume_restrictions",
    "volume_zone",
    "node_volume_limits",
    "volume_binding",
    "node_declared_features",
    "dynamic_resources.plugin",
)

for _module in _BUILTIN:
    import_module(f"podium.algorithms.{_module}")
