"""The pod-group cycle on an in-memory scheduler: who binds, the pods' messages, and the
PodGroup condition, against what kube-scheduler v1.37.2 (GenericWorkload on) gives."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from podium.algorithms.gang_scheduling import NAME as GANG
from podium.algorithms.gang_scheduling import GangScheduling
from podium.framework.extension import Status
from podium.framework.plugin import PluginError
from podium.framework.podgroup import MIN_COUNT_WAIT, NO_VICTIMS
from podium.kube.objects import PodInfo
from podium.policy import build_profile, default_profile
from podium.scheduling.binder import Binder, BindOutcome, status_patch
from podium.scheduling.nominator import Nominator
from podium.scheduling.podgroup_cycle import merged_conditions
from podium.scheduling.scheduler import PodiumScheduler
from podium.state.podgroups import PodGroup, parse_pod_group
from tests.unit.builders import node, pod

EARLIER = "2025-01-01T00:00:00Z"  # members are tried oldest first
INSUFFICIENT = "0/2 nodes are available: 2 Insufficient cpu."
GROUP_ERROR = "pod group is unschedulable"
SHORT = "minCount (3) cannot be satisfied: 0 scheduled, 2 remaining"  # never evaluated: no prefix
TWO_OF_THREE = "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining"


class _Client:
    def __init__(self) -> None:
        self.patches: list[tuple[str, Any]] = []

    async def patch(self, path: str, body: Any, kind: str = "") -> Any:
        self.patches.append((path, body))
        return {}


@dataclass
class _Binder:
    client: _Client = field(default_factory=_Client)
    instance: str = "test"
    bound: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    resolve_backoff: float = 0.2
    resolve_max_backoff: float = 0.5
    # Bindings of these pods answer RETRY this many times before they apply.
    refusals: dict[str, int] = field(default_factory=dict)
    posts: list[str] = field(default_factory=list)
    # Bindings wait for it when set: the test runs other cycles meanwhile.
    gate: asyncio.Event | None = None
    # The nominatedNodeName each failure report would write (None: null), by pod name.
    nomination_writes: dict[str, str | None] = field(default_factory=dict)

    async def bind(self, p: PodInfo, n: str) -> tuple[BindOutcome, str]:
        if self.gate is not None:
            await self.gate.wait()
        self.posts.append(p.name)
        if self.refusals.get(p.name, 0) > 0:
            self.refusals[p.name] -= 1
            return BindOutcome.RETRY, "connection reset"
        self.bound[p.name] = n
        return BindOutcome.BOUND, ""

    async def set_condition(
        self, p: PodInfo, reason: str, message: str, nominator: Nominator | None = None
    ) -> None:
        self.messages[p.name] = message
        patch = status_patch(p, reason, message, nominator.node_of(p.uid) if nominator else None)
        if patch is not None and "nominatedNodeName" in patch["status"]:
            self.nomination_writes[p.name] = patch["status"]["nominatedNodeName"]

    async def event(self, *args: Any, **kwargs: Any) -> None:
        return None


def _group(
    name: str, min_count: int | None, conditions: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    policy: dict[str, Any] = (
        {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    )
    return {
        "metadata": {"name": name, "namespace": "default", "generation": 1, "resourceVersion": "1"},
        "spec": {"schedulingPolicy": policy},
        "status": {"conditions": conditions or []},
    }


def _member(name: str, cpu: str, group: str = "g", **extra: Any) -> dict[str, Any]:
    return pod(name, cpu=cpu, schedulingGroup={"podGroupName": group}, **extra)


SCHEDULED = [
    {
        "type": "PodGroupInitiallyScheduled",
        "status": "True",
        "reason": "Scheduled",
        "message": "",
        "observedGeneration": 1,
    }
]


@dataclass(frozen=True)
class Case:
    id: str
    group: dict[str, Any] | None
    members: list[dict[str, Any]]
    bound: set[str]
    messages: dict[str, str]  # pending member -> PodScheduled=False message
    condition: tuple[str, str] | None  # (status, message) written, None: no write
    preemption: bool = True
    waiting: bool = False  # the members wait silently (PreEnqueue)


CASES = [
    Case(
        "two-of-three-fit",
        _group("g", 3),
        [_member(f"m{i}", "3") for i in range(3)],
        set(),
        {
            "m0": f"{GROUP_ERROR}, {TWO_OF_THREE}, {NO_VICTIMS}",
            "m1": f"{GROUP_ERROR}, {TWO_OF_THREE}, {NO_VICTIMS}",
            "m2": INSUFFICIENT,
        },
        ("False", f"minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, {NO_VICTIMS}"),
    ),
    Case(
        "no-preemption-leaves-an-empty-reason",
        _group("g", 3),
        [_member(f"m{i}", "3") for i in range(3)],
        set(),
        {
            "m0": f"{GROUP_ERROR}, minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, ",
            "m1": f"{GROUP_ERROR}, minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, ",
            "m2": INSUFFICIENT,
        },
        ("False", "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, "),
        preemption=False,
    ),
    Case(
        "gang-fits",
        _group("g", 2),
        [_member(f"m{i}", "1") for i in range(2)],
        {"m0", "m1"},
        {},
        ("True", ""),
    ),
    Case(
        "min-count-met-extra-member-fails",
        _group("g", 2),
        [_member(f"m{i}", "3") for i in range(3)],
        {"m0", "m1"},
        {"m2": INSUFFICIENT},
        ("True", ""),
    ),
    Case(
        "first-member-fails-early-stop",
        _group("g", 2),
        [_member("m0", "9", created=EARLIER), _member("m1", "1"), _member("m2", "1")],
        {"m1", "m2"},
        {"m0": INSUFFICIENT},
        ("True", ""),
    ),
    Case(
        "a-failure-that-breaks-min-count-ends-the-cycle",
        _group("g", 3),
        [_member("m0", "9", created=EARLIER), _member("m1", "1"), _member("m2", "1")],
        set(),
        {"m0": INSUFFICIENT, "m1": SHORT, "m2": SHORT},
        ("False", f"{SHORT}, {NO_VICTIMS}"),
    ),
    Case(
        "basic-group-is-a-group-of-one",
        _group("g", None),
        [_member(f"m{i}", "5") for i in range(2)],
        set(),
        {"m0": INSUFFICIENT, "m1": INSUFFICIENT},
        ("False", f"minCount (1) cannot be satisfied: 0 scheduled, 0 remaining, {NO_VICTIMS}"),
    ),
    Case(
        "gated-member-leaves-the-cycle-short",
        _group("g", 3),
        [
            _member("m0", "1"),
            _member("m1", "1"),
            _member("m2", "1", schedulingGates=[{"name": "x"}]),
        ],
        set(),
        {
            "m0": f"{GROUP_ERROR}, minCount (3) cannot be satisfied: 0 scheduled, 2 remaining",
            "m1": f"{GROUP_ERROR}, minCount (3) cannot be satisfied: 0 scheduled, 2 remaining",
        },
        (
            "False",
            f"{GROUP_ERROR}, {SHORT}, {NO_VICTIMS}",
        ),
    ),
    Case(
        "late-member-joins-a-scheduled-gang",
        _group("g", 2, SCHEDULED),
        [
            _member("b0", "1", node_name="n0"),
            _member("b1", "1", node_name="n1"),
            _member("m0", "1"),
        ],
        {"m0"},
        {},
        None,  # already True: nothing to write
    ),
    Case(
        "late-member-that-fits-nowhere-keeps-the-condition-true",
        _group("g", 2, SCHEDULED),
        [
            _member("b0", "1", node_name="n0"),
            _member("b1", "1", node_name="n1"),
            _member("m0", "9"),
        ],
        set(),
        {"m0": INSUFFICIENT},
        None,
    ),
    Case(
        "fewer-than-min-count-wait",
        _group("g", 3),
        [_member(f"m{i}", "1") for i in range(2)],
        set(),
        {},
        None,
        waiting=True,
    ),
    Case(
        "missing-group-waits",
        None,
        [_member(f"m{i}", "1") for i in range(2)],
        set(),
        {},
        None,
        waiting=True,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_pod_group_cycle(case: Case) -> None:
    binder = _Binder()
    profile = default_profile("podium")
    profile.preemption = case.preemption
    sched = PodiumScheduler(cast(Binder, binder), {"podium": profile})
    sched.pod_groups.served = True
    for name in ("n0", "n1"):
        sched.on_node("ADDED", node(name, cpu="4"))
    if case.group is not None:
        sched.on_pod_group("podgroups", "ADDED", case.group)
    for body in case.members:
        sched.on_pod("ADDED", body)
    pre_bound = {b["metadata"]["name"] for b in case.members if b["spec"].get("nodeName")}
    if case.waiting:
        assert not sched.queue.ready()  # PreEnqueue held every member as it was added
    else:
        sched.schedule_one(await asyncio.wait_for(sched.queue.pop(), 1))
    await sched.settle()

    assert set(binder.bound) == case.bound
    assert binder.messages == case.messages
    if case.waiting:
        pending = [e for e in sched.queue.entries.values() if e.pod.name not in pre_bound]
        assert pending and all((e.where, e.rejected_by) == ("gated", {GANG}) for e in pending)
    written = [body["status"]["conditions"][-1] for _, body in binder.client.patches]
    if case.condition is None:
        assert written == []
    else:
        (cond,) = written
        assert (cond["type"], cond["status"], cond["message"]) == (
            "PodGroupInitiallyScheduled",
            *case.condition,
        )
        assert cond["reason"] == ("Scheduled" if case.condition[0] == "True" else "Unschedulable")
        assert cond["observedGeneration"] == 1
    # No partial gang: either the whole quorum is assumed or bound, or no member is.
    placed = len(case.bound) + len(pre_bound)
    group = sched.pod_groups.get("default", "g")
    if group is not None and group.gang and not case.waiting:
        assert placed == 0 or placed >= group.required
    assert all(state.pod.name in case.bound | pre_bound for state in sched.cache.pods.values())


@pytest.mark.parametrize(
    ("names", "created", "earlier_attempt", "bound", "left"),
    [
        # Created in one second: the queue's order (the watch's), not the names'.
        (["z", "y", "x"], ["2026-01-01T00:00:00Z"] * 3, None, {"z", "y"}, "x"),
        # A member with an earlier attempt goes before those without, whatever its age.
        (
            ["m0", "m1", "m2"],
            ["2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"],
            "m2",
            {"m2", "m0"},
            "m1",
        ),
        # Otherwise the oldest first, as created and queued.
        (["a", "b", "c"], ["2026-01-01T00:00:00Z"] * 3, None, {"a", "b"}, "c"),
    ],
    ids=["same-second-queue-order", "more-attempts-first", "queue-order"],
)
async def test_members_are_tried_in_kube_schedulers_order(
    names: list[str],
    created: list[str],
    earlier_attempt: str | None,
    bound: set[str],
    left: str,
) -> None:
    """PodGroupMemberPodsOrderingFunc: room for two of three 3-cpu members, one per node,
    so the member tried last is the one left out."""
    binder = _Binder()
    sched = PodiumScheduler(cast(Binder, binder), {"podium": default_profile("podium")})
    sched.pod_groups.served = True
    for name in ("n0", "n1"):
        sched.on_node("ADDED", node(name, cpu="4"))
    sched.on_pod_group("podgroups", "ADDED", _group("g", 2))
    for name, when in zip(names, created, strict=True):
        sched.on_pod("ADDED", _member(name, "3", created=when))
    if earlier_attempt is not None:
        (entry,) = [e for e in sched.queue.entries.values() if e.pod.name == earlier_attempt]
        entry.attempts = 1
    sched.schedule_one(await asyncio.wait_for(sched.queue.pop(), 1))
    await sched.settle()
    assert set(binder.bound) == bound
    assert binder.messages == {left: INSUFFICIENT}


def _pg(conditions: list[dict[str, Any]]) -> PodGroup:
    return parse_pod_group(_group("g", 2, conditions))


@pytest.mark.parametrize(
    ("existing", "new", "written"),
    [
        ([], ("False", "m"), True),
        (SCHEDULED, ("True", ""), False),
        ([{**SCHEDULED[0], "observedGeneration": 0}], ("True", ""), True),
        (SCHEDULED, ("False", "m"), False),  # never back from True
        (
            [
                {
                    "type": "PodGroupInitiallyScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "m",
                    "observedGeneration": 1,
                }
            ],
            ("False", "m"),
            False,
        ),
        (
            [
                {
                    "type": "PodGroupInitiallyScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "m",
                    "observedGeneration": 1,
                }
            ],
            ("True", ""),
            True,
        ),
    ],
)
def test_condition_writes_follow_set_status_condition(
    existing: list[dict[str, Any]], new: tuple[str, str], written: bool
) -> None:
    reason = "Scheduled" if new[0] == "True" else "Unschedulable"
    merged = merged_conditions(
        _pg(existing), {"status": new[0], "reason": reason, "message": new[1]}
    )
    assert (merged is not None) == written


def test_status_writes_do_not_wake_members() -> None:
    sched = PodiumScheduler(cast(Binder, _Binder()), {"podium": default_profile("podium")})
    assert sched.pod_groups.apply("podgroups", "ADDED", _group("g", 2)) is not None
    assert sched.pod_groups.apply("podgroups", "MODIFIED", _group("g", 2, SCHEDULED)) is None
    changed = _group("g", 1)
    changed["metadata"]["generation"] = 2
    assert sched.pod_groups.apply("podgroups", "MODIFIED", changed) is not None


@pytest.mark.parametrize(
    ("group", "members", "reason"),
    [
        (None, 1, 'waiting for pods\'s pod group "g" to appear in scheduling queue'),
        (_group("g", 3), 2, MIN_COUNT_WAIT),
        (_group("g", 3), 3, ""),
        (_group("g", None), 1, ""),
    ],
)
def test_pre_enqueue_messages_are_kube_schedulers(
    group: dict[str, Any] | None, members: int, reason: str
) -> None:
    sched = PodiumScheduler(cast(Binder, _Binder()), {"podium": default_profile("podium")})
    sched.pod_groups.served = True
    if group is not None:
        sched.on_pod_group("podgroups", "ADDED", group)
    for i in range(members):
        sched.on_pod("ADDED", _member(f"m{i}", "1"))
    first = next(iter(sched.queue.entries.values())).pod
    assert GangScheduling().pre_enqueue(sched.handle, first).reason == reason


async def test_a_late_member_right_after_success_never_sets_the_group_false() -> None:
    """The True condition counts from the moment it is decided, before the watch echoes it."""
    binder = _Binder()
    sched = PodiumScheduler(cast(Binder, binder), {"podium": default_profile("podium")})
    sched.pod_groups.served = True
    sched.on_node("ADDED", node("n0", cpu="4"))
    sched.on_pod_group("podgroups", "ADDED", _group("g", 2))
    for body in (_member("m0", "1"), _member("m1", "1")):
        sched.on_pod("ADDED", body)
    sched.schedule_one(await asyncio.wait_for(sched.queue.pop(), 1))
    sched.on_pod("ADDED", _member("late", "9"))
    sched.schedule_one(await asyncio.wait_for(sched.queue.pop(), 1))
    await sched.settle()
    assert set(binder.bound) == {"m0", "m1"}
    assert binder.messages == {"late": "0/1 nodes are available: 1 Insufficient cpu."}
    written = [body["status"]["conditions"][-1]["status"] for _, body in binder.client.patches]
    assert written == ["True"]


@pytest.mark.parametrize("completes", ["third-member", "group-created", "min-count-lowered"])
async def test_waiting_members_wake_when_their_group_can_start(completes: str) -> None:
    """GangScheduling's events: a new member or a new or changed PodGroup wakes the group."""
    binder = _Binder()
    sched = PodiumScheduler(cast(Binder, binder), {"podium": default_profile("podium")})
    sched.pod_groups.served = True
    sched.on_node("ADDED", node("n0", cpu="4"))
    if completes != "group-created":
        sched.on_pod_group("podgroups", "ADDED", _group("g", 3))
    members = 3 if completes == "group-created" else 2
    for i in range(members):
        sched.on_pod("ADDED", _member(f"m{i}", "1"))
    while sched.queue.ready():  # every member is tried once and waits
        sched.schedule_one(await asyncio.wait_for(sched.queue.pop(), 1))
    assert sched.queue.counts()["gated"] == members
    if completes == "third-member":
        sched.on_pod("ADDED", _member("m2", "1"))
    elif completes == "group-created":
        sched.on_pod_group("podgroups", "ADDED", _group("g", 3))
    else:
        lowered = _group("g", 2)
        lowered["metadata"]["generation"] = 2
        sched.on_pod_group("podgroups", "MODIFIED", lowered)
    woken = sched.metrics.queue_incoming.labels("active", "PodGroupAdd")._value.get()
    assert woken == members  # GangScheduling's hint, labelled as Go labels it
    sched.schedule_one(await asyncio.wait_for(sched.queue.pop(), 1))
    await sched.settle()
    assert len(binder.bound) == (2 if completes == "min-count-lowered" else 3)


