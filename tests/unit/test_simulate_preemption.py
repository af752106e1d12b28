"""``podium simulate`` preempts as the live scheduler's DefaultPreemption: pods and
PodGroups that fit nowhere evict lower-priority pods, within PodDisruptionBudgets where
they can, and the evictions are reported."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from podium.cli import main
from podium.kube.objects import parse_node, parse_pod
from podium.kube.pdb import Pdb, parse_pdb
from podium.policy import default_profile
from podium.tools.simulation import simulate
from tests.unit.builders import node, pod

INSUFFICIENT = "0/1 nodes are available: 1 Insufficient cpu."
# On the second node of the victim-group cases: the preemptor can use only the first.
TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def _group(
    name: str, min_count: int, priority: int, disruption_all: bool = False
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulingPolicy": {"gang": {"minCount": min_count}},
        "priority": priority,
    }
    if disruption_all:
        spec["disruptionMode"] = {"all": {}}
    return {
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "generation": 1},
        "spec": spec,
    }


def _pdb(name: str, app: str, allowed: int) -> dict[str, Any]:
    return {
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": app}}},
        "status": {"disruptionsAllowed": allowed},
    }


def _member(name: str, group: str, **kw: Any) -> dict[str, Any]:
    return pod(name, schedulingGroup={"podGroupName": group}, **kw)


@dataclass
class Case:
    name: str
    nodes: list[dict[str, Any]]
    bound: list[dict[str, Any]]
    pending: list[dict[str, Any]]
    placed: dict[str, str]
    evicted: dict[str, str]  # victim -> preemptor
    failed: dict[str, str] = field(default_factory=dict)
    groups: list[dict[str, Any]] = field(default_factory=list)
    pdbs: list[dict[str, Any]] = field(default_factory=list)
    preemption: bool = True


CASES = [
    Case(
        "a higher-priority pod evicts a lower one and takes its node",
        [node("n0", cpu="2"), node("n1", cpu="1")],
        [pod("low", cpu="2", priority=0, node_name="n0")],
        [pod("high", cpu="2", priority=100)],
        {"default/high": "n0"},
        {"default/low": "default/high"},
    ),
    Case(
        "only the victims it needs go, the least important first",
        [node("n0", cpu="2")],
        [
            pod("lowest", cpu="1", priority=0, node_name="n0"),
            pod("middle", cpu="1", priority=50, node_name="n0"),
        ],
        [pod("high", cpu="1", priority=100)],
        {"default/high": "n0"},
        {"default/lowest": "default/high"},
    ),
    Case(
        "an equal priority is no victim",
        [node("n0", cpu="1")],
        [pod("peer", cpu="1", priority=100, node_name="n0")],
        [pod("high", cpu="1", priority=100)],
        {},
        {},
        failed={
            "default/high": f"{INSUFFICIENT} preemption: 0/1 nodes are available: "
            "1 No preemption victims found for incoming pod."
        },
    ),
    Case(
        "preemptionPolicy Never evicts nothing",
        [node("n0", cpu="1")],
        [pod("low", cpu="1", priority=0, node_name="n0")],
        [pod("high", cpu="1", priority=100, preemptionPolicy="Never")],
        {},
        {},
        failed={
            "default/high": f"{INSUFFICIENT} preemption: not eligible due to "
            "preemptionPolicy=Never."
        },
    ),
    Case(
        "a profile without preemption evicts nothing and says nothing of it",
        [node("n0", cpu="1")],
        [pod("low", cpu="1", priority=0, node_name="n0")],
        [pod("high", cpu="1", priority=100)],
        {},
        {},
        failed={"default/high": INSUFFICIENT},
        preemption=False,
    ),
    Case(
        "a budget with no disruption left steers the preemptor to the other node",
        [node("n0", cpu="2"), node("n1", cpu="2")],
        [
            pod("guarded", cpu="2", priority=0, node_name="n0", labels={"app": "a"}),
            pod("free", cpu="2", priority=0, node_name="n1", labels={"app": "b"}),
        ],
        [pod("high", cpu="2", priority=100)],
        {"default/high": "n1"},
        {"default/free": "default/high"},
        pdbs=[_pdb("guard", "a", 0)],
    ),
    Case(
        "a budget is spent by the first eviction, so the second evicts a higher priority",
        [node("n0", cpu="2"), node("n1", cpu="2"), node("n2", cpu="2")],
        [
            pod("a0", cpu="2", priority=0, node_name="n0", labels={"app": "a"}),
            pod("a1", cpu="2", priority=1, node_name="n1", labels={"app": "a"}),
            pod("b2", cpu="2", priority=5, node_name="n2", labels={"app": "b"}),
        ],
        [
            pod("h0", cpu="2", priority=100, created="2026-01-01T00:00:00Z"),
            pod("h1", cpu="2", priority=100, created="2026-01-01T00:00:01Z"),
        ],
        {"default/h0": "n0", "default/h1": "n2"},
        {"default/a0": "default/h0", "default/b2": "default/h1"},
        pdbs=[_pdb("one-of-a", "a", 1)],
    ),
    Case(
        "a gang evicts as a unit and each member lands where it was nominated",
        [node("n0", cpu="2"), node("n1", cpu="2")],
        [
            pod("low0", cpu="2", priority=0, node_name="n0"),
            pod("low1", cpu="2", priority=0, node_name="n1"),
        ],
        [_member(f"m{i}", "g", cpu="2", priority=100) for i in range(2)],
        {"default/m0": "n0", "default/m1": "n1"},
        {"default/low0": "podgroup default/g", "default/low1": "podgroup default/g"},
        groups=[_group("g", 2, 100)],
    ),
    Case(
        "a victim group in disruption mode All goes whole for one plain pod",
        [node("n0", cpu="2"), node("n1", cpu="2", taints=[TAINT])],
        [
            _member("v0", "victims", cpu="2", priority=0, node_name="n0"),
            _member("v1", "victims", cpu="2", priority=0, node_name="n1"),
        ],
        [pod("high", cpu="2", priority=100)],
        {"default/high": "n0"},
        {"default/v0": "default/high", "default/v1": "default/high"},
        groups=[_group("victims", 2, 0, disruption_all=True)],
    ),
    Case(
        "a victim group in disruption mode Single loses one member",
        [node("n0", cpu="2"), node("n1", cpu="2", taints=[TAINT])],
        [
            _member("v0", "victims", cpu="2", priority=0, node_name="n0"),
            _member("v1", "victims", cpu="2", priority=0, node_name="n1"),
        ],
        [pod("high", cpu="2", priority=100)],
        {"default/high": "n0"},
        {"default/v0": "default/high"},
        groups=[_group("victims", 2, 0)],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_simulate_preempts_as_the_live_scheduler(case: Case) -> None:
    profile = replace(default_profile("podium"), preemption=case.preemption)
    result = simulate(
        profile,
        [parse_node(n) for n in case.nodes],
        [parse_pod(p) for p in case.bound],
        [parse_pod(p) for p in case.pending],
        pod_groups=case.groups,
        pdbs=[b for b in (parse_pdb(body) for body in case.pdbs) if isinstance(b, Pdb)],
    )
    assert {p.pod: p.node for p in result.placements} == case.placed
    assert {e.pod: e.preemptor for e in result.evicted} == case.evicted
    assert {f.pod: f.message for f in result.unschedulable} == case.failed
    assert result.metrics()["pods_evicted"] == len(case.evicted)
    # A victim's room went to its preemptor: no node holds more than it has.
    requested = result.snapshot.requested[:, result.snapshot.resource_index["cpu"]]
    allocatable = result.snapshot.allocatable[:, result.snapshot.resource_index["cpu"]]
    assert (requested <= allocatable).all()
    held = {p.key for s in result.snapshot.pods for p in s.values()}
    assert not held & set(case.evicted)


def test_the_command_reads_budgets_and_lists_the_evicted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A snapshot file's PodDisruptionBudgets are read; the table and -o json both name
    each evicted pod, its node, priority and preemptor."""
    (case,) = [c for c in CASES if c.name.startswith("a budget with no disruption")]
    items = (
        [{"apiVersion": "v1", "kind": "Node", **n} for n in case.nodes]
        + [{"apiVersion": "v1", "kind": "Pod", **p} for p in [*case.bound, *case.pending]]
        + [{"apiVersion": "policy/v1", **b} for b in case.pdbs]
    )
    path = tmp_path / "snapshot.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    assert main(["simulate", "--snapshot", str(path), "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["evicted"] == [
        {"pod": "default/free", "node": "n1", "priority": 0, "preemptor": "default/high"}
    ]
    assert out["metrics"]["pods_evicted"] == 1
    assert main(["simulate", "--snapshot", str(path)]) == 0
    table = capsys.readouterr().out
    assert "evicted 1." in table
    assert "EVICTED BY PREEMPTION (1)" in table
    row = next(line for line in table.splitlines() if line.startswith("default/free"))
    assert row.split() == ["default/free", "n1", "0", "default/high"]
