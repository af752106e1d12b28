"""InterPodAffinity's incremental tallies against the per-pod loops they replaced.

``ref_filter_state`` and ``ref_pre_score`` below are the plugin's PreFilter
and PreScore sums as they were before PodIndex kept per-pair tallies,
verbatim but for their names: they walk every existing pod with terms and
every candidate pod of the incoming pod's terms, reading node labels from the
snapshot at cycle time. Seeded random clusters then go through a sequence of
snapshot changes (pods added, removed and moved, node labels changed, nodes
added and removed, what-if row edits), and after each change random incoming
pods are checked: PreFilter counts, filter verdicts, PreScore totals and
scores must equal the reference's, and what a fresh snapshot of the same
cache decides.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
import pytest

from podium.algorithms.affinity_tallies import KeyCounts
from podium.algorithms.affinity_terms import PodAffinity, merge_namespaces
from podium.algorithms.inter_pod_affinity import (
    InterPodAffinity,
    _FilterState,
    _matches_all,
    _ScoreState,
    pod_index,
    term_candidates,
)
from podium.framework.plugin import Cycle
from podium.kube.objects import PodInfo, parse_node, parse_pod
from podium.state.cache import Cache
from podium.state.rows import label_codes
from podium.state.snapshot import Snapshot

from .algorithms.conftest import HOST, ZONE, node, pod

RACK = "example.com/rack"
NAMESPACES = {"default": {"team": "a"}, "ns1": {"team": "b"}, "ns2": {"team": "a"}}
Pair = tuple[str, str]


# -- reference: the sums before the tallies, verbatim but for names ------------------------
def _by_key(counts: Counter[Pair]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (key, value), count in counts.items():
        out.setdefault(key, {})[value] = count
    return out


def ref_filter_state(
    plugin: InterPodAffinity, cycle: Cycle, parsed: PodAffinity
) -> _FilterState | None:
    snap, pod = cycle.snapshot, cycle.pod
    ns_labels = snap.namespace_labels.get(pod.namespace, {})
    affinity = tuple(merge_namespaces(t, snap) for t in parsed.required)
    anti = tuple(merge_namespaces(t, snap) for t in parsed.required_anti)
    index = pod_index(snap)
    existing: Counter[Pair] = Counter()
    hits: dict[int, list[str]] = {}  # id(interned terms) -> keys of terms matching pod
    for row, entries in index.rows(index.anti):
        labels = snap.nodes[row].labels
        for _, other in entries:
            keys = hits.get(id(other))
            if keys is None:
                keys = hits[id(other)] = [
                    t.topology_key for t in other.required_anti if t.matches(pod, ns_labels)
                ]
            for key in keys:
                if key in labels:
                    existing[(key, labels[key])] += 1
    affinity_counts: Counter[Pair] = Counter()
    if affinity:
        rest = affinity[1:]  # term_candidates already matched the first
        for row, candidate in term_candidates(index, affinity[0]):
            if not rest or _matches_all(rest, candidate):
                labels = snap.nodes[row].labels
                for term in affinity:
                    if term.topology_key in labels:
                        affinity_counts[(term.topology_key, labels[term.topology_key])] += 1
    anti_counts: Counter[Pair] = Counter()
    for term in anti:
        for row, _ in term_candidates(index, term):
            labels = snap.nodes[row].labels
            if term.topology_key in labels:
                anti_counts[(term.topology_key, labels[term.topology_key])] += 1
    if not existing and not affinity and not anti:
        return None
    return _FilterState(
        affinity,
        anti,
        key_counts(affinity_counts),
        key_counts(anti_counts),
        key_counts(existing),
        _matches_all(affinity, pod),
    )


def key_counts(counts: Counter[Pair]) -> KeyCounts:
    """The reference's pair counts as the plugin's state holds them."""
    return {key: Counter(values) for key, values in _by_key(counts).items()}


def ref_pre_score(plugin: InterPodAffinity, cycle: Cycle) -> bool:
    snap, pod = cycle.snapshot, cycle.pod
    parsed = plugin._incoming(cycle)
    cycle.state["InterPodAffinity/score"] = None
    if parsed.error:
        return False
    has_constraints = bool(parsed.preferred or parsed.preferred_anti)
    if plugin.ignore_existing_preferred and not has_constraints:
        return False
    ns_labels = snap.namespace_labels.get(pod.namespace, {})
    totals: Counter[Pair] = Counter()
    index = pod_index(snap)
    for weighted, sign in [(w, 1) for w in parsed.preferred] + [
        (w, -1) for w in parsed.preferred_anti
    ]:
        term = merge_namespaces(weighted.term, snap)
        key, amount = term.topology_key, weighted.weight * sign
        for row, _ in term_candidates(index, term):
            value = snap.nodes[row].labels.get(key)
            if value is not None:
                totals[(key, value)] += amount
    weights: dict[int, list[tuple[str, int]]] = {}  # id(interned terms) -> (key, amount)
    for row, entries in index.rows(index.affinity):
        labels = snap.nodes[row].labels
        if not labels:
            continue
        for _, other in entries:
            amounts = weights.get(id(other))
            if amounts is None:
                amounts = weights[id(other)] = plugin._existing_weights(other, pod, ns_labels)
            for key, amount in amounts:
                value = labels.get(key)
                if value is not None:
                    totals[(key, value)] += amount
    if not totals:
        return False
    cycle.state["InterPodAffinity/score"] = _ScoreState(key_counts(totals))
    return True


# -- random clusters ---------------------------------------------------------------------
def random_selector(rng: random.Random) -> dict[str, Any]:
    apps = ["web", "db", "cache"]
    shape = rng.choice(["labels", "in", "exists", "notin", "two", "empty", "green"])
    if shape == "labels":
        return {"matchLabels": {"app": rng.choice(apps)}}
    if shape == "in":
        values = rng.sample(apps, rng.randint(1, 2))
        return {"matchExpressions": [{"key": "app", "operator": "In", "values": values}]}
    if shape == "exists":
        return {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}
    if shape == "notin":
        return {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]}
    if shape == "two":
        return {
            "matchLabels": {"tier": rng.choice(["front", "back"])},
            "matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "db"]}],
        }
    if shape == "green":
        return {"matchLabels": {"color": "green"}}
    return {}


def random_term(rng: random.Random) -> dict[str, Any]:
    term: dict[str, Any] = {
        "labelSelector": random_selector(rng),
        "topologyKey": rng.choice([ZONE, ZONE, HOST, HOST, RACK]),
    }
    where = rng.choice(["own", "own", "list", "all", "selector"])
    if where == "list":
        term["namespaces"] = rng.sample(sorted(NAMESPACES), rng.randint(1, 2))
    elif where == "all":
        term["namespaceSelector"] = {}
    elif where == "selector":
        term["namespaceSelector"] = {"matchLabels": {"team": rng.choice(["a", "b"])}}
    return term


def random_affinity(rng: random.Random) -> dict[str, Any]:
    def terms() -> list[dict[str, Any]]:
        return [random_term(rng) for _ in range(rng.choice([0, 0, 1, 1, 2]))]

    def weighted() -> list[dict[str, Any]]:
        return [{"weight": rng.randint(0, 100), "podAffinityTerm": t} for t in terms()]

    out: dict[str, Any] = {}
    for kind, required, preferred in (
        ("podAffinity", terms(), weighted()),
        ("podAntiAffinity", terms(), weighted()),
    ):
        section: dict[str, Any] = {}
        if required:
            section["requiredDuringSchedulingIgnoredDuringExecution"] = required
        if preferred:
            section["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
        if section:
            out[kind] = section
    return out


class World:
    """A cache, its live snapshot, and random changes to both."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.cache = Cache()
        self.snap = Snapshot()
        self.snap.namespace_labels = {k: dict(v) for k, v in NAMESPACES.items()}
        # Pods of one controller share terms: most pods draw theirs from a small pool.
        self.pool = [random_affinity(rng) for _ in range(4)]
        self.serial = 0
        for _ in range(rng.randint(3, 10)):
            self.add_node()
        for _ in range(rng.randint(0, 25)):
            self.add_pod()
        self.snap.update(self.cache)

    def name(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}{self.serial}"

    def node_body(self, name: str) -> dict[str, Any]:
        rng = self.rng
        labels = {RACK: rng.choice(["r1", "r2"])} if rng.random() < 0.5 else {}
        zone = rng.choice(["a", "b", "c", None])
        return node(name, labels, zone=zone, hostname=rng.random() < 0.85)

    def node_names(self) -> list[str]:
        return sorted(n for n, s in self.cache.nodes.items() if s.node is not None)

    def add_node(self) -> None:
        self.cache.add_node(parse_node(self.node_body(self.name("n"))))

    def relabel_node(self) -> None:
        name = self.rng.choice(self.node_names())
        self.cache.update_node(parse_node(self.node_body(name)))

    def remove_node(self) -> None:
        names = self.node_names()
        if len(names) > 1:
            self.cache.remove_node(self.rng.choice(names))

    def pod_body(self, name: str, node_name: str = "") -> dict[str, Any]:
        rng = self.rng
        labels = {"app": rng.choice(["web", "db", "cache"])}
        if rng.random() < 0.5:
            labels["tier"] = rng.choice(["front", "back"])
        if rng.random() < 0.3:
            labels["color"] = "green"
        draw = rng.random()
        affinity = rng.choice(self.pool) if draw < 0.6 else random_affinity(rng)
        body = pod(
            name,
            labels,
            namespace=rng.choice(sorted(NAMESPACES)),
            affinity=affinity if draw < 0.9 else None,
        )
        if node_name:
            body["spec"]["nodeName"] = node_name
            body["status"]["phase"] = "Running"
        return body

    def add_pod(self) -> None:
        target = self.rng.choice(self.node_names())
        self.cache.add_pod(parse_pod(self.pod_body(self.name("p"), target)))

    def bound(self) -> list[PodInfo]:
        return sorted((s.pod for s in self.cache.pods.values()), key=lambda p: p.uid)

    def remove_pod(self) -> None:
        pods = self.bound()
        if pods:
            self.cache.remove_pod(self.rng.choice(pods).uid)

    def move_pod(self) -> None:
        pods = self.bound()
        if pods:
            moved = self.rng.choice(pods)
            body = dict(moved.raw)
            body["spec"] = {**body["spec"], "nodeName": self.rng.choice(self.node_names())}
            self.cache.add_pod(parse_pod(body))

    def change(self) -> str:
        what = self.rng.choice(
            ["add_pod"] * 4 + ["remove_pod", "move_pod", "relabel_node", "add_node", "remove_node"]
        )
        getattr(self, what)()
        self.snap.update(self.cache)
        return what

    def fresh(self) -> Snapshot:
        snap = Snapshot()
        snap.namespace_labels = self.snap.namespace_labels
        snap.update(self.cache)
        return snap


