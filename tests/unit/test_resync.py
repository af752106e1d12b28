"""Resync after a relist: which cached objects a LIST shows to be gone."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from podium.scheduling.resync import METADATA_LIST, Resyncer, ResyncSettings, stale_keys


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
    """A LIST endpoint that fails ``failures`` times, then answers ``body``."""

    def __init__(self, body: dict[str, Any], failures: int = 0) -> None:
        self.body = body
        self.failures = failures
        self.calls: list[str] = []
        self.accepted: list[str | None] = []

    async def get(self, path: str, accept: str | None = None) -> dict[str, Any]:
        self.calls.append(path)
        self.accepted.append(accept)
        if self.failures:
            self.failures -= 1
            raise OSError("connection refused")
        return self.body


def _pods(*uids: str, version: str) -> dict[str, Any]:
    return {
        "metadata": {"resourceVersion": version},
        "items": [{"metadata": {"uid": uid, "name": uid}} for uid in uids],
    }


async def test_listing_burst_is_debounced_into_one_list_and_retried_until_it_answers() -> None:
    lister = _Lister(_pods("a", version="20"), failures=2)
    cached = {"pods": {"a": "3", "gone": "4", "new": "25"}, "nodes": {}}
    forgotten: list[tuple[str, str]] = []
    resync = Resyncer(
        lister,  # type: ignore[arg-type]
        lambda kind: cached[kind],
        lambda kind, key: forgotten.append((kind, key)),
        ResyncSettings(quiet=0.05, retry=0.01, period=0),
    )
    for _ in range(5):
        resync.listed("pods")
        await asyncio.sleep(0.01)
    task = resync.kinds["pods"].task
    assert task is not None
    await asyncio.wait_for(task, 5)
    assert lister.calls == ["/api/v1/pods"] * 3  # two failures, then one answer
    assert lister.accepted == [METADATA_LIST] * 3  # names and versions are all it reads
    assert forgotten == [("pods", "gone")]
    await resync.close()


def test_nodes_are_keyed_by_name() -> None:
    resync = Resyncer(
        _Lister({}),  # type: ignore[arg-type]
        lambda kind: {"n1": "5", "n2": "5"},
        lambda kind, key: None,
    )
    body = {"metadata": {"resourceVersion": "9"}, "items": [{"metadata": {"name": "n1"}}]}
    assert resync.reconcile("nodes", body) == ["n2"]
