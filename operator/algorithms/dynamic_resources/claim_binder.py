"""DynamicResources' binding half: Reserve, PreBind and Unreserve, claims written before
the Binding (kube-scheduler's ``dynamicresources`` Reserve/PreBind/Unreserve and its
assume cache); the plugin (``plugin.py``) calls it at those points.

kube-scheduler's order, which the kubelet relies on:

1. Reserve: the chosen allocations go in flight in the store, so the next
   cycles see their devices taken while this pod binds.
2. PreBind, per claim not yet reserved for the pod: add the finalizer
   ``resource.kubernetes.io/delete-protection`` (a normal update), then write
   ``status.allocation`` (with ``allocationTimestamp``) and append the pod to
   ``status.reservedFor`` in one status update; a conflict re-reads the claim
   and tries again (client-go's DefaultRetry, 5 tries). A claim allocated or
   deleted meanwhile fails the attempt. A shared, allocated claim only grows
   its ``reservedFor``. A status write whose answer is lost (the connection
   broke, or timed out) may have been applied: the claim is read until the
   server answers and taken into the store before the attempt fails, so that a
   device it holds stays taken.
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
4a. A pod with DRA-backed extended resources served by the node's devices: after its
   own claims, the extended-resource claim is created, written as above, and named in
   the pod's ``status.extendedResourceClaimStatus``
   (``podium.algorithms.dynamic_resources.extended_binder``); Unreserve deletes it.
4b. Members of one pod-group cycle that share a claim share its in-flight allocation
   (``ClaimPlan.group``); each member's PreBind writes it if it is still unwritten,
   and a member that finds it written by another member with the very same devices only
   adds itself to ``reservedFor``. kube-scheduler fails that member's PreBind instead
   (``got allocated elsewhere in the meantime``) and places it again on a later
   attempt, on the claim's node; the claim ends the same.
5. Unreserve, after any failure: the in-flight allocations are dropped and the
   pod is taken out of every claim's ``reservedFor`` again (a strategic-merge
   patch, as kube-scheduler does); an allocation already written stays, and
   constrains the next attempt to its node, as in kube-scheduler.
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog

from podium.algorithms.dynamic_resources import extended_binder
from podium.algorithms.dynamic_resources.extended import is_extended_claim
from podium.framework.extension import ApiClient
from podium.kube.client import ApiError
from podium.kube.objects import PodInfo
from podium.state.dra import FINALIZER, Claim, DraStore, parse_claim

__all__ = [
    "ClaimBinder",
    "ClaimPlan",
    "ExtendedPlan",
    "assume",
    "binding_ready",
    "binding_timed_out",
    "release",
    "same_devices",
]

log = structlog.get_logger("podium.algorithms.dynamic_resources.claim_binder")

RETRIES = 5
RETRY_DELAY = 0.01
# Re-reads of a claim whose status write lost its answer: first wait, and the longest.
SETTLE_BACKOFF = 0.2
SETTLE_MAX_BACKOFF = 5.0
# PreBind's poll of the binding conditions (wait.PollUntilContextTimeout's interval).
BINDING_POLL = 5.0


def _dict(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _timestamp(value: object) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _go_quote(text: str) -> str:
    """Go's %q for the texts conditions carry."""
    return json.dumps(text, ensure_ascii=False)


def binding_ready(claim: Claim) -> bool | str:
    """isClaimReadyForBinding: True once every binding condition of every allocated
    device is True in ``status.devices`` (also when there are none), False while one is
    not yet, and Go's ErrDeviceBindingFailed text when a failure condition is True."""
    allocation = claim.allocation
    if allocation is None:
        return False
    devices = _list(claim.status.get("devices"))
    for result in _list(_dict(allocation.get("devices")).get("results")):
        result = _dict(result)
        conditions = _list(result.get("bindingConditions"))
        if not conditions:
            continue
        status = next(
            (
                _dict(d)
                for d in devices
                if all(_dict(d).get(k) == result.get(k) for k in ("device", "driver", "pool"))
            ),
            None,
        )
        if status is None:
            return False
        reported = {
            str(_dict(c).get("type") or ""): _dict(c) for c in _list(status.get("conditions"))
        }
        for name in _list(result.get("bindingFailureConditions")):
            failed = reported.get(str(name))
            if failed is not None and failed.get("status") == "True":
                return (
                    f"device binding failed: claim={claim.name}, "
                    f"reason={failed.get('reason') or ''}, "
                    f"message={_go_quote(str(failed.get('message') or ''))}"
                )
        for name in conditions:
            if _dict(reported.get(str(name))).get("status") != "True":
                return False
    return True


