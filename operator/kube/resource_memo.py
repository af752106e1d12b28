"""The request model of pods that repeat one another, worked out once.

Every copy of a pod the watch delivers is parsed, and ``pod_resources`` (exact
quantities, init-container peaks, the resize status, QoS) was about half of that
parse. The pods of one Deployment, Job or benchmark template ask for the same
resources, and a pod's later copies (bound, then running) usually change none of
what the model reads. So the model is kept per value of exactly those inputs, and
a copy whose inputs were seen before costs building their key.

The kept ``PodResources`` is shared by the pods that have equal inputs: nothing
writes into a pod's requests, and sharing them also makes each cached pod smaller.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from podium.kube.resources import PodResources, pod_resources, resize_infeasible

__all__ = ["KEPT_MODELS", "kept_pod_resources"]

KEPT_MODELS = 1024
"""How many distinct inputs are kept; the oldest is dropped first."""

_CONTAINER_KEYS = ("name", "resources", "restartPolicy")
_STATUS_KEYS = ("name", "allocatedResources", "resources")

_kept: dict[str, PodResources] = {}


def _items(value: object, keys: tuple[str, ...]) -> object:
    """What the model reads of a list of containers or container statuses."""
    if not isinstance(value, list):
        return value
    return [
        tuple(item.get(k) for k in keys) if isinstance(item, Mapping) else item for item in value
    ]


def _inputs(spec: Mapping[str, Any], status: Mapping[str, Any], bound: bool) -> str:
    """Every field ``pod_resources`` reads (``_read_pod`` and ``_qos``), as one string."""
    return repr(
        (
            _items(spec.get("containers"), _CONTAINER_KEYS),
            _items(spec.get("initContainers"), _CONTAINER_KEYS),
            spec.get("resources"),
            spec.get("overhead"),
            _items(status.get("containerStatuses"), _STATUS_KEYS),
            _items(status.get("initContainerStatuses"), _STATUS_KEYS),
            status.get("resources"),
            status.get("allocatedResources"),
            status.get("qosClass"),
            resize_infeasible(status.get("conditions")),
            bound,
        )
    )


def kept_pod_resources(
    spec: Mapping[str, Any], status: Mapping[str, Any], bound: bool
) -> PodResources:
    """``pod_resources(spec, status, bound)``, from what was kept when the same inputs
    were seen before."""
    key = _inputs(spec, status, bound)
    model = _kept.get(key)
    if model is None:
        model = pod_resources(spec, status, bound)
        if len(_kept) >= KEPT_MODELS:
            del _kept[next(iter(_kept))]
        _kept[key] = model
    return model
