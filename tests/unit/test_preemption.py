"""DefaultPreemption: victim selection, candidate ordering, messages, nominated pods."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from podium.framework.cycle import Scheduler
from podium.framework.preemption import (
    NEVER,
    NO_VICTIMS,
    NOT_HELPFUL,
    TERMINATING,
    Candidate,
    best_candidates,
    evaluate,
    filter_victims_with_pdb_violation,
    pick_one_node,
    select_victims_on_node,
)
from podium.kube.objects import PodInfo, parse_node, parse_pod
from podium.kube.pdb import Pdb, parse_pdb
from podium.policy import default_profile
from podium.scheduling.nominator import Nominator
from podium.state.cache import Cache
from podium.state.snapshot import Snapshot

from .builders import node, pod

NOW = 2_000_000_000.0


def started(body: dict[str, Any], when: str) -> dict[str, Any]:
    body["status"]["startTime"] = when
    return body


def snap_of(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> Snapshot:
    cache = Cache()
    for body in nodes:
        cache.add_node(parse_node(body))
    for body in pods:
        cache.add_pod(parse_pod(body))
    snap = Snapshot()
    snap.update(cache)
    return snap


def fail(snap: Snapshot, incoming: PodInfo, **kw: Any) -> Any:
    profile = default_profile()
    placement = Scheduler(random.Random(1)).schedule(profile, snap, incoming)
    assert not placement.node
    assert placement.diagnosis is not None
    return evaluate(profile, snap, incoming, placement.diagnosis, random.Random(1), **kw)


def victims_of(snap: Snapshot, incoming: PodInfo, node_name: str, pdbs: list[Pdb] = ()) -> Any:  # type: ignore[assignment]
    row = snap.index[node_name]
    before = (snap.requested.copy(), dict(snap.pods[row]))
    victims, violations, status = select_victims_on_node(
        default_profile(), snap, incoming, row, list(pdbs), None, NOW
    )
    assert np.array_equal(snap.requested, before[0]) and snap.pods[row] == before[1]
    return sorted(p.name for p in victims), violations, status


# -- SelectVictimsOnNode -------------------------------------------------------------------
VICTIM_CASES = [
    pytest.param(
        [("a", "1", 1), ("b", "1", 2), ("c", "2", 3)], "2", ["a", "b"], id="reprieve-highest-first"
    ),
    pytest.param(
        [("a", "1", 1), ("b", "1", 2), ("c", "2", 3)], "3", ["a", "c"], id="keeps-b-when-c-needed"
    ),
    pytest.param([("a", "2", 1), ("b", "2", 200)], "2", ["a"], id="equal-or-higher-untouched"),
    pytest.param([("a", "4", 1)], "4", ["a"], id="single"),
]


@pytest.mark.parametrize(("existing", "want_cpu", "expected"), VICTIM_CASES)
def test_select_victims(
    existing: list[tuple[str, str, int]], want_cpu: str, expected: list[str]
) -> None:
    pods = [pod(n, cpu=c, node_name="n1", priority=p) for n, c, p in existing]
    snap = snap_of([node("n1", cpu="4")], pods)
    incoming = parse_pod(pod("hi", cpu=want_cpu, priority=100))
    names, violations, status = victims_of(snap, incoming, "n1")
    assert status.fits and names == expected and violations == 0


def test_no_victims_and_still_unfit() -> None:
    snap = snap_of([node("n1", cpu="4")], [pod("big", cpu="4", node_name="n1", priority=500)])
    incoming = parse_pod(pod("hi", cpu="1", priority=100))
    _, _, status = victims_of(snap, incoming, "n1")
    assert not status.fits and status.unresolvable and status.reasons == [NO_VICTIMS]
    snap = snap_of(
        [node("n1", cpu="4")],
        [pod("big", cpu="3", node_name="n1", priority=500), pod("lo", cpu="1", node_name="n1")],
    )
    incoming = parse_pod(pod("hi", cpu="2", priority=100))
    _, _, status = victims_of(snap, incoming, "n1")
    assert not status.fits and status.reasons == ["Insufficient cpu"]


def test_pdb_violating_victims_reprieved_first() -> None:
    pods = [
        pod("guarded", cpu="2", node_name="n1", priority=1, labels={"app": "db"}),
        pod("free", cpu="2", node_name="n1", priority=1),
    ]
    snap = snap_of([node("n1", cpu="4")], pods)
    incoming = parse_pod(pod("hi", cpu="2", priority=100))
    pdb = parse_pdb(
        {
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "db"}}},
            "status": {"disruptionsAllowed": 0},
        }
    )
    assert pdb is not None
    names, violations, _ = victims_of(snap, incoming, "n1", [pdb])
    assert names == ["free"] and violations == 0
    incoming = parse_pod(pod("hi", cpu="4", priority=100))
    names, violations, _ = victims_of(snap, incoming, "n1", [pdb])
    assert names == ["free", "guarded"] and violations == 1


def test_filter_victims_with_pdb_violation_budget() -> None:
    pods = [parse_pod(pod(f"p{i}", labels={"app": "x"})) for i in range(3)]
    budget = Pdb("default", "x", parse_pdb_selector({"app": "x"}), 1)
    violating, others = filter_victims_with_pdb_violation(pods, [budget])
    assert [p.name for p in others] == ["p0"] and [p.name for p in violating] == ["p1", "p2"]
    disrupted = Pdb("default", "x", parse_pdb_selector({"app": "x"}), 0, frozenset({"p0"}))
    violating, others = filter_victims_with_pdb_violation(pods, [disrupted])
    assert [p.name for p in others] == ["p0"]
    empty = Pdb("default", "x", parse_pdb_selector({}), 0)
    assert filter_victims_with_pdb_violation(pods, [empty]) == ([], pods)


def parse_pdb_selector(labels: dict[str, str]) -> Any:
    pdb = parse_pdb({"metadata": {"name": "t"}, "spec": {"selector": {"matchLabels": labels}}})
    assert pdb is not None
    return pdb.selector


# -- pickOneNodeForPreemption --------------------------------------------------------------
def victims(*specs: tuple[int, str]) -> list[PodInfo]:
    out = [parse_pod(started(pod(f"v{i}", priority=p), t)) for i, (p, t) in enumerate(specs)]
    return sorted(out, key=lambda v: (-v.priority, v.raw["status"]["startTime"]))


T0, T1 = "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"
PICK_CASES = [
    pytest.param(
        [("a", victims((1, T0)), 1), ("b", victims((5, T0), (5, T0)), 0)], "b", id="fewest-pdb"
    ),
    pytest.param(
        [("a", victims((5, T0)), 0), ("b", victims((3, T0), (3, T0)), 0)],
        "b",
        id="lowest-highest-priority",
    ),
    pytest.param(
        [("a", victims((5, T0), (4, T0)), 0), ("b", victims((5, T0), (1, T0)), 0)],
        "b",
        id="lowest-sum",
    ),
    pytest.param(
        [("a", victims((-5, T0), (-5, T0)), 0), ("b", victims((-5, T0)), 0)],
        "b",
        id="negative-priorities-fewer-wins",
    ),
    pytest.param(
        [("a", victims((5, T0), (0, T0), (0, T0)), 0), ("b", victims((5, T0), (0, T0)), 0)],
        "b",
        id="fewest-victims",
    ),
    pytest.param([("a", victims((5, T0)), 0), ("b", victims((5, T1)), 0)], "b", id="latest-start"),
    pytest.param([("a", victims((5, T0)), 0), ("b", victims((5, T0)), 0)], "a", id="first"),
]


@pytest.mark.parametrize(("cands", "expected"), PICK_CASES)
def test_pick_one_node(cands: list[tuple[str, list[PodInfo], int]], expected: str) -> None:
    best = pick_one_node([Candidate(n, v, k) for n, v, k in cands], NOW)
    assert best is not None and best.node == expected


TIE_CASES = [
    pytest.param([], [], id="none"),
    pytest.param([("a", victims((5, T0)), 0)], ["a"], id="one"),
    pytest.param([("a", victims((5, T0)), 0), ("b", victims((5, T1)), 0)], ["b"], id="decided"),
    pytest.param(
        [("a", victims((5, T0)), 0), ("b", victims((5, T0)), 0), ("c", victims((9, T0)), 0)],
        ["a", "b"],
        id="tie-left-to-visit-order",
    ),
]


@pytest.mark.parametrize(("cands", "expected"), TIE_CASES)
def test_best_candidates_are_the_ties(
    cands: list[tuple[str, list[PodInfo], int]], expected: list[str]
) -> None:
    best = best_candidates([Candidate(n, v, k) for n, v, k in cands], NOW)
    assert [c.node for c in best] == expected


# -- Evaluator ---------------------------------------------------------------------------
def test_evaluate_picks_cheapest_node_and_message() -> None:
    pods = [
        pod("a1", cpu="4", node_name="n1", priority=10),
        pod("b1", cpu="2", node_name="n2", priority=1),
        pod("b2", cpu="2", node_name="n2", priority=1),
        pod("c1", cpu="4", node_name="n3", priority=1000),
    ]
    snap = snap_of([node("n1", cpu="4"), node("n2", cpu="4"), node("n3", cpu="4")], pods)
    result = fail(snap, parse_pod(pod("hi", cpu="2", priority=100)))
    assert result.candidate is not None
    assert result.candidate.node == "n2"
    assert [v.name for v in result.candidate.victims] in (["b1"], ["b2"])
    assert result.nominating == "n2"
    assert result.message == (
        "preemption: found a potential placement for pod on node n2, preempting 1 victims"
    )


def test_evaluate_no_candidate_message_counts_nodes() -> None:
    pods = [
        pod("big", cpu="4", node_name="n1", priority=1000),
        pod("lo", cpu="1", node_name="n2", priority=1),
        pod("hi2", cpu="3", node_name="n2", priority=1000),
    ]
    snap = snap_of(
        [node("n1", cpu="4"), node("n2", cpu="4"), node("n3", cpu="4", unschedulable=True)], pods
    )
    result = fail(snap, parse_pod(pod("hi", cpu="2", priority=100)))
    assert result.candidate is None and result.nominating == ""
    assert result.message == (
        f"preemption: 0/3 nodes are available: 1 Insufficient cpu, 1 {NO_VICTIMS}, 1 {NOT_HELPFUL}."
    )


def test_never_and_terminating_are_not_eligible() -> None:
    snap = snap_of([node("n1", cpu="1")], [pod("lo", cpu="1", node_name="n1", priority=1)])
    never = parse_pod(pod("hi", cpu="1", priority=100, preemptionPolicy="Never"))
    result = fail(snap, never)
    assert result.message == "preemption: " + NEVER and result.nominating is None
    victim = pod("lo", cpu="1", node_name="n1", priority=1)
    victim["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    victim["status"]["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
    ]
    snap = snap_of([node("n1", cpu="1")], [victim])
    waiting = parse_pod(pod("hi", cpu="1", priority=100))
    result = fail(snap, waiting, nominated_node="n1")
    assert result.message == "preemption: " + TERMINATING and result.nominating is None


def test_stops_after_enough_clean_candidates() -> None:
    nodes = [node(f"n{i}", cpu="1") for i in range(10)]
    pods = [pod(f"lo{i}", cpu="1", node_name=f"n{i}", priority=1) for i in range(10)]
    snap = snap_of(nodes, pods)
    profile = default_profile()
    profile.min_candidate_nodes_absolute = 2
    profile.min_candidate_nodes_percentage = 0
    incoming = parse_pod(pod("hi", cpu="1", priority=100))
    placement = Scheduler(random.Random(1)).schedule(profile, snap, incoming)
    assert placement.diagnosis is not None
    result = evaluate(profile, snap, incoming, placement.diagnosis, random.Random(3))
    assert result.candidate is not None and not result.statuses


# -- nominated pods ------------------------------------------------------------------------
def test_nominated_pods_hold_room_for_lower_priority() -> None:
    snap = snap_of([node("n1", cpu="4")], [pod("x", cpu="2", node_name="n1")])
    nominator = Nominator()
    holder = parse_pod(pod("holder", cpu="2", priority=100))
    nominator.add(holder, "n1")
    low = parse_pod(pod("low", cpu="1", priority=5))
    sched = Scheduler(random.Random(1))
    placement = sched.schedule(default_profile(), snap, low, nominated=nominator.by_node)
    assert not placement.node
    assert placement.diagnosis is not None
    assert placement.diagnosis.reasons == {"Insufficient cpu": 1}
    assert snap.pods[0].keys() == {next(iter(snap.pods[0]))}  # restored
    high = parse_pod(pod("high", cpu="1", priority=101))
    assert sched.schedule(default_profile(), snap, high, nominated=nominator.by_node).node == "n1"
    # The nominated pod itself is placed on its node first.
    placement = sched.schedule(
        default_profile(), snap, holder, nominated=nominator.by_node, nominated_node="n1"
    )
    assert placement.node == "n1" and placement.nominated == "n1"


def test_nominator_keeps_in_memory_nomination() -> None:
    nominator = Nominator()
    p = parse_pod(pod("p", priority=3))
    nominator.add(p, "n1")
    nominator.update(p)  # a watch echo without status.nominatedNodeName yet
    assert nominator.node_of(p.uid) == "n1"
    assert (
        nominator.lower_priority_on("n1", 4) == [p] and nominator.lower_priority_on("n1", 3) == []
    )
    nominator.remove(p.uid)
    assert not nominator.by_node and len(nominator) == 0


# Go's RemovePod lowers PodTopologySpread's count for any matching victim, though its
# PreFilter (countPodsMatchSelector) never counted a terminating one.
SPREAD_X = {
    "maxSkew": 2,
    "topologyKey": "zone",
    "whenUnsatisfiable": "DoNotSchedule",
    "labelSelector": {"matchLabels": {"app": "x"}},
}


@pytest.mark.parametrize(
    ("terminating", "candidate", "victims"),
    [
        # zone A counts 2 (t skipped); removing t makes it 1: skew 1 + 1 - 0 <= 2.
        pytest.param(True, "n1", ["t"], id="terminating-victim-lowers-the-count"),
        # zone A counts 3; removing t makes it 2: skew 2 + 1 - 0 > 2 everywhere.
        pytest.param(False, "", [], id="running-victim"),
    ],
)
def test_a_spread_victims_removal_counts_as_go_counts_it(
    terminating: bool, candidate: str, victims: list[str]
) -> None:
    t = pod("t", cpu="1", node_name="n1", priority=0, labels={"app": "x"})
    if terminating:
        t["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    snap = snap_of(
        [
            node("n1", cpu="1", labels={"zone": "A"}),
            node("n2", cpu="2", labels={"zone": "A"}),
            node("n3", cpu="1", labels={"zone": "B"}),
        ],
        [
            t,
            pod("a1", cpu="1", node_name="n2", priority=1000, labels={"app": "x"}),
            pod("a2", cpu="1", node_name="n2", priority=1000, labels={"app": "x"}),
            pod("b1", cpu="1", node_name="n3", priority=1000, labels={"app": "y"}),
        ],
    )
    incoming = parse_pod(
        pod("p", cpu="1", priority=100, labels={"app": "x"}, topologySpreadConstraints=[SPREAD_X])
    )
    result = fail(snap, incoming)
    assert result.nominating == candidate
    assert victims_of(snap, incoming, "n1")[0] == victims
    assert not snap.unedited


def test_rows_under_framework_edits_keep_their_pods_before_the_first_edit() -> None:
    snap = snap_of([node("n1", cpu="4")], [pod("a", cpu="1", node_name="n1", priority=1)])
    row, original = 0, snap.pods[0]
    a = original[next(iter(original))]
    extra = parse_pod(pod("b", cpu="1", priority=1))
    outer = snap.edit_row(row, remove=[a])
    inner = snap.edit_row(row, add=[extra])
    assert snap.unedited == {row: original}
    snap.restore_row(row, inner)
    assert snap.unedited == {row: original}
    snap.restore_row(row, outer)
    assert snap.unedited == {}
    shadow = snap.edit_row(row, remove=[a], framework=False)  # the pod's own absence
    assert snap.unedited == {}
    snap.restore_row(row, shadow)
