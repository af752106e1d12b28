"""Opportunistic batching (framework/batch.py) against kube-scheduler's batch.go."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from podium.framework.batch import MAX_BATCH_AGE, BatchStats, SortedNodes, heap_top, sign_pod
from podium.framework.cycle import Scheduler
from podium.framework.plugin import Cycle, PluginError
from podium.framework.podgroup import Board, place_group
from podium.framework.profile import Profile
from podium.framework.queued import QueuedPod
from podium.kube.objects import PodInfo, parse_node, parse_pod
from podium.metrics import Metrics
from podium.policy import PolicyError, build_profile
from podium.state.cache import Cache
from podium.state.podgroups import parse_pod_group
from podium.state.snapshot import Snapshot
from tests.unit.builders import node, pod

LIST = {"pluginArgs": {"podTopologySpread": {"defaultingType": "List"}}}
BATCHING = {"schedulerName": "podium", **LIST}


def _zone_affinity(values: list[str]) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": values}]}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }


def _pod(**kwargs: Any) -> PodInfo:
    return parse_pod(pod("p", cpu="1", **kwargs))


def _sign(profile: Profile, pod: PodInfo, classes: tuple[dict[str, Any], ...] = ()) -> bytes | None:
    """The pod's signature in a cycle whose snapshot holds ``classes`` (DeviceClasses)."""
    snapshot = Snapshot()
    for body in classes:
        snapshot.dra.apply("deviceclasses", None, body)
    return sign_pod(profile, Cycle(pod, snapshot))


GPU_CLASS = {"metadata": {"name": "gpu"}, "spec": {"extendedResourceName": "example.com/gpu"}}


@pytest.mark.parametrize(
    ("spec", "extra", "signable"),
    [
        pytest.param({}, {}, False, id="default-profile-system-spread-defaults"),
        pytest.param(BATCHING, {}, True, id="list-defaulting-without-constraints"),
        pytest.param(
            {
                "pluginArgs": {
                    "podTopologySpread": {
                        "defaultingType": "List",
                        "defaultConstraints": [
                            {
                                "maxSkew": 1,
                                "topologyKey": "zone",
                                "whenUnsatisfiable": "ScheduleAnyway",
                            }
                        ],
                    }
                }
            },
            {},
            False,
            id="list-defaulting-with-constraints",
        ),
        pytest.param(
            BATCHING,
            {
                "topologySpreadConstraints": [
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
                ]
            },
            False,
            id="own-spread-constraints",
        ),
        pytest.param(
            BATCHING,
            {"affinity": {"podAntiAffinity": {}}},
            False,
            id="pod-anti-affinity",
        ),
        pytest.param(
            BATCHING,
            {"resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}]},
            False,
            id="resource-claims",
        ),
        pytest.param(
            {**BATCHING, "filters": [{"name": "NodeResourcesFit"}, {"name": "NodeConditions"}]},
            {},
            False,
            id="plugin-without-sign-pod",
        ),
        pytest.param({**BATCHING, "opportunisticBatching": False}, {}, False, id="switched-off"),
    ],
)
def test_which_pods_are_signed(spec: dict[str, Any], extra: dict[str, Any], signable: bool) -> None:
    profile = build_profile(spec)
    assert (_sign(profile, _pod(**extra)) is not None) is signable


@pytest.mark.parametrize(
    ("resource", "classes", "signable"),
    [
        pytest.param("example.com/gpu", (), True, id="device-plugin-resource"),
        pytest.param("example.com/gpu", (GPU_CLASS,), False, id="class-backed-name"),
        pytest.param("example.com/fpga", (GPU_CLASS,), True, id="other-class-name"),
        pytest.param(
            "deviceclass.resource.kubernetes.io/gpu", (GPU_CLASS,), False, id="implicit-name"
        ),
    ],
)
@pytest.mark.parametrize(
    "plugins",
    [
        pytest.param({}, id="both"),
        pytest.param(
            {
                "filters": [{"name": "NodeName"}],
                "scores": [{"name": "NodeResourcesBalancedAllocation"}],
            },
            id="balanced-allocation-alone",
        ),
    ],
)
def test_fit_and_balanced_allocation_refuse_dra_backed_extended_resources(
    resource: str,
    classes: tuple[dict[str, Any], ...],
    signable: bool,
    plugins: dict[str, Any],
) -> None:
    """Fit.SignPod and BalancedAllocation.SignPod: a requested resource a DeviceClass
    backs makes the pod unsignable, whatever the nodes offer (shouldDelegateResourceToDRA
    without a node)."""
    profile = build_profile({**BATCHING, **plugins})
    raw = pod("p", cpu="1")
    raw["spec"]["containers"][0]["resources"]["requests"][resource] = "1"
    assert (_sign(profile, parse_pod(raw), classes) is not None) is signable


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        pytest.param({}, {}, True, id="equal-pods"),
        pytest.param({"cpu": "1"}, {"cpu": "2"}, False, id="requests"),
        pytest.param({"labels": {"app": "a"}}, {"labels": {"app": "b"}}, False, id="labels"),
        pytest.param({"nodeSelector": {"z": "a"}}, {"nodeSelector": {"z": "b"}}, False, id="sel"),
        pytest.param(
            {"tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "value": "1"}]},
            {"tolerations": [{"key": "b", "value": "1"}, {"key": "a", "operator": "Exists"}]},
            True,
            id="toleration-order",
        ),
        pytest.param(
            {"volumes": [{"name": "x", "configMap": {"name": "one"}}]},
            {"volumes": [{"name": "y", "configMap": {"name": "two"}}]},
            True,
            id="config-maps-ignored",
        ),
        pytest.param(
            {"volumes": [{"name": "x", "persistentVolumeClaim": {"claimName": "one"}}]},
            {"volumes": [{"name": "x", "persistentVolumeClaim": {"claimName": "two"}}]},
            False,
            id="claims-differ",
        ),
        pytest.param(
            {"affinity": _zone_affinity(["b", "a"])},
            {"affinity": _zone_affinity(["a", "b"])},
            True,
            id="node-affinity-value-order",
        ),
        pytest.param(
            {"affinity": _zone_affinity(["a"])},
            {"affinity": _zone_affinity(["b"])},
            False,
            id="node-affinity-values",
        ),
    ],
)
def test_signatures_compare_as_gos(a: dict[str, Any], b: dict[str, Any], same: bool) -> None:
    profile = build_profile(BATCHING)
    cpu_a, cpu_b = a.pop("cpu", "1"), b.pop("cpu", "1")
    sig_a = _sign(profile, parse_pod(pod("a", cpu=cpu_a, **a)))
    sig_b = _sign(profile, parse_pod(pod("b", cpu=cpu_b, **b)))
    assert sig_a is not None and sig_b is not None
    assert (sig_a == sig_b) is same


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _snapshot(cache: Cache) -> Snapshot:
    snap = Snapshot()
    snap.update(cache)
    return snap


