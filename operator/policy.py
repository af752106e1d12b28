"""SchedulerPolicy → Profile, with validation that never lets a bad policy in.

The CRD's schema and CEL rules reject most bad policies at admission. This
module checks again on load, because a policy can predate a schema change
or name a plugin that this Podium build does not have; a policy that fails
keeps the last good profile in force and says why in its status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from podium.algorithms import EXTENSIONS, FILTERS, SCORES
from podium.algorithms.default_preemption import DefaultPreemption
from podium.algorithms.gang_scheduling import GangScheduling
from podium.algorithms.scheduling_gates import SchedulingGates
from podium.framework.profile import DEFAULT_FILTERS, DEFAULT_SCORES, Profile

__all__ = ["GROUP", "PLURAL", "VERSION", "PolicyError", "build_profile", "default_profile"]

GROUP = "podium.dev"
VERSION = "v1alpha1"
PLURAL = "schedulerpolicies"

_ARGS_FOR = {
    "NodeResourcesFit": "nodeResourcesFit",
    "NodeResourcesBalancedAllocation": "balancedAllocation",
    "PodTopologySpread": "podTopologySpread",
    "InterPodAffinity": "interPodAffinity",
    "NodeAffinity": "nodeAffinity",
    "VolumeBinding": "volumeBinding",
    "DynamicResources": "dynamicResources",
    "DefaultPreemption": "defaultPreemption",
}


class PolicyError(ValueError):
    """A SchedulerPolicy that cannot be applied; the message goes into its status."""


@dataclass(frozen=True, slots=True)
class _Records:
    enabled: bool
    top_nodes: int


@dataclass(frozen=True, slots=True)
class _Bounds:
    low: int
    high: int


_INT_FIELDS = {
    "percentageOfNodesToScore": _Bounds(0, 100),
    "podInitialBackoffSeconds": _Bounds(1, 3600),
    "podMaxBackoffSeconds": _Bounds(1, 3600),
    "unschedulableFlushSeconds": _Bounds(1, 3600),
}


def _int(spec: Mapping[str, Any], key: str, default: int) -> int:
    value = spec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise PolicyError(f"spec.{key} must be an integer, got {value!r}")
    bounds = _INT_FIELDS[key]
    if not bounds.low <= value <= bounds.high:
        raise PolicyError(f"spec.{key} must be between {bounds.low} and {bounds.high}, got {value}")
    return value


def _names(spec: Mapping[str, Any], key: str) -> list[Mapping[str, Any]] | None:
    items = spec.get(key)
    if items is None:
        return None
    if not isinstance(items, list) or not all(isinstance(i, Mapping) for i in items):
        raise PolicyError(f"spec.{key} must be a list of objects with a name")
    seen: set[str] = set()
    for item in items:
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise PolicyError(f"spec.{key}: every entry needs a name")
        if name in seen:
            raise PolicyError(f"spec.{key}: duplicate plugin {name!r}")
        seen.add(name)
    return items


def build_profile(spec: Mapping[str, Any], policy: str = "", generation: int = 0) -> Profile:
    """Validate a SchedulerPolicy spec and instantiate its plugins."""
    if not isinstance(spec, Mapping):
        raise PolicyError("spec must be an object")
    args = spec.get("pluginArgs") or {}
    if not isinstance(args, Mapping):
        raise PolicyError("spec.pluginArgs must be an object")

    def plugin_args(name: str) -> Mapping[str, Any]:
        value = args.get(_ARGS_FOR.get(name, name), {}) or {}
        if not isinstance(value, Mapping):
            raise PolicyError(f"spec.pluginArgs for {name} must be an object")
        return value

    filter_items = _names(spec, "filters")
    if filter_items is None:
        filter_names = [n for n in DEFAULT_FILTERS if n in FILTERS]
    else:
        filter_names = [str(i["name"]) for i in filter_items]
    unknown = [n for n in filter_names if n not in FILTERS]
    if unknown:
        raise PolicyError(f"unknown filter plugin(s): {', '.join(unknown)}")

    score_items = _names(spec, "scores")
    if score_items is None:
        score_pairs = [(n, w) for n, w in DEFAULT_SCORES if n in SCORES]
    else:
        score_pairs = []
        for item in score_items:
            weight = item.get(
                "weight", SCORES[item["name"]].default_weight if item["name"] in SCORES else 1
            )
            if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
                raise PolicyError(f"score {item['name']!r}: weight must be an integer 1..100")
            score_pairs.append((str(item["name"]), weight))
    unknown = [n for n, _ in score_pairs if n not in SCORES]
    if unknown:
        raise PolicyError(f"unknown score plugin(s): {', '.join(unknown)}")

    extension_items = _names(spec, "extensions") or []
    extension_names = [str(i["name"]) for i in extension_items]
    unknown = [n for n in extension_names if n not in EXTENSIONS]
    if unknown:
        raise PolicyError(f"unknown extension plugin(s): {', '.join(unknown)}")

    instances: dict[tuple[str, str], Any] = {}
    try:
        filters = [FILTERS[n](plugin_args(n)) for n in filter_names]
        for plugin in filters:
            instances[("f", plugin.name)] = plugin
        scores = []
        for name, weight in score_pairs:
            cls = SCORES[name]
            shared = instances.get(("f", name))
            scorer = shared if isinstance(shared, cls) else cls(plugin_args(name))
            scores.append((scorer, weight))
        extensions = [EXTENSIONS[n](plugin_args(n)) for n in extension_names]
    except PolicyError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise PolicyError(f"invalid plugin arguments: {exc}") from exc

    initial = _int(spec, "podInitialBackoffSeconds", 1)
    maximum = _int(spec, "podMaxBackoffSeconds", 10)
    if initial > maximum:
        raise PolicyError("spec.podInitialBackoffSeconds must not exceed spec.podMaxBackoffSeconds")
    mode = spec.get("mode", "Active")
    if mode not in ("Active", "DryRun"):
        raise PolicyError(f"spec.mode must be Active or DryRun, got {mode!r}")
    scheduler_name = spec.get("schedulerName", "podium")
    if not isinstance(scheduler_name, str) or not scheduler_name:
        raise PolicyError("spec.schedulerName must be a non-empty string")
    percentage, absolute = preemption_args(plugin_args("DefaultPreemption"))
    post_events = spec.get("postSuccessEvents", True)
    if not isinstance(post_events, bool):
        raise PolicyError("spec.postSuccessEvents must be a boolean")
    records = decision_records(spec)
    gang = spec.get("gangScheduling", True)
    topology = spec.get("topologyAwareWorkloadScheduling", False)
    if not isinstance(gang, bool) or not isinstance(topology, bool):
        raise PolicyError(
            "spec.gangScheduling and spec.topologyAwareWorkloadScheduling must be booleans"
        )
    batching = spec.get("opportunisticBatching", True)
    if not isinstance(batching, bool):
        raise PolicyError("spec.opportunisticBatching must be a boolean")
    shadow_of = shadow_target(spec, scheduler_name, mode)
    return Profile(
        scheduler_name=scheduler_name,
        filters=filters,
        scores=scores,
        extensions=extensions,
        post_filters=[DefaultPreemption(plugin_args("DefaultPreemption"))],
        gates=[SchedulingGates()],
        queueing=[GangScheduling()] if gang else [],
        percentage_of_nodes_to_score=_int(spec, "percentageOfNodesToScore", 0),
        initial_backoff=float(initial),
        max_backoff=float(maximum),
        unschedulable_flush=float(_int(spec, "unschedulableFlushSeconds", 300)),
        post_success_events=post_events,
        dry_run=mode == "DryRun",
        min_candidate_nodes_percentage=percentage,
        min_candidate_nodes_absolute=absolute,
        policy=policy,
        generation=generation,
        record_decisions=records.enabled,
        record_top_nodes=records.top_nodes,
        shadow_of=shadow_of,
        gang_scheduling=gang,
        topology_aware_workloads=topology,
        opportunistic_batching=batching,
    )


def default_profile(scheduler_name: str = "podium") -> Profile:
    """kube-scheduler's default profile, served when no SchedulerPolicy names it."""
    return build_profile({"schedulerName": scheduler_name}, policy="<built-in>")


