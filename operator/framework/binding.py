"""The extensions after Score, run in kube-scheduler's order for one profile.

Go's ``RunReservePluginsReserve``/``Unreserve``, ``RunPermitPlugins`` and
``WaitOnPermit``, ``RunPreBindPlugins`` and ``RunPostBindPlugins``
(``framework/runtime/framework.go``), with their messages. The scheduling loop calls
these and names no plugin; the built-in binding work (volumes, claims, the Binding)
stays where it is and these run around it as Go orders them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from podium.framework.extension import (
    ALLOW,
    MAX_PERMIT_WAIT,
    ApiClient,
    PermitPlugin,
    PostBindPlugin,
    PreBindPlugin,
    ReservePlugin,
    Status,
)

if TYPE_CHECKING:
    from podium.framework.profile import Profile
    from podium.kube.objects import PodInfo

__all__ = [
    "BindingHandle",
    "Failure",
    "run_permit",
    "run_post_bind",
    "run_pre_bind",
    "run_pre_bind_pre_flights",
    "run_reserve",
    "run_unreserve",
    "wait_on_permit",
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
    return Failure(f'running {point} plugin "{plugin}": {status.reason}', plugin, rejected=False)


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


class BindingHandle:
    """The running scheduler as plugins see it (``extension.Handle``)."""

    def __init__(self, client: ApiClient, spawn: Callable[[Coroutine[Any, Any, object]], None]):
        self._client = client
        self._spawn = spawn
        self.waiting: dict[str, _Waiting] = {}

    @property
    def client(self) -> ApiClient:
        return self._client

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


def run_reserve(profile: Profile, handle: BindingHandle, pod: PodInfo, node: str) -> Failure | None:
    """RunReservePluginsReserve: the first failure stops it."""
    for plugin in (p for p in profile.extensions if isinstance(p, ReservePlugin)):
        status = plugin.reserve(handle, pod, node)
        if not status.ok:
            return _failure("Reserve", plugin.name, status)
    return None


def run_unreserve(profile: Profile, handle: BindingHandle, pod: PodInfo, node: str) -> None:
    """RunReservePluginsUnreserve: every Reserve plugin, in reverse order."""
    handle.waiting.pop(pod.uid, None)
    for plugin in reversed([p for p in profile.extensions if isinstance(p, ReservePlugin)]):
        try:
            plugin.unreserve(handle, pod, node)
        except Exception:  # one plugin's failure must not keep the others from undoing
            log.exception("unreserve_failed", plugin=plugin.name, pod=pod.name)


def run_permit(profile: Profile, handle: BindingHandle, pod: PodInfo, node: str) -> Failure | None:
    """RunPermitPlugins: a rejection or error stops it; Waits are gathered into one
    waiting pod, each plugin's timeout capped at Go's 15 minutes."""
    timeouts: dict[str, float] = {}
    for plugin in (p for p in profile.extensions if isinstance(p, PermitPlugin)):
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
    profile: Profile, handle: BindingHandle, pod: PodInfo, node: str, built_in: bool
) -> Failure | bool:
    """RunPreBindPreFlights: whether some PreBind will work for the pod (``built_in``:
    VolumeBinding's or DynamicResources' own answer), or the first plugin's Error, in
    Go's words. Any code but Success and Skip is an error there, Unschedulable included."""
    works = built_in
    for plugin in (p for p in profile.extensions if isinstance(p, PreBindPlugin)):
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
    for plugin in (p for p in profile.extensions if isinstance(p, PreBindPlugin)):
        status = await plugin.pre_bind(handle, pod, node)
        if not status.ok:
            return _failure("PreBind", plugin.name, status)
    return None


async def run_post_bind(profile: Profile, handle: BindingHandle, pod: PodInfo, node: str) -> None:
    """RunPostBindPlugins: informational; a failure is logged and changes nothing."""
    for plugin in (p for p in profile.extensions if isinstance(p, PostBindPlugin)):
        try:
            await plugin.post_bind(handle, pod, node)
        except Exception:
            log.exception("post_bind_failed", plugin=plugin.name, pod=pod.name, node=node)