PRIORITY = (
    "all pods in a single pod group should have the same priority as the pod group's "
    "priority, got 10 and 0"
)
POLICY = (
    "all pods in a single pod group should have the same preemption policy, "
    "got Never and PreemptLowerPriority"
)


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ([_member("m0", "1", priority=10), _member("m1", "1", priority=10)], PRIORITY),
        ([_member("m0", "1"), _member("m1", "1", preemptionPolicy="Never")], POLICY),
        (
            [_member("m0", "1"), _member("b0", "1", node_name="n0", priority=10)],
            PRIORITY,  # scheduled members are checked too
        ),
    ],
    ids=["priority-differs-from-the-group", "preemption-policies-differ", "scheduled-member"],
)
async def test_an_invalid_group_is_a_scheduler_error(
    members: list[dict[str, Any]], message: str
) -> None:
    binder = _Binder()
    sched = PodiumScheduler(cast(Binder, binder), {"podium": default_profile("podium")})
    sched.pod_groups.served = True
    sched.on_node("ADDED", node("n0", cpu="4"))
    sched.on_pod_group("podgroups", "ADDED", _group("g", 2))
    for body in members:
        sched.on_pod("ADDED", body)
    sched.schedule_one(await asyncio.wait_for(sched.queue.pop(), 1))
    await sched.settle()
    pending = {b["metadata"]["name"] for b in members if not b["spec"].get("nodeName")}
    assert binder.bound == {}
    assert binder.messages == dict.fromkeys(pending, message)
    (cond,) = [body["status"]["conditions"][-1] for _, body in binder.client.patches]
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "SchedulerError", message)