def _cluster(cpus: list[str]) -> Cache:
    cache = Cache()
    for i, cpu in enumerate(cpus):
        cache.add_node(parse_node(node(f"n{i}", cpu=cpu, memory="64Gi")))
    return cache


def _burst(
    spec: dict[str, Any],
    cpus: list[str],
    requests: list[str],
    *,
    clock_step: float = 0.0,
    remove_after: tuple[int, str] | None = None,
) -> tuple[list[str], list[str | None], BatchStats]:
    """Schedule pods one after another, each assumed where it went, the queue's cycle
    counting up: where each went, its hint, and what the batch recorded."""
    profile = build_profile(spec)
    cache = _cluster(cpus)
    state = Scheduler(random.Random(7))
    stats = state.batch_stats = BatchStats()
    clock = Clock()
    state.batch(profile).clock = clock
    placed: list[str] = []
    hints: list[str | None] = []
    for i, cpu in enumerate(requests):
        if remove_after is not None and remove_after[0] == i:
            cache.remove_node(remove_after[1])
        incoming = parse_pod(pod(f"p{i}", cpu=cpu, memory="1Gi"))
        placement = state.schedule(profile, _snapshot(cache), incoming, cycle_count=i + 1)
        placed.append(placement.node)
        hints.append(placement.hint or None)
        if placement.node:
            cache.assume_pod(incoming, placement.node)
        clock.now += clock_step
    return placed, hints, stats


# A 2-cpu node no 3-cpu pod fits, a 5-cpu node that ranks first, and two 4-cpu nodes
# that tie: each takes one 3-cpu pod only.
CPUS = ["2", "5", "4", "4"]


