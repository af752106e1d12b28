"""Random gang states for differential runs against kube-scheduler (GenericWorkload on).

A scenario is 2-4 nodes, pods already bound to them (the existing load) and one
PodGroup with members: gang (minCount 1-5) or basic policy, fewer members than
minCount, exactly as many, or more, one cpu request for all members, sized so that
the gang sometimes fits, sometimes only in part. Sometimes the PodGroup is created
only after its members (the missing group), and sometimes more members arrive after
the first decision (late members). Now and then the members' priority differs from
the PodGroup's, which kube-scheduler rejects as a SchedulerError. Scenarios are pure
data made from a seed, so a disagreement can be replayed exactly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from podium.kube.manifests import make_node, make_pod

SIDE = "podium.dev/gang-side"
RACK = "example.com/rack"
CPUS = (2, 4, 8)
REQUESTS_M = (250, 500, 1000, 1500, 2000, 3000)


@dataclass
class GangScenario:
    seed: int
    node_cpus: list[int] = field(default_factory=list)
    # (node index, millicpu) of each bound pod.
    load: list[tuple[int, int]] = field(default_factory=list)
    min_count: int | None = None  # None: the basic policy
    members: int = 1
    late: int = 0
    request_m: int = 1000
    group_missing: bool = False
    # Members' spec.priority; the PodGroup has none (0), so any other value is invalid.
    priority: int | None = None
    # For the topology-aware family: each node's rack, and whether the group has the key.
    racks: list[int] = field(default_factory=list)
    topology: bool = False

    def nodes(self, prefix: str) -> list[dict[str, Any]]:
        return [
            make_node(
                f"{prefix}-n{i}",
                cpu=str(cpu),
                labels={SIDE: prefix, **({RACK: f"r{self.racks[i]}"} if self.racks else {})},
            )
            for i, cpu in enumerate(self.node_cpus)
        ]

    def bound(self, prefix: str, scheduler: str) -> list[dict[str, Any]]:
        out = []
        for i, (node, milli) in enumerate(self.load):
            body = make_pod(f"{prefix}-load{i}", cpu=f"{milli}m", scheduler_name=scheduler)
            body["spec"]["nodeName"] = f"{prefix}-n{node}"
            out.append(body)
        return out


def generate(seed: int, topology: bool = False) -> GangScenario:
    """A scenario; with ``topology`` the nodes sit in 1-3 racks and the PodGroup usually
    asks for one rack."""
    rng = random.Random(seed)
    scenario = GangScenario(seed)
    scenario.node_cpus = [rng.choice(CPUS) for _ in range(rng.randint(2, 4 + 2 * topology))]
    if topology:
        racks = rng.randint(1, 3)
        scenario.racks = [rng.randrange(racks) for _ in scenario.node_cpus]
        scenario.topology = rng.random() < 0.8
    for index, cpu in enumerate(scenario.node_cpus):
        free = cpu * 1000
        for _ in range(rng.randint(0, 2)):
            milli = rng.choice((500, 1000, 1500, 2000))
            if milli <= free:
                scenario.load.append((index, milli))
                free -= milli
    scenario.min_count = None if rng.random() < 0.15 else rng.randint(1, 5)
    base = scenario.min_count or 1
    scenario.members = max(1, base + rng.choice((-1, 0, 0, 0, 1, 2)))
    scenario.late = rng.choice((0, 0, 0, 1, 2))
    scenario.request_m = rng.choice(REQUESTS_M)
    scenario.group_missing = rng.random() < 0.15
    scenario.priority = 10 if rng.random() < 0.08 else None
    return scenario


LOW, HIGH = 100, 1000


@dataclass
class GroupPreemptionScenario:
    """One node: a low-priority PodGroup (disruptionMode All or Single) and plain pods bound
    to it, then a high-priority PodGroup (or plain pod) whose every member is too big for
    the room left, so it fits only by preempting, or not at all.

    One node per side keeps the placement unique, so victims can be compared exactly;
    distinct start times keep the reprieve order (MoreImportantVictim) deterministic.
    """

    seed: int
    node_cpu: int = 4
    mode: str = "all"
    victim_min_count: int = 2
    # millicpu of each bound victim-group member, then of each plain pod with its priority.
    victim_members: list[int] = field(default_factory=list)
    plain: list[tuple[int, int]] = field(default_factory=list)
    preemptor_group: bool = True
    preemptor_min_count: int = 1
    preemptor_members: list[int] = field(default_factory=list)


def generate_group_preemption(seed: int) -> GroupPreemptionScenario:
    rng = random.Random(seed)
    scenario = GroupPreemptionScenario(seed)
    scenario.node_cpu = rng.choice((2, 3, 4))
    scenario.mode = rng.choice(("all", "single"))
    free = scenario.node_cpu * 1000
    for _ in range(rng.randint(1, 3)):
        milli = rng.choice((500, 1000))
        if milli <= free:
            scenario.victim_members.append(milli)
            free -= milli
    scenario.victim_min_count = rng.randint(1, len(scenario.victim_members))
    for _ in range(rng.randint(0, 2)):
        milli = rng.choice((500, 1000))
        if milli <= free:
            scenario.plain.append((milli, rng.choice((1, 50, LOW, 2000))))
            free -= milli
    scenario.preemptor_group = rng.random() < 0.85
    count = rng.randint(1, 2) if scenario.preemptor_group else 1
    # Each member alone is too big for the free room: the first cycle places no member,
    # so the group fits only by preempting (or not at all).
    sizes = [m for m in (500, 1000, 1500, 2000) if m > free] or [free + 500]
    scenario.preemptor_members = [rng.choice(sizes) for _ in range(count)]
    scenario.preemptor_min_count = rng.randint(1, count)
    return scenario


@dataclass
class SharedClaimScenario:
    """2-3 nodes of distinct sizes (so that kube-scheduler's scores seldom tie) with 0-3
    devices each; a gang of 2-4 members that all name one claim for a device (last in
    each pod's claims), some also a claim of their own. The shared claim pins every member
    to the node of its device, so cpu or devices there often run out and the gang does
    not fit. Members that do not fit leave nothing held.
    """

    seed: int
    node_cpus: list[int] = field(default_factory=list)
    node_devices: list[int] = field(default_factory=list)
    # millicpu of each member, and whether it also has a claim of its own.
    members: list[tuple[int, bool]] = field(default_factory=list)
    min_count: int = 2


def generate_shared_claims(seed: int) -> SharedClaimScenario:
    rng = random.Random(seed)
    scenario = SharedClaimScenario(seed)
    count = rng.randint(2, 3)
    scenario.node_cpus = rng.sample((2, 3, 4, 6), count)
    scenario.node_devices = [rng.randint(0, 3) for _ in range(count)]
    if not any(scenario.node_devices):
        scenario.node_devices[0] = 1
    size = rng.randint(2, 4)
    scenario.members = [(rng.choice((500, 1000, 1500)), rng.random() < 0.4) for _ in range(size)]
    scenario.min_count = rng.randint(max(1, size - 1), size)
    return scenario


@dataclass
class VolumeGangScenario:
    """2-3 nodes of distinct sizes (so that kube-scheduler's scores seldom tie: its pick
    among tied nodes is random, and decides which PVs are left for the later members)
    with 0-2 local PVs each (WaitForFirstConsumer, no provisioner, all of one size); a
    gang of 2-4 members, each with a claim of its own or, now and then, the claim of an
    earlier member. Each PV reaches one node, so the members spread over the nodes
    with a free PV (those sharing a claim over its PV's node), and the gang does not fit
    when PVs, or cpu where the PVs are, run out.
    """

    seed: int
    node_cpus: list[int] = field(default_factory=list)
    node_pvs: list[int] = field(default_factory=list)
    members: list[int] = field(default_factory=list)  # millicpu of each member
    claims: list[int] = field(default_factory=list)  # the claim (index) of each member
    min_count: int = 2


def generate_volume_gangs(seed: int) -> VolumeGangScenario:
    rng = random.Random(seed)
    scenario = VolumeGangScenario(seed)
    count = rng.randint(2, 3)
    scenario.node_cpus = rng.sample((2, 3, 4, 6), count)
    scenario.node_pvs = [rng.randint(0, 2) for _ in range(count)]
    size = rng.randint(2, 4)
    scenario.members = [rng.choice((500, 1000, 1500)) for _ in range(size)]
    scenario.claims = [rng.randrange(i) if i and rng.random() < 0.3 else i for i in range(size)]
    scenario.min_count = rng.randint(max(1, size - 1), size)
    return scenario


@dataclass
class BatchGangScenario:
    """Empty nodes and one gang of equal members, minCount all of them, in a profile where
    opportunistic batching fires: its members share one pod-group cycle, so each may take
    the hint the member before it left. The gang is sometimes too big for the nodes.

    The nodes are empty and of two sizes, so nodes that tie on score are alike and the
    hints a burst of members takes do not depend on how either scheduler broke a tie.
    """

    seed: int
    node_cpus: list[int] = field(default_factory=list)
    members: int = 2
    request_m: int = 1000

    def nodes(self, prefix: str) -> list[dict[str, Any]]:
        return [
            make_node(f"{prefix}-n{i}", cpu=str(cpu), labels={SIDE: prefix})
            for i, cpu in enumerate(self.node_cpus)
        ]


def generate_batch_gang(seed: int) -> BatchGangScenario:
    rng = random.Random(seed)
    scenario = BatchGangScenario(seed)
    sizes = rng.sample(CPUS, 2)
    scenario.node_cpus = [rng.choice(sizes) for _ in range(rng.randint(2, 6))]
    scenario.members = rng.randint(2, 7)
    scenario.request_m = rng.choice((600, 1000, 1500, 2500))
    return scenario
