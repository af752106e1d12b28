from __future__ import annotations

import random
from typing import Any

import pytest

from podium.framework.cycle import Scheduler, num_feasible_nodes_to_find
from podium.kube.objects import parse_node, parse_pod
from podium.policy import build_profile
from podium.state.cache import Cache
from podium.state.snapshot import Snapshot
from tests.unit.builders import node, pod

# A custom profile: it opts in to NodeConditions, which kube-scheduler's default lacks.
CORE = {
    "filters": [
        {"name": n}
        for n in (
            "NodeName",
            "NodeUnschedulable",
            "TaintToleration",
            "NodeConditions",
            "NodeResourcesFit",
        )
    ],
    "scores": [
        {"name": "TaintToleration", "weight": 3},
        {"name": "NodeResourcesFit", "weight": 1},
        {"name": "NodeResourcesBalancedAllocation", "weight": 1},
    ],
}


@pytest.mark.parametrize(
    ("pct", "total", "expected"),
    [
        (0, 50, 50),
        (0, 100, 100),
        (0, 1000, 420),
        (0, 5000, 500),
        (0, 6000, 300),
        (30, 1000, 300),
        (5, 1000, 100),
        (100, 7000, 7000),
    ],
)
def test_num_feasible_nodes_to_find(pct: int, total: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(pct, total) == expected


def _snapshot(nodes: list[dict[str, Any]], pods: list[dict[str, Any]] = ()) -> Snapshot:  # type: ignore[assignment]
    cache = Cache()
    for body in nodes:
        cache.add_node(parse_node(body))
    for body in pods:
        cache.add_pod(parse_pod(body))
    snap = Snapshot()
    snap.update(cache)
    return snap


NOSCHED = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
CASES = [
    pytest.param(
        [node("small1", cpu="1"), node("small2", cpu="1"), node("big", cpu="8")],
        pod("p", cpu="2"),
        "big",
        None,
        id="only-feasible-node",
    ),
    pytest.param(
        [node("a", cpu="1"), node("b", cpu="1", taints=NOSCHED), node("c", unschedulable=True)],
        pod("p", cpu="2"),
        "",
        "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s), "
        "1 node(s) were unschedulable. preemption: 0/3 nodes are available: "
        "3 Preemption is not helpful for scheduling.",
        id="three-reasons-sorted",
    ),
    pytest.param(
        [node(f"n{i}", cpu="1", memory="1Gi") for i in range(10)]
        + [node("t", cpu="1", taints=NOSCHED)],
        pod("p", cpu="2", memory="2Gi"),
        "",
        "0/11 nodes are available: 1 node(s) had untolerated taint(s), 10 Insufficient cpu, "
        "10 Insufficient memory. preemption: 0/11 nodes are available: "
        "11 Preemption is not helpful for scheduling.",
        id="lexicographic-not-numeric",
    ),
    pytest.param(
        [node("a", pods=0), node("b")],
        pod("p"),
        "b",
        None,
        id="pod-count-limit",
    ),
    pytest.param(
        [node("a", conditions={"Ready": "False"}), node("b", conditions={"DiskPressure": "True"})],
        pod("p"),
        "",
        "0/2 nodes are available: 1 node(s) had disk pressure, 1 node(s) were not ready. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
        id="node-conditions",
    ),
    pytest.param(
        [node("a", taints=NOSCHED), node("b", cpu="1")],
        pod("p", cpu="2", tolerations=[{"key": "dedicated", "operator": "Exists"}]),
        "a",
        None,
        id="tolerated-taint",
    ),
    pytest.param(
        [node("a", extra={"nvidia.com/gpu": "1"}), node("b")],
        pod("p", extra_requests={"nvidia.com/gpu": "1"}),
        "a",
        None,
        id="extended-resource",
    ),
]


@pytest.mark.parametrize(("nodes", "incoming", "chosen", "message"), CASES)
def test_schedule(
    nodes: list[dict[str, Any]], incoming: dict[str, Any], chosen: str, message: str | None
) -> None:
    from podium.algorithms.default_preemption import offline_message

    profile = build_profile(CORE)
    snap = _snapshot(nodes)
    info = parse_pod(incoming)
    placement = Scheduler(random.Random(1)).schedule(profile, snap, info)
    assert placement.node == chosen
    if message is not None:
        assert placement.diagnosis is not None
        placement.diagnosis.post_filter_msg = offline_message(
            profile, snap, info, placement.diagnosis, random.Random(1)
        )
        assert placement.diagnosis.message() == message


# (policy spec, the node chosen when the only other node is NotReady and untainted)
NOT_READY = [
    pytest.param({}, {"sick", "well"}, id="default-profile-like-kube-scheduler"),
    pytest.param(CORE, {"well"}, id="node-conditions-opted-in"),
]


@pytest.mark.parametrize(("spec", "allowed"), NOT_READY)
def test_node_conditions_is_opt_in(spec: dict[str, Any], allowed: set[str]) -> None:
    """kube-scheduler leaves NotReady nodes to the lifecycle controller's taint."""
    snap = _snapshot([node("sick", conditions={"Ready": "False"}), node("well")])
    placement = Scheduler(random.Random(1)).schedule(
        build_profile(spec), snap, parse_pod(pod("p", cpu="100m"))
    )
    assert placement.feasible == len(allowed)
    assert placement.node in allowed


def test_least_allocated_prefers_emptier_node() -> None:
    snap = _snapshot(
        [node("busy"), node("idle")],
        [pod("x", cpu="3", memory="24Gi", node_name="busy")],
    )
    placement = Scheduler(random.Random(0)).schedule(
        build_profile(CORE), snap, parse_pod(pod("p", cpu="100m"))
    )
    assert placement.node == "idle"


def test_most_allocated_packs() -> None:
    spec = {
        **CORE,
        "pluginArgs": {"nodeResourcesFit": {"strategy": "MostAllocated"}},
        "scores": [{"name": "NodeResourcesFit", "weight": 1}],
    }
    snap = _snapshot(
        [node("busy"), node("idle")], [pod("x", cpu="3", memory="24Gi", node_name="busy")]
    )
    placement = Scheduler(random.Random(0)).schedule(
        build_profile(spec), snap, parse_pod(pod("p", cpu="100m"))
    )
    assert placement.node == "busy"


def test_round_robin_start_advances() -> None:
    nodes = [node(f"n{i:03}") for i in range(200)]
    snap = _snapshot(nodes)
    state = Scheduler(random.Random(0))
    spec = {**CORE, "percentageOfNodesToScore": 50}
    state.schedule(build_profile(spec), snap, parse_pod(pod("p")))
    assert state.next_start == 100


@pytest.mark.parametrize(
    ("nodes", "trial", "start", "chosen", "after"),
    [
        # Six alike nodes, the trial the last three. Go walks ListNodesInPlacement() (the
        # trial's nodes) from nextStartNodeIndex % 3, so start 2 finds n5 first, and the
        # first found wins a tie; the next start is (2 + 3) % 3.
        pytest.param(6, range(3, 6), 2, "n005", 2, id="start-inside-the-trial"),
        pytest.param(6, range(3, 6), 0, "n003", 0, id="start-zero"),
        pytest.param(6, range(3, 6), 4, "n004", 1, id="start-past-the-trial-size"),
        # 300 nodes, a trial of 200: 49% of 200 is 98, so 100 feasible are found, from the
        # trial's 50th node (start 250 % 200): n050 first, then the next start is 150.
        pytest.param(300, range(200), 250, "n050", 150, id="window-in-a-large-trial"),
        # Every node in the trial: the whole list, as AssumePlacement's shortcut.
        pytest.param(6, range(6), 4, "n004", 4, id="trial-of-every-node"),
    ],
)
def test_a_trial_searches_its_own_nodes_from_the_start_index(
    nodes: int, trial: range, start: int, chosen: str, after: int
) -> None:
    """findNodesThatPassFilters in a pod-group trial (AssumePlacement): the nodes it walks
    and the nextStartNodeIndex it leaves are the trial's, not the cluster's."""
    snap = _snapshot([node(f"n{i:03}") for i in range(nodes)])
    state = Scheduler(random.Random(0))
    state.next_start = start
    within = frozenset(f"n{i:03}" for i in trial)
    placement = state.schedule(build_profile(CORE), snap, parse_pod(pod("p")), within=within)
    assert (placement.node, state.next_start) == (chosen, after)
