"""``Snapshot.rows_written_since`` answers what a scan of ``row_version`` would."""

from __future__ import annotations

import random

import numpy as np
import pytest

from podium.kube.objects import parse_node, parse_pod
from podium.state.cache import Cache
from podium.state.snapshot import Snapshot
from tests.unit.builders import node, pod


def _scan(snap: Snapshot, version: int) -> list[int]:
    return [int(r) for r in np.flatnonzero(snap.row_version > version)]


@pytest.mark.parametrize(
    ("seed", "nodes", "steps", "joins"),
    [
        (1, 3, 300, 0.0),  # a few rows written many times: the log's cap is reached
        (2, 20, 200, 0.1),  # nodes joining: rebuilds start the log again
        (3, 50, 60, 0.1),
    ],
)
def test_rows_written_since_matches_a_scan_at_every_version_seen(
    seed: int, nodes: int, steps: int, joins: float
) -> None:
    rng = random.Random(seed)
    cache = Cache()
    names = [f"n{i}" for i in range(nodes)]
    for name in names:
        cache.add_node(parse_node(node(name)))
    snap = Snapshot()
    snap.update(cache)
    seen = [snap.version]
    for step in range(steps):
        choice = rng.random()
        if choice < 0.6:  # a bound pod lands: its node's row is rewritten by update
            cache.add_pod(parse_pod(pod(f"p{step}", cpu="10m", node_name=rng.choice(names))))
            snap.update(cache)
        elif choice < 1 - joins:  # a what-if edit and its restore, as preemption makes them
            row = rng.randrange(nodes)
            backup = snap.edit_row(row, add=[parse_pod(pod(f"w{step}", cpu="10m"))])
            seen.append(snap.version)
            snap.restore_row(row, backup)
        else:  # a node joins: the rows are renumbered and the log starts again
            names.append(f"n{len(names)}")
            cache.add_node(parse_node(node(names[-1])))
            snap.update(cache)
            nodes += 1
        seen.append(snap.version)
        for version in rng.sample(seen, min(5, len(seen))):
            assert snap.rows_written_since(version) == _scan(snap, version), (step, version)
    assert snap.rows_written_since(snap.version) == []


def test_rows_written_in_place_equal_a_rebuild_with_a_resource_per_node() -> None:
    """A row write sets every column: those the node no longer lists or its pods no longer
    ask for go back to 0, as a rebuild from the cache has them."""
    cache = Cache()
    for i in range(4):
        cache.add_node(parse_node(node(f"n{i}", extra={f"example.com/r-{i}": "2"})))
    snap = Snapshot()
    snap.update(cache)
    bound = parse_pod(pod("a", cpu="100m", node_name="n1", extra_requests={"example.com/r-1": "1"}))
    cache.add_pod(bound)
    snap.update(cache)
    # n2 drops its resource (a device plugin gone) and n1's pod leaves.
    cache.add_node(parse_node(node("n2", extra={"example.com/r-2": "0"})))
    cache.remove_pod(bound.uid)
    snap.update(cache)
    fresh = Snapshot()
    fresh.update(cache)
    assert snap.resources == fresh.resources
    for name in ("n0", "n1", "n2", "n3"):
        i, j = snap.index[name], fresh.index[name]
        assert snap.allocatable[i].tolist() == fresh.allocatable[j].tolist(), name
        assert snap.requested[i].tolist() == fresh.requested[j].tolist(), name
    assert snap.requested.sum() == 0
    assert snap.allocatable[snap.index["n2"], snap.resource_index["example.com/r-2"]] == 0
