"""Workload-aware preemption (podium.framework.podgroup_preemption), table-driven.

The cases follow kube-scheduler v1.37.2's podgrouppreemption_test.go where they translate
to one-node clusters: victims by disruption mode, the reprieve order, PDBs, and Go's
messages. Every case also checks that the cache is left as it was found.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from podium.framework.cycle import Scheduler
from podium.framework.podgroup import Board
from podium.framework.podgroup_preemption import (
    FOUND,
    NO_VICTIMS,
    PREFIX,
    preempt_group,
)
from podium.framework.preemption import NEVER, select_victims_on_node
from podium.framework.queued import QueuedPod
from podium.framework.victims import Victim, domain_victims
from podium.kube.objects import PodInfo, parse_node, parse_pod
from podium.kube.pdb import Pdb, parse_pdb
from podium.policy import default_profile
from podium.state.cache import Cache
from podium.state.podgroups import PodGroup, parse_pod_group
from podium.state.snapshot import Snapshot
from tests.unit.builders import node, pod

HIGH, LOW = 1000, 100


def _group(name: str, priority: int, min_count: int, mode: str) -> PodGroup:
    return parse_pod_group(
        {
            "metadata": {"name": name, "namespace": "default", "uid": f"pg-{name}"},
            "spec": {
                "priority": priority,
                "schedulingPolicy": {"gang": {"minCount": min_count}},
                "disruptionMode": {mode: {}},
            },
        }
    )


@dataclass
class Case:
    name: str
    # (name, cpu, priority, group or "", labels, startTime) of pods bound on "n1" (2 cpu)
    running: list[tuple[str, str, int, str, dict[str, str], str]]
    victim_mode: str = "all"
    preemptor: list[str] = field(default_factory=lambda: ["1"])  # members' cpu
    policy: str = ""
    pdb: dict[str, str] | None = None
    success: bool = True
    victims: list[str] = field(default_factory=list)
    message: str = ""


T1, T2 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"

CASES = [
    Case(
        "all mode: the whole group goes",
        [("v1", "1", LOW, "victim", {}, T1), ("v2", "1", LOW, "victim", {}, T2)],
        victims=["v1", "v2"],
    ),
    Case(
        "single mode: members one by one, the later started goes",
        [("v1", "1", LOW, "victim", {}, T1), ("v2", "1", LOW, "victim", {}, T2)],
        victim_mode="single",
        victims=["v2"],
    ),
    Case(
        "plain pods: the lowest priority goes",
        [("p-low", "1", 1, "", {}, T1), ("p-mid", "1", 5, "", {}, T1)],
        victims=["p-low"],
    ),
    Case(
        "two members need the node: every victim goes, most important first",
        [("p-low", "1", 1, "", {}, T1), ("p-mid", "1", 5, "", {}, T1)],
        preemptor=["1", "1"],
        victims=["p-mid", "p-low"],
    ),
    Case(
        "a PDB-protected victim is reprieved first",
        [("p-old", "1", 1, "", {}, T1), ("p-new", "1", 1, "", {"app": "db"}, T2)],
        pdb={"app": "db"},
        victims=["p-old"],
    ),
    Case(
        "without the PDB the later started goes",
        [("p-old", "1", 1, "", {}, T1), ("p-new", "1", 1, "", {"app": "db"}, T2)],
        victims=["p-new"],
    ),
    Case(
        "no lower priority pods",
        [("p-high", "2", HIGH, "", {}, T1)],
        success=False,
        message=PREFIX + NO_VICTIMS,
    ),
    Case(
        "removing every victim is not enough",
        [("p-low", "1", 1, "", {}, T1), ("p-high", "1", HIGH, "", {}, T1)],
        preemptor=["2"],
        success=False,
        message=PREFIX + "minCount (1) cannot be satisfied: 0 scheduled, 0 remaining",
    ),
    Case(
        "preemptionPolicy Never",
        [("p-low", "2", 1, "", {}, T1)],
        policy="Never",
        success=False,
        message=PREFIX + NEVER,
    ),
]


def _running(
    name: str,
    cpu: str,
    priority: int,
    group: str,
    labels: dict[str, str],
    start: str,
    where: str = "n1",
) -> PodInfo:
    extra: dict[str, Any] = {"schedulingGroup": {"podGroupName": group}} if group else {}
    body = pod(name, cpu=cpu, node_name=where, priority=priority, labels=labels, **extra)
    body["status"] = {"phase": "Running", "startTime": start}
    return parse_pod(body)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_preempt_group(case: Case) -> None:
    cache = Cache()
    cache.add_node(parse_node(node("n1", cpu="2")))
    for spec in case.running:
        cache.add_pod(_running(*spec))
    before = {uid: (s.node, s.assumed) for uid, s in cache.pods.items()}
    groups = {
        g.key: g
        for g in (_group("victim", LOW, 2, case.victim_mode), _group("hp", HIGH, 1, "single"))
    }
    extra: dict[str, Any] = {"preemptionPolicy": case.policy} if case.policy else {}
    members = [
        QueuedPod(
            parse_pod(
                pod(
                    f"hp{i}",
                    cpu=cpu,
                    priority=HIGH,
                    schedulingGroup={"podGroupName": "hp"},
                    **extra,
                )
            )
        )
        for i, cpu in enumerate(case.preemptor)
    ]
    pdbs: list[Pdb] = []
    if case.pdb:
        spec = {"selector": {"matchLabels": case.pdb}}
        budget = parse_pdb({"metadata": {"name": "db", "namespace": "default"}, "spec": spec})
        assert budget is not None
        pdbs.append(budget)
    snapshot = Snapshot()
    snapshot.update(cache)
    board = Board(Scheduler(random.Random(0)), cache, snapshot)
    result = preempt_group(
        board, default_profile(), groups["default/hp"], members, [], groups, pdbs
    )
    assert result.success == case.success, result.message
    assert [v.name for v in result.victims] == case.victims
    if case.success:
        assert result.message == PREFIX + FOUND.format(len(case.victims))
        assert result.nominations == {m.pod.uid: "n1" for m in members}
    else:
        assert result.message == case.message
        assert not result.nominations
    assert {uid: (s.node, s.assumed) for uid, s in cache.pods.items()} == before


def test_all_mode_group_is_one_victim_across_nodes() -> None:
    """searchCrossNodesVictimPods: an All group's pods on two nodes are one unit."""
    cache = Cache()
    for name in ("n1", "n2"):
        cache.add_node(parse_node(node(name, cpu="2")))
    for name, where in (("v1", "n1"), ("v2", "n2")):
        body = pod(name, cpu="1", node_name=where, priority=LOW)
        body["spec"]["schedulingGroup"] = {"podGroupName": "victim"}
        cache.add_pod(parse_pod(body))
    cache.add_pod(parse_pod(pod("plain", cpu="1", node_name="n1", priority=1)))
    snapshot = Snapshot()
    snapshot.update(cache)
    for mode, expected in (
        ("all", [["v1", "v2"], ["plain"]]),
        ("single", [["v1"], ["plain"], ["v2"]]),
    ):
        groups = {"default/victim": _group("victim", LOW, 2, mode)}
        victims: list[Victim] = domain_victims(snapshot, groups)
        assert sorted(sorted(p.name for p in v.pods) for v in victims) == sorted(expected)
        assert all(v.group == (v.pods[0].name != "plain") for v in victims)


@pytest.mark.parametrize(
    ("mode", "victims"),
    [("all", ["v1", "v2"]), ("single", ["v2"])],
    ids=["all: the whole group, its pod on the other node too", "single: one member"],
)
def test_single_pod_preemptor_respects_disruption_mode(mode: str, victims: list[str]) -> None:
    """SelectVictimsOnNode with DomainVictims: a pod evicts an All group only whole."""
    cache = Cache()
    for name in ("n1", "n2"):
        cache.add_node(parse_node(node(name, cpu="1")))
    for name, where, start in (("v1", "n2", T1), ("v2", "n1", T2)):
        cache.add_pod(_running(name, "1", LOW, "victim", {}, start, where))
    snapshot = Snapshot()
    snapshot.update(cache)
    groups = {"default/victim": _group("victim", LOW, 2, mode)}
    preemptor = parse_pod(pod("p", cpu="1", priority=HIGH))
    chosen, violations, status = select_victims_on_node(
        default_profile(), snapshot, preemptor, snapshot.index["n1"], groups=groups
    )
    assert status.fits and violations == 0
    assert sorted(p.name for p in chosen) == victims
