"""Reserve, PreBind and Unreserve for DynamicResources: claims written before the Binding.

kube-scheduler's order, which the kubelet relies on:

1. Reserve: the chosen allocations go in flight in the store, so the next
   cycles see their devices taken while this pod binds.
2. PreBind, per claim not yet reserved for the pod: add the finalizer
   ``resource.kubernetes.io/delete-protection`` (a normal update), then write
   ``status.allocation`` (with ``allocationTimestamp``) and append the pod to
   ``status.reservedFor`` in one status update; a conflict re-reads the claim
   and tries again (client-go's DefaultRetry, 5 tries). A claim allocated or
   deleted meanwhile fails the attempt. A shared, allocated claim only grows
   its ``reservedFor``.
3. Binding conditions: when an allocated device carries ``bindingConditions``,
   PreBind records a ``BindingConditionsPending`` Event and polls the claims
   every 5 s (Go's ``wait.PollUntilContextTimeout``) until each condition is
   True in the claim's ``status.devices[]``. A True ``bindingFailureCondition``
   fails the attempt (``device binding failed: ...``); so does the plugin's
   ``bindingTimeoutSeconds`` (``device binding timeout: ...``). The wait runs in
   the binding cycle, off the scheduling loop. After a failure the pod leaves
   ``reservedFor`` (below) and is retried with backoff; its next attempt finds
   the claim unusable on every node and PostFilter deallocates it.
4. The pod's Binding, only once every claim is written and ready.
5. Unreserve, after any failure: the in-flight allocations are dropped and the
   pod is taken out of every claim's ``reservedFor`` again (a strategic-merge
   patch, as kube-scheduler does); an allocation already written stays, and
   constrains the next attempt to its node, as in kube-scheduler.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import structlog

from podium.algorithms.dynamic_resources.plugin import (
    NAME,
    ClaimPlan,
    binding_ready,
    binding_timed_out,
)
from podium.kube.client import ApiError, KubeClient
from podium.kube.objects import PodInfo
from podium.state.dra import FINALIZER, Claim, DraStore, parse_claim

__all__ = ["ClaimBinder"]

log = structlog.get_logger("podium.scheduling.claim_binder")

RETRIES = 5
RETRY_DELAY = 0.01
# PreBind's poll of the binding conditions (wait.PollUntilContextTimeout's interval).
BINDING_POLL = 5.0


class _Failed(Exception):
    """One claim could not be written; the message is Go's."""


def _message(exc: ApiError) -> str:
    """The API server's message, as client-go's error prints it."""
    body = exc.body
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return str(exc)


def _path(claim: Claim) -> str:
    return f"/apis/resource.k8s.io/v1/namespaces/{claim.namespace}/resourceclaims/{claim.name}"


# A claim write's answer, handed to the scheduler's DRA event handler: it goes into the
# store and wakes the pods waiting on the claim, as the watch event would.
Seen = Callable[[str, str | None, Mapping[str, Any]], None]
# Records a Normal Event about the pod: reason, note.
Note = Callable[[PodInfo, str, str], Awaitable[None]]


def _has_binding_conditions(claim: Claim) -> bool:
    """hasBindingConditions, for one claim."""
    devices = (claim.allocation or {}).get("devices") or {}
    return any((r or {}).get("bindingConditions") for r in devices.get("results") or ())


