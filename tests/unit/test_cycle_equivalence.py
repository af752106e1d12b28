"""The scheduling cycle's hot paths against verbatim copies of what they replaced.

The vectorised fast paths (NodeResourcesFit, NodeResourcesBalancedAllocation,
PodTopologySpread's constraints, the filter and score loops) must decide
exactly as the general code did: the copies below are that code, unchanged but
for their names, and every test compares arrays and records for equality on
seeded random clusters, including absurd sizes near the int64 clip.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from podium.algorithms.balanced_allocation import NodeResourcesBalancedAllocation
from podium.algorithms.image_locality import (
    ImageLocality,
    calculate_priority,
    image_index,
    pod_images,
)
from podium.algorithms.node_resources_fit import (
    _CLIP,
    TOO_MANY_PODS,
    NodeResourcesFit,
    _broken_linear,
    _go_div,
    requested_and_allocatable,
)
from podium.algorithms.pod_topology_spread import (
    DO_NOT_SCHEDULE,
    SCHEDULE_ANYWAY,
    Constraint,
    PodTopologySpread,
    parse_constraints,
)
from podium.algorithms.taint_toleration import _HARD_EFFECTS, REASON, TaintToleration, untolerated
from podium.framework.batch import SortedNodes
from podium.framework.cycle import (
    UNRESOLVABLE,
    UNSCHEDULABLE,
    UNSEEN,
    Diagnosis,
    Held,
    Placement,
    Scheduler,
    _find_feasible,
    _in_window,
    _restricted_order,
    _score,
    filter_nodes,
    num_feasible_nodes_to_find,
    run_filters,
)
from podium.framework.plugin import (
    MAX_NODE_SCORE,
    Cycle,
    FilterPlugin,
    IndexArray,
    IntArray,
    Rejection,
)
from podium.framework.profile import Profile
from podium.kube.objects import PodInfo, Taint, parse_node, parse_pod
from podium.kube.resource_names import is_scalar_resource
from podium.policy import build_profile, default_profile
from podium.state.cache import Cache
from podium.state.selectors import SelectorStore
from podium.state.snapshot import Snapshot

from .builders import node, pod

# -- reference copies: the implementations before the fast paths, verbatim but for names --


def ref_requested_and_allocatable(
    cycle: Cycle, nodes: IndexArray, resource: str, use_requested: bool
) -> tuple[IntArray, IntArray]:
    """calculateResourceAllocatableRequest: what the node would have requested with this pod."""
    snap, pod = cycle.snapshot, cycle.pod
    col = snap.resource_column(resource)
    zeros = np.zeros(len(nodes), dtype=np.int64)
    if col is None:
        return zeros, zeros
    allocatable = np.minimum(snap.allocatable[nodes, col], _CLIP)
    if resource == "cpu" and not use_requested:
        requested = snap.nonzero_cpu[nodes] + pod.score_cpu
    elif resource == "memory" and not use_requested:
        requested = snap.nonzero_memory[nodes] + pod.score_memory
    else:
        amount = pod.requests.get(resource, 0)
        if amount == 0 and is_scalar_resource(resource):
            return zeros, zeros
        requested = snap.requested[nodes, col] + amount
    return np.minimum(requested, _CLIP), allocatable


def ref_fit_filter(self: NodeResourcesFit, cycle: Cycle, nodes: IndexArray) -> list[Rejection]:
    snap = cycle.snapshot
    out: list[Rejection] = []
    full = snap.pod_count[nodes] + 1 > snap.max_pods[nodes]
    if full.any():
        out.append(Rejection(TOO_MANY_PODS, full))
    for resource, amount in cycle.pod.requests.items():
        if amount <= 0 or self._ignored(resource):
            continue
        col = snap.resource_column(resource)
        if col is None:
            mask = over = np.ones(len(nodes), dtype=bool)
        else:
            allocatable = snap.allocatable[nodes, col]
            mask = amount > allocatable - snap.requested[nodes, col]
            over = amount > allocatable
        # More than the node's whole allocatable: evicting pods cannot help.
        reason = f"Insufficient {resource}"
        if (mask & over).any():
            out.append(Rejection(reason, mask & over, unresolvable=True))
        if (mask & ~over).any():
            out.append(Rejection(reason, mask & ~over))
    return out


def ref_fit_score(self: NodeResourcesFit, cycle: Cycle, nodes: IndexArray) -> IntArray:
    total = np.zeros(len(nodes), dtype=np.int64)
    weights = np.zeros(len(nodes), dtype=np.int64)
    for resource, weight in self.resources:
        requested, allocatable = ref_requested_and_allocatable(cycle, nodes, resource, False)
        present = allocatable != 0
        safe = np.where(present, allocatable, 1)
        if self.strategy == "MostAllocated":
            part = np.minimum(requested, allocatable) * MAX_NODE_SCORE // safe
        elif self.strategy == "RequestedToCapacityRatio":
            over = requested > allocatable
            utilization = np.where(over, 100, requested * 100 // safe)
            part = _broken_linear(self.shape, utilization)
            present &= part > 0
        else:
            part = np.where(
                requested > allocatable, 0, (allocatable - requested) * MAX_NODE_SCORE // safe
            )
        total += np.where(present, part * weight, 0)
        weights += np.where(present, weight, 0)
    if self.strategy == "RequestedToCapacityRatio":
        ratio = total / np.maximum(weights, 1)
        rounded = np.floor(ratio + 0.5).astype(np.int64)
        return np.where(weights == 0, 0, rounded)
    return np.where(weights == 0, 0, _go_div(total, np.maximum(weights, 1)))


def ref_balanced_score(
    self: NodeResourcesBalancedAllocation, cycle: Cycle, nodes: IndexArray
) -> IntArray:
    """v1.37 scores the change in balance: 50 + (50 + with_pod - without_pod) / 2."""
    requested, allocated, allocatable = [], [], []
    for resource in self.resources:
        with_pod, capacity = ref_requested_and_allocatable(cycle, nodes, resource, True)
        pod_amount = cycle.pod.requests.get(resource, 0)
        requested.append(with_pod)
        allocated.append(np.where(capacity != 0, with_pod - pod_amount, 0))
        allocatable.append(capacity)
    cap = np.array(allocatable)
    with_pod_score = ref_balance(np.array(requested), cap)
    without_pod_score = ref_balance(np.array(allocated), cap)
    half = MAX_NODE_SCORE // 2
    return half + (half + with_pod_score - without_pod_score) // 2


def ref_balance(requested: IntArray, allocatable: IntArray) -> IntArray:
    """balancedResourceScore: (1 - std of the used fractions) * 100, truncated.

    Rows are resources, columns nodes; resources a node lacks are skipped.
    The two-resource case uses |f0 - f1| / 2 exactly as Go does, so that
    float rounding cannot move a truncated score.
    """
    valid = allocatable != 0
    fractions = np.minimum(requested.astype(np.float64) / np.where(valid, allocatable, 1), 1.0)
    if requested.shape[0] == 2 and valid.all():
        # The common case (cpu and memory on every node), without the general bookkeeping.
        spread: IntArray = (
            (1 - np.abs((fractions[0] - fractions[1]) / 2)) * MAX_NODE_SCORE
        ).astype(np.int64)
        return spread
    count = valid.sum(axis=0)
    std = np.zeros(requested.shape[1], dtype=np.float64)
    for k in range(2, requested.shape[0] + 1):
        rows = count == k
        if not rows.any():
            continue
        f, v = fractions[:, rows], valid[:, rows]
        if k == 2:
            order = np.argsort(~v, axis=0, kind="stable")[:2]
            cols = np.arange(f.shape[1])
            std[rows] = np.abs((f[order[0], cols] - f[order[1], cols]) / 2)
        else:
            mean = np.where(v, f, 0).sum(axis=0) / k
            std[rows] = np.sqrt(np.where(v, (f - mean) ** 2, 0).sum(axis=0) / k)
    return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)


def ref_constraints(
    self: PodTopologySpread, pod: PodInfo, action: str, selectors: SelectorStore
) -> tuple[Constraint, ...]:
    """getConstraints: the pod's own, or the defaults with DefaultSelector's selector."""
    if pod.topology_spread:
        return parse_constraints(pod.topology_spread, pod.labels, action)
    defaults = parse_constraints(self.defaults, pod.labels, action)
    if not defaults:
        return ()
    selector = selectors.default_selector(pod)
    if selector.empty:
        return ()
    return tuple(replace(c, selector=selector) for c in defaults)


def ref_run_filters(
    profile: Profile, cycle: Cycle, nodes: IndexArray, diagnosis: Diagnosis | None
) -> IndexArray:
    """Every filter in order over the still-feasible nodes; the first rejection wins."""
    alive = nodes
    for position, plugin in enumerate(profile.filters):
        if alive.size == 0:
            break
        rejections = plugin.filter(cycle, alive)
        if not rejections:
            continue
        rejected = np.zeros(alive.size, dtype=bool)
        unresolvable = np.zeros(alive.size, dtype=bool)
        for rejection in rejections:
            rejected |= rejection.mask
            if rejection.unresolvable:
                unresolvable |= rejection.mask
            if diagnosis is not None:
                diagnosis.reasons[rejection.reason] += int(rejection.mask.sum())
        if diagnosis is not None and rejected.any():
            hit = alive[rejected]
            diagnosis.status[hit] = np.where(unresolvable[rejected], UNRESOLVABLE, UNSCHEDULABLE)
            diagnosis.plugin[hit] = position
            diagnosis.rejected_by.add(plugin.name)
        alive = alive[~rejected]
    return alive


def ref_find_feasible(
    profile: Profile,
    snapshot: Snapshot,
    cycle: Cycle,
    state: Scheduler,
    diagnosis: Diagnosis,
    allowed: frozenset[str] | None,
    restricting: list[str],
    within: frozenset[str] | None = None,
    held: Held | None = None,
    rejected: int | None = None,
) -> tuple[IndexArray, int]:
    total = len(snapshot)
    # The rotated order is built whole only when a restriction must look at every node;
    # otherwise each chunk is computed when reached, as most cycles stop after the first.
    order, listed = None, total
    if within is not None or allowed is not None:
        order, listed = _restricted_order(snapshot, state, diagnosis, allowed, restricting, within)

    size = total if order is None else order.size
    wanted = num_feasible_nodes_to_find(profile.percentage_of_nodes_to_score, size)
    if not profile.scores:
        wanted = min(wanted, 1)
    chunk = max(wanted + wanted // 4, 128)
    feasible: list[IndexArray] = []
    found = 0
    processed = 0
    for start in range(0, size, chunk):
        if order is None:
            stop = min(start + chunk, size)
            nodes = (state.next_start + np.arange(start, stop, dtype=np.intp)) % total
        else:
            nodes = order[start : start + chunk]
        if held:
            fit = filter_nodes(profile, cycle, nodes, diagnosis, held)
        else:
            fit = ref_run_filters(profile, cycle, nodes, diagnosis)
        if found + fit.size >= wanted:
            fit = fit[: wanted - found]
            last = int(np.flatnonzero(nodes == fit[-1])[0]) if fit.size else -1
            processed = start + last + 1
            feasible.append(fit)
            found = wanted
            break
        feasible.append(fit)
        found += fit.size
        processed = start + nodes.size
    if rejected is not None and not _in_window(snapshot, state, order, processed, rejected):
        processed += 1
    # A trial's start index runs over its own nodes (ListNodesInPlacement), as the
    # product's since the trial search was corrected; the filter loop is what is compared.
    if listed:
        state.next_start = (state.next_start + processed) % listed

    candidates = np.concatenate(feasible) if feasible else np.zeros(0, dtype=np.intp)
    return candidates, processed


def ref_score(
    profile: Profile,
    snapshot: Snapshot,
    cycle: Cycle,
    state: Scheduler,
    placement: Placement,
    candidates: IndexArray,
    record: bool,
    ranked: bool = False,
) -> Placement:
    # These cycles carry no cycle count, so no pod is signed and nothing is ranked.
    assert not ranked
    if candidates.size == 1 and not record:
        placement.node = snapshot.names[int(candidates[0])]
        placement.candidates = candidates
        return placement

    score_started = time.perf_counter()
    totals = np.zeros(candidates.size, dtype=np.int64)
    for scorer, weight in profile.scores:
        if not scorer.pre_score(cycle, candidates):
            continue
        raw = scorer.score(cycle, candidates)
        normalized = scorer.normalize(cycle, candidates, raw)
        totals += normalized * weight
        if record:
            placement.plugin_scores[scorer.name] = normalized
    # The pick itself is Go's heap (SortedNodes): the reference checks the scores.
    placement.node = SortedNodes([snapshot.names[int(r)] for r in candidates], totals, {}).pop()
    placement.score_seconds = time.perf_counter() - score_started
    placement.candidates = candidates
    placement.totals = totals
    return placement


def ref_image_score(self: ImageLocality, cycle: Cycle, nodes: IndexArray) -> IntArray:
    snap = cycle.snapshot
    names, count = pod_images(cycle.pod)
    total = len(snap)
    sums = np.zeros(total, dtype=np.int64)
    if total:
        index = image_index(snap)
        for name in names:
            rows, sizes = index.rows(name)
            if rows.size:
                spread = float(rows.size) / float(total)
                sums[rows] += (sizes.astype(np.float64) * spread).astype(np.int64)
    return calculate_priority(sums[nodes], count)


def ref_taint_filter(self: TaintToleration, cycle: Cycle, nodes: IndexArray) -> list[Rejection]:
    snap = cycle.snapshot
    tainted = np.flatnonzero(snap.tainted[nodes])
    if tainted.size == 0:
        return []
    tolerations = cycle.pod.tolerations
    verdicts: dict[tuple[Taint, ...], bool] = {}
    mask = np.zeros(len(nodes), dtype=bool)
    for pos in tainted:
        taints = snap.nodes[nodes[pos]].taints
        bad = verdicts.get(taints)
        if bad is None:
            bad = verdicts[taints] = bool(untolerated(taints, tolerations, _HARD_EFFECTS))
        mask[pos] = bad
    return [Rejection(REASON, mask, unresolvable=True)] if mask.any() else []


def ref_taint_score(self: TaintToleration, cycle: Cycle, nodes: IndexArray) -> IntArray:
    snap = cycle.snapshot
    out = np.zeros(len(nodes), dtype=np.int64)
    tolerations = tuple(t for t in cycle.pod.tolerations if t.effect in ("", "PreferNoSchedule"))
    soft = frozenset({"PreferNoSchedule"})
    for pos in np.flatnonzero(snap.tainted[nodes]):
        out[pos] = len(untolerated(snap.nodes[nodes[pos]].taints, tolerations, soft))
    return out


# -- random clusters -----------------------------------------------------------------------

EXTENDED = ("example.com/gpu", "hugepages-2Mi", "nvidia.com/mig-1g")
IMAGES = ("docker.io/library/nginx:latest", "docker.io/library/redis:7", "example.com/big:v1")
TAINTS = (
    {"key": "a", "value": "1", "effect": "NoSchedule"},
    {"key": "b", "value": "1", "effect": "PreferNoSchedule"},
    {"key": "c", "value": "", "effect": "NoExecute"},
    {"key": "d", "value": "2", "effect": "PreferNoSchedule"},
)
ABSENT = "example.com/absent"
SEEDS = range(60)


def _column(rng: np.random.Generator, n: int, mode: int) -> IntArray:
    """One resource over ``n`` nodes: ordinary, mixed with zeros, all zero, or absurd sizes."""
    ordinary = rng.integers(1, 64 * 2**30, n)
    if mode == 0:
        return ordinary
    if mode == 1:
        kinds = rng.integers(0, 4, n)
        return np.select([kinds == 0, kinds == 1], [0, rng.integers(0, 10, n)], ordinary)
    if mode == 2:
        return np.zeros(n, dtype=np.int64)
    if mode == 3:
        kinds = rng.integers(0, 3, n)
        edge = rng.integers(_CLIP - 8, _CLIP + 8, n)
        return np.select([kinds == 0, kinds == 1], [edge, rng.integers(2**60, 2**62, n)], ordinary)
    return rng.integers(-1000, 1000, n)  # Negative sizes: no parser makes them, the code copes.


def random_snapshot(seed: int, n: int) -> Snapshot:
    """A snapshot of ``n`` nodes whose resource arrays are then overwritten with random draws."""
    rng = np.random.default_rng(seed)
    cache = Cache()
    for i in range(n):
        extra = {r: "1" for r in EXTENDED}
        taints = [TAINTS[k] for k in rng.choice(len(TAINTS), int(rng.integers(0, 3)))]
        body = node(f"n{i}", labels={"zone": f"z{i % 3}"}, taints=taints, extra=extra)
        if seed % 2:
            images = rng.choice(len(IMAGES), int(rng.integers(0, 3)), replace=False)
            body["status"]["images"] = [
                {"names": [IMAGES[k]], "sizeBytes": int(rng.integers(0, 2**31))} for k in images
            ]
        cache.add_node(parse_node(body))
    snap = Snapshot()
    snap.update(cache)
    modes = rng.choice([0, 0, 0, 1, 2, 3, 4], size=len(snap.resources))
    for col, mode in enumerate(modes):
        snap.allocatable[:, col] = _column(rng, n, int(mode))
        snap.requested[:, col] = _column(rng, n, int(rng.choice([0, 0, 1, 2, 3])))
    snap.nonzero_cpu[:] = _column(rng, n, int(rng.choice([0, 1, 3, 4])))
    snap.nonzero_memory[:] = _column(rng, n, int(rng.choice([0, 1, 3, 4])))
    snap.pod_count[:] = rng.integers(0, 120, n)
    snap.max_pods[:] = rng.choice([0, 5, 110, 110, 110], n)
    return snap


def random_pod(rng: random.Random) -> PodInfo:
    extra = {
        r: rng.choice(["0", "1", "3"])
        for r in rng.sample((*EXTENDED, ABSENT, "ephemeral-storage"), rng.randint(0, 3))
    }
    body = pod(
        f"p{rng.randrange(10**9)}",
        cpu=rng.choice([None, "0", "1m", "100m", "3", "4000000000"]),
        memory=rng.choice([None, "0", "1", "512Mi", "31Gi", "4000000000000000000"]),
        labels=rng.choice([{}, {"app": "web"}, {"app": "web", "tier": "a"}]),
        extra_requests=extra,
        tolerations=[dict(t) for t in rng.sample(TAINTS, rng.randint(0, 3))],
    )
    for k in range(rng.randint(0, 2)):
        image = rng.choice(["nginx", "redis:7", "example.com/big:v1"])
        body["spec"]["containers"].append({"name": f"c{k}", "image": image})
    return parse_pod(body)


def random_nodes(rng: random.Random, n: int) -> IndexArray:
    size = rng.choice([0, 1, n, rng.randint(0, n)])
    return np.array(rng.sample(range(n), size), dtype=np.intp)


def fit_args(rng: random.Random) -> dict[str, Any]:
    args: dict[str, Any] = {}
    strategy = rng.choice([None, "LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"])
    if strategy:
        args["strategy"] = strategy
    if rng.random() < 0.6:
        names = rng.sample(
            ("cpu", "memory", "ephemeral-storage", *EXTENDED, ABSENT), rng.randint(1, 4)
        )
        args["resources"] = [{"name": r, "weight": rng.choice([1, 1, 2, 5, 100])} for r in names]
    if rng.random() < 0.3:
        args["shape"] = [
            {"utilization": 0, "score": 10},
            {"utilization": 50, "score": 3},
            {"utilization": 100, "score": 0},
        ]
    if rng.random() < 0.3:
        args["ignoredResources"] = ["example.com/gpu"]
    if rng.random() < 0.2:
        args["ignoredResourceGroups"] = ["nvidia.com"]
    return args


def assert_same(new: IntArray, old: IntArray) -> None:
    assert new.dtype == old.dtype and new.shape == old.shape
    assert np.array_equal(new, old)


def rejections(found: Sequence[Rejection]) -> list[tuple[str, bool, list[bool]]]:
    return [(r.reason, r.unresolvable, r.mask.tolist()) for r in found]


# -- plugins -----------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_requested_and_allocatable(seed: int) -> None:
    rng = random.Random(seed)
    snap = random_snapshot(seed, rng.randint(1, 40))
    for _ in range(5):
        cycle = Cycle(random_pod(rng), snap)
        nodes = random_nodes(rng, len(snap))
        for resource in (*snap.resources, ABSENT):
            for use_requested in (False, True):
                new = requested_and_allocatable(cycle, nodes, resource, use_requested)
                old = ref_requested_and_allocatable(cycle, nodes, resource, use_requested)
                assert_same(new[0], old[0])
                assert_same(new[1], old[1])


@pytest.mark.parametrize("seed", SEEDS)
def test_node_resources_fit(seed: int) -> None:
    rng = random.Random(seed)
    snap = random_snapshot(seed, rng.randint(1, 40))
    for _ in range(8):
        plugin = NodeResourcesFit(fit_args(rng))
        cycle = Cycle(random_pod(rng), snap)
        nodes = random_nodes(rng, len(snap))
        assert_same(plugin.score(cycle, nodes), ref_fit_score(plugin, cycle, nodes))
        assert rejections(plugin.filter(cycle, nodes)) == rejections(
            ref_fit_filter(plugin, cycle, nodes)
        )


# Negative sizes overflow the general path's float math to inf, cast to int64 alike in both.
@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")
@pytest.mark.parametrize("seed", SEEDS)
def test_balanced_allocation(seed: int) -> None:
    rng = random.Random(seed)
    snap = random_snapshot(seed, rng.randint(1, 40))
    for _ in range(8):
        names = rng.choice(
            [
                None,
                ["cpu", "memory"],
                ["memory", "cpu"],
                ["cpu", "example.com/gpu"],
                ["cpu", ABSENT],
                ["cpu", "memory", "hugepages-2Mi"],
                ["cpu"],
            ]
        )
        args = {} if names is None else {"resources": [{"name": r} for r in names]}
        plugin = NodeResourcesBalancedAllocation(args)
        cycle = Cycle(random_pod(rng), snap)
        nodes = random_nodes(rng, len(snap))
        assert_same(plugin.score(cycle, nodes), ref_balanced_score(plugin, cycle, nodes))


@pytest.mark.parametrize("seed", SEEDS)
def test_image_locality_and_taint_toleration(seed: int) -> None:
    rng = random.Random(seed)
    snap = random_snapshot(seed, rng.randint(1, 40))
    images, taints = ImageLocality(), TaintToleration()
    for _ in range(8):
        cycle = Cycle(random_pod(rng), snap)
        nodes = random_nodes(rng, len(snap))
        assert_same(images.score(cycle, nodes), ref_image_score(images, cycle, nodes))
        assert_same(taints.score(cycle, nodes), ref_taint_score(taints, cycle, nodes))
        assert rejections(taints.filter(cycle, nodes)) == rejections(
            ref_taint_filter(taints, cycle, nodes)
        )


LIST_DEFAULTS = {
    "defaultingType": "List",
    "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"},
        {
            "maxSkew": 2,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "matchLabelKeys": ["app"],
        },
    ],
}
OWN_SPREAD = [
    {
        "maxSkew": 1,
        "topologyKey": "zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
        "matchLabelKeys": ["tier"],
    },
    {"maxSkew": 3, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"},
]


@pytest.mark.parametrize("args", [{}, LIST_DEFAULTS], ids=["system", "list"])
@pytest.mark.parametrize("services", [False, True])
@pytest.mark.parametrize("own", [False, True])
def test_topology_spread_constraints(args: dict[str, Any], services: bool, own: bool) -> None:
    plugin = PodTopologySpread(args)
    snap = random_snapshot(0, 3)
    if services:
        meta = {"name": "web", "namespace": "default", "resourceVersion": "1"}
        snap.selectors.load(
            [{"kind": "Service", "metadata": meta, "spec": {"selector": {"app": "web"}}}]
        )
    for labels in ({}, {"app": "web"}, {"app": "web", "tier": "a"}):
        spec = {"topologySpreadConstraints": OWN_SPREAD} if own else {}
        incoming = parse_pod(pod("p", labels=labels, **spec))
        cycle = Cycle(incoming, snap)
        for action in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY, DO_NOT_SCHEDULE):
            expected = ref_constraints(plugin, incoming, action, snap.selectors)
            assert plugin.constraints(cycle, action) == expected


# -- the filter and score loops -----------------------------------------------------------


class Scripted(FilterPlugin):
    """Rejections drawn from a generator seeded by the plugin and the nodes it is shown."""

    name = "Scripted"

    def __init__(self, seed: int) -> None:
        super().__init__()
        self.seed = seed

    def filter(self, cycle: Cycle, nodes: IndexArray) -> list[Rejection]:
        rng = np.random.default_rng([self.seed, *nodes.tolist()])
        out = []
        for _ in range(int(rng.choice([0, 0, 1, 1, 1, 2, 3]))):
            share = float(rng.choice([0.0, 0.05, 0.5, 1.0]))
            mask = rng.random(nodes.size) < share
            reason = str(rng.choice(["a", "b", "c"]))
            out.append(Rejection(reason, mask, unresolvable=bool(rng.integers(2))))
        return out


def _diagnosis(total: int) -> Diagnosis:
    return Diagnosis(
        num_all_nodes=total,
        status=np.full(total, UNSEEN, dtype=np.int8),
        plugin=np.full(total, -1, dtype=np.int16),
    )


def assert_same_diagnosis(new: Diagnosis, old: Diagnosis) -> None:
    assert_same(new.status, old.status)
    assert_same(new.plugin, old.plugin)
    assert list(new.reasons.items()) == list(old.reasons.items())
    assert new.rejected_by == old.rejected_by
    assert new.message() == old.message()


@pytest.mark.parametrize("seed", SEEDS)
def test_run_filters(seed: int) -> None:
    rng = random.Random(seed)
    total = rng.randint(1, 300)
    profile = Profile(filters=[Scripted(seed * 10 + k) for k in range(rng.randint(1, 5))])
    for plugin in profile.filters:
        plugin.name = f"Scripted{plugin.seed % 10}"  # type: ignore[attr-defined,misc]
    for _ in range(5):
        nodes = random_nodes(rng, total)
        cycle = Cycle(random_pod(rng), Snapshot())
        new_diag, old_diag = _diagnosis(total), _diagnosis(total)
        assert_same(
            run_filters(profile, cycle, nodes, new_diag),
            ref_run_filters(profile, cycle, nodes, old_diag),
        )
        assert_same_diagnosis(new_diag, old_diag)
        assert_same(
            run_filters(profile, cycle, nodes, None), ref_run_filters(profile, cycle, nodes, None)
        )


def random_profile(rng: random.Random) -> Profile:
    spec: dict[str, Any] = {"pluginArgs": {"nodeResourcesFit": fit_args(rng)}}
    spec["percentageOfNodesToScore"] = rng.choice([0, 1, 30, 100])
    if rng.random() < 0.3:
        spec["pluginArgs"]["balancedAllocation"] = {
            "resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "example.com/gpu"}]
        }
    if rng.random() < 0.1:
        spec["scores"] = []  # Without scores one feasible node is enough.
    return build_profile(spec) if rng.random() < 0.7 else default_profile()


@pytest.mark.parametrize("seed", SEEDS)
def test_find_feasible_and_score(seed: int) -> None:
    rng = random.Random(seed)
    snap = random_snapshot(seed, rng.choice([1, 7, 99, 150, 400]))
    total = len(snap)
    for _ in range(4):
        profile = random_profile(rng)
        incoming = random_pod(rng)
        start = rng.randrange(total + 5)
        allowed = within = None
        if rng.random() < 0.3:
            allowed = frozenset(rng.sample(snap.names, rng.randint(1, total)))
        if rng.random() < 0.3:
            within = frozenset(rng.sample(snap.names, rng.randint(0, total)))
        restricting = ["NodeAffinity"] if allowed is not None else []
        outcomes = []
        for find, score in ((_find_feasible, _score), (ref_find_feasible, ref_score)):
            state = Scheduler(random.Random(seed))
            state.next_start = start
            cycle = Cycle(incoming, snap)
            diagnosis = _diagnosis(total)
            found, processed = find(
                profile, snap, cycle, state, diagnosis, allowed, restricting, within
            )
            placed = []
            for record in (False, True):
                if found.size:
                    placed.append(score(profile, snap, cycle, state, Placement(), found, record))
            outcomes.append((found, processed, state, diagnosis, placed))
        (new, n_proc, n_state, n_diag, n_placed), (old, o_proc, o_state, o_diag, o_placed) = (
            outcomes
        )
        assert_same(new, old)
        assert n_proc == o_proc
        assert n_state.next_start == o_state.next_start
        assert n_state.rng.getstate() == o_state.rng.getstate()
        assert_same_diagnosis(n_diag, o_diag)
        for a, b in zip(n_placed, o_placed, strict=True):
            assert a.node == b.node
            assert a.totals is None or b.totals is None or np.array_equal(a.totals, b.totals)
            assert (a.totals is None) == (b.totals is None)
            assert a.plugin_scores.keys() == b.plugin_scores.keys()
            for name, values in a.plugin_scores.items():
                assert_same(values, b.plugin_scores[name])


# -- whole cycles ------------------------------------------------------------------------------


def _trace(profile: Profile, nodes: int, pods: int, seed: int) -> list[Any]:
    from podium.tools.generate import generate_cluster

    cluster = generate_cluster(nodes, pods, seed=seed)
    cache = Cache()
    for body in cluster.nodes:
        cache.add_node(parse_node(body))
    snap = Snapshot()
    state = Scheduler(random.Random(seed))
    out: list[Any] = []
    for body in cluster.pods:
        incoming = parse_pod(body)
        snap.update(cache)
        placement = state.schedule(profile, snap, incoming, record=True)
        diagnosis = placement.diagnosis or placement.filtered
        out.append(
            (
                placement.node,
                placement.evaluated,
                None if placement.totals is None else placement.totals.tolist(),
                {k: v.tolist() for k, v in placement.plugin_scores.items()},
                None if diagnosis is None else (diagnosis.message(), diagnosis.status.tolist()),
            )
        )
        if placement.node:
            cache.assume_pod(incoming, placement.node)
    return out


def _use_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    import podium.framework.cycle as cycle_module

    monkeypatch.setattr(cycle_module, "run_filters", ref_run_filters)
    monkeypatch.setattr(cycle_module, "_find_feasible", ref_find_feasible)
    monkeypatch.setattr(cycle_module, "_score", ref_score)
    monkeypatch.setattr(NodeResourcesFit, "filter", ref_fit_filter)
    monkeypatch.setattr(NodeResourcesFit, "score", ref_fit_score)
    monkeypatch.setattr(NodeResourcesBalancedAllocation, "score", ref_balanced_score)
    monkeypatch.setattr(
        PodTopologySpread,
        "constraints",
        lambda self, cycle, action: ref_constraints(
            self, cycle.pod, action, cycle.snapshot.selectors
        ),
    )


@pytest.mark.parametrize(("nodes", "pods", "seed"), [(30, 200, 3), (300, 300, 1), (6, 200, 2)])
def test_whole_cycles_match_the_reference(
    monkeypatch: pytest.MonkeyPatch, nodes: int, pods: int, seed: int
) -> None:
    profiles = [
        default_profile(),
        build_profile(
            {
                "pluginArgs": {
                    "nodeResourcesFit": {
                        "strategy": "MostAllocated",
                        "resources": [{"name": "cpu", "weight": 3}, {"name": "memory"}],
                    }
                },
                "percentageOfNodesToScore": 30,
            }
        ),
    ]
    new = [_trace(p, nodes, pods, seed) for p in profiles]
    _use_reference(monkeypatch)
    old = [_trace(p, nodes, pods, seed) for p in profiles]
    assert new == old
    assert any(step[0] for trace in new for step in trace)