# -- comparison ----------------------------------------------------------------------------
def decide(plugin: InterPodAffinity, snap: Snapshot, incoming: PodInfo) -> dict[str, Any]:
    """PreFilter state, filter verdicts, PreScore state and raw/normalized scores."""
    cycle = Cycle(incoming, snap)
    result = plugin.pre_filter(cycle)
    nodes = snap.all_nodes()
    verdicts = {snap.names[i]: "" for i in nodes}
    if result is None:
        for rejection in plugin.filter(cycle, nodes):
            for i in nodes[rejection.mask]:
                verdicts[snap.names[i]] = rejection.reason
    scored = plugin.pre_score(cycle, nodes)
    raw = plugin.score(cycle, nodes)
    normalized = plugin.normalize(cycle, nodes, raw.copy())
    state = cycle.state.get("InterPodAffinity/filter")
    return {
        "reject": result.reject if result is not None else "",
        "filter": None if state is None else filter_counts(state),
        "verdicts": verdicts,
        "scored": scored,
        "totals": score_totals(cycle.state.get("InterPodAffinity/score")),
        "raw": dict(zip(snap.names, raw.tolist(), strict=True)),
        "normalized": dict(zip(snap.names, normalized.tolist(), strict=True)),
    }


def plain(counts: KeyCounts) -> dict[str, dict[str, int]]:
    """Plain dicts: Counter equality would take a zero count for a missing one."""
    return {key: dict(values) for key, values in counts.items()}


