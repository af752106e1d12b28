"""A rebuild that keeps the unchanged nodes' rows equals a snapshot built from scratch."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from podium.kube.objects import parse_node, parse_pod
from podium.state.cache import Cache
from podium.state.snapshot import Snapshot
from tests.unit.builders import node, pod

ZONE = "topology.kubernetes.io/zone"


def _node(name: str, zone: str, **extra: str) -> dict[str, object]:
    return node(name, labels={ZONE: zone}, extra=extra or None)


# Nodes whose rows differ from the others' in every column a row has.
ODD: dict[str, dict[str, object]] = {
    "n1": {"conditions": {"MemoryPressure": "True", "DiskPressure": "True"}},
    "n3": {"conditions": {"Ready": "False", "PIDPressure": "True"}},
    "n5": {"unschedulable": True, "pods": 20},
    "n6": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
    "n8": {"conditions": {"NetworkUnavailable": "True"}, "cpu": "16"},
}


def _cluster() -> Cache:
    cache = Cache()
    for i in range(12):
        name = f"n{i}"
        body = node(name, labels={ZONE: f"z{i % 3}"}, **ODD.get(name, {}))  # type: ignore[arg-type]
        cache.add_node(parse_node(body))
    for i in range(30):
        body = pod(f"p{i}", cpu="100m", memory="64Mi", node_name=f"n{i % 12}")
        if i % 7 == 0:
            body["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8000 + i}]
        cache.add_pod(parse_pod(body))
    return cache


def _join(cache: Cache) -> None:
    cache.add_node(parse_node(_node("new", "z1")))


def _leave(cache: Cache) -> None:
    cache.remove_node("n4")


def _join_and_bind(cache: Cache) -> None:
    _join(cache)
    cache.add_pod(parse_pod(pod("late", cpu="1", node_name="n7")))


def _leave_and_relabel(cache: Cache) -> None:
    _leave(cache)
    cache.update_node(parse_node(node("n2", labels={ZONE: "z0", "x": "y"}, cpu="8")))


def _new_resource(cache: Cache) -> None:
    cache.add_node(parse_node(_node("gpu", "z2", **{"example.com/gpu": "2"})))


def _unbind_and_leave(cache: Cache) -> None:
    cache.remove_pod(next(uid for uid, s in cache.pods.items() if s.node == "n5"))
    cache.remove_node("n9")


# (id, the change, a node whose row must be kept, or "" when no row can be)
CHANGES: list[tuple[str, Callable[[Cache], None], str]] = [
    ("a node joins", _join, "n0"),
    ("a node leaves", _leave, "n0"),
    ("a node joins while a pod binds elsewhere", _join_and_bind, "n1"),
    ("a node leaves while another changes", _leave_and_relabel, "n3"),
    ("a pod leaves one node while another node leaves", _unbind_and_leave, "n6"),
    ("a new resource column", _new_resource, ""),
]


def _state(snap: Snapshot) -> dict[str, object]:
    """Everything a cycle reads of the snapshot, rows in order."""
    arrays = {k: v.tolist() for k, v in vars(snap).items() if isinstance(v, np.ndarray)}
    arrays.pop("row_version")
    pressure = {k: v.tolist() for k, v in snap.pressure.items()}
    return {
        "names": snap.names,
        "index": snap.index,
        "resources": snap.resources,
        "nodes": [id(n) for n in snap.nodes],
        "pods": [{uid: id(p) for uid, p in row.items()} for row in snap.pods],
        "ports": snap.ports,
        "arrays": arrays,
        "pressure": pressure,
    }


@pytest.mark.parametrize(
    ("change", "kept"), [row[1:] for row in CHANGES], ids=[row[0] for row in CHANGES]
)
def test_a_rebuild_equals_a_fresh_snapshot(change: Callable[[Cache], None], kept: str) -> None:
    cache = _cluster()
    snap = Snapshot()
    snap.update(cache)
    before = {name: snap.pods[i] for name, i in snap.index.items()}
    change(cache)
    snap.update(cache)
    fresh = Snapshot()
    fresh.update(cache)
    assert _state(snap) == _state(fresh)
    assert (snap.row_version == snap.version).all()
    assert snap.rows_written_since(snap.version - 1) == list(range(len(snap)))
    if kept:  # the row was taken over, not written again
        assert snap.pods[snap.index[kept]] is before[kept]
    else:
        assert all(snap.pods[i] is not before.get(n) for n, i in snap.index.items())