@pytest.mark.parametrize(
    ("spec", "requests", "kwargs", "attempts", "flushes"),
    [
        pytest.param(
            {},
            ["1", "1"],
            {},
            {"no_hint": 2},
            {"pod_not_batchable": 2},
            id="default-profile-never-batches",
        ),
        pytest.param(
            BATCHING,
            ["3", "3", "3"],
            {},
            {"no_hint": 1, "hint_used": 2},
            {},
            id="burst-of-one-signature",
        ),
        pytest.param(
            BATCHING,
            ["3", "2"],
            {},
            {"no_hint": 2},
            {"pod_incompatible": 1},
            id="mixed-signatures",
        ),
        pytest.param(
            BATCHING,
            ["3", "3"],
            {"clock_step": MAX_BATCH_AGE + 0.01},
            {"no_hint": 2},
            {"expired": 1},
            id="too-old",
        ),
        pytest.param(
            BATCHING,
            ["3", "3"],
            {"remove_after": (1, "n1")},
            {"no_hint": 2},
            {"node_missing": 1},
            id="chosen-node-deleted",
        ),
    ],
)
def test_batch_outcomes(
    spec: dict[str, Any],
    requests: list[str],
    kwargs: dict[str, Any],
    attempts: dict[str, int],
    flushes: dict[str, int],
) -> None:
    _, _, stats = _burst(spec, CPUS, requests, **kwargs)
    assert {r: n for (_, r), n in stats.attempts.items()} == attempts
    assert {r: n for (_, r), n in stats.flushes.items()} == flushes


def test_hints_walk_the_first_pods_ranking() -> None:
    """Each 3-cpu pod fills a node, so the last chosen is infeasible for the next pod and
    the hints are the first cycle's ranking in order, as in Go."""
    placed, hints, _ = _burst(BATCHING, CPUS, ["3", "3", "3"])
    assert placed[0] == "n1"  # 5 cpus: the emptiest after the pod
    assert hints == [None, placed[1], placed[2]]
    assert set(placed[1:]) == {"n2", "n3"}


def test_a_still_feasible_node_is_rescored_and_competes() -> None:
    """Small pods leave the chosen node feasible: it is rescored with the pods it now
    holds and competes with the cached candidates, so the burst lands exactly where full
    cycles put it, the 8-cpu node coming back as a hint once it is the best again."""
    cpus, requests = ["8", "4", "2"], ["1", "1", "1", "1"]
    placed, hints, stats = _burst(BATCHING, cpus, requests)
    full, _, _ = _burst({**BATCHING, "opportunisticBatching": False}, cpus, requests)
    assert placed == full == ["n0", "n0", "n1", "n0"]
    assert hints == [None, "n0", "n1", "n0"]
    assert stats.rescores["podium"] == 3


def test_a_skipped_cycle_flushes() -> None:
    profile = build_profile(BATCHING)
    cache = _cluster(CPUS)
    state = Scheduler(random.Random(1))
    stats = state.batch_stats = BatchStats()
    for count in (1, 3):  # cycle 2 went to another pod (or another profile)
        incoming = parse_pod(pod(f"p{count}", cpu="3"))
        placement = state.schedule(profile, _snapshot(cache), incoming, cycle_count=count)
        cache.assume_pod(incoming, placement.node)
    assert stats.flushes[("podium", "pod_skipped")] == 1


def test_a_nominated_pod_bypasses_the_batch() -> None:
    profile = build_profile(BATCHING)
    cache = _cluster(CPUS)
    state = Scheduler(random.Random(1))
    stats = state.batch_stats = BatchStats()
    first = parse_pod(pod("p1", cpu="1"))
    cache.assume_pod(first, state.schedule(profile, _snapshot(cache), first, cycle_count=1).node)
    second = parse_pod(pod("p2", cpu="1"))
    placement = state.schedule(
        profile, _snapshot(cache), second, cycle_count=2, nominated_node="n2"
    )
    assert placement.node == "n2" and placement.hint == ""
    assert stats.flushes[("podium", "pod_nominated")] == 1
    assert stats.flushes[("podium", "empty_list")] == 1  # a single feasible node stores none


