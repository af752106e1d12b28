"""Leader election on a coordination.k8s.io/v1 Lease, as kube-scheduler does it.

kopf's peering is not used: it freezes operators of equal priority instead
of electing one. Replicas that do not hold the Lease keep their caches warm
but never bind. A leader that cannot renew within the renew deadline stops
at once; the process then exits so that a fresh start competes again,
mirroring kube-scheduler's "lost master" behaviour.

Whether another replica's Lease has expired is judged as client-go does: by
the local monotonic time at which this replica last saw the Lease record
change, never by comparing the holder's ``renewTime`` with the local clock.
Replicas whose clocks disagree by minutes therefore still agree on who leads.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

from podium.kube.client import ApiError, KubeClient

__all__ = ["LeaderElector", "LeaseSettings", "LostLeadership"]

log = structlog.get_logger("podium.kube.leader")


class LostLeadership(RuntimeError):
    """The Lease could not be renewed within the renew deadline."""


@dataclass(frozen=True, slots=True)
class LeaseSettings:
    namespace: str = "default"
    name: str = "podium"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


def _micro_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _utc_now() -> datetime:
    return datetime.now(UTC)


class LeaderElector:
    def __init__(
        self,
        client: KubeClient,
        identity: str,
        settings: LeaseSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = _utc_now,
    ) -> None:
        self.client = client
        self.identity = identity
        self.settings = settings
        self.clock = clock  # measures how long a record has gone unchanged
        self.wall = wall  # only written into the Lease, never compared
        self.path = (
            f"/apis/coordination.k8s.io/v1/namespaces/{settings.namespace}/leases/{settings.name}"
        )
        self._observed: dict[str, Any] | None = None
        self._observed_at = -math.inf

    def _observe(self, spec: dict[str, Any]) -> None:
        """Remember the record and, if it changed, when this replica saw it change."""
        if spec != self._observed:
            self._observed = dict(spec)
            self._observed_at = self.clock()

    def _spec(self, transitions: int, acquired: str | None = None) -> dict[str, Any]:
        now = _micro_time(self.wall())
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.settings.lease_duration),
            "acquireTime": acquired or now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    async def try_acquire_or_renew(self) -> bool:
        """One optimistic attempt; False when another holder's lease is still valid."""
        try:
            lease = await self.client.get(self.path)
        except ApiError as exc:
            if exc.status != 404:
                raise
            created = self._spec(0)
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.settings.name, "namespace": self.settings.namespace},
                "spec": created,
            }
            collection = self.path.rsplit("/", 1)[0]
            try:
                await self.client.post(collection, body)
            except ApiError as create_exc:
                if create_exc.status == 409:
                    return False
                raise
            self._observe(created)
            return True
        spec = lease.get("spec") or {}
        self._observe(spec)
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or self.settings.lease_duration)
        transitions = int(spec.get("leaseTransitions") or 0)
        valid = self._observed_at + duration > self.clock()
        if holder and holder != self.identity and valid:
            return False
        if holder == self.identity:
            new_spec = self._spec(transitions, spec.get("acquireTime"))
        else:
            new_spec = self._spec(transitions + 1)
        lease["spec"] = new_spec
        try:
            await self.client.request("PUT", self.path, lease)
        except ApiError as exc:
            if exc.status == 409:  # someone else wrote first
                return False
            raise
        self._observe(new_spec)
        return True

    async def _attempt(self) -> bool:
        try:
            return await self.try_acquire_or_renew()
        except (ApiError, TimeoutError, OSError) as exc:
            log.warning("lease_attempt_failed", lease=self.settings.name, error=str(exc))
            return False

    async def acquire(self) -> None:
        """Wait until this replica holds the Lease."""
        # Polling is the protocol: the Lease lives on the server, not in a local Event.
        while not await self._attempt():  # noqa: ASYNC110
            await asyncio.sleep(self.settings.retry_period)
        log.info("lease_acquired", lease=self.settings.name, identity=self.identity)

    async def hold(self) -> None:
        """Renew every retry period; raise LostLeadership after the renew deadline passes."""
        last = self.clock()
        while True:
            await asyncio.sleep(self.settings.retry_period)
            try:
                held = await self.try_acquire_or_renew()
            except (ApiError, TimeoutError, OSError) as exc:
                log.warning("lease_renew_failed", lease=self.settings.name, error=str(exc))
                if self.clock() - last > self.settings.renew_deadline:
                    raise LostLeadership(f"failed to renew lease {self.settings.name}") from exc
                continue
            if not held:
                raise LostLeadership(f"lease {self.settings.name} is held by another replica")
            last = self.clock()

    async def release(self) -> None:
        """Give the Lease up on a clean stop, so that a standby takes over at once.

        As client-go with ReleaseOnCancel, which kube-scheduler sets: the record
        keeps its transitions, loses its holder and lasts one second.
        """
        try:
            lease = await self.client.get(self.path)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            now = _micro_time(self.wall())
            lease["spec"] = {
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": int(spec.get("leaseTransitions") or 0),
            }
            await self.client.request("PUT", self.path, lease)
        except (ApiError, TimeoutError, OSError) as exc:
            log.warning("lease_release_failed", lease=self.settings.name, error=str(exc))
            return
        log.info("lease_released", lease=self.settings.name, identity=self.identity)
