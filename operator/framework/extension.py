"""The extension points besides the cycle's: PreEnqueue, PostFilter, Reserve, Permit,
PreBind, PostBind.

kube-scheduler's interfaces (``k8s.io/kube-scheduler/framework/interface.go``) with
Python's shape: PreEnqueue decides whether a popped pod gets a cycle at all; PostFilter
runs after a cycle found no node; Reserve and Permit run in the scheduling cycle and answer at once;
Permit may answer Wait, and the binding cycle then holds the pod until a plugin allows
or rejects it through the ``Handle`` or the wait times out (``WaitOnPermit``); PreBind
and PostBind run in the binding cycle and may await the API. A plugin class implements
any of them and is enabled by a SchedulerPolicy's ``extensions`` (``docs/plugins.md``);
a built-in filter implements them too (VolumeBinding's and DynamicResources' binding
halves), and runs at each point before the extensions, as in Go's default profile.
"""

from __future__ import annotations

import random
from abc import abstractmethod
from collections.abc import Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from podium.framework.nominations import Nominations
from podium.framework.plugin import ClusterEvent, Plugin

if TYPE_CHECKING:
    from podium.framework.cycle import Diagnosis
    from podium.framework.podgroup import Board
    from podium.framework.profile import Profile
    from podium.framework.queued import QueuedPod
    from podium.kube.objects import PodInfo
    from podium.kube.pdb import Pdb
    from podium.metrics import Metrics
    from podium.state.podgroups import PodGroup
    from podium.state.snapshot import Snapshot

__all__ = [
    "ALLOW",
    "REJECTED",
    "SKIP",
    "ApiClient",
    "FailedCycle",
    "FailedGroup",
    "Handle",
    "Nominations",
    "PermitPlugin",
    "PodGroupPostFilterPlugin",
    "PodGroupPostFilterResult",
    "PostBindPlugin",
    "PostFilterPlugin",
    "PostFilterResult",
    "PreBindPlugin",
    "PreEnqueuePlugin",
    "QueueingHintPlugin",
    "ReservePlugin",
    "Status",
    "Undo",
    "WarmUpPlugin",
]

Code = Literal["Success", "Unschedulable", "Error", "Wait", "Skip"]
# Go's maxTimeout for a Permit wait (framework/runtime/framework.go).
MAX_PERMIT_WAIT = 15 * 60.0


@dataclass(frozen=True, slots=True)
class Status:
    """A plugin's answer at these points: Go's Status with the codes they use.

    Unschedulable rejects the pod (it is retried after a cluster event or backoff);
    Error is a failure of the plugin itself; Wait (Permit only) holds the pod for at
    most ``timeout`` seconds; Skip (PreBindPreFlight only) says PreBind has nothing to do.
    ``worded``: the reason is already the pod's whole message, Go's prefix included
    (DynamicResources' Reserve errors, built where its Filter's are), so the runner adds
    no ``running ... plugin`` prefix.
    """

    code: Code = "Success"
    reason: str = ""
    timeout: float = 0.0
    worded: bool = False

    @property
    def ok(self) -> bool:
        return self.code == "Success"


ALLOW = Status()
SKIP = Status("Skip")
REJECTED = Status("Unschedulable")
# Unreserve's work that needs the API: awaited in the binding cycle, run beside the loop
# when the scheduling cycle itself failed (Go blocks its loop on it there).
Undo = Coroutine[Any, Any, None]


class ApiClient(Protocol):
    """The API calls a plugin may make (Go's ``Handle.ClientSet()``): Podium's client,
    with its credentials, rate budgets and retries."""

    async def request(self, method: str, path: str, body: Any = None) -> Any:
        """Any verb, PUT included (an update of a whole object or its status)."""

    async def get(
        self, path: str, params: dict[str, str] | None = None, accept: str | None = None
    ) -> Any: ...

    async def post(self, path: str, body: Any) -> Any: ...

    async def patch(self, path: str, body: Any, kind: str = "strategic-merge-patch") -> Any: ...

    async def delete(self, path: str, body: Any = None) -> Any: ...