def filter_counts(state: _FilterState) -> tuple[Any, ...]:
    return (
        state.affinity,
        state.anti,
        plain(state.affinity_counts),
        plain(state.anti_counts),
        plain(state.existing_counts),
        state.self_match,
    )


def score_totals(state: object) -> dict[str, dict[str, int]] | None:
    return plain(state.topology) if isinstance(state, _ScoreState) else None


def reference(plugin: InterPodAffinity, snap: Snapshot, incoming: PodInfo) -> dict[str, Any]:
    """What ``decide`` returns with the reference sums in place of the plugin's."""

    class Reference(InterPodAffinity):
        def _filter_state(self, cycle: Cycle, parsed: PodAffinity) -> _FilterState | None:
            return ref_filter_state(self, cycle, parsed)

        def pre_score(self, cycle: Cycle, nodes: Any) -> bool:
            return ref_pre_score(self, cycle)

    ref = Reference(plugin.args)
    return decide(ref, snap, incoming)


ARGS = [
    pytest.param({}, id="defaults"),
    pytest.param({"hardPodAffinityWeight": 0}, id="hard-weight-0"),
    pytest.param({"hardPodAffinityWeight": 7}, id="hard-weight-7"),
    pytest.param({"ignorePreferredTermsOfExistingPods": True}, id="ignore-existing-preferred"),
]