BOOM = 'running PreFilter plugin "NodeResourcesFit": boom'
OTHER_FAILED = f"failed to schedule other pod from a pod group: {BOOM}"
RESERVE_BOOM = 'running Reserve plugin "DynamicResources": boom'
POST_FILTER_ERROR = (
    f'error in "DefaultPreemption" PodGroupPostFilter plugins: pod group preemption: {OTHER_FAILED}'
)


@pytest.mark.parametrize(
    ("point", "erring", "taken", "messages"),
    [
        # In the cycle itself: no other member is tried, no preemption runs.
        ("pre_filter", "m0", "1", {"m0": BOOM, "m1": OTHER_FAILED}),
        ("pre_filter", "m1", "1", {"m0": OTHER_FAILED, "m1": BOOM}),
        # Reserve, as the member is assumed: worded by the Reserve runner, and forgotten.
        (
            "reserve",
            "m1",
            "1",
            {"m0": f"failed to schedule other pod from a pod group: {RESERVE_BOOM}"}
            | {"m1": RESERVE_BOOM},
        ),
        # Only in preemption's scheduling function (m1 is tried there alone): the
        # PodGroupPostFilter's Error becomes every member's status, nothing is evicted.
        ("pre_filter", "m1", "4", {"m0": POST_FILTER_ERROR, "m1": POST_FILTER_ERROR}),
    ],
    ids=["first-member", "second-member", "reserve", "in-preemption"],
)
async def test_a_members_plugin_error_fails_its_group_as_an_error(
    point: str,
    erring: str,
    taken: str,
    messages: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A member's cycle returns an Error (podGroupSchedulingDefaultAlgorithm): nothing
    stays assumed, the member that erred fails with its own error and the others with
    the group's, and the condition is a SchedulerError (submitPodGroupAlgorithmResult);
    an Error from PodGroupPostFilter is given to every member
    (applyPodGroupPostFilterResult)."""
    binder = _Binder(client=_PreemptingClient())
    profile = default_profile("podium")
    sched = PodiumScheduler(cast(Binder, binder), {"podium": profile})
    sched.pod_groups.served = True
    sched.on_node("ADDED", node("n0", cpu="4"))
    sched.on_pod("ADDED", pod("low", cpu=taken, node_name="n0", priority=0))
    group = _group("g", 2)
    group["spec"]["priority"] = 100
    sched.on_pod_group("podgroups", "ADDED", group)
    for name in ("m0", "m1"):
        sched.on_pod("ADDED", _member(name, "1", priority=100))
    (fit,) = [p for p in profile.filters if p.name == "NodeResourcesFit"]
    (dra,) = [p for p in profile.filters if p.name == "DynamicResources"]
    real_pre_filter, real_reserve = fit.pre_filter, dra.reserve

    def pre_filter(cycle: Any) -> Any:
        if cycle.pod.name == erring:
            raise PluginError(BOOM)
        return real_pre_filter(cycle)

    def reserve(handle: Any, p: PodInfo, n: str) -> Status:
        return Status("Error", "boom") if p.name == erring else real_reserve(handle, p, n)

    if point == "pre_filter":
        monkeypatch.setattr(fit, "pre_filter", pre_filter)
    else:
        monkeypatch.setattr(dra, "reserve", reserve)
    sched.schedule_one(await asyncio.wait_for(sched.queue.pop(), 1))
    await sched.settle()
    client = cast(_PreemptingClient, binder.client)
    assert binder.bound == {} and client.deleted == []
    assert binder.messages == messages
    assert [s.pod.name for s in sched.cache.pods.values()] == ["low"]
    group_message = messages["m0" if erring == "m1" else "m1"]
    written = [b["status"]["conditions"][-1] for path, b in client.patches if "podgroups" in path]
    assert [(c["status"], c["reason"], c["message"]) for c in written] == [
        ("False", "SchedulerError", group_message)
    ]


async def test_dry_run_decides_a_group_and_never_binds_or_writes() -> None:
    binder = _Binder()
    profile = default_profile("podium")
    profile.dry_run = True
    sched = PodiumScheduler(cast(Binder, binder), {"podium": profile})
    sched.pod_groups.served = True
    sched.on_node("ADDED", node("n0", cpu="4"))
    sched.on_pod_group("podgroups", "ADDED", _group("g", 2))
    for i in range(2):
        sched.on_pod("ADDED", _member(f"m{i}", "1"))
    sched.schedule_one(await asyncio.wait_for(sched.queue.pop(), 1))
    await sched.settle()
    assert binder.bound == {} and binder.client.patches == []
    assert not sched.cache.pods
    assert sched.queue.counts()["unschedulable"] == 2


RACK = "example.com/rack"


def _topology_group(min_count: int, key: str | None = RACK) -> dict[str, Any]:
    body = _group("g", min_count)
    if key is not None:
        body["spec"]["schedulingConstraints"] = {"topology": [{"key": key}]}
    return body


@pytest.mark.parametrize(
    ("group", "members", "bound_nodes", "condition"),
    [
        # Two racks of two 4-cpu nodes: 3 x 2 cpu fit in one rack, never split over both.
        (_topology_group(3), [_member(f"m{i}", "2") for i in range(3)], 1, ("True", "")),
        # 5 x 2 cpu fit in no rack (4 slots each), though they would fit across both.
        (
            _topology_group(5),
            [_member(f"m{i}", "2") for i in range(5)],
            0,
            (
                "False",
                "pod group is unschedulable, 0/2 placements are available, first placement "
                "status: minCount (5) cannot be satisfied: 4 scheduled, 0 remaining, " + NO_VICTIMS,
            ),
        ),
        # No key: one placement of every node, and Go's placement wording.
        (
            _topology_group(3, key=None),
            [_member(f"m{i}", "9") for i in range(3)],
            0,
            (
                "False",
                "pod group is unschedulable, 0/1 placements are available, first placement "
                f"status: {SHORT}, {NO_VICTIMS}",
            ),
        ),
    ],
    ids=["one-rack", "no-rack-is-big-enough", "no-key"],
)
async def test_topology_aware_placements(
    group: dict[str, Any],
    members: list[dict[str, Any]],
    bound_nodes: int,
    condition: tuple[str, str],
) -> None:
    binder = _Binder()
    profile = default_profile("podium")
    profile.topology_aware_workloads = True
    sched = PodiumScheduler(cast(Binder, binder), {"podium": profile})
    sched.pod_groups.served = True
    for i in range(4):
        sched.on_node("ADDED", node(f"n{i}", cpu="4", labels={RACK: f"r{i // 2}"}))
    sched.on_pod_group("podgroups", "ADDED", group)
    for body in members:
        sched.on_pod("ADDED", body)
    sched.schedule_one(await asyncio.wait_for(sched.queue.pop(), 1))
    await sched.settle()
    racks = {int(n[1:]) // 2 for n in binder.bound.values()}
    assert len(racks) == bound_nodes
    if bound_nodes:
        assert len(binder.bound) == len(members)
    (cond,) = [body["status"]["conditions"][-1] for _, body in binder.client.patches]
    assert (cond["status"], cond["message"]) == condition


async def test_a_cycle_that_raises_leaves_no_member_taken_or_assumed() -> None:
    binder = _Binder()
    sched = PodiumScheduler(cast(Binder, binder), {"podium": default_profile("podium")})
    sched.pod_groups.served = True
    sched.on_node("ADDED", node("n0", cpu="4"))
    sched.on_pod_group("podgroups", "ADDED", _group("g", 2))
    for name in ("m0", "m1"):
        sched.on_pod("ADDED", _member(name, "1"))
    records = 0

    def record(*args: Any, **kwargs: Any) -> None:
        nonlocal records
        records += 1
        if records == 2:  # the second member's bind cannot be prepared
            raise RuntimeError("boom")

    sched.record = record  # type: ignore[method-assign]
    entry = await asyncio.wait_for(sched.queue.pop(), 1)
    with pytest.raises(RuntimeError):
        sched.schedule_one(entry)
    await sched.settle()
    assert binder.bound == {}, "no bind starts unless every bind was prepared"
    assert not any(sched.cache.is_assumed(uid) for uid in sched.cache.pods)
    others = [e for e in sched.queue.entries.values() if e is not entry]
    assert others and all(e.where != "in_flight" for e in others)


async def test_a_trial_placement_still_sees_pods_outside_its_domain() -> None:
    """Go's AssumePlacement narrows the candidates only: a pod in another rack whose
    required anti-affinity spans the zone still keeps the gang out of the whole zone."""
    binder = _Binder()
    profile = default_profile("podium")
    profile.topology_aware_workloads = True
    sched = PodiumScheduler(cast(Binder, binder), {"podium": profile})
    sched.pod_groups.served = True
    zone = "topology.kubernetes.io/zone"
    for i in range(4):
        labels = {RACK: f"r{i // 2}", zone: "z1"}
        sched.on_node("ADDED", node(f"n{i}", cpu="4", labels=labels))
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "train"}}, "topologyKey": zone}
            ]
        }
    }
    sched.on_pod("ADDED", pod("guard", cpu="1", node_name="n2", affinity=anti))
    sched.on_pod_group("podgroups", "ADDED", _topology_group(2))
    for i in range(2):
        sched.on_pod("ADDED", _member(f"m{i}", "1", labels={"app": "train"}))
    sched.schedule_one(await asyncio.wait_for(sched.queue.pop(), 1))
    await sched.settle()
    assert binder.bound == {}
    (cond,) = [body["status"]["conditions"][-1] for _, body in binder.client.patches]
    assert cond["status"] == "False"
    assert "0/2 placements are available" in cond["message"]


class _PreemptingClient(_Client):
    def __init__(self) -> None:
        super().__init__()
        self.deleted: list[str] = []
        self.posted: list[str] = []

    async def delete(self, path: str, body: Any = None) -> Any:
        self.deleted.append(path.rpartition("/")[2])
        return {}

    async def post(self, path: str, body: Any) -> Any:
        self.posted.append(path)
        return {}


async def test_an_unschedulable_group_preempts_and_waits() -> None:
    """Workload-aware preemption in the live cycle: the victim goes, the member is
    nominated with the group's message, and the attempt is counted."""
    binder = _Binder(client=_PreemptingClient())
    sched = PodiumScheduler(cast(Binder, binder), {"podium": default_profile("podium")})
    sched.pod_groups.served = True
    sched.on_node("ADDED", node("n0", cpu="4"))
    group = _group("g", 1)
    group["spec"]["priority"] = 100
    sched.on_pod_group("podgroups", "ADDED", group)
    sched.on_pod("ADDED", pod("low", cpu="4", node_name="n0", priority=1))
    sched.on_pod("ADDED", _member("m0", "1", priority=100))
    entry = await asyncio.wait_for(sched.queue.pop(), 1)
    sched.schedule_one(entry)
    await sched.settle()

    client = cast(_PreemptingClient, binder.client)
    assert client.deleted == ["low"] and binder.bound == {}
    assert sched.nominator.node_of(entry.pod.uid) == "n0"
    assert binder.messages == {"m0": "0/1 nodes are available: 1 Insufficient cpu."}
    written = [
        body["status"]["conditions"][-1] for path, body in client.patches if "podgroups" in path
    ]
    assert written[-1]["message"] == (
        "minCount (1) cannot be satisfied: 0 scheduled, 0 remaining, pod group preemption: "
        "found a placement for podgroup, preempting 1 victims"
    )
    attempts = sched.metrics.registry.get_sample_value(
        "scheduler_workload_preemption_attempts_total", {"result": "Success"}
    )
    assert attempts == 1.0


TAINT = {"key": "only", "value": "m1", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("nodes", "nominated", "bound", "nominations", "writes"),
    [
        # m0's nomination to n0 is stale (n0 is tainted for it): assumed on n1, it must not
        # hold n0's room against m1 as well.
        (
            [node("n0", cpu="2", taints=[TAINT]), node("n1", cpu="2")],
            {"m0": "n0", "m1": "n0"},
            {"m0": "n1", "m1": "n0"},
            {},
            {},
        ),
        # Room for one: the gang fails; m0, placed then reverted, loses its nomination
        # (clearNominatedNode, null on the pod too), and m1, never placed, keeps the one
        # its status names (ModeNoop: nothing written).
        (
            [node("n0", cpu="3"), node("n1", cpu="1")],
            {"m0": "n0", "m1": "n1"},
            {},
            {"m1": "n1"},
            {"m0": None},
        ),
    ],
    ids=["nominated-elsewhere", "one-fits"],
)
async def test_an_assumed_member_drops_its_nomination(
    nodes: list[dict[str, Any]],
    nominated: dict[str, str],
    bound: dict[str, str],
    nominations: dict[str, str],
    writes: dict[str, str | None],
) -> None:
    """Go's assume deletes the member's nomination (DeleteNominatedPodIfExists): a member
    nominated by an earlier group preemption holds no room for its siblings once it is
    assumed, wherever that is."""
    binder = _Binder()
    profile = default_profile("podium")
    profile.preemption = False
    sched = PodiumScheduler(cast(Binder, binder), {"podium": profile})
    sched.pod_groups.served = True
    for body in nodes:
        sched.on_node("ADDED", body)
    group = _group("g", 2)
    group["spec"]["priority"] = 100
    sched.on_pod_group("podgroups", "ADDED", group)
    tolerations = {"m0": [], "m1": [{"key": "only", "operator": "Exists"}]}
    for name in ("m0", "m1"):
        body = _member(name, "2", priority=100, tolerations=tolerations[name])
        body["status"]["nominatedNodeName"] = nominated[name]
        sched.on_pod("ADDED", body)
    assert len(sched.nominator) == 2
    sched.schedule_one(await asyncio.wait_for(sched.queue.pop(), 1))
    await sched.settle()
    assert binder.bound == bound
    members = {e.pod.name: e.pod.uid for e in sched.queue.entries.values()}
    assert {name: sched.nominator.node_of(uid) for name, uid in members.items()} == {
        name: nominations.get(name, "") for name in members
    }
    assert binder.nomination_writes == writes


async def test_a_dry_run_gives_back_the_nominations_it_took() -> None:
    """unreserveAndForget puts back what assume removed: the main attempt and the
    preemption's scheduling function each assume m1 on n1, its nominated node, and
    revert it, so in the next placement m1 still holds n1 and m0 goes where the victim
    was. Nominated: m0 to n0 (the victim's node), m1 to n1."""
    binder = _Binder(client=_PreemptingClient())
    sched = PodiumScheduler(cast(Binder, binder), {"podium": default_profile("podium")})
    sched.pod_groups.served = True
    sched.on_node("ADDED", node("n0", cpu="2"))
    sched.on_node("ADDED", node("n1", cpu="3"))
    group = _group("g", 2)
    group["spec"]["priority"] = 100
    sched.on_pod_group("podgroups", "ADDED", group)
    sched.on_pod("ADDED", pod("low", cpu="2", node_name="n0", priority=0))
    for name in ("m0", "m1", "m2"):
        body = _member(name, "2", priority=100)
        if name == "m1":
            body["status"]["nominatedNodeName"] = "n1"
        sched.on_pod("ADDED", body)
    sched.schedule_one(await asyncio.wait_for(sched.queue.pop(), 1))
    await sched.settle()
    assert cast(_PreemptingClient, binder.client).deleted == ["low"] and binder.bound == {}
    members = {e.pod.name: e.pod.uid for e in sched.queue.entries.values()}
    assert {name: sched.nominator.node_of(uid) for name, uid in members.items()} == {
        "m0": "n0",
        "m1": "n1",
        "m2": "",
    }


async def test_members_take_batching_hints_in_the_live_cycle() -> None:
    """In a profile where opportunistic batching fires, the live pod-group cycle hands
    its members the queue's one cycle count (Go's CurrentCycle in each member's
    schedulePod): the second and third 3-cpu members take the hints the member before
    them left, and the next pod the hint the last member left."""
    binder = _Binder()
    spec = {
        "schedulerName": "podium",
        "pluginArgs": {"podTopologySpread": {"defaultingType": "List"}},
    }
    sched = PodiumScheduler(cast(Binder, binder), {"podium": build_profile(spec)})
    sched.pod_groups.served = True
    for i, cpu in enumerate(("2", "5", "4", "4", "4")):
        sched.on_node("ADDED", node(f"n{i}", cpu=cpu))
    sched.on_pod_group("podgroups", "ADDED", _group("g", 3))
    for name in ("m0", "m1", "m2"):
        sched.on_pod("ADDED", _member(name, "3", created=EARLIER))
    sched.on_pod("ADDED", pod("after", cpu="3"))
    for _ in range(2):  # the gang's cycle, then the pod's
        sched.schedule_one(await asyncio.wait_for(sched.queue.pop(), 1))
        await sched.settle()
    assert sorted(binder.bound) == ["after", "m0", "m1", "m2"]
    stats = sched.algorithm.batch_stats
    assert stats is not None
    assert {result: n for (_, result), n in stats.attempts.items()} == {
        "no_hint": 1,
        "hint_used": 3,
    }


async def test_a_member_whose_group_went_after_pre_enqueue_is_held_again() -> None:
    """PreEnqueue let the members in; the PodGroup is deleted before the pop: the popped
    member goes back through the queue, whose PreEnqueue now holds it, with no bind and
    no status written."""
    binder = _Binder()
    sched = PodiumScheduler(cast(Binder, binder), {"podium": default_profile("podium")})
    sched.pod_groups.served = True
    sched.on_node("ADDED", node("n0", cpu="4"))
    sched.on_pod_group("podgroups", "ADDED", _group("g", 2))
    for i in range(2):
        sched.on_pod("ADDED", _member(f"m{i}", "1"))
    assert sched.queue.counts()["active"] == 2
    sched.on_pod_group("podgroups", "DELETED", _group("g", 2))
    sched.schedule_one(await asyncio.wait_for(sched.queue.pop(), 1))
    await sched.settle()
    held = [e for e in sched.queue.entries.values() if e.where == "gated"]
    assert [e.rejected_by for e in held] == [frozenset({GANG})]
    assert not binder.bound and not binder.messages and not binder.client.patches


@dataclass(frozen=True)
class RetryCase:
    id: str
    group: str  # "" for a plain pod
    refusals: int
    bound: bool
    posts: int
    slept: list[float]
    node_deleted: bool = False  # n0 deleted during the first wait


RETRY_CASES = [
    RetryCase("member-bound-on-its-third-post", "g", 2, True, 3, [0.2, 0.4]),
    RetryCase("member-given-up-after-five", "g", 9, False, 5, [0.2, 0.4, 0.5, 0.5]),
    RetryCase("member-whose-node-went-is-not-posted-again", "g", 9, False, 1, [0.2], True),
    RetryCase("plain-pod-requeued-at-once", "", 1, False, 1, []),
]


@pytest.mark.parametrize("case", RETRY_CASES, ids=[c.id for c in RETRY_CASES])
async def test_a_members_binding_is_retried_in_place(
    case: RetryCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Binding that certainly did not apply: a pod-group member keeps its room and posts
    again (its siblings may be bound already) while the cache holds it assumed on its
    node; a plain pod, and a member given up, are forgotten and requeued, and their
    released room moves a pod that waited for room (AssignedPodDelete)."""
    slept: list[float] = []
    real_sleep = asyncio.sleep
    sched: PodiumScheduler | None = None

    async def sleep(seconds: float) -> None:
        if seconds:
            slept.append(seconds)
            if case.node_deleted and sched is not None and len(slept) == 1:
                sched.on_node("DELETED", {"metadata": {"name": "n0"}})
        await real_sleep(0)

    monkeypatch.setattr("podium.scheduling.scheduler.asyncio.sleep", sleep)
    binder = _Binder(refusals={"m1": case.refusals}, gate=asyncio.Event())
    sched = PodiumScheduler(cast(Binder, binder), {"podium": default_profile("podium")})
    sched.pod_groups.served = True
    sched.on_node("ADDED", node("n0", cpu="4"))
    if case.group:
        sched.on_pod_group("podgroups", "ADDED", _group("g", 2))
        for i in range(2):
            sched.on_pod("ADDED", _member(f"m{i}", "2"))
    else:
        sched.on_pod("ADDED", pod("m1", cpu="2"))
    sched.schedule_one(await asyncio.wait_for(sched.queue.pop(), 1))
    sched.on_pod("ADDED", pod("late", cpu="3"))  # no room beside m1: waits for an event
    sched.schedule_one(await asyncio.wait_for(sched.queue.pop(), 1))
    late = next(e for e in sched.queue.entries.values() if e.pod.name == "late")
    assert late.where == "unschedulable"
    binder.gate.set()
    await sched.settle()

    assert binder.posts.count("m1") == case.posts
    assert slept == case.slept
    m1 = next(s for s in sched.cache.pods.values() if s.pod.name == "m1") if case.bound else None
    if case.bound:
        assert binder.bound["m1"] == "n0" and m1 is not None and m1.node == "n0"
        assert late.where == "unschedulable"
    else:
        assert "m1" not in binder.bound
        assert all(s.pod.name != "m1" for s in sched.cache.pods.values())
        (entry,) = [e for e in sched.queue.entries.values() if e.pod.name == "m1"]
        # Its sibling went with the node too: the gang is one short, held at PreEnqueue.
        assert entry.where == ("gated" if case.node_deleted else "backoff")
        assert late.where == "backoff"
