"""PodTopologySpread's per-row match counts, kept across cycles, equal a fresh count.

Random clusters go through random changes (pods bound, removed, relabelled, marked
terminating, moved to another namespace; nodes added, removed and relabelled; the
preemption path's what-if row edits and their restore); after each, the kept counts
for several selectors and namespaces must equal both the count the plugin made from
scratch before (``MatchCounts._count_all``) and a plain count over the snapshot.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from podium.algorithms.pod_topology_spread import MatchCounts
from podium.kube.labels import Selector, parse_label_selector
from podium.kube.objects import PodInfo, parse_node, parse_pod
from podium.state.cache import Cache
from podium.state.snapshot import Snapshot
from tests.unit.builders import node, pod

RAW_SELECTORS: list[dict[str, Any]] = [
    {"matchLabels": {"app": "web"}},
    {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "db"]}]},
    {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
    {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]},
    {"matchLabels": {"app": "db"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]},
]
NAMESPACES = ("default", "other")


def _selectors() -> list[Selector]:
    out = []
    for raw in RAW_SELECTORS:
        parsed = parse_label_selector(raw)
        assert isinstance(parsed, Selector)
        out.append(parsed)
    return out


def _plain(snap: Snapshot, selector: Selector, namespace: str) -> list[int]:
    return [
        sum(
            1
            for p in pods.values()
            if p.namespace == namespace and not p.deleting and selector.matches(p.labels)
        )
        for pods in snap.pods
    ]


class _World:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.cache = Cache()
        self.snap = Snapshot()
        self.nodes: list[str] = []
        self.bound: dict[str, PodInfo] = {}
        self.serial = 0
        for _ in range(rng.randint(1, 8)):
            self.add_node()

    def labels(self) -> dict[str, str]:
        out = {}
        if self.rng.random() < 0.8:
            out["app"] = self.rng.choice(["web", "db", "cache"])
        if self.rng.random() < 0.4:
            out["tier"] = self.rng.choice(["a", "b"])
        return out

    def add_node(self) -> None:
        self.serial += 1
        name = f"n{self.serial}"
        self.nodes.append(name)
        self.cache.add_node(parse_node(node(name, labels={"zone": self.rng.choice("ab")})))

    def bind(self) -> None:
        self.serial += 1
        body = pod(f"p{self.serial}", node_name=self.rng.choice(self.nodes), labels=self.labels())
        body["metadata"]["namespace"] = self.rng.choice(NAMESPACES)
        info = parse_pod(body)
        self.cache.add_pod(info)
        self.bound[info.uid] = info

    def update(self, **meta: Any) -> None:
        uid = self.rng.choice(sorted(self.bound))
        old = self.bound[uid]
        raw = {**old.raw, "metadata": {**old.raw["metadata"], **meta}}
        info = parse_pod(raw)
        self.cache.add_pod(info)
        self.bound[uid] = info

    def step(self) -> None:
        """One random change, then the snapshot brought up to date."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.35 or not self.bound:
            self.bind()
        elif roll < 0.5:
            uid = rng.choice(sorted(self.bound))
            self.cache.remove_pod(uid)
            del self.bound[uid]
        elif roll < 0.6:
            self.update(labels=self.labels())
        elif roll < 0.67:
            self.update(deletionTimestamp="2026-01-01T00:00:00Z")
        elif roll < 0.72:
            self.add_node()
        elif roll < 0.77 and len(self.nodes) > 1:
            name = self.nodes.pop(rng.randrange(len(self.nodes)))
            for uid, info in list(self.bound.items()):
                if info.node_name == name:
                    self.cache.remove_pod(uid)
                    del self.bound[uid]
            self.cache.remove_node(name)
        elif roll < 0.82:
            name = rng.choice(self.nodes)
            self.cache.update_node(parse_node(node(name, labels={"zone": rng.choice("abc")})))
        self.snap.update(self.cache)


@pytest.mark.parametrize("seed", range(12))
def test_kept_counts_equal_a_fresh_count(seed: int) -> None:
    rng = random.Random(seed)
    world = _World(rng)
    world.snap.update(world.cache)
    kept = MatchCounts()
    selectors = _selectors()
    for _ in range(120):
        world.step()
        snap = world.snap
        edit = None
        if snap.names and rng.random() < 0.15:  # the preemption path's what-if edit
            row = rng.randrange(len(snap))
            victims = list(snap.pods[row].values())[:1]
            edit = (row, snap.edit_row(row, remove=victims))
        for selector in rng.sample(selectors, 3):
            namespace = rng.choice(NAMESPACES)
            got = kept.get(snap, selector, namespace)
            assert got.tolist() == _plain(snap, selector, namespace)
            fresh = MatchCounts._count_all(snap, selector, namespace)
            assert np.array_equal(got, fresh)
        if edit is not None:
            snap.restore_row(*edit)


def test_handed_out_counts_are_never_written_again() -> None:
    world = _World(random.Random(99))
    world.snap.update(world.cache)
    kept = MatchCounts()
    web = _selectors()[0]
    before = kept.get(world.snap, web, "default")
    frozen = before.copy()
    for _ in range(30):
        world.bind()
        world.snap.update(world.cache)
        kept.get(world.snap, web, "default")
    assert np.array_equal(before, frozen)