class ClaimBinder:
    def __init__(
        self,
        client: KubeClient,
        store: DraStore,
        seen: Seen,
        wake: Callable[[str], None],
        note: Note,
        poll: float = BINDING_POLL,
    ) -> None:
        self.client = client
        self.store = store
        self.seen = seen
        # Called with a claim's key when its in-flight allocation is dropped.
        self.wake = wake
        self.note = note
        self.poll = poll

    def assume(self, pod: PodInfo, plan: ClaimPlan) -> None:
        """Reserve: the allocations are in flight from now on."""
        for claim, allocation in plan.items:
            if allocation is not None:
                self.store.assume(claim, allocation, pod.uid)

    def release(self, pod: PodInfo, plan: ClaimPlan) -> None:
        """Drop this pod's in-flight allocations (written, or given up)."""
        for claim, allocation in plan.items:
            if allocation is not None and self.store.release(claim.uid, pod.uid):
                self.wake(claim.key)

    async def bind(self, pod: PodInfo, node: str, plan: ClaimPlan, binding_timeout: float) -> str:
        """PreBind: '' once every claim is allocated, reserved and its devices' binding
        conditions are met, else why (unreserved)."""
        try:
            for claim, allocation in plan.items:
                await self._bind_claim(pod, claim, allocation)
            self.release(pod, plan)
            await self._await_binding_conditions(pod, node, plan, binding_timeout)
        except (_Failed, ApiError) as exc:
            why = str(exc) if isinstance(exc, _Failed) else _message(exc)
            await self.unreserve(pod, plan)
            return f'running PreBind plugin "{NAME}": {why}'
        log.info(
            "claims_reserved",
            pod=pod.name,
            namespace=pod.namespace,
            node=node,
            claims=[c.name for c, _ in plan.items],
        )
        return ""

    async def _await_binding_conditions(
        self, pod: PodInfo, node: str, plan: ClaimPlan, binding_timeout: float
    ) -> None:
        """PreBind's wait: poll until every claim is ready for binding (Go's
        isPodReadyForBinding); _Failed with Go's text on a failure condition or a timeout."""
        current = [self.store.claim(c.namespace, c.name) or c for c in plan.claims]
        if not any(_has_binding_conditions(c) for c in current):
            return
        note = f"waiting for binding conditions for device on node {node}"
        await self.note(pod, "BindingConditionsPending", note)
        log.info(
            "binding_conditions_pending",
            pod=pod.name,
            namespace=pod.namespace,
            node=node,
            timeout_s=binding_timeout,
        )
        try:
            async with asyncio.timeout(binding_timeout):
                # Polled, like Go: the store follows the claims through watch events.
                while not self._ready_for_binding(plan, binding_timeout):  # noqa: ASYNC110
                    await asyncio.sleep(self.poll)
        except TimeoutError:
            raise _Failed("device binding timeout: context deadline exceeded") from None
        log.info("binding_conditions_met", pod=pod.name, namespace=pod.namespace, node=node)

    def _ready_for_binding(self, plan: ClaimPlan, timeout: float) -> bool:
        """isPodReadyForBinding over the store's copies of the pod's claims."""
        now = time.time()
        for planned in plan.claims:
            claim = self.store.claim(planned.namespace, planned.name)
            if claim is None or claim.uid != planned.uid:
                raise _Failed(f'resourceclaim.resource.k8s.io "{planned.name}" not found')
            ready = binding_ready(claim)
            if isinstance(ready, str):
                raise _Failed(ready)
            if not ready:
                if binding_timed_out(claim, timeout, now):
                    raise _Failed(f"device binding timeout: claim={claim.name}")
                return False
        return True

    async def _bind_claim(
        self, pod: PodInfo, planned: Claim, allocation: dict[str, Any] | None
    ) -> None:
        """bindClaim: finalizer, then allocation and reservation, retried on conflicts."""
        current = self.store.claim(planned.namespace, planned.name)
        claim = current if current is not None and current.uid == planned.uid else planned
        for attempt in range(RETRIES):
            if attempt:
                await asyncio.sleep(RETRY_DELAY * attempt)
                try:
                    claim = self._seen(await self.client.get(_path(claim)))
                except ApiError as exc:
                    raise _Failed(
                        f"get updated claim {claim.key} after conflict: {_message(exc)}"
                    ) from exc
            try:
                self._write(pod, claim, allocation)
                claim = await self._write_claim(pod, claim, allocation)
                return
            except ApiError as exc:
                if exc.status != 409 or attempt == RETRIES - 1:
                    what = "add allocation and reservation" if allocation else "add reservation"
                    raise _Failed(f"{what} to claim {claim.key}: {_message(exc)}") from exc

    def _write(self, pod: PodInfo, claim: Claim, allocation: dict[str, Any] | None) -> None:
        """The checks kube-scheduler makes before each try."""
        if claim.deleting:
            raise _Failed(f"claim {claim.key} got deleted in the meantime")
        if allocation is not None and claim.allocation is not None:
            raise _Failed(f"claim {claim.key} got allocated elsewhere in the meantime")
        if allocation is None and claim.allocation is None:
            raise _Failed(f"claim {claim.key} got deallocated elsewhere in the meantime")

    async def _write_claim(
        self, pod: PodInfo, claim: Claim, allocation: dict[str, Any] | None
    ) -> Claim:
        body = copy.deepcopy(dict(claim.raw))
        if allocation is not None and FINALIZER not in claim.finalizers:
            meta = body.setdefault("metadata", {})
            meta["finalizers"] = [*(meta.get("finalizers") or []), FINALIZER]
            try:
                claim = self._seen(await self.client.request("PUT", _path(claim), body))
            except ApiError as exc:
                if exc.status == 409:
                    raise
                raise _Failed(f"add finalizer to claim {claim.key}: {_message(exc)}") from exc
            body = copy.deepcopy(dict(claim.raw))
        status = body.setdefault("status", {})
        if allocation is not None:
            status["allocation"] = copy.deepcopy(allocation)
        status["reservedFor"] = [
            *(status.get("reservedFor") or []),
            {"resource": "pods", "name": pod.name, "uid": pod.uid},
        ]
        written = status["allocation"]
        if not written.get("allocationTimestamp"):
            written["allocationTimestamp"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return self._seen(await self.client.request("PUT", _path(claim) + "/status", body))

    async def deallocate(self, claim: Claim) -> None:
        """PostFilter: clear reservedFor, allocation and devices of a stale claim."""
        body = copy.deepcopy(dict(claim.raw))
        status = body.setdefault("status", {})
        for key in ("reservedFor", "allocation", "devices"):
            status.pop(key, None)
        try:
            self._seen(await self.client.request("PUT", _path(claim) + "/status", body))
        except ApiError as exc:  # the next attempt finds the claim still stale
            log.warning("deallocation_failed", claim=claim.key, error=str(exc))
            return
        log.info("claim_deallocated", claim=claim.key)

    async def unreserve(self, pod: PodInfo, plan: ClaimPlan) -> None:
        """Unreserve: in-flight allocations dropped, the pod out of every ``reservedFor``."""
        self.release(pod, plan)
        for planned in plan.claims or [c for c, _ in plan.items]:
            claim = self.store.claim(planned.namespace, planned.name)
            if claim is None or claim.allocation is None or pod.uid not in claim.reserved_for:
                continue
            patch = {
                "metadata": {"uid": claim.uid},
                "status": {"reservedFor": [{"$patch": "delete", "uid": pod.uid}]},
            }
            try:
                self._seen(await self.client.patch(_path(claim) + "/status", patch))
            except Exception as exc:  # any failure: the bind must not be stranded; retried later
                log.warning("unreserve_failed", claim=claim.key, pod=pod.key, error=str(exc))

    def _seen(self, body: Any) -> Claim:
        """Take a write's answer into the store at once (the assume cache)."""
        self.seen("resourceclaims", "MODIFIED", body)
        return parse_claim(body)