def binding_timed_out(claim: Claim, timeout: float, now: float) -> bool:
    """isClaimTimeout: a device of the allocation has binding conditions and
    ``allocationTimestamp`` + ``timeout`` lies before ``now``."""
    allocation = claim.allocation
    if allocation is None:
        return False
    stamp = _timestamp(allocation.get("allocationTimestamp"))
    if stamp is None:
        return False
    results = _list(_dict(allocation.get("devices")).get("results"))
    with_conditions = any(_dict(r).get("bindingConditions") is not None for r in results)
    return with_conditions and stamp + timeout < now


@dataclass(slots=True)
class ExtendedPlan:
    """The extended-resource claim PreBind creates: the node's variant (in memory, with a
    temporary uid for the in-flight allocation), its allocation, the pod's
    ``requestMappings``, and the claim once created."""

    claim: Claim
    allocation: dict[str, Any]
    mappings: list[dict[str, str]]
    created: Claim | None = None


@dataclass(slots=True)
class ClaimPlan:
    """What Reserve and PreBind must do for one pod on one node.

    ``items``: each claim not yet reserved for the pod, with the allocation to write
    (None when the claim is already allocated and only needs ``reservedFor``);
    ``claims``: all of the pod's claims, which PreBind's binding conditions watch;
    ``extended``: the extended-resource claim to create, when the node's devices serve
    some of the pod's extended resources; ``has_extended``: the pod has such requests
    (served by device plugins on this node, or by ``extended``).
    """

    items: list[tuple[Claim, dict[str, Any] | None]] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    extended: ExtendedPlan | None = None
    has_extended: bool = False
    # The pod-group cycle's pending allocations (claim uid -> members sharing them), where
    # this plan's allocations are recorded for the next member; None for a single pod.
    group: dict[str, set[str]] | None = None

    def shared(self, claim: Claim) -> bool:
        """Whether other members of the pod-group cycle share ``claim``'s allocation."""
        return self.group is not None and len(self.group.get(claim.uid, ())) > 1

    @property
    def empty(self) -> bool:
        return not self.items and self.extended is None

    @property
    def pre_flight(self) -> bool:
        """PreBindPreFlight: PreBind works (Success) for a pod with any claim, else Skip."""
        return bool(self.claims) or self.has_extended

    @property
    def watched(self) -> list[Claim]:
        """The claims whose binding conditions PreBind awaits: the extended one once made."""
        created = self.extended.created if self.extended is not None else None
        return self.claims + ([created] if created is not None else [])

    @property
    def in_flight(self) -> list[tuple[Claim, dict[str, Any]]]:
        """Reserve's allocations: each claim's, then the extended claim's."""
        out = [(claim, a) for claim, a in self.items if a is not None]
        if self.extended is not None:
            out.append((self.extended.claim, self.extended.allocation))
        return out


def assume(store: DraStore, pod: PodInfo, plan: ClaimPlan) -> None:
    """Reserve (SignalClaimPendingAllocation): the plan's allocations in flight, each
    recorded in the pod-group cycle's pending allocations for the next member."""
    for claim, allocation in plan.in_flight:
        store.assume(claim, allocation, pod.uid)
        if plan.group is not None:
            plan.group.setdefault(claim.uid, set()).add(pod.uid)


def release(store: DraStore, pod: PodInfo, plan: ClaimPlan) -> list[str]:
    """MaybeRemoveClaimPendingAllocation for the plan's claims: the keys of those whose
    in-flight allocation the last pod sharing it let go (also out of the cycle's
    pending allocations)."""
    released = []
    for claim, _ in plan.in_flight:
        if store.release(claim.uid, pod.uid):
            released.append(claim.key)
            if plan.group is not None:
                plan.group.pop(claim.uid, None)
    return released


def _devices(allocation: Mapping[str, Any] | None) -> set[tuple[str, ...]]:
    results = _list(_dict(_dict(allocation).get("devices")).get("results"))
    keys = ("request", "driver", "pool", "device", "shareID")
    return {tuple(str(_dict(r).get(k) or "") for k in keys) for r in results}


def same_devices(claim: Claim, allocation: Mapping[str, Any] | None) -> bool:
    """Whether ``claim`` already holds ``allocation`` (the same devices)."""
    if allocation is None or claim.allocation is None:
        return False
    return _devices(claim.allocation) == _devices(allocation)


