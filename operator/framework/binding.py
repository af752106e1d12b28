"""The extension points outside the cycle, run in kube-scheduler's order for one profile.

Go's ``RunPreEnqueuePlugins``, ``RunPostFilterPlugins``, ``RunReservePluginsReserve``/
``Unreserve``, ``RunPermitPlugins`` and ``WaitOnPermit``, ``RunPreBindPreFlights``,
``RunPreBindPlugins`` and ``RunPostBindPlugins`` (``framework/runtime/framework.go``),
with their messages. The plugins at each point are the profile's filters that implement
it (VolumeBinding's and DynamicResources' binding halves), in profile order, then its
extensions: Go's default profile lists the built-ins first. The scheduling loop calls
these and names no plugin; only the Binding itself is its own.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

import structlog

from podium.framework.extension import (
    ALLOW,
    MAX_PERMIT_WAIT,
    REJECTED,
    ApiClient,
    FailedCycle,
    FailedGroup,
    Nominations,
    PermitPlugin,
    PodGroupPostFilterPlugin,
    PodGroupPostFilterResult,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    QueueingHintPlugin,
    ReservePlugin,
    Status,
    Undo,
    WarmUpPlugin,
)
from podium.framework.plugin import ClusterEvent, Plugin, PluginError
from podium.metrics import Metrics

if TYPE_CHECKING:
    from podium.framework.profile import Profile
    from podium.kube.objects import PodInfo
    from podium.kube.pdb import Pdb
    from podium.state.podgroups import PodGroup, PodGroupStore
    from podium.state.snapshot import Snapshot

__all__ = [
    "BindingHandle",
    "Failure",
    "post_filter_plugins",
    "run_group_reserve",
    "run_group_unreserve",
    "run_hints",
    "run_permit",
    "run_pod_group_post_filter",
    "run_post_bind",
    "run_post_filter",
    "run_pre_bind",
    "run_pre_bind_pre_flights",
    "run_pre_enqueue",
    "run_reserve",
    "run_unreserve",
    "wait_on_permit",
    "warm_ups",
]

log = structlog.get_logger("podium.framework.binding")


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a point failed the pod: its message, the plugin, and whether it is a rejection
    (Unschedulable: retried on events) or an error (retried after backoff)."""

    message: str
    plugin: str
    rejected: bool


def _failure(point: str, plugin: str, status: Status) -> Failure:
    if status.code == "Unschedulable":
        return Failure(status.reason, plugin, rejected=True)
    if status.worded:
        return Failure(status.reason, plugin, rejected=False)
    return Failure(f'running {point} plugin "{plugin}": {status.reason}', plugin, rejected=False)


P = TypeVar("P", bound=Plugin)


def _plugins(profile: Profile) -> tuple[Plugin, ...]:
    """The plugins that may implement a point: the profile's gates (SchedulingGates, first
    as in kube-scheduler's profile), its filters, its extensions, then its own queueing
    plugins (GangScheduling, last)."""
    return (*profile.gates, *profile.filters, *profile.extensions, *profile.queueing)


def implementing(profile: Profile, point: Callable[..., P]) -> tuple[P, ...]:
    """The profile's plugins that implement ``point`` (an extension point's class), in
    order, picked once per plugin list (``Profile.derived``)."""
    kind = cast(type, point)  # a Callable, so that mypy takes the abstract classes

    def pick() -> tuple[P, ...]:
        return tuple(p for p in _plugins(profile) if isinstance(p, kind))  # type: ignore[misc]

    return profile.derived(point, pick)


def go_duration(seconds: float) -> str:
    """time.Duration's String() for whole and fractional seconds: 5s, 1m0s, 1.5s."""
    minutes, rest = divmod(seconds, 60)
    text = f"{rest:g}s"
    return f"{int(minutes)}m{text}" if minutes else text


@dataclass(slots=True)
class _Waiting:
    pending: set[str]
    verdict: asyncio.Future[tuple[Status, str]]
    timeouts: dict[str, float] = field(default_factory=dict)


Preempting = Callable[[str, list[str], Coroutine[Any, Any, bool]], Coroutine[Any, Any, None]]