@pytest.mark.parametrize("args", ARGS)
@pytest.mark.parametrize("seed", range(6))
def test_tallies_decide_as_the_per_pod_sums(args: dict[str, Any], seed: int) -> None:
    rng = random.Random(seed * 7919 + len(args))
    world = World(rng)
    plugin = InterPodAffinity(args)
    checked = 0
    for step in range(40):
        what = world.change()
        if rng.random() < 0.2 and world.bound():
            # A what-if row edit, as preemption and nominated pods make.
            row = rng.randrange(len(world.snap))
            extra = parse_pod(world.pod_body(world.name("w"), world.snap.names[row]))
            removed = list(world.snap.pods[row].values())[:1]
            backup = world.snap.edit_row(row, remove=removed, add=[extra])
            incoming = parse_pod(world.pod_body(world.name("in")))
            got = decide(plugin, world.snap, incoming)
            assert got == reference(plugin, world.snap, incoming), (step, "edit_row")
            world.snap.restore_row(row, backup)
            what += "+restore"
        for _ in range(3):
            incoming = parse_pod(world.pod_body(world.name("in")))
            got = decide(plugin, world.snap, incoming)
            assert got == reference(plugin, world.snap, incoming), (step, what)
            assert got == decide(plugin, world.fresh(), incoming), (step, what, "fresh")
            checked += got["filter"] is not None or got["scored"]
    assert checked > 0, "no cycle had anything to count"


def test_node_label_change_refiles_pods() -> None:
    """A node that changes zone moves its pods' counts with it, without any pod changing."""
    cache = Cache()
    for name, zone in (("a1", "a"), ("a2", "a"), ("b1", "b")):
        cache.add_node(parse_node(node(name, zone=zone, hostname=True)))
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"color": "green"}}, "topologyKey": ZONE}
            ]
        }
    }
    cache.add_pod(parse_pod(pod("x", {"app": "web"}, node_name="a1", affinity=anti)))
    snap = Snapshot()
    snap.update(cache)
    plugin = InterPodAffinity()
    green = parse_pod(pod("g", {"color": "green"}, affinity=anti))
    cases = [
        ("a", {"a1": "existing", "a2": "existing", "b1": ""}),
        ("b", {"a1": "existing", "a2": "", "b1": "existing"}),
    ]
    for zone, expected in cases:
        cache.update_node(parse_node(node("a1", zone=zone, hostname=True)))
        snap.update(cache)
        verdicts = decide(plugin, snap, green)["verdicts"]
        assert {n: "existing" if v else "" for n, v in verdicts.items()} == expected
        assert verdicts == reference(plugin, snap, green)["verdicts"]
    index = pod_index(snap)
    assert [plain(t.counts) for t in index.anti_tallies.values()] == [{ZONE: {"b": 1}}]


def test_tallies_forget_term_lists_no_pod_carries() -> None:
    cache = Cache()
    cache.add_node(parse_node(node("a1", zone="a", hostname=True)))
    spec = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": HOST}
            ]
        }
    }
    pods = [parse_pod(pod(f"p{i}", node_name="a1", affinity=spec)) for i in range(3)]
    for p in pods:
        cache.add_pod(p)
    snap = Snapshot()
    snap.update(cache)
    index = pod_index(snap)
    assert [(t.pods, plain(t.counts)) for t in index.tallies.values()] == [(3, {HOST: {"a1": 3}})]
    for p in pods:
        cache.remove_pod(p.uid)
    snap.update(cache)
    assert not pod_index(snap).tallies
    assert not np.any(snap.pod_count)


COUNT_TABLES = [
    pytest.param({}, id="empty"),
    pytest.param({"a": 2, "c": -3}, id="some-values"),
    pytest.param({"a": 1, "b": 0, "c": 5, "zz": 9}, id="value-no-node-has"),
    pytest.param({"zz": 4}, id="only-values-no-node-has"),
]


@pytest.mark.parametrize("counts", COUNT_TABLES)
def test_count_table_fills_as_a_lookup_per_value_does(counts: dict[str, int]) -> None:
    snap = Snapshot()
    cache = Cache()
    for name, zone in (("n1", "a"), ("n2", "b"), ("n3", None), ("n4", "c"), ("n5", "a")):
        cache.add_node(parse_node(node(name, zone=zone)))
    snap.update(cache)
    codes = label_codes(snap, ZONE)
    expected = [0] * (len(codes.uniques) + 1)  # the last slot: nodes without the label
    for value, count in counts.items():
        if value in codes.lookup:
            expected[codes.lookup[value]] = count
    got = codes.count_table(counts)
    assert got.tolist() == expected
    assert got[codes.codes].tolist() == [expected[c] for c in codes.codes]
