"""Binding calls and the writes that report a decision: pod status and Events.

The outcome of a Binding is not always known: a timeout or a 5xx may have
been applied by the server. In that case the binder keeps the cache's
assumption and re-reads the pod until the server tells the truth, instead of
releasing the space and risking a double booking (kube-scheduler #106361,
#96579). A 409 means the pod is bound already: a success for the queue,
never a retry loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

from podium.kube.client import ApiError, KubeClient
from podium.kube.credentials import CredentialError
from podium.kube.objects import PodInfo, parse_pod
from podium.scheduling.nominator import Nominator

__all__ = ["BindOutcome", "Binder", "EventRecorder", "status_patch"]

log = structlog.get_logger("podium.scheduling.binder")

NOTE_LIMIT = 1024
# Answers that prove a Binding was refused before it was applied.
_NOT_APPLIED = frozenset({401, 403, 429})
# Status reports written again after a 409, each against a fresh read of the pod.
_CONFLICT_RETRIES = 3


class BindOutcome(enum.Enum):
    BOUND = "bound"  # bound to the chosen node
    ELSEWHERE = "elsewhere"  # someone else bound it to another node
    GONE = "gone"  # deleted, or replaced by a pod with a new UID
    RETRY = "retry"  # certainly not bound: schedule it again


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def truncate(note: str) -> str:
    """Event notes are limited to 1024 bytes; kube-scheduler cuts and appends ' ...'."""
    if len(note) <= NOTE_LIMIT:
        return note
    return note[: NOTE_LIMIT - 4] + " ..."


class Binder:
    def __init__(
        self,
        client: KubeClient,
        instance: str,
        max_in_flight: int = 256,
        resolve_backoff: float = 0.2,
        resolve_max_backoff: float = 5.0,
    ) -> None:
        self.client = client
        self.instance = instance
        self.semaphore = asyncio.Semaphore(max_in_flight)
        self.resolve_backoff = resolve_backoff
        self.resolve_max_backoff = resolve_max_backoff
        self.events = EventRecorder(client, instance, backoff=resolve_backoff)
        # The newest status report begun for each pod (by UID), so a retried one yields.
        self._latest: dict[str, int] = {}
        self._reports = 0

    async def bind(self, pod: PodInfo, node: str) -> tuple[BindOutcome, str]:
        """POST pods/binding; returns the outcome and, for RETRY, why (an API error as
        client-go prints it: the server's message)."""
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding"
        async with self.semaphore:
            try:
                await self.client.post(path, body)
                return BindOutcome.BOUND, ""
            except ApiError as exc:
                if exc.status in _NOT_APPLIED:
                    # Refused before it was handled: certainly not bound. A throttled
                    # Binding waits out the server's Retry-After before it is requeued.
                    if exc.status == 429 and exc.retry_after:
                        await asyncio.sleep(exc.retry_after)
                    return BindOutcome.RETRY, exc.message
                # Even a 404 proves nothing by itself (a proxy or aggregator may answer
                # it): like every other failure, it is settled by re-reading the pod.
                error = exc
            except CredentialError as exc:  # never sent
                return BindOutcome.RETRY, str(exc)
            except (TimeoutError, OSError) as exc:
                error = exc  # type: ignore[assignment]
        outcome = await self.resolve(pod, node)
        return outcome, error.message if isinstance(error, ApiError) else str(error)

    async def resolve(self, pod: PodInfo, node: str) -> BindOutcome:
        """Read the pod until the server answers, and classify what happened to it.

        The reservation stands until then. A refused read (401, 403) is not retried
        at once: the client has re-authenticated once already and reported it, so
        the read waits the longest backoff before it tries again.
        """
        delay = self.resolve_backoff
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
        refused = False
        while True:
            wait = delay
            try:
                current = await self.client.get(path)
                break
            except ApiError as exc:
                if exc.status == 404:
                    return BindOutcome.GONE
                if exc.status in (401, 403):
                    wait = self.resolve_max_backoff
                    if not refused:
                        log.error(
                            "bind_resolve_refused",
                            pod=pod.name,
                            namespace=pod.namespace,
                            status=exc.status,
                        )
                    refused = True
                else:
                    wait = max(delay, exc.retry_after or 0.0)
                    log.warning(
                        "bind_resolve_retry", pod=pod.name, namespace=pod.namespace, error=str(exc)
                    )
            except (TimeoutError, OSError) as exc:
                log.warning(
                    "bind_resolve_retry", pod=pod.name, namespace=pod.namespace, error=str(exc)
                )
            await asyncio.sleep(wait)
            delay = min(delay * 2, self.resolve_max_backoff)
        meta = current.get("metadata") or {}
        if meta.get("uid") != pod.uid:
            return BindOutcome.GONE
        bound_to = (current.get("spec") or {}).get("nodeName") or ""
        if bound_to == node:
            return BindOutcome.BOUND
        if bound_to:
            return BindOutcome.ELSEWHERE
        return BindOutcome.RETRY

    async def nominate(self, pod: PodInfo, node: str) -> PodInfo:
        """bindingCycle's updatePod before PreBind: ``status.nominatedNodeName`` set to the
        chosen node, so that autoscalers see where the pod goes while PreBind or a Permit
        wait works. Returns the pod as the server holds it now; a failed write is logged
        and binding goes on, as in Go."""
        if pod.nominated_node == node:  # Go's nnnNeedsUpdate
            return pod
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status"
        patch = {"metadata": {"uid": pod.uid}, "status": {"nominatedNodeName": node}}
        try:
            written = await self.client.patch(path, patch)
        except (ApiError, CredentialError, TimeoutError, OSError) as exc:
            log.error(
                "nominate_failed", pod=pod.name, namespace=pod.namespace, node=node, error=str(exc)
            )
            return pod
        version = str(((written or {}).get("metadata") or {}).get("resourceVersion") or "")
        log.info("nominated_before_prebind", pod=pod.name, namespace=pod.namespace, node=node)
        return dataclasses.replace(
            pod, nominated_node=node, resource_version=version or pod.resource_version
        )

    # -- reporting ------------------------------------------------------------------
    async def set_condition(
        self, pod: PodInfo, reason: str, message: str, nominator: Nominator | None = None
    ) -> None:
        """handleSchedulingFailure's updatePod: PodScheduled=False with kube-scheduler's
        reason and, given the ``nominator``, the pod's nominatedNodeName as it holds it,
        in one status write (Go's PatchPodStatus).

        The resourceVersion makes the write conditional: a copy retried through an
        outage must not land after a later attempt bound the pod. A 409 re-reads the
        pod and writes again against that version while the pod is unbound, has the
        same UID, and no later report for it has begun (Go retries conflicts too).
        """
        uid = pod.uid
        self._reports += 1
        mine = self._latest[uid] = self._reports
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
        try:
            for attempt in range(1, _CONFLICT_RETRIES + 1):
                nominated = nominator.node_of(uid) if nominator is not None else None
                patch = status_patch(pod, reason, message, nominated)
                if patch is None:
                    return
                status = await _write(
                    self.client.patch, path + "/status", patch, self.resolve_backoff
                )
                if status != 409 or attempt == _CONFLICT_RETRIES:
                    return
                try:
                    fresh = parse_pod(await self.client.get(path))
                except (
                    ApiError,
                    CredentialError,
                    TimeoutError,
                    OSError,
                ) as exc:
                    log.info("report_dropped", path=path, error=str(exc))
                    return
                if fresh.uid != uid or fresh.bound or self._latest.get(uid) != mine:
                    return
                pod = fresh
        finally:
            if self._latest.get(uid) == mine:
                del self._latest[uid]

    async def event(
        self, pod: PodInfo, reason: str, note: str, controller: str, kind: str = "Normal"
    ) -> None:
        """An Event about the pod; repeats of it join one Event series."""
        await self.events.record(pod, reason, note, controller, kind)


def status_patch(
    pod: PodInfo, reason: str, message: str, nominated: str | None = None
) -> dict[str, Any] | None:
    """updatePod's patch: the PodScheduled=False condition and, where ``nominated`` is
    given and differs from the pod's, its nominatedNodeName ("" clears it), conditional
    on the pod's resourceVersion; None when neither changes (Go's
    podConditionNeedsUpdate and nnnNeedsUpdate)."""
    status: dict[str, Any] = {}
    current = pod.conditions.get("PodScheduled") or {}
    if (
        current.get("status") != "False"
        or current.get("reason") != reason
        or current.get("message") != message
    ):
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": reason,
                "message": message,
                "lastProbeTime": None,
                "lastTransitionTime": _now(),
            }
        ]
    if nominated is not None and nominated != pod.nominated_node:
        status["nominatedNodeName"] = nominated or None
    if not status:
        return None
    meta = {"uid": pod.uid, "resourceVersion": pod.resource_version}
    return {"metadata": {k: v for k, v in meta.items() if v}, "status": status}


