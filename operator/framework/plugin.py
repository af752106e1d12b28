"""The plugin contract: vectorised Filter and Score units with named rejections.

kube-scheduler calls each plugin once per node. Podium calls each plugin once
per scheduling cycle with an array of node indexes into the columnar snapshot,
and the plugin answers with boolean masks and integer score arrays. A plugin
that needs per-node Python work restricts it to the few nodes it concerns
(tainted nodes, nodes with host ports in use, ...).
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from podium.state.arrays import IndexArray, IntArray, MaskArray

if TYPE_CHECKING:
    from podium.framework.probe import PluginProbe
    from podium.kube.objects import PodInfo
    from podium.state.snapshot import Snapshot

__all__ = [
    "MAX_NODE_SCORE",
    "ClusterEvent",
    "Cycle",
    "FilterPlugin",
    "IndexArray",
    "IntArray",
    "MaskArray",
    "Plugin",
    "PluginError",
    "PreFilterResult",
    "Rejection",
    "ScorePlugin",
    "SignFragments",
    "signs",
]

MAX_NODE_SCORE = 100

SignFragments = dict[str, Any]
"""SignFragment key -> value; equal values must mean equal Filter and Score verdicts."""


class ClusterEvent(enum.Flag):
    """Changes that can make a rejected pod schedulable (queueing hints, coarsely)."""

    NODE_ADD = enum.auto()
    NODE_DELETE = enum.auto()
    NODE_ALLOCATABLE = enum.auto()
    NODE_LABEL = enum.auto()
    NODE_TAINT = enum.auto()
    NODE_CONDITION = enum.auto()
    NODE_IMAGES = enum.auto()
    NODE_DECLARED_FEATURES = enum.auto()
    ASSIGNED_POD_ADD = enum.auto()
    ASSIGNED_POD_UPDATE = enum.auto()
    ASSIGNED_POD_DELETE = enum.auto()
    # A bound pod's requests went down (UpdatePodScaleDown): an in-place resize freed room.
    ASSIGNED_POD_SCALE_DOWN = enum.auto()
    VOLUME = enum.auto()
    POLICY = enum.auto()
    # DynamicResources: a ResourceSlice (or DeviceTaintRule) or DeviceClass added or
    # changed, an allocated claim freed. Claims a pod waits for wake only that pod.
    RESOURCE_SLICE = enum.auto()
    DEVICE_CLASS = enum.auto()
    RESOURCE_CLAIM = enum.auto()
    # GangScheduling: a PodGroup added or changed, or a new member of it; wakes only the
    # group's pods.
    POD_GROUP = enum.auto()

    @classmethod
    def any_node_change(cls) -> ClusterEvent:
        return (
            cls.NODE_ADD
            | cls.NODE_ALLOCATABLE
            | cls.NODE_LABEL
            | cls.NODE_TAINT
            | cls.NODE_CONDITION
            | cls.NODE_DECLARED_FEATURES
        )


class PluginError(Exception):
    """A plugin could not decide (kube's Error status): the attempt is aborted and retried
    with backoff; the message is the pod's condition and Event, as kube-scheduler's."""


@dataclass(slots=True)
class Rejection:
    """Nodes that one reason rejects; ``mask`` is aligned with the evaluated indexes."""

    reason: str
    mask: MaskArray
    unresolvable: bool = False


@dataclass(slots=True)
class PreFilterResult:
    """A PreFilter verdict: reject the pod outright, or restrict the nodes to evaluate."""

    reject: str = ""
    unresolvable: bool = True
    node_names: frozenset[str] | None = None


@dataclass(slots=True)
class Cycle:
    """One scheduling attempt: the pod, the snapshot, and per-plugin scratch state."""

    pod: PodInfo
    snapshot: Snapshot
    state: dict[str, Any] = field(default_factory=dict)
    # Per-plugin metrics; None where a cycle is not the scheduling loop's (a dry run).
    probe: PluginProbe | None = None
    # Go's PodGroupCycleState: scratch state the members of one pod-group cycle share
    # (what an earlier member's Reserve left for the next); None for a single pod.
    group: dict[str, Any] | None = None


class Plugin(ABC):
    """A named unit that a SchedulerPolicy enables and configures."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    events: ClassVar[ClusterEvent] = ClusterEvent(0)

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        self.args: Mapping[str, Any] = args or {}

    def sign_pod(self, cycle: Cycle) -> SignFragments | None:
        """SignPlugin.SignPod: the parts of the cycle's pod this plugin's verdicts depend on
        (the snapshot stands for what Go's plugins read through their Handle), keyed
        by Go's signer names (``framework/signers.go``); None when such a pod cannot be
        signed (Go's Unschedulable status). A plugin that does not override this method
        turns opportunistic batching off for its whole profile, as a Go plugin without
        SignPod does (``computeBatchablePlugins``)."""
        return None

    def signs_no_pod(self) -> bool:
        """Whether ``sign_pod`` answers None whatever the pod, by the plugin's settings
        alone; the profile's signing then stops before asking every plugin."""
        return False


class FilterPlugin(Plugin):
    def pre_filter(self, cycle: Cycle) -> PreFilterResult | None:
        """Precompute per-pod state once per cycle; may reject the pod for every node."""
        return None

    @abstractmethod
    def filter(self, cycle: Cycle, nodes: IndexArray) -> list[Rejection]:
        """Reasons that reject some of ``nodes``; an empty list admits them all."""

    def explain(self, cycle: Cycle, node: int) -> str:
        """A concrete, human sentence for why ``node`` was rejected."""
        return ""

    def add_pods(self, cycle: Cycle) -> None:
        """PreFilterExtensions.AddPod: ``cycle`` holds a copy of the PreFilter state and
        its snapshot has rows that gained pods (nominated pods); a plugin whose PreFilter
        counted pods brings its copy up to them. Most plugins read rows live: no-op."""


class ScorePlugin(Plugin):
    default_weight: ClassVar[int] = 1

    def pre_score(self, cycle: Cycle, nodes: IndexArray) -> bool:
        """False skips the plugin for this pod (it then adds nothing to any node)."""
        return True

    @abstractmethod
    def score(self, cycle: Cycle, nodes: IndexArray) -> IntArray:
        """Raw scores for ``nodes``."""

    def normalize(self, cycle: Cycle, nodes: IndexArray, scores: IntArray) -> IntArray:
        """Map raw scores to 0..MAX_NODE_SCORE; the default leaves them as they are."""
        return scores


def default_normalize(scores: IntArray, reverse: bool) -> IntArray:
    """helper.DefaultNormalizeScore with Go's truncating integer division."""
    top = int(scores.max()) if scores.size else 0
    if top == 0:
        value = MAX_NODE_SCORE if reverse else 0
        return np.full(scores.shape, value, dtype=np.int64)
    out = MAX_NODE_SCORE * scores // top
    return MAX_NODE_SCORE - out if reverse else out


def signs(plugin: Plugin) -> bool:
    """Whether ``plugin`` implements SignPod (Go's ``fwk.SignPlugin`` interface check)."""
    return type(plugin).sign_pod is not Plugin.sign_pod


PluginFactory = Callable[[Mapping[str, Any] | None], Plugin]