class Handle(Protocol):
    """What a plugin may use of the running scheduler: Go's ``framework.Handle``, narrowed
    to the API client, the snapshot's stores, the waiting pods, Events, queueing hints,
    the plugin's own background work, and what preemption reads (budgets, nominations,
    PodGroups, the scheduler's random source, its metrics) and starts (evictions)."""

    @property
    def client(self) -> ApiClient: ...

    @property
    def snapshot(self) -> Snapshot:
        """The cycle's snapshot and its stores (Go's SnapshotSharedLister and the
        SharedDRAManager): what Reserve reads of the chosen node."""

    def observe(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A write's answer, taken in as its watch event would be (Go's assume caches)."""

    def wake(self, uids: Iterable[str], plugin: str, event: ClusterEvent) -> None:
        """A queueing hint: these pods, rejected by ``plugin``, may fit now after ``event``
        (the label of their move in scheduler_queue_incoming_pods)."""

    async def event(self, pod: PodInfo, reason: str, note: str) -> None:
        """A Normal Event about the pod in its scheduler's name (Go's EventRecorder)."""

    def allow(self, uid: str, plugin: str) -> None:
        """Let a pod waiting at Permit go on, as far as ``plugin`` is concerned."""

    def reject(self, uid: str, plugin: str, reason: str) -> None:
        """Reject a pod waiting at Permit."""

    def is_waiting(self, uid: str) -> bool:
        """Whether the pod still waits at Permit (a plugin's poller stops when it does not)."""

    def spawn(self, work: Coroutine[Any, Any, object]) -> None:
        """Run ``work`` beside the scheduler; it is cancelled when the scheduler stops."""

    @property
    def instance(self) -> str:
        """This replica's name, the reportingInstance of the Events it writes itself."""

    @property
    def pdbs(self) -> Iterable[Pdb]:
        """The PodDisruptionBudgets watched (Go's PDB lister)."""

    @property
    def nominator(self) -> Nominations:
        """The nominations held in memory (Go's ``Handle.PodNominator``)."""

    @property
    def pod_groups(self) -> Mapping[str, PodGroup] | None:
        """The PodGroups by key while the Workload API is served, else None."""

    def pod_group_members(self, key: str) -> frozenset[str]:
        """The uids of every pod of the PodGroup ``key`` the scheduler has seen."""

    def pod_group_size(self, key: str) -> int:
        """How many of those are queued, assumed or bound (Go's
        ``PodGroupState.AllPodsCount``): what a gang's minCount is held against."""

    @property
    def rng(self) -> random.Random:
        """The scheduler's random source (the preemption dry run's offset)."""

    @property
    def metrics(self) -> Metrics:
        """The scheduler's Prometheus metrics, for the points that count themselves."""

    def preempting(self, preemptor: str, uids: list[str], work: Coroutine[Any, Any, bool]) -> None:
        """Run a preemption's evictions beside the scheduler (Go's prepareCandidateAsync),
        counted and timed under ``preemptor`` ("pod" or "podgroup"); when ``work`` answers
        False the preemptor's pods (``uids``) are activated."""


class PreEnqueuePlugin(Plugin):
    """PreEnqueue, run as a pod enters activeQ or backoffQ: Success lets it in;
    Unschedulable holds it back (gated), with no attempt, condition or Event, until an
    update or a queueing hint (Go's runPreEnqueuePlugins in moveToActiveQ)."""

    @abstractmethod
    def pre_enqueue(self, handle: Handle, pod: PodInfo) -> Status: ...


@dataclass(frozen=True, slots=True)
class FailedCycle:
    """What PostFilter is given of the cycle that found no node (Go's CycleState and
    NodeToStatus): the profile it ran, its diagnosis, and the node the pod was nominated
    to when the cycle began."""

    profile: Profile
    diagnosis: Diagnosis
    nominated_node: str = ""


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    """A PostFilter plugin's answer, Go's (PostFilterResult, Status) pair: its status and
    the nomination it asks for (Go's NominatingInfo): None leaves the pod's nomination as
    it is (ModeNoop), "" clears it, a node name sets it."""

    status: Status
    nominating: str | None = None


class PostFilterPlugin(Plugin):
    """PostFilter: the cycle found no node (Go's RunPostFilterPlugins). Success stops the
    plugins after it and its nomination is the pod's; Error stops them too;
    Unschedulable goes on to the next plugin and its reason joins the pod's message.

    A dry-run profile calls ``post_filter_dry_run`` instead: the plugin's answer without
    its writes; the default has nothing to say, as a plugin whose work is a write."""

    @abstractmethod
    def post_filter(
        self, handle: Handle, pod: PodInfo, failed: FailedCycle
    ) -> PostFilterResult: ...

    def post_filter_dry_run(
        self, handle: Handle, pod: PodInfo, failed: FailedCycle
    ) -> PostFilterResult:
        return PostFilterResult(REJECTED)


@dataclass(frozen=True, slots=True)
class FailedGroup:
    """What PodGroupPostFilter is given of a pod group's cycle that failed: the profile,
    the PodGroup, its members in the cycle (most important first) and those already
    scheduled, and a board to place them on again (Go's PodGroupSchedulingFunc)."""

    profile: Profile
    group: PodGroup
    entries: list[QueuedPod]
    scheduled: list[PodInfo]
    board: Board


@dataclass(frozen=True, slots=True)
class PodGroupPostFilterResult:
    """A PodGroupPostFilter plugin's answer: its status and, on Success, the node each
    member is nominated to (uid -> node, Go's ProposedAssignments)."""

    status: Status
    nominations: Mapping[str, str] = field(default_factory=dict)


class PodGroupPostFilterPlugin(Plugin):
    """PodGroupPostFilter: a pod group's cycle placed too few members (Go's
    RunPodGroupPostFilterPlugins). Success stops the plugins after it and its members
    wait on their nominations; Error stops them too; Unschedulable reasons are joined
    into the PodGroup's message. A dry-run profile's group cycle runs none."""

    @abstractmethod
    def pod_group_post_filter(
        self, handle: Handle, failed: FailedGroup
    ) -> PodGroupPostFilterResult: ...


class QueueingHintPlugin(Plugin):
    """A queueing hint for one watched object that changed (Go's QueueingHintFn): the
    plugin wakes the pods it concerns through ``handle.wake``."""

    @abstractmethod
    def hint(self, handle: Handle, kind: str, key: str) -> None: ...


class WarmUpPlugin(Plugin):
    """Work a plugin does once, in a worker thread, when the first event it names
    arrives, so that the first cycle needing it does not hold the loop."""

    warm_up_on: ClassVar[ClusterEvent] = ClusterEvent(0)

    @abstractmethod
    def warm_up(self) -> None: ...


class ReservePlugin(Plugin):
    """Reserve and Unreserve: the pod is assumed on ``node`` in the scheduler's cache.

    A rejection fails the attempt; Unreserve then runs for every Reserve plugin, in
    reverse order, as it does whenever a later point fails (Go's RunReservePluginsUnreserve).
    Unreserve undoes memory at once and may return the API work left (``Undo``).
    """

    @abstractmethod
    def reserve(self, handle: Handle, pod: PodInfo, node: str) -> Status: ...

    def unreserve(self, handle: Handle, pod: PodInfo, node: str) -> Undo | None:
        return None


class PermitPlugin(Plugin):
    """Permit: Success binds, Unschedulable rejects, Wait holds the pod until the plugin
    calls ``handle.allow`` or ``handle.reject`` for it, or the wait times out."""

    @abstractmethod
    def permit(self, handle: Handle, pod: PodInfo, node: str) -> Status: ...


class PreBindPlugin(Plugin):
    """PreBind: work that must be done before the Binding (a volume, a label).

    ``pre_bind_pre_flight`` (Go's PreBindPreFlight) runs first in the binding cycle and
    says whether PreBind will do work for the pod: Success (the default) or Skip. When
    some plugin answers Success, the pod's ``status.nominatedNodeName`` is written before
    PreBind runs, so that autoscalers see where the pod goes; Error fails the attempt.
    """

    def pre_bind_pre_flight(self, handle: Handle, pod: PodInfo, node: str) -> Status:
        return ALLOW

    @abstractmethod
    async def pre_bind(self, handle: Handle, pod: PodInfo, node: str) -> Status: ...


class PostBindPlugin(Plugin):
    """PostBind: informational, after the Binding succeeded; it cannot fail the pod."""

    @abstractmethod
    async def post_bind(self, handle: Handle, pod: PodInfo, node: str) -> None: ...