async def _write(call: Any, path: str, body: Any, backoff: float, attempts: int = 3) -> int | None:
    """One reporting write, retried on its own: a lost one must not stall scheduling.

    Returns None once written, else the status of the last answer (0 if none). A
    409 means the object changed meanwhile and the report is stale; 401, 403,
    404 and 422 would only be refused again, and are not retried.
    """
    delay = backoff
    status = 0
    for attempt in range(1, attempts + 1):
        wait = delay
        try:
            await call(path, body)
            return None
        except ApiError as exc:
            status = exc.status
            if exc.status == 409:
                log.info("report_stale", path=path)
                return status
            if exc.status in (401, 403, 404, 422) or attempt == attempts:
                log.warning("report_failed", path=path, error=str(exc), attempt=attempt)
                return status
            wait = max(delay, exc.retry_after or 0.0)
        except (TimeoutError, OSError) as exc:
            status = 0
            if attempt == attempts:
                log.warning("report_failed", path=path, error=str(exc), attempt=attempt)
                return status
        await asyncio.sleep(wait)
        delay *= 2
    return status


@dataclass(slots=True)
class _Recorded:
    """An Event as first written, and how often it has happened since."""

    body: dict[str, Any]
    first: float
    last: float
    count: int = 1
    last_observed: str = ""