MAX_TOP_NODES = 20


def decision_records(spec: Mapping[str, Any]) -> _Records:
    """spec.decisionRecords: on by default with the best 3 nodes; topNodes 0 skips scores."""
    raw = spec.get("decisionRecords", {})
    if not isinstance(raw, Mapping):
        raise PolicyError("spec.decisionRecords must be an object")
    enabled = raw.get("enabled", True)
    if not isinstance(enabled, bool):
        raise PolicyError("spec.decisionRecords.enabled must be a boolean")
    top = raw.get("topNodes", 3)
    if isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= MAX_TOP_NODES:
        raise PolicyError(f"spec.decisionRecords.topNodes must be an integer 0..{MAX_TOP_NODES}")
    return _Records(enabled, top)


def preemption_args(args: Mapping[str, Any]) -> tuple[int, int]:
    """DefaultPreemption's minCandidateNodesPercentage and minCandidateNodesAbsolute, checked
    as Go's ``ValidateDefaultPreemptionArgs`` checks them (ranges, never both zero)."""
    values = []
    for key, default in (("minCandidateNodesPercentage", 10), ("minCandidateNodesAbsolute", 100)):
        value = args.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise PolicyError(f"spec.pluginArgs.defaultPreemption.{key} must be an integer")
        values.append(value)
    percentage, absolute = values
    if not 0 <= percentage <= 100:
        raise PolicyError(
            "spec.pluginArgs.defaultPreemption.minCandidateNodesPercentage: "
            f"{percentage}: not in valid range [0, 100]"
        )
    if absolute < 0:
        raise PolicyError(
            "spec.pluginArgs.defaultPreemption.minCandidateNodesAbsolute: "
            f"{absolute}: not in valid range [0, inf)"
        )
    if percentage == 0 and absolute == 0:
        raise PolicyError(
            "spec.pluginArgs.defaultPreemption.minCandidateNodesPercentage: "
            "cannot be zero at the same time as minCandidateNodesAbsolute"
        )
    return percentage, absolute


def shadow_target(spec: Mapping[str, Any], scheduler_name: str, mode: str) -> str:
    """spec.shadowOf: the live schedulerName a DryRun policy also decides for."""
    target = spec.get("shadowOf", "")
    if not isinstance(target, str):
        raise PolicyError("spec.shadowOf must be a string")
    if target and mode != "DryRun":
        raise PolicyError("spec.shadowOf is only allowed with spec.mode DryRun")
    if target == scheduler_name:
        raise PolicyError("spec.shadowOf must name another schedulerName than the policy's own")
    return target
