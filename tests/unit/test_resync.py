"""Resync after a relist: which cached objects a LIST shows to be gone."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from podium.kube.client import LIST_PAGE, ApiError
from podium.kube.kinds import Kind
from podium.kube.listwatch import stale_keys
from podium.scheduling.resync import METADATA_LIST, Resyncer, ResyncSettings
from tests.unit.clock import ManualClock


@pytest.mark.parametrize(
    ("cached", "listed", "version", "expected"),
    [
        pytest.param({"a": "5", "b": "7"}, {"a", "b"}, "10", [], id="all-listed"),
        pytest.param({"a": "5", "b": "7"}, {"a"}, "10", ["b"], id="deleted-in-gap"),
        pytest.param({"a": "5", "b": "12"}, {"a"}, "10", [], id="newer-than-list-kept"),
        pytest.param({"a": "10"}, set(), "10", ["a"], id="same-version-is-gone"),
        pytest.param({"a": ""}, set(), "10", [], id="unknown-version-kept"),
        pytest.param({"a": "x1"}, set(), "10", [], id="opaque-version-kept"),
        pytest.param({"a": "5"}, set(), "", [], id="list-without-version"),
        pytest.param({"a": "5", "b": "6", "c": "99"}, set(), "50", ["a", "b"], id="several"),
    ],
)
def test_stale_keys(
    cached: dict[str, str], listed: set[str], version: str, expected: list[str]
) -> None:
    assert stale_keys(cached, listed, version) == expected


class _Lister:
    """A LIST endpoint that fails ``failures`` times, then answers ``pages`` in turn
    (an int is an API error with that status)."""

    def __init__(self, *pages: dict[str, Any] | int, failures: int = 0) -> None:
        self.pages = list(pages)
        self.failures = failures
        self.calls: list[str] = []
        self.accepted: list[str | None] = []
        self.params: list[dict[str, str]] = []

    async def get(
        self, path: str, params: dict[str, str] | None = None, accept: str | None = None
    ) -> dict[str, Any]:
        self.calls.append(path)
        self.accepted.append(accept)
        self.params.append(dict(params or {}))
        if self.failures:
            self.failures -= 1
            raise OSError("connection refused")
        page = self.pages.pop(0)
        if isinstance(page, int):
            raise ApiError(page, {"message": "expired"})
        return page


def _pods(*uids: str, version: str, token: str = "") -> dict[str, Any]:
    return {
        "metadata": {"resourceVersion": version, "continue": token},
        "items": [{"metadata": {"uid": uid, "name": uid}} for uid in uids],
    }


async def test_listing_burst_is_debounced_into_one_list_and_retried_until_it_answers() -> None:
    lister = _Lister(_pods("a", version="20"), failures=2)
    cached = {"pods": {"a": "3", "gone": "4", "new": "25"}, "nodes": {}}
    forgotten: list[tuple[str, str]] = []
    clock = ManualClock()
    resync = Resyncer(
        lister,  # type: ignore[arg-type]
        lambda kind: cached[kind],
        lambda kind, key: forgotten.append((kind, key)),
        ResyncSettings(quiet=1.0, retry=0.5, period=0),
        clock=clock,
        sleep=clock.sleep,
    )
    resync.listed("pods")
    await clock.asleep(1)
    for _ in range(3):  # the burst goes on while the resync waits for it to end
        clock.advance(0.25)
        resync.listed("pods")
    clock.advance(0.25)  # quiet since the first event, not since the last
    await clock.asleep(2)
    assert lister.calls == []
    clock.advance(0.75)  # quiet since the last: it lists, and is refused twice
    await clock.asleep(3)
    clock.advance(0.5)
    await clock.asleep(4)
    clock.advance(1.0)
    task = resync.kinds["pods"].task
    assert task is not None
    await asyncio.wait_for(task, 5)
    assert clock.sleeps == [1.0, 0.75, 0.5, 1.0]  # the debounce, then doubling retries
    assert lister.calls == ["/api/v1/pods"] * 3  # two failures, then one answer
    assert lister.accepted == [METADATA_LIST] * 3  # names and versions are all it reads
    assert forgotten == [("pods", "gone")]
    await resync.close()


async def _resync_once(lister: _Lister, kind: str, cached: dict[str, str]) -> list[str]:
    forgotten: list[str] = []
    resync = Resyncer(
        lister,  # type: ignore[arg-type]
        lambda _: cached,
        lambda _, key: forgotten.append(key),
        ResyncSettings(quiet=0, retry=0.01, period=0),
    )
    resync.listed(kind)
    task = resync.kinds[kind].task
    assert task is not None
    await asyncio.wait_for(task, 5)
    return forgotten


async def test_nodes_are_keyed_by_name() -> None:
    page = {"metadata": {"resourceVersion": "9"}, "items": [{"metadata": {"name": "n1"}}]}
    assert await _resync_once(_Lister(page), "nodes", {"n1": "5", "n2": "5"}) == ["n2"]


async def test_the_list_is_read_in_pages_and_a_restart_counts_only_its_own_snapshot() -> None:
    lister = _Lister(
        _pods("a", version="10", token="t1"),
        410,  # the token expired: the list starts again, at a newer version
        _pods("b", version="30", token="t2"),
        _pods("c", version="30"),
    )
    cached = {"a": "5", "b": "6", "c": "7", "d": "8", "late": "31"}
    assert await _resync_once(lister, "pods", cached) == ["a", "d"]
    assert [p.get("continue", "") for p in lister.params] == ["", "t1", "", "t2"]
    assert {p["limit"] for p in lister.params} == {str(LIST_PAGE)}


async def test_a_relist_reconciles_every_kind_since_an_emptied_collection_sends_nothing() -> None:
    """After a gap kopf relists every kind, but a kind whose last object went during the
    gap relists with no event: a relist of any kind resyncs them all."""
    pages = [{"metadata": {"resourceVersion": "30"}, "items": []} for _ in range(4)]
    lister = _Lister(*pages)
    cached = {"nodes": {"n1": "5"}, "poddisruptionbudgets": {"shop/guard": "6"}, "pods": {}}
    forgotten: list[tuple[str, str]] = []
    resync = Resyncer(
        lister,  # type: ignore[arg-type]
        lambda kind: cached[kind],
        lambda kind, key: forgotten.append((kind, key)),
        ResyncSettings(quiet=0, retry=0.01, period=0),
    )
    resync.kinds = {kind: resync.kinds[kind] for kind in cached}  # these three kinds only
    resync.listed("nodes")  # the first listing: that kind alone
    first = resync.kinds["nodes"].task
    assert first is not None and resync.kinds["poddisruptionbudgets"].task is None
    await asyncio.wait_for(first, 5)
    resync.listed("nodes", relist=True)
    tasks = [state.task for state in resync.kinds.values()]
    await asyncio.wait_for(asyncio.gather(*(t for t in tasks if t is not None)), 5)
    assert sorted(lister.calls) == sorted(
        ["/api/v1/nodes", "/api/v1/nodes", "/api/v1/pods", "/apis/policy/v1/poddisruptionbudgets"]
    )
    assert ("poddisruptionbudgets", "shop/guard") in forgotten
    await resync.close()


async def test_a_store_outside_the_cache_is_reconciled_through_its_own_pair() -> None:
    """SchedulerPolicies live in the policy handler, not the scheduler's cache: a relist
    reconciles them with the handler's own versions and forget, by name."""
    page = {"metadata": {"resourceVersion": "30"}, "items": [{"metadata": {"name": "kept"}}]}
    lister = _Lister(page)
    forgotten: list[str] = []
    resync = Resyncer(
        lister,  # type: ignore[arg-type]
        lambda kind: pytest.fail(f"the cache was asked for {kind}"),
        lambda kind, key: pytest.fail(f"the cache was told to forget {kind} {key}"),
        ResyncSettings(quiet=0, retry=0.01, period=0),
    )
    kind = Kind("podium.dev", "v1alpha1", "schedulerpolicies", "SchedulerPolicy", False)
    resync.watch_store(kind, lambda: {"kept": "5", "gone": "6", "newer": "31"}, forgotten.append)
    resync.kinds = {"schedulerpolicies": resync.kinds["schedulerpolicies"]}
    resync.listed("schedulerpolicies", relist=True)
    task = resync.kinds["schedulerpolicies"].task
    assert task is not None
    await asyncio.wait_for(task, 5)
    assert lister.calls == ["/apis/podium.dev/v1alpha1/schedulerpolicies"]
    assert forgotten == ["gone"]
    await resync.close()