class BindingHandle:
    """The running scheduler as plugins see it (``extension.Handle``).

    ``pdbs`` and ``pod_groups`` are the scheduler's own stores, read as they are at each
    call; ``preempting`` wraps a preemption's evictions in the scheduler's metrics and
    its activation of the preemptor after a refusal."""

    def __init__(
        self,
        client: ApiClient,
        spawn: Callable[[Coroutine[Any, Any, object]], None],
        snapshot: Snapshot,
        observe: Callable[[str, str | None, Mapping[str, Any]], None],
        wake: Callable[[Iterable[str], str, ClusterEvent], None],
        event: Callable[[PodInfo, str, str], Awaitable[None]],
        *,
        nominator: Nominations,
        preempting: Preempting,
        instance: str = "",
        pdbs: Mapping[str, Pdb] | None = None,
        pod_groups: PodGroupStore | None = None,
        group_size: Callable[[str], int] | None = None,
        rng: random.Random | None = None,
        metrics: Metrics | None = None,
    ):
        self._client = client
        self._spawn = spawn
        self._snapshot = snapshot
        self._observe = observe
        self._wake = wake
        self._event = event
        self._nominator = nominator
        self._preempting = preempting
        self._instance = instance
        self._pdbs: Mapping[str, Pdb] = {} if pdbs is None else pdbs
        self._pod_groups = pod_groups
        self._group_size = group_size
        self._rng = rng or random.Random()
        self._metrics = metrics or Metrics()
        self.waiting: dict[str, _Waiting] = {}

    @property
    def client(self) -> ApiClient:
        return self._client

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    def observe(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> None:
        self._observe(kind, event_type, body)

    def wake(self, uids: Iterable[str], plugin: str, event: ClusterEvent) -> None:
        self._wake(uids, plugin, event)

    async def event(self, pod: PodInfo, reason: str, note: str) -> None:
        await self._event(pod, reason, note)

    def allow(self, uid: str, plugin: str) -> None:
        waiting = self.waiting.get(uid)
        if waiting is None or waiting.verdict.done():
            return
        waiting.pending.discard(plugin)
        if not waiting.pending:
            waiting.verdict.set_result((ALLOW, ""))

    def reject(self, uid: str, plugin: str, reason: str) -> None:
        waiting = self.waiting.get(uid)
        if waiting is not None and not waiting.verdict.done():
            waiting.verdict.set_result((Status("Unschedulable", reason), plugin))

    def is_waiting(self, uid: str) -> bool:
        waiting = self.waiting.get(uid)
        return waiting is not None and not waiting.verdict.done()

    def spawn(self, work: Coroutine[Any, Any, object]) -> None:
        self._spawn(work)

    @property
    def instance(self) -> str:
        return self._instance

    @property
    def pdbs(self) -> Iterable[Pdb]:
        return self._pdbs.values()

    @property
    def nominator(self) -> Nominations:
        return self._nominator

    @property
    def pod_groups(self) -> Mapping[str, PodGroup] | None:
        store = self._pod_groups
        return store.groups if store is not None and store.served else None

    def pod_group_members(self, key: str) -> frozenset[str]:
        store = self._pod_groups
        return store.member_uids(key) if store is not None else frozenset()

    def pod_group_size(self, key: str) -> int:
        if self._group_size is not None:
            return self._group_size(key)
        return len(self.pod_group_members(key))

    @property
    def rng(self) -> random.Random:
        return self._rng

    @property
    def metrics(self) -> Metrics:
        return self._metrics

    def preempting(self, preemptor: str, uids: list[str], work: Coroutine[Any, Any, bool]) -> None:
        self._spawn(self._preempting(preemptor, uids, work))


def warm_ups(profile: Profile, event: ClusterEvent) -> Iterator[WarmUpPlugin]:
    """The profile's plugins whose warm-up waits for ``event``."""
    return (p for p in _plugins(profile) if isinstance(p, WarmUpPlugin) and p.warm_up_on & event)


def run_hints(profile: Profile, handle: BindingHandle, kind: str, key: str, done: set[str]) -> None:
    """The profile's queueing hints for one changed object; ``done`` holds the plugins
    already asked (by another profile)."""
    for plugin in implementing(profile, QueueingHintPlugin):
        if plugin.name not in done:
            done.add(plugin.name)
            plugin.hint(handle, kind, key)


def _group_reserve_plugins(profile: Profile) -> list[ReservePlugin]:
    """The filters' Reserve plugins: what a pod-group member holds for the next one."""
    return [p for p in profile.filters if isinstance(p, ReservePlugin)]


def run_group_reserve(profile: Profile, handle: BindingHandle, pod: PodInfo, node: str) -> None:
    """A pod-group member assumed by the group's cycle: the filters' Reserve, so the next
    member's Filter sees what it holds (Go runs Reserve as each member is assumed, and
    ``SignalClaimPendingAllocation`` makes its devices taken). Raises PluginError, worded
    as RunReservePluginsReserve words it, when a plugin cannot reserve; the group's cycle
    then fails with that member's error."""
    for plugin in _group_reserve_plugins(profile):
        status = plugin.reserve(handle, pod, node)
        if not status.ok:
            raise PluginError(_failure("Reserve", plugin.name, status).message)


def run_group_unreserve(profile: Profile, handle: BindingHandle, pod: PodInfo, node: str) -> None:
    """A member forgotten by the group's cycle (a failed trial or group): the filters'
    Unreserve in reverse order; memory is undone at once, API work runs beside."""
    for plugin in reversed(_group_reserve_plugins(profile)):
        undo = plugin.unreserve(handle, pod, node)
        if undo is not None:
            handle.spawn(undo)


def run_pre_enqueue(
    profile: Profile, handle: BindingHandle, pod: PodInfo
) -> tuple[str, str] | None:
    """RunPreEnqueuePlugins: the first plugin that turns the pod away, and why."""
    for plugin in implementing(profile, PreEnqueuePlugin):
        status = plugin.pre_enqueue(handle, pod)
        if not status.ok:
            return plugin.name, status.reason
    return None


def _post_filter_list(profile: Profile) -> list[Plugin]:
    """The plugins that may implement PostFilter or PodGroupPostFilter: the filters, the
    extensions, then the profile's own PostFilter plugins (DefaultPreemption) while it
    preempts."""
    return [*_plugins(profile), *(profile.post_filters if profile.preemption else [])]


def post_filter_plugins(profile: Profile) -> list[PostFilterPlugin]:
    """The profile's PostFilter list, in order."""
    return [p for p in _post_filter_list(profile) if isinstance(p, PostFilterPlugin)]


def run_pod_group_post_filter(
    profile: Profile, handle: BindingHandle, failed: FailedGroup
) -> PodGroupPostFilterResult:
    """RunPodGroupPostFilterPlugins, in profile order: a Success is the answer, an Error
    stops the rest in Go's words, and the Unschedulable reasons are joined."""
    reasons: list[str] = []
    for plugin in _post_filter_list(profile):
        if not isinstance(plugin, PodGroupPostFilterPlugin):
            continue
        answer = plugin.pod_group_post_filter(handle, failed)
        if answer.status.ok:
            return answer
        if answer.status.code == "Error":
            message = f'error in "{plugin.name}" PodGroupPostFilter plugins: {answer.status.reason}'
            return PodGroupPostFilterResult(Status("Error", message))
        if answer.status.reason:
            reasons.append(answer.status.reason)
    return PodGroupPostFilterResult(Status("Unschedulable", ", ".join(reasons)))


def run_post_filter(
    profile: Profile, handle: BindingHandle, pod: PodInfo, failed: FailedCycle
) -> PostFilterResult:
    """RunPostFilterPlugins, in profile order: a Success or an Error stops the plugins
    after it and is the answer; otherwise the Unschedulable reasons are joined (Go's
    Status.Message) and the last plugin's nomination that is not None is kept. With no
    PostFilter plugin the nomination is cleared (Go's clearNominatedNode). A dry-run
    profile runs each plugin's ``post_filter_dry_run``, which writes nothing."""
    plugins = post_filter_plugins(profile)
    if not plugins:
        return PostFilterResult(REJECTED, nominating="")
    reasons: list[str] = []
    nominating: str | None = None
    for plugin in plugins:
        if profile.dry_run:
            answer = plugin.post_filter_dry_run(handle, pod, failed)
        else:
            answer = plugin.post_filter(handle, pod, failed)
        if answer.status.ok:
            return answer
        if answer.status.code == "Error":
            return PostFilterResult(answer.status)
        if answer.nominating is not None:
            nominating = answer.nominating
        if answer.status.reason:
            reasons.append(answer.status.reason)
    return PostFilterResult(Status("Unschedulable", ", ".join(reasons)), nominating)


def run_reserve(profile: Profile, handle: BindingHandle, pod: PodInfo, node: str) -> Failure | None:
    """RunReservePluginsReserve: the first failure stops it."""
    for plugin in implementing(profile, ReservePlugin):
        status = plugin.reserve(handle, pod, node)
        if not status.ok:
            return _failure("Reserve", plugin.name, status)
    return None


def run_unreserve(profile: Profile, handle: BindingHandle, pod: PodInfo, node: str) -> Undo | None:
    """RunReservePluginsUnreserve: every Reserve plugin, in reverse order; the API work
    they leave is returned as one coroutine, None when there is none."""
    handle.waiting.pop(pod.uid, None)
    pending: list[tuple[str, Undo]] = []
    for plugin in reversed(implementing(profile, ReservePlugin)):
        try:
            work = plugin.unreserve(handle, pod, node)
        except Exception:  # one plugin's failure must not keep the others from undoing
            log.exception("unreserve_failed", plugin=plugin.name, pod=pod.name)
            continue
        if work is not None:
            pending.append((plugin.name, work))
    return _undo(pending, pod) if pending else None


async def _undo(pending: list[tuple[str, Undo]], pod: PodInfo) -> None:
    for name, work in pending:
        try:
            await work
        except Exception:
            log.exception("unreserve_failed", plugin=name, pod=pod.name)


def run_permit(profile: Profile, handle: BindingHandle, pod: PodInfo, node: str) -> Failure | None:
    """RunPermitPlugins: a rejection or error stops it; Waits are gathered into one
    waiting pod, each plugin's timeout capped at Go's 15 minutes."""
    timeouts: dict[str, float] = {}
    for plugin in implementing(profile, PermitPlugin):
        status = plugin.permit(handle, pod, node)
        if status.code == "Wait":
            timeouts[plugin.name] = min(status.timeout, MAX_PERMIT_WAIT)
        elif not status.ok:
            return _failure("Permit", plugin.name, status)
    if timeouts:
        verdict: asyncio.Future[tuple[Status, str]] = asyncio.get_running_loop().create_future()
        handle.waiting[pod.uid] = _Waiting(set(timeouts), verdict, timeouts)
    return None


async def wait_on_permit(handle: BindingHandle, pod: PodInfo) -> Failure | None:
    """WaitOnPermit: hold the binding cycle until every waiting plugin allowed the pod, one
    rejected it, or the first timeout passed (Go's "rejected due to timeout" message)."""
    waiting = handle.waiting.get(pod.uid)
    if waiting is None:
        return None
    plugin, timeout = min(waiting.timeouts.items(), key=lambda item: item[1])
    log.info(
        "waiting_on_permit",
        pod=pod.name,
        namespace=pod.namespace,
        plugins=sorted(waiting.pending),
        timeout_s=timeout,
    )
    try:
        status, by = await asyncio.wait_for(asyncio.shield(waiting.verdict), timeout)
    except TimeoutError:
        message = f"rejected due to timeout after waiting {go_duration(timeout)} at plugin {plugin}"
        return Failure(message, plugin, rejected=True)
    finally:
        handle.waiting.pop(pod.uid, None)
    return None if status.ok else Failure(status.reason, by, rejected=True)


def run_pre_bind_pre_flights(
    profile: Profile, handle: BindingHandle, pod: PodInfo, node: str
) -> Failure | bool:
    """RunPreBindPreFlights: whether some PreBind will work for the pod, or the first
    plugin's Error, in Go's words. Any code but Success and Skip is an error there,
    Unschedulable included."""
    works = False
    for plugin in implementing(profile, PreBindPlugin):
        status = plugin.pre_bind_pre_flight(handle, pod, node)
        if status.ok:
            works = True
        elif status.code == "Error":
            message = f'running PreBindPreFlight "{plugin.name}": {status.reason}'
            return Failure(message, plugin.name, rejected=False)
        elif status.code != "Skip":
            message = (
                f'PreBindPreFlight {plugin.name} returned "{status.code}", which is '
                "unsupported. It is supposed to return Success, Skip, or Error status"
            )
            return Failure(message, plugin.name, rejected=False)
    return works


async def run_pre_bind(
    profile: Profile, handle: BindingHandle, pod: PodInfo, node: str
) -> Failure | None:
    """RunPreBindPlugins: in order, the first failure stops it."""
    for plugin in implementing(profile, PreBindPlugin):
        status = await plugin.pre_bind(handle, pod, node)
        if not status.ok:
            return _failure("PreBind", plugin.name, status)
    return None


async def run_post_bind(profile: Profile, handle: BindingHandle, pod: PodInfo, node: str) -> None:
    """RunPostBindPlugins: informational; a failure is logged and changes nothing."""
    for plugin in implementing(profile, PostBindPlugin):
        try:
            await plugin.post_bind(handle, pod, node)
        except Exception:
            log.exception("post_bind_failed", plugin=plugin.name, pod=pod.name, node=node)
