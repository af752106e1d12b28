from __future__ import annotations

from typing import Any

import pytest

from podium.kube.objects import parse_node, parse_pod
from podium.state.cache import Cache
from podium.state.snapshot import Snapshot
from tests.unit.builders import node, pod


def _cache(*names: str) -> Cache:
    cache = Cache()
    for name in names:
        cache.add_node(parse_node(node(name)))
    return cache


def test_assumed_pod_counts_until_confirmed_and_never_expires() -> None:
    cache = _cache("n1")
    p = parse_pod(pod("p", cpu="1"))
    cache.assume_pod(p, "n1")
    assert cache.requested_on("n1")["cpu"] == 1000
    bound = parse_pod({**p.raw, "spec": {**p.raw["spec"], "nodeName": "n1"}})
    cache.add_pod(bound)
    assert not cache.is_assumed(p.uid)
    assert cache.requested_on("n1")["cpu"] == 1000


def test_forget_releases_only_assumed_pods() -> None:
    cache = _cache("n1")
    assumed = parse_pod(pod("a", cpu="1"))
    bound = parse_pod(pod("b", cpu="2", node_name="n1"))
    cache.assume_pod(assumed, "n1")
    cache.add_pod(bound)
    cache.forget_pod(assumed)
    cache.forget_pod(bound)
    assert cache.requested_on("n1")["cpu"] == 2000


def test_watch_moves_pod_bound_elsewhere() -> None:
    cache = _cache("n1", "n2")
    p = parse_pod(pod("p", cpu="1"))
    cache.assume_pod(p, "n1")
    cache.add_pod(parse_pod({**p.raw, "spec": {**p.raw["spec"], "nodeName": "n2"}}))
    assert cache.requested_on("n1")["cpu"] == 0
    assert cache.requested_on("n2")["cpu"] == 1000


def test_node_delete_returns_assumed_orphans() -> None:
    cache = _cache("n1")
    assumed = parse_pod(pod("a", cpu="1"))
    bound = parse_pod(pod("b", cpu="1", node_name="n1"))
    cache.assume_pod(assumed, "n1")
    cache.add_pod(bound)
    orphans = cache.remove_node("n1")
    assert [o.uid for o in orphans] == [assumed.uid]
    assert bound.uid in cache.pods and assumed.uid not in cache.pods


def test_snapshot_copies_only_changed_nodes() -> None:
    cache = _cache("n1", "n2")
    snap = Snapshot()
    snap.update(cache)
    rows_before = list(snap.pods)
    cache.add_pod(parse_pod(pod("b", cpu="1", node_name="n2")))
    snap.update(cache)
    i1, i2 = snap.index["n1"], snap.index["n2"]
    assert snap.pods[i1] is rows_before[i1]
    assert snap.requested[i2, 0] == 1000
    assert snap.pod_count[i2] == 1


def test_snapshot_interleaves_zones() -> None:
    cache = Cache()
    for name, zone in [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"), ("b2", "b")]:
        cache.add_node(parse_node(node(name, labels={"topology.kubernetes.io/zone": zone})))
    snap = Snapshot()
    snap.update(cache)
    assert snap.names == ["a1", "b1", "a2", "b2", "a3"]


def test_snapshot_grows_a_column_for_new_extended_resources() -> None:
    cache = _cache("n1")
    snap = Snapshot()
    snap.update(cache)
    cache.update_node(parse_node(node("n1", extra={"nvidia.com/gpu": "2"})))
    snap.update(cache)
    col = snap.resource_column("nvidia.com/gpu")
    assert col is not None and snap.allocatable[0, col] == 2


T0 = "2026-01-01T00:00:00Z"
READY = {"type": "Ready", "status": "True"}


@pytest.mark.parametrize(
    ("change", "rewritten"),
    [
        pytest.param({"metadata": {"deletionTimestamp": T0}}, True, id="deleting"),
        pytest.param({"status": {"startTime": T0}}, True, id="started"),
        pytest.param({"metadata": {"labels": {"app": "other"}}}, True, id="labels"),
        pytest.param({"status": {"conditions": [READY]}}, False, id="status"),
        pytest.param({"metadata": {"annotations": {"a": "b"}}}, False, id="annotations"),
    ],
)
def test_a_bound_pods_update_reaches_the_snapshot_when_a_plugin_reads_it(
    change: dict[str, dict[str, Any]], rewritten: bool
) -> None:
    """Spreading skips terminating pods and preemption orders victims by start time,
    both from the snapshot's row: those updates rewrite it; plain status writes do not."""
    cache = _cache("n1")
    bound = parse_pod(pod("b", cpu="1", node_name="n1", labels={"app": "web"}))
    cache.add_pod(bound)
    snap = Snapshot()
    snap.update(cache)
    row = snap.index["n1"]
    raw = {part: {**(bound.raw.get(part) or {}), **extra} for part, extra in change.items()}
    updated = parse_pod({**bound.raw, **raw})
    cache.add_pod(updated)
    snap.update(cache)
    assert (snap.pods[row][bound.uid] is updated) is rewritten
