"""Leader election with clocks that disagree.

Two electors share one fake Lease store. Each has its own wall clock (what it
writes into renewTime) and both share the elapsed time (their monotonic
clocks tick together). An elector must judge a Lease by when it saw the
record change, as client-go does, so a wall clock minutes off never makes a
standby steal a Lease whose holder is renewing.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from podium.kube.client import ApiError, KubeClient
from podium.kube.leader import LeaderElector, LeaseSettings

SETTINGS = LeaseSettings(namespace="ns", name="podium", lease_duration=15, retry_period=2)


class LeaseStore:
    """GET, POST and PUT of one Lease with resourceVersion conflicts, like the API server."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0

    async def get(self, path: str) -> Any:
        if self.lease is None:
            raise ApiError(404, {"message": "not found"})
        return copy.deepcopy(self.lease)

    async def post(self, path: str, body: Any) -> Any:
        if self.lease is not None:
            raise ApiError(409, {"message": "exists"})
        return self._store(body)

    async def request(self, method: str, path: str, body: Any) -> Any:
        assert method == "PUT"
        assert self.lease is not None
        if body["metadata"]["resourceVersion"] != self.lease["metadata"]["resourceVersion"]:
            raise ApiError(409, {"message": "conflict"})
        return self._store(body)

    def _store(self, body: Any) -> Any:
        self.version += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(self.lease)

    @property
    def holder(self) -> str:
        return str((self.lease or {}).get("spec", {}).get("holderIdentity") or "")


class Time:
    def __init__(self) -> None:
        self.elapsed = 0.0
        self.epoch = datetime(2026, 6, 1, 12, tzinfo=UTC)

    def monotonic(self) -> float:
        return self.elapsed

    def wall(self, skew: timedelta) -> Any:
        return lambda: self.epoch + timedelta(seconds=self.elapsed) + skew


def elector(store: LeaseStore, time: Time, name: str, skew: timedelta) -> LeaderElector:
    return LeaderElector(
        cast(KubeClient, store), name, SETTINGS, clock=time.monotonic, wall=time.wall(skew)
    )


SKEWS = [
    (timedelta(minutes=-5), timedelta(0)),  # the holder's clock runs 5 minutes behind
    (timedelta(0), timedelta(minutes=5)),  # the standby's clock runs 5 minutes ahead
    (timedelta(hours=2), timedelta(0)),  # the holder's ahead: its renewTime looks future
    (timedelta(0), timedelta(0)),
]


@pytest.mark.parametrize(("holder_skew", "standby_skew"), SKEWS)
async def test_standby_never_steals_a_renewed_lease_whatever_the_clocks(
    holder_skew: timedelta, standby_skew: timedelta
) -> None:
    store, time = LeaseStore(), Time()
    leader = elector(store, time, "a", holder_skew)
    standby = elector(store, time, "b", standby_skew)
    assert await leader.try_acquire_or_renew()
    for _ in range(60):  # two minutes of renewals every retry period
        time.elapsed += SETTINGS.retry_period
        assert not await standby.try_acquire_or_renew()
        assert await leader.try_acquire_or_renew()
    assert store.holder == "a"
    assert store.lease is not None and store.lease["spec"]["leaseTransitions"] == 0


@pytest.mark.parametrize(("holder_skew", "standby_skew"), SKEWS)
async def test_standby_takes_over_one_lease_duration_after_the_last_renewal_it_saw(
    holder_skew: timedelta, standby_skew: timedelta
) -> None:
    store, time = LeaseStore(), Time()
    leader = elector(store, time, "a", holder_skew)
    standby = elector(store, time, "b", standby_skew)
    assert await leader.try_acquire_or_renew()
    assert not await standby.try_acquire_or_renew()  # saw the renewal at elapsed 0
    # The leader dies. The standby keeps polling; it may take over only once the
    # record has gone unchanged for a lease duration on its own clock.
    takeover = None
    while takeover is None:
        time.elapsed += 1
        if await standby.try_acquire_or_renew():
            takeover = time.elapsed
    assert takeover == SETTINGS.lease_duration
    assert store.holder == "b"
    assert store.lease is not None and store.lease["spec"]["leaseTransitions"] == 1


async def test_a_new_replica_waits_a_lease_duration_before_taking_an_abandoned_lease() -> None:
    """It never saw the record change, so it cannot know how old it is: it waits."""
    store, time = LeaseStore(), Time()
    assert await elector(store, time, "a", timedelta(hours=-3)).try_acquire_or_renew()
    time.elapsed += 3600  # long abandoned, but the newcomer cannot tell
    newcomer = elector(store, time, "b", timedelta(0))
    assert not await newcomer.try_acquire_or_renew()
    time.elapsed += SETTINGS.lease_duration - 1
    assert not await newcomer.try_acquire_or_renew()
    time.elapsed += 1
    assert await newcomer.try_acquire_or_renew()


async def test_a_released_lease_is_taken_at_once() -> None:
    store, time = LeaseStore(), Time()
    leader = elector(store, time, "a", timedelta(minutes=-5))
    standby = elector(store, time, "b", timedelta(0))
    assert await leader.try_acquire_or_renew()
    assert not await standby.try_acquire_or_renew()
    await leader.release()
    assert store.holder == ""
    assert store.lease is not None and store.lease["spec"]["leaseDurationSeconds"] == 1
    assert await standby.try_acquire_or_renew()  # no holder: no need to wait
    assert store.holder == "b"
    await leader.release()  # not the holder any more: leaves the Lease alone
    assert store.holder == "b"
