"""Readiness waits for kopf's first listing to bring back every primed object."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from structlog.testing import capture_logs

from podium.devcluster.objects import wait_for
from podium.scheduling.first_listing import FirstListing
from tests.unit.clock import ManualClock


def _obj(uid: str) -> dict[str, Any]:
    return {"metadata": {"uid": uid, "name": uid}}


@pytest.mark.parametrize(
    ("primed", "delivered", "synced"),
    [
        pytest.param({}, [], True, id="nothing-primed"),
        pytest.param({"nodes": ["a", "b"]}, [("nodes", "a"), ("nodes", "b")], True, id="all-back"),
        pytest.param({"nodes": ["a", "b"]}, [("nodes", "a")], False, id="one-missing"),
        pytest.param(
            {"nodes": ["a"], "namespaces": ["n"]}, [("nodes", "a")], False, id="other-kind-missing"
        ),
        pytest.param({"nodes": ["a"]}, [("namespaces", "a")], False, id="same-uid-other-kind"),
        pytest.param({"nodes": ["a"]}, [("nodes", "x")], False, id="unknown-uid"),
        pytest.param(
            {"nodes": ["a"], "pods": []}, [("nodes", "x"), ("nodes", "a")], True, id="extra-uid"
        ),
    ],
)
async def test_synced_once_every_primed_object_is_back(
    primed: dict[str, list[str]], delivered: list[tuple[str, str]], synced: bool
) -> None:
    listing = FirstListing()
    for kind, uids in primed.items():
        for uid in uids:
            listing.expect(kind, _obj(uid))
    listing.start()
    for kind, uid in delivered:
        listing.seen(kind, _obj(uid))
    assert listing.synced.is_set() is synced


async def test_an_object_without_uid_is_not_awaited() -> None:
    listing = FirstListing()
    listing.expect("nodes", {"metadata": {"name": "odd"}})
    listing.start()
    assert listing.synced.is_set()


async def test_synced_is_logged_with_the_count() -> None:
    listing = FirstListing()
    listing.expect("nodes", _obj("a"))
    listing.start()
    with capture_logs() as logs:
        listing.seen("nodes", _obj("a"))
    assert [(e["event"], e["objects"]) for e in logs] == [("watches_synced", 1)]


async def test_wait_gives_up_after_a_stall_and_names_what_is_missing() -> None:
    clock = ManualClock()
    listing = FirstListing(clock=clock, sleep=clock.sleep)
    for uid in ("a", "gone"):
        listing.expect("nodes", _obj(uid))
    listing.start()
    listing.seen("nodes", _obj("a"))
    with capture_logs() as logs:
        waiting = asyncio.create_task(listing.wait(limit=60, stall=0.5))
        await clock.asleep(1)
        clock.advance(0.5)
        await asyncio.wait_for(waiting, 5)
    assert listing.synced.is_set()
    assert clock.sleeps == [0.5]  # one round without an arrival ends it
    assert [(e["event"], e["missing"]) for e in logs] == [("watches_sync_gave_up", {"nodes": 1})]


@pytest.mark.parametrize(
    ("count", "limit", "outcome"),
    [
        # 12 x 0.125 s is longer than one stall of 0.25 s: arrivals keep the wait going.
        pytest.param(12, 60.0, "watches_synced", id="progress-extends-the-wait"),
        # 100 x 0.125 s outlasts the limit, progress or not.
        pytest.param(100, 0.5, "watches_sync_gave_up", id="limit-ends-it"),
    ],
)
async def test_wait_while_objects_trickle_in(count: int, limit: float, outcome: str) -> None:
    """``count`` primed nodes, one delivered each 0.125 s of a clock the test moves, and
    only while the wait sleeps, so that each of its rounds sees the time it is meant to."""
    clock = ManualClock()
    listing = FirstListing(clock=clock, sleep=clock.sleep)
    uids = [str(i) for i in range(count)]
    for uid in uids:
        listing.expect("nodes", _obj(uid))
    listing.start()
    with capture_logs() as logs:
        waiting = asyncio.create_task(listing.wait(limit=limit, stall=0.25))
        for uid in uids:
            await wait_for(lambda: clock.sleeping or waiting.done(), 5, 0.001, "the wait")
            if waiting.done():
                break
            clock.advance(0.125)
            listing.seen("nodes", _obj(uid))
        await asyncio.wait_for(waiting, 5)
    assert listing.synced.is_set()
    assert [e["event"] for e in logs] == [outcome]
    assert clock.now > 0.25  # longer than one stall in either case
