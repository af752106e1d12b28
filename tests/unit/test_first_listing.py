"""Readiness waits for kopf's first listing to bring back every primed object."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from structlog.testing import capture_logs

from podium.scheduling.first_listing import FirstListing


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
    listing = FirstListing()
    for uid in ("a", "gone"):
        listing.expect("nodes", _obj(uid))
    listing.start()
    listing.seen("nodes", _obj("a"))
    with capture_logs() as logs:
        async with asyncio.timeout(5):
            await listing.wait(limit=60, stall=0.05)
    assert listing.synced.is_set()
    assert [(e["event"], e["missing"]) for e in logs] == [("watches_sync_gave_up", {"nodes": 1})]


def _trickle(count: int, gap: float) -> tuple[FirstListing, asyncio.Task[None]]:
    """``count`` primed nodes, delivered one every ``gap`` seconds by a background task."""
    listing = FirstListing()
    uids = [str(i) for i in range(count)]
    for uid in uids:
        listing.expect("nodes", _obj(uid))
    listing.start()

    async def deliver() -> None:
        for uid in uids:
            await asyncio.sleep(gap)
            listing.seen("nodes", _obj(uid))

    return listing, asyncio.create_task(deliver())


@pytest.mark.parametrize(
    ("count", "limit", "outcome"),
    [
        # 12 x 0.05 s is longer than one stall of 0.25 s: arrivals keep the wait going.
        pytest.param(12, 60.0, "watches_synced", id="progress-extends-the-wait"),
        # 100 x 0.05 s outlasts the limit, progress or not.
        pytest.param(100, 0.5, "watches_sync_gave_up", id="limit-ends-it"),
    ],
)
async def test_wait_while_objects_trickle_in(count: int, limit: float, outcome: str) -> None:
    listing, feeder = _trickle(count, gap=0.05)
    with capture_logs() as logs:
        await listing.wait(limit=limit, stall=0.25)
    feeder.cancel()
    assert listing.synced.is_set()
    assert [e["event"] for e in logs] == [outcome]
