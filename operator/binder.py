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
import enum
import secrets
from datetime import UTC, datetime
from typing import Any

import aiohttp
import structlog

from podium.kube import ApiError, KubeClient
from podium.objects import PodInfo

__all__ = ["BindOutcome", "Binder"]

log = structlog.get_logger("podium.binder")

NOTE_LIMIT = 1024


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

    async def bind(self, pod: PodInfo, node: str) -> tuple[BindOutcome, str]:
        """POST pods/binding; returns the outcome and, for RETRY, why."""
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
                # Even a 404 proves nothing by itself (a proxy or aggregator may answer
                # it): like every other failure, it is settled by re-reading the pod.
                error = exc
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                error = exc  # type: ignore[assignment]
        outcome = await self.resolve(pod, node)
        return outcome, str(error)

    async def resolve(self, pod: PodInfo, node: str) -> BindOutcome:
        """Read the pod until the server answers, and classify what happened to it."""
        delay = self.resolve_backoff
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
        while True:
            try:
                current = await self.client.get(path)
                break
            except ApiError as exc:
                if exc.status == 404:
                    return BindOutcome.GONE
                log.warning(
                    "bind_resolve_retry", pod=pod.name, namespace=pod.namespace, error=str(exc)
                )
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                log.warning(
                    "bind_resolve_retry", pod=pod.name, namespace=pod.namespace, error=str(exc)
                )
            await asyncio.sleep(delay)
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

    # -- reporting ------------------------------------------------------------------
    async def set_condition(self, pod: PodInfo, reason: str, message: str) -> None:
        """PodScheduled=False with kube-scheduler's reason; skipped when nothing changed."""
        current = pod.conditions.get("PodScheduled") or {}
        if (
            current.get("status") == "False"
            and current.get("reason") == reason
            and current.get("message") == message
        ):
            return
        # The resourceVersion makes the write conditional: a copy retried through an
        # outage must not land after a later attempt bound the pod (409 instead).
        meta = {"uid": pod.uid, "resourceVersion": pod.resource_version}
        patch = {
            "metadata": {k: v for k, v in meta.items() if v},
            "status": {
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": reason,
                        "message": message,
                        "lastProbeTime": None,
                        "lastTransitionTime": _now(),
                    }
                ]
            },
        }
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status"
        await self._retrying(self.client.patch, path, patch)

    async def event(
        self, pod: PodInfo, reason: str, note: str, controller: str, kind: str = "Normal"
    ) -> None:
        """An events.k8s.io/v1 Event about the pod, as kube-scheduler's recorder writes it."""
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
            "action": "Binding" if reason == "Scheduled" else "Scheduling",
            "reason": reason,
            "regarding": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": pod.namespace,
                "name": pod.name,
                "uid": pod.uid,
            },
            "note": truncate(note),
            "type": kind,
        }
        await self._retrying(
            self.client.post, f"/apis/events.k8s.io/v1/namespaces/{pod.namespace}/events", body
        )

    async def _retrying(self, call: Any, path: str, body: Any, attempts: int = 3) -> None:
        """Reporting writes are retried on their own: a lost one must not stall scheduling."""
        delay = self.resolve_backoff
        for attempt in range(1, attempts + 1):
            try:
                await call(path, body)
                return
            except ApiError as exc:
                if exc.status == 409:  # the object changed meanwhile: this report is stale
                    log.info("report_stale", path=path)
                    return
                if exc.status in (404, 422) or attempt == attempts:
                    log.warning("report_failed", path=path, error=str(exc), attempt=attempt)
                    return
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                if attempt == attempts:
                    log.warning("report_failed", path=path, error=str(exc), attempt=attempt)
                    return
            await asyncio.sleep(delay)
            delay *= 2