class _Failed(Exception):
    """One claim could not be written; the message is Go's."""


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
        client: ApiClient,
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
        assume(self.store, pod, plan)

    def release(self, pod: PodInfo, plan: ClaimPlan) -> None:
        """Drop this pod's in-flight allocations (written, or given up)."""
        for key in release(self.store, pod, plan):
            self.wake(key)

    async def bind(self, pod: PodInfo, node: str, plan: ClaimPlan, binding_timeout: float) -> str:
        """PreBind: '' once every claim is allocated, reserved and its devices' binding
        conditions are met, else why (unreserved), which the runner prefixes with
        ``running PreBind plugin "DynamicResources"``."""
        try:
            for claim, allocation in plan.items:
                await self._bind_claim(pod, claim, allocation, shared=plan.shared(claim))
            if plan.extended is not None:
                await self._bind_extended(pod, plan)
            self.release(pod, plan)
            await self._await_binding_conditions(pod, node, plan, binding_timeout)
        except (_Failed, ApiError, extended_binder.ExtendedWriteError) as exc:
            why = exc.message if isinstance(exc, ApiError) else str(exc)
            await self.unreserve(pod, plan)
            return why
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
        current = [self.store.claim(c.namespace, c.name) or c for c in plan.watched]
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
        for planned in plan.watched:
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
        self, pod: PodInfo, planned: Claim, allocation: dict[str, Any] | None, shared: bool = False
    ) -> None:
        """bindClaim: finalizer, then allocation and reservation, retried on conflicts.
        ``shared``: other members of the pod-group cycle share the allocation in flight."""
        current = self.store.claim(planned.namespace, planned.name)
        claim = current if current is not None and current.uid == planned.uid else planned
        ours = allocation
        for attempt in range(RETRIES):
            if attempt:
                await asyncio.sleep(RETRY_DELAY * attempt)
                try:
                    claim = self._seen(await self.client.get(_path(claim)))
                except ApiError as exc:
                    raise _Failed(
                        f"get updated claim {claim.key} after conflict: {exc.message}"
                    ) from exc
            # A member of the pod group sharing this allocation wrote it first.
            allocation = None if shared and same_devices(claim, ours) else ours
            try:
                self._write(pod, claim, allocation)
                claim = await self._write_claim(pod, claim, allocation)
                return
            except ApiError as exc:
                if exc.status != 409 or attempt == RETRIES - 1:
                    what = "add allocation and reservation" if allocation else "add reservation"
                    raise _Failed(f"{what} to claim {claim.key}: {exc.message}") from exc

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
                raise _Failed(f"add finalizer to claim {claim.key}: {exc.message}") from exc
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
        try:
            return self._seen(await self.client.request("PUT", _path(claim) + "/status", body))
        except (TimeoutError, OSError) as exc:
            await self._settle(claim)
            what = "add allocation and reservation" if allocation else "add reservation"
            raise _Failed(f"{what} to claim {claim.key}: {exc}") from exc

    async def _settle(self, claim: Claim) -> None:
        """The status write lost its answer (the connection broke, or timed out), so it may
        have been applied: read the claim until the server answers and take it into the
        store before the in-flight allocation is dropped. Otherwise a device the server
        holds for this claim looks free until the watch delivers it, and a later cycle
        allocates it to another claim. The Binder settles a lost Binding the same way."""
        delay = SETTLE_BACKOFF
        while True:
            try:
                self._seen(await self.client.get(_path(claim)))
                return
            except ApiError as exc:
                if exc.status == 404:  # gone: its devices are free
                    return
                log.warning("claim_settle_retry", claim=claim.key, error=exc.message)
            except (TimeoutError, OSError) as exc:
                log.warning("claim_settle_retry", claim=claim.key, error=str(exc))
            await asyncio.sleep(delay)
            delay = min(delay * 2, SETTLE_MAX_BACKOFF)

    async def _bind_extended(self, pod: PodInfo, plan: ClaimPlan) -> None:
        """bindClaim for the extended-resource claim: create, write, name it on the pod."""
        extended = plan.extended
        assert extended is not None
        created = self._seen(await extended_binder.create(self.client, extended.claim.raw))
        extended.created = created
        await self._bind_claim(pod, created, extended.allocation)
        await extended_binder.record(self.client, pod, created.name, extended.mappings)

    async def deallocate(self, claim: Claim) -> None:
        """PostFilter: clear reservedFor, allocation and devices of a stale claim; a stale
        extended-resource claim is deleted instead."""
        if is_extended_claim(claim):
            await self._delete_extended(claim)
            return
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
        created = plan.extended.created if plan.extended is not None else None
        if created is not None:
            await self._delete_extended(created)

    async def _delete_extended(self, claim: Claim) -> None:
        """Unreserve's and PostFilter's deletion of an extended-resource claim."""
        try:
            await extended_binder.delete(self.client, claim)
        except Exception as exc:  # the next attempt finds the claim stale and deletes it
            log.warning("extended_claim_delete_failed", claim=claim.key, error=str(exc))

    def _seen(self, body: Any) -> Claim:
        """Take a write's answer into the store at once (the assume cache)."""
        self.seen("resourceclaims", "MODIFIED", body)
        return parse_claim(body)