@pytest.mark.parametrize(
    ("plugin", "method", "reason"),
    [
        pytest.param("NodeResourcesFit", "filter", "filter_error", id="filter"),
        pytest.param("NodeResourcesBalancedAllocation", "pre_score", "prescore_error", id="pre"),
        pytest.param("NodeResourcesBalancedAllocation", "score", "rescore_error", id="score"),
        pytest.param(
            "NodeResourcesBalancedAllocation", "normalize", "normalize_error", id="normalize"
        ),
    ],
)
def test_an_error_while_refreshing_the_hint_leaves_no_hint(
    plugin: str, method: str, reason: str
) -> None:
    """refreshHintCandidates and rescoreHintedNode: an Error (not a rejection) while the
    last chosen node is re-checked or rescored gives no hint and counts the step's
    flush; the cycle goes on and places the pod (here the step fails once only)."""
    profile = build_profile(BATCHING)
    cache = _cluster(["8", "8", "8"])
    state = Scheduler(random.Random(1))
    stats = state.batch_stats = BatchStats()
    first = parse_pod(pod("p1", cpu="1"))
    cache.assume_pod(first, state.schedule(profile, _snapshot(cache), first, cycle_count=1).node)
    plugins = [*profile.filters, *(s for s, _ in profile.scores)]
    target = next(p for p in plugins if p.name == plugin)  # Fit filters and scores: one object
    real = getattr(target, method)
    failures = [PluginError("transient")]

    def once(*args: Any) -> Any:
        if failures:
            raise failures.pop()
        return real(*args)

    setattr(target, method, once)
    second = parse_pod(pod("p2", cpu="1"))
    placement = state.schedule(profile, _snapshot(cache), second, cycle_count=2)
    assert not failures, "the step ran"
    assert placement.node and placement.hint == ""
    assert stats.flushes[("podium", reason)] == 1


RACK = "example.com/rack"