class EventRecorder:
    """events.k8s.io/v1 Events with client-go's series, as kube-scheduler records them.

    client-go's events/v1 broadcaster (tools/events): the first occurrence is
    POSTed; the second turns the Event into a series and PATCHes
    ``series: {count: 2, lastObservedTime}``; later ones only count in memory.
    Every ``refresh`` (30 min) each open series is PATCHed with its count, and a
    series idle for ``finish`` (6 min) gets a last PATCH and is forgotten, as is
    a single Event that old. A PATCH answered 404 (the Event expired) POSTs it
    again, series included.

    Occurrences are the same when type, action, reason, reporting controller and
    instance and the regarding object agree. The regarding reference carries
    the pod's resourceVersion, as kube-scheduler's does, so a pod whose
    PodScheduled condition changed starts a new Event. The note is part of the
    key too: a new message is never hidden in an old Event's series, even when
    the condition patch that changes the resourceVersion was lost.
    """

    def __init__(
        self,
        client: KubeClient,
        instance: str,
        *,
        backoff: float = 0.2,
        finish: float = 360.0,
        refresh: float = 1800.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.instance = instance
        self.backoff = backoff
        self.finish_after = finish
        self.refresh_every = refresh
        self.clock = clock
        self.cache: dict[tuple[str, ...], _Recorded] = {}

    def _count(self, action: str) -> None:
        if self.client.metrics is not None:
            self.client.metrics.events.labels(action).inc()

    async def record(
        self, pod: PodInfo, reason: str, note: str, controller: str, kind: str = "Normal"
    ) -> None:
        regarding = {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": pod.namespace,
            "name": pod.name,
            "uid": pod.uid,
        }
        if pod.resource_version:
            regarding["resourceVersion"] = pod.resource_version
        action = "Binding" if reason == "Scheduled" else "Scheduling"
        note = truncate(note)
        key = (
            kind,
            action,
            reason,
            controller,
            self.instance,
            *(regarding.get(k, "") for k in ("namespace", "name", "uid", "resourceVersion")),
            note,
        )
        now = self.clock()
        seen = self.cache.get(key)
        if seen is None:
            body: dict[str, Any] = {
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": {
                    "name": f"{pod.name}.{secrets.token_hex(8)}",
                    "namespace": pod.namespace,
                },
                "eventTime": _micro_now(),
                "reportingController": controller,
                "reportingInstance": self.instance,
                "action": action,
                "reason": reason,
                "regarding": regarding,
                "note": note,
                "type": kind,
            }
            self.cache[key] = _Recorded(body, now, now)
            self._count("create")
            await _write(self.client.post, self._collection(body), body, self.backoff)
            return
        seen.count += 1
        seen.last = now
        seen.last_observed = _micro_now()
        if seen.count > 2:  # already a series: written on refresh and when it finishes
            self._count("aggregate")
            return
        await self._write_series(seen)

    @staticmethod
    def _collection(body: dict[str, Any]) -> str:
        return f"/apis/events.k8s.io/v1/namespaces/{body['metadata']['namespace']}/events"

    async def _write_series(self, seen: _Recorded) -> int | None:
        self._count("patch")
        series = {"count": seen.count, "lastObservedTime": seen.last_observed}
        path = f"{self._collection(seen.body)}/{seen.body['metadata']['name']}"
        status = await _write(self.client.patch, path, {"series": series}, self.backoff)
        if status == 404:  # expired or never written: create it, series and all
            status = await _write(
                self.client.post, self._collection(seen.body), {**seen.body, "series": series}, 0
            )
        if status == 409:  # created meanwhile by the first write: patch that one
            status = await _write(self.client.patch, path, {"series": series}, self.backoff)
        return status

    async def finish(self) -> None:
        """Close series idle for ``finish`` seconds; forget single Events that old."""
        horizon = self.clock() - self.finish_after
        for key, seen in list(self.cache.items()):
            if seen.last >= horizon:
                continue
            if seen.count > 1:
                await self._write_series(seen)
            self.cache.pop(key, None)

    async def refresh(self) -> None:
        """PATCH every open series with its current count."""
        for seen in list(self.cache.values()):
            if seen.count > 1:
                await self._write_series(seen)

    async def run(self) -> None:
        """finish() every ``finish`` seconds and refresh() every ``refresh``, until cancelled."""
        next_refresh = self.clock() + self.refresh_every
        while True:
            await asyncio.sleep(self.finish_after)
            await self.finish()
            if self.clock() >= next_refresh:
                await self.refresh()
                next_refresh = self.clock() + self.refresh_every