def _in_cycles(
    spec: dict[str, Any], racks: bool, cycles: list[list[str]]
) -> tuple[list[str], BatchStats]:
    """Each cycle's pods in turn on CPUS (n0 and n1 in rack r0, n2 and n3 in r1), the
    queue's count going up by one per cycle: one pod is a single-pod cycle; several are
    a gang of them all, placed by a pod-group cycle (each rack tried in turn when
    ``racks``), its members sharing the count as Go's schedulePod calls do. Where each
    pod went, and what the batch recorded."""
    profile = build_profile({**spec, "topologyAwareWorkloadScheduling": racks})
    cache = Cache()
    for i, cpu in enumerate(CPUS):
        labels = {RACK: f"r{i // 2}"}
        cache.add_node(parse_node(node(f"n{i}", cpu=cpu, memory="64Gi", labels=labels)))
    state = Scheduler(random.Random(7))
    stats = state.batch_stats = BatchStats()
    placed: list[str] = []
    for count, cpus in enumerate(cycles, start=1):
        pods = [
            parse_pod(pod(f"c{count}-{i}", cpu=cpu, memory="1Gi", created="2025-01-01T00:00:00Z"))
            for i, cpu in enumerate(cpus)
        ]
        if len(pods) == 1:
            (incoming,) = pods
            where = state.schedule(profile, _snapshot(cache), incoming, cycle_count=count).node
            placed.append(where)
            cache.assume_pod(incoming, where)
            continue
        body: dict[str, Any] = {
            "metadata": {"name": f"g{count}", "namespace": "default"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": len(pods)}}},
        }
        if racks:
            body["spec"]["schedulingConstraints"] = {"topology": [{"key": RACK}]}
        board = Board(state, cache, _snapshot(cache), cycle=count)
        entries = [QueuedPod(p) for p in pods]
        outcome = place_group(board, profile, parse_pod_group(body), entries, [])
        assert outcome.success, outcome.status_message()
        placed += [p.node for _, p in outcome.placements if p is not None]
    return placed, stats


@pytest.mark.parametrize(
    ("racks", "cycles", "attempts"),
    [
        # A gang of three 3-cpu pods: the second and third members take the hints the
        # member before them left, as batchStateCompatible allows within one count.
        pytest.param(False, [["3", "3", "3"]], {"no_hint": 1, "hint_used": 2}, id="gang"),
        # The gang's first member takes the hint the single pod of the cycle before left.
        pytest.param(False, [["3"], ["3", "3"]], {"no_hint": 1, "hint_used": 2}, id="pod-gang"),
        # The pod after the gang takes the hint its last member left.
        pytest.param(False, [["3", "3"], ["3"]], {"no_hint": 1, "hint_used": 2}, id="gang-pod"),
        # Two 1-cpu members, rack r0 then rack r1. In r0 the second takes the first's hint.
        # In r1 the first is handed an r0 node, outside its trial: it is not tried, the
        # search runs in r1, and the hint counts as not used (Go's evaluateNominatedNode
        # returns no node for it); the second takes the r1 hint.
        pytest.param(
            True,
            [["1", "1"]],
            {"no_hint": 1, "hint_used": 2, "hint_not_used": 1},
            id="trials-by-rack",
        ),
    ],
)
def test_pod_group_members_share_the_batch(
    racks: bool, cycles: list[list[str]], attempts: dict[str, int]
) -> None:
    """kube-scheduler's pod-group cycle runs schedulePod for each member of each trial
    with the queue's one CurrentCycle, so batching spans the members; the nodes taken
    are the ones full cycles take (the tied 4-cpu nodes in either order)."""
    placed, stats = _in_cycles(BATCHING, racks, cycles)
    assert {r: n for (_, r), n in stats.attempts.items()} == attempts
    full, _ = _in_cycles({**BATCHING, "opportunisticBatching": False}, racks, cycles)
    assert sorted(placed) == sorted(full)


@pytest.mark.parametrize(
    ("tried", "start", "evaluated"),
    [
        pytest.param("", 144, 145, id="nothing-tried-first"),
        pytest.param("n010", 144, 146, id="failed-node-outside-the-window"),
        pytest.param("n200", 144, 145, id="failed-node-inside-the-window"),
        pytest.param("n010", 250, 145, id="inside-after-wrapping-round"),
    ],
)
def test_a_failed_first_try_counts_as_processed_outside_the_window(
    tried: str, start: int, evaluated: int
) -> None:
    """findNodesThatFitPod: a nominated or hinted node that fails keeps its status in the
    Diagnosis, so it counts as processed (nextStartNodeIndex moves one further) when
    the search stopped before reaching it. 300 nodes: the search stops at the 144th
    feasible node (48%); n010 and n200 are full, so a window holding either is 145."""
    profile = build_profile(BATCHING)
    cache = Cache()
    for i in range(300):
        cache.add_node(parse_node(node(f"n{i:03}", pods=1 if i in (10, 200) else 110)))
    for name in ("n010", "n200"):  # full: no pod fits there
        cache.add_pod(parse_pod(pod(f"on-{name}", node_name=name)))
    state = Scheduler(random.Random(3))
    state.next_start = start
    incoming = parse_pod(pod("p", cpu="1"))
    placement = state.schedule(profile, _snapshot(cache), incoming, nominated_node=tried)
    assert placement.evaluated == evaluated
    assert state.next_start == (start + evaluated) % 300


@pytest.mark.parametrize(
    ("totals", "pops"),
    [
        pytest.param([5, 9, 9, 1], ["b", "c", "a", "d"], id="distinct-and-a-tie"),
        # Go's container/heap over [a..f], all tied: Init leaves them in place, and each
        # Pop swaps the last in and sifts it down.
        pytest.param([7] * 6, ["a", "f", "e", "d", "c", "b"], id="all-tied"),
        pytest.param([1, 2, 3, 4, 5, 6], ["f", "e", "d", "c", "b", "a"], id="ascending"),
    ],
)
def test_sorted_nodes_pop_as_gos_heap(totals: list[int], pops: list[str]) -> None:
    names = [chr(ord("a") + i) for i in range(len(totals))]
    ranked = SortedNodes(names, np.array(totals), {"P": np.array(totals)})
    assert [ranked.pop() for _ in names] == pops


@pytest.mark.parametrize(
    ("seed", "size", "levels"),
    [(1, 2, 2), (2, 7, 2), (3, 50, 3), (4, 420, 2), (5, 1000, 5), (6, 3, 1), (7, 257, 4)],
)
def test_heap_top_is_the_first_pop_of_gos_heap(seed: int, size: int, levels: int) -> None:
    """``heap_top`` without the heap equals ``SortedNodes(...).pop()`` (Go's Init then
    Pop), over many random score lists with few distinct values, so ties abound."""
    rng = random.Random(seed)
    for _ in range(200):
        n = rng.randint(1, size)
        totals = np.array([rng.randrange(levels) for _ in range(n)], dtype=np.int64)
        names = [str(i) for i in range(n)]
        expected = int(SortedNodes(names, totals, {}).pop())
        assert heap_top(totals) == expected, totals.tolist()


def test_stats_drain_into_kube_scheduler_metric_names() -> None:
    _, _, stats = _burst(BATCHING, CPUS, ["3", "3"])
    metrics = Metrics()
    stats.drain(metrics)
    value = metrics.registry.get_sample_value
    labels = {"profile": "podium", "result": "hint_used"}
    assert value("scheduler_batch_attempts_total", labels) == 1
    assert (
        value(
            "scheduler_get_node_hint_duration_seconds_count",
            {"hinted": "hint", "profile": "podium"},
        )
        == 1
    )
    assert not stats.attempts and not stats.hint_seconds


def test_the_policy_field_must_be_a_boolean() -> None:
    with pytest.raises(PolicyError, match="opportunisticBatching"):
        build_profile({**BATCHING, "opportunisticBatching": "no"})
