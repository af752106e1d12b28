"""The points after Score: Go's order, its messages, Unreserve on every failure, Permit waits."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, ClassVar

import numpy as np
import pytest

from podium.framework.binding import (
    BindingHandle,
    Failure,
    go_duration,
    run_permit,
    run_post_bind,
    run_post_filter,
    run_pre_bind,
    run_pre_bind_pre_flights,
    run_pre_enqueue,
    run_reserve,
    run_unreserve,
    wait_on_permit,
)
from podium.framework.cycle import Diagnosis
from podium.framework.extension import (
    ALLOW,
    SKIP,
    FailedCycle,
    Handle,
    PermitPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    ReservePlugin,
    Status,
)
from podium.framework.plugin import FilterPlugin
from podium.framework.profile import Profile
from podium.kube.objects import PodInfo, parse_pod
from podium.scheduling.nominator import Nominator
from podium.state.snapshot import Snapshot
from tests.unit.builders import pod

CALLS: list[str] = []


def _answering(point: str, status: Status) -> type[Any]:
    """A plugin class answering ``status`` at ``point``, named after the answer."""
    name = f"example.com/{point}{status.code}"

    class Reserve(ReservePlugin):
        def reserve(self, handle: Handle, pod: PodInfo, node: str) -> Status:
            CALLS.append(f"reserve {self.name}")
            return status

        def unreserve(self, handle: Handle, pod: PodInfo, node: str) -> None:
            CALLS.append(f"unreserve {self.name}")

    class Permit(PermitPlugin):
        def permit(self, handle: Handle, pod: PodInfo, node: str) -> Status:
            CALLS.append(f"permit {self.name}")
            return status

    class PreBind(PreBindPlugin):
        async def pre_bind(self, handle: Handle, pod: PodInfo, node: str) -> Status:
            CALLS.append(f"prebind {self.name}")
            return status

    cls = {"Reserve": Reserve, "Permit": Permit, "PreBind": PreBind}[point]
    cls.name = name
    return cls


def _profile(*classes: type[Any]) -> Profile:
    return Profile(extensions=[cls() for cls in classes])


def _handle() -> BindingHandle:
    spawned: list[Coroutine[Any, Any, object]] = []

    async def event(pod: PodInfo, reason: str, note: str) -> None:
        CALLS.append(f"event {reason}")

    async def preempting(preemptor: str, uids: list[str], work: Coroutine[Any, Any, bool]) -> None:
        await work

    return BindingHandle(
        client=None,  # type: ignore[arg-type]
        spawn=spawned.append,
        snapshot=Snapshot(),
        observe=lambda kind, event_type, body: None,
        wake=lambda uids, plugin, event: None,
        event=event,
        nominator=Nominator(),
        preempting=preempting,
    )


POD = parse_pod(pod("p", cpu="100m"))
REJECT = Status("Unschedulable", "not today")
ERROR = Status("Error", "the plugin broke")


@pytest.mark.parametrize(
    ("answers", "failure", "calls"),
    [
        ([ALLOW, ALLOW], None, ["reserve example.com/ReserveSuccess"] * 2),
        (
            [REJECT, ALLOW],
            Failure("not today", "example.com/ReserveUnschedulable", rejected=True),
            ["reserve example.com/ReserveUnschedulable"],
        ),
        (
            [ALLOW, ERROR],
            Failure(
                'running Reserve plugin "example.com/ReserveError": the plugin broke',
                "example.com/ReserveError",
                rejected=False,
            ),
            ["reserve example.com/ReserveSuccess", "reserve example.com/ReserveError"],
        ),
    ],
)
def test_reserve_stops_at_the_first_failure(
    answers: list[Status], failure: Failure | None, calls: list[str]
) -> None:
    CALLS.clear()
    profile = _profile(*(_answering("Reserve", a) for a in answers))
    assert run_reserve(profile, _handle(), POD, "n1") == failure
    assert calls == CALLS


def test_unreserve_runs_every_reserve_plugin_in_reverse() -> None:
    CALLS.clear()
    profile = _profile(_answering("Reserve", ALLOW), _answering("Reserve", REJECT))
    run_unreserve(profile, _handle(), POD, "n1")
    assert CALLS == [
        "unreserve example.com/ReserveUnschedulable",
        "unreserve example.com/ReserveSuccess",
    ]


async def test_permit_rejection_and_error_carry_gos_messages() -> None:
    handle = _handle()
    rejected = run_permit(_profile(_answering("Permit", REJECT)), handle, POD, "n1")
    assert rejected == Failure("not today", "example.com/PermitUnschedulable", rejected=True)
    broke = run_permit(_profile(_answering("Permit", ERROR)), handle, POD, "n1")
    assert broke is not None and broke.message == (
        'running Permit plugin "example.com/PermitError": the plugin broke'
    )
    assert await wait_on_permit(handle, POD) is None  # nothing waits


class _Waits(PermitPlugin):
    name: ClassVar[str] = "example.com/Waits"
    timeout: ClassVar[float] = 30.0

    def permit(self, handle: Handle, pod: PodInfo, node: str) -> Status:
        return Status("Wait", timeout=self.timeout)


class _WaitsLess(_Waits):
    name: ClassVar[str] = "example.com/WaitsLess"
    timeout: ClassVar[float] = 0.05


async def test_a_waiting_pod_goes_on_once_every_waiting_plugin_allowed_it() -> None:
    class _WaitsToo(_Waits):
        name: ClassVar[str] = "example.com/WaitsToo"

    handle = _handle()
    assert run_permit(_profile(_Waits, _WaitsToo), handle, POD, "n1") is None
    waiting = asyncio.create_task(wait_on_permit(handle, POD))
    handle.allow(POD.uid, "example.com/Waits")
    held = handle.waiting[POD.uid]
    assert held.pending == {"example.com/WaitsToo"} and not held.verdict.done()
    handle.allow(POD.uid, "example.com/WaitsToo")
    assert await asyncio.wait_for(waiting, 5) is None
    assert POD.uid not in handle.waiting


async def test_a_waiting_pod_rejected_by_one_plugin_fails_with_its_reason() -> None:
    handle = _handle()
    assert run_permit(_profile(_Waits), handle, POD, "n1") is None
    waiting = asyncio.create_task(wait_on_permit(handle, POD))
    handle.reject(POD.uid, "example.com/Waits", "the gate is shut")
    failure = await asyncio.wait_for(waiting, 5)
    assert failure == Failure("the gate is shut", "example.com/Waits", rejected=True)


async def test_the_first_timeout_rejects_with_gos_message() -> None:
    handle = _handle()
    assert run_permit(_profile(_Waits, _WaitsLess), handle, POD, "n1") is None
    failure = await asyncio.wait_for(wait_on_permit(handle, POD), 5)
    assert failure == Failure(
        "rejected due to timeout after waiting 0.05s at plugin example.com/WaitsLess",
        "example.com/WaitsLess",
        rejected=True,
    )


@pytest.mark.parametrize(
    ("seconds", "text"), [(5, "5s"), (0.5, "0.5s"), (60, "1m0s"), (90, "1m30s"), (900, "15m0s")]
)
def test_go_duration(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


async def test_pre_bind_in_order_and_post_bind_never_fails_the_pod() -> None:
    CALLS.clear()
    profile = _profile(_answering("PreBind", ALLOW), _answering("PreBind", ERROR))
    failure = await run_pre_bind(profile, _handle(), POD, "n1")
    assert failure is not None and failure.message == (
        'running PreBind plugin "example.com/PreBindError": the plugin broke'
    )
    assert CALLS == ["prebind example.com/PreBindSuccess", "prebind example.com/PreBindError"]

    class Broken(PostBindPlugin):
        name: ClassVar[str] = "example.com/Broken"

        async def post_bind(self, handle: Handle, pod: PodInfo, node: str) -> None:
            raise RuntimeError("a PostBind plugin that fails")

    await run_post_bind(_profile(Broken), _handle(), POD, "n1")  # logged, not raised


def _flying(status: Status) -> type[Any]:
    """A PreBind plugin whose PreBindPreFlight answers ``status``."""

    class Flight(PreBindPlugin):
        name = f"example.com/Flight{status.code}"

        def pre_bind_pre_flight(self, handle: Handle, pod: PodInfo, node: str) -> Status:
            CALLS.append(f"preflight {self.name}")
            return status

        async def pre_bind(self, handle: Handle, pod: PodInfo, node: str) -> Status:
            return ALLOW

    return Flight


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        pytest.param([], False, id="nothing-to-do"),
        pytest.param([ALLOW], True, id="volumes-or-claims-to-write"),
        pytest.param([SKIP, SKIP], False, id="all-skip"),
        pytest.param([SKIP, ALLOW], True, id="one-success"),
        pytest.param([ALLOW, SKIP], True, id="built-in-success-plugin-skip"),
        pytest.param(
            [ALLOW, ERROR, ALLOW],
            Failure(
                'running PreBindPreFlight "example.com/FlightError": the plugin broke',
                "example.com/FlightError",
                rejected=False,
            ),
            id="error-stops-it",
        ),
        pytest.param(
            [REJECT],
            Failure(
                'PreBindPreFlight example.com/FlightUnschedulable returned "Unschedulable", '
                "which is unsupported. It is supposed to return Success, Skip, or Error status",
                "example.com/FlightUnschedulable",
                rejected=False,
            ),
            id="unschedulable-is-an-error",
        ),
    ],
)
def test_pre_bind_pre_flights(answers: list[Status], expected: bool | Failure) -> None:
    """RunPreBindPreFlights: Success when some PreBind works, Skip when none, Error
    (or any other code) fails the binding cycle."""
    CALLS.clear()
    profile = _profile(*(_flying(a) for a in answers))
    assert run_pre_bind_pre_flights(profile, _handle(), POD, "n1") == expected


def test_a_pre_bind_plugin_does_work_unless_it_says_skip() -> None:
    """The default PreBindPreFlight answers Success: the nomination is written."""
    profile = _profile(_answering("PreBind", ALLOW))
    assert run_pre_bind_pre_flights(profile, _handle(), POD, "n1") is True


def _at_every_point(name: str, undo: bool = False) -> type[Any]:
    """A filter that also implements PreEnqueue, PostFilter and Reserve (a built-in's
    shape); its Unreserve leaves API work when ``undo``."""

    class Both(FilterPlugin, PreEnqueuePlugin, PostFilterPlugin, ReservePlugin):
        def filter(self, cycle: Any, nodes: Any) -> list[Any]:
            return []

        def pre_enqueue(self, handle: Handle, pod: PodInfo) -> Status:
            CALLS.append(f"pre_enqueue {self.name}")
            return Status("Unschedulable", "claims missing")

        def post_filter(
            self, handle: Handle, pod: PodInfo, failed: FailedCycle
        ) -> PostFilterResult:
            CALLS.append(f"post_filter {self.name}")
            return PostFilterResult(Status("Unschedulable", f"{self.name} freed"))

        def reserve(self, handle: Handle, pod: PodInfo, node: str) -> Status:
            CALLS.append(f"reserve {self.name}")
            return ALLOW

        def unreserve(self, handle: Handle, pod: PodInfo, node: str) -> Any:
            CALLS.append(f"unreserve {self.name}")
            if not undo:
                return None

            async def work() -> None:
                CALLS.append(f"undo {self.name}")

            return work()

    Both.name = name
    return Both


async def test_filters_implementing_a_point_run_before_the_extensions() -> None:
    """Go's default profile lists the built-ins first: a filter's Reserve runs before an
    extension's, its Unreserve after, and its API work is handed back to be awaited."""
    CALLS.clear()
    profile = Profile(
        filters=[_at_every_point("Builtin", undo=True)()],
        extensions=[_answering("Reserve", ALLOW)()],
    )
    assert run_reserve(profile, _handle(), POD, "n1") is None
    undo = run_unreserve(profile, _handle(), POD, "n1")
    assert undo is not None
    assert CALLS == [
        "reserve Builtin",
        "reserve example.com/ReserveSuccess",
        "unreserve example.com/ReserveSuccess",
        "unreserve Builtin",
    ]
    await undo
    assert CALLS[-1] == "undo Builtin"


def test_pre_enqueue_and_post_filter() -> None:
    """PreEnqueue stops at the first plugin that turns the pod away; PostFilter runs every
    plugin and gathers their reasons, in profile order."""
    CALLS.clear()
    profile = Profile(filters=[_at_every_point("A")(), _at_every_point("B")()])
    assert run_pre_enqueue(profile, _handle(), POD) == ("A", "claims missing")
    answer = run_post_filter(profile, _handle(), POD, _failed(profile))
    assert answer == PostFilterResult(Status("Unschedulable", "A freed, B freed"))
    assert CALLS == ["pre_enqueue A", "post_filter A", "post_filter B"]
    assert run_unreserve(profile, _handle(), POD, "n1") is None


def _failed(profile: Profile) -> FailedCycle:
    diagnosis = Diagnosis(0, np.zeros(0, dtype=np.int8), np.zeros(0, dtype=np.int16))
    return FailedCycle(profile, diagnosis)


def _post_filter(code: str, reason: str, nominating: str | None) -> type[Any]:
    """A PostFilter plugin answering ``code``; its dry run answers the same, marked."""
    answer = PostFilterResult(Status(code, reason), nominating)  # type: ignore[arg-type]

    class Answering(PostFilterPlugin):
        name = f"example.com/{code}{reason}"

        def post_filter(
            self, handle: Handle, pod: PodInfo, failed: FailedCycle
        ) -> PostFilterResult:
            CALLS.append(f"post_filter {self.name}")
            return answer

        def post_filter_dry_run(
            self, handle: Handle, pod: PodInfo, failed: FailedCycle
        ) -> PostFilterResult:
            CALLS.append(f"dry_run {self.name}")
            return answer

    return Answering


U1 = ("Unschedulable", "one", None)
U2 = ("Unschedulable", "two", "")
U3 = ("Unschedulable", "", "n3")
OK = ("Success", "found n9", "n9")
ERR = ("Error", "broke", "n1")


@pytest.mark.parametrize(
    ("plugins", "expected", "ran"),
    [
        pytest.param([], PostFilterResult(Status("Unschedulable"), ""), 0, id="none-clears"),
        pytest.param([U1], PostFilterResult(Status("Unschedulable", "one")), 1, id="no-nomination"),
        pytest.param(
            [U1, U2, U3],
            PostFilterResult(Status("Unschedulable", "one, two"), "n3"),
            3,
            id="reasons-joined-last-nomination-kept",
        ),
        pytest.param(
            [U3, U2], PostFilterResult(Status("Unschedulable", "two"), ""), 2, id="a-clear-is-kept"
        ),
        pytest.param(
            [U1, OK, U2],
            PostFilterResult(Status("Success", "found n9"), "n9"),
            2,
            id="success",
        ),
        pytest.param(
            [U3, ERR, U1],
            PostFilterResult(Status("Error", "broke")),
            2,
            id="error",
        ),
    ],
)
def test_run_post_filter_follows_run_post_filter_plugins(
    plugins: list[tuple[str, str, str | None]], expected: PostFilterResult, ran: int
) -> None:
    """Go's RunPostFilterPlugins: in order, Success and Error stop the rest; otherwise the
    reasons are joined and the last nomination given is kept; none at all clears it."""
    for dry_run in (False, True):
        CALLS.clear()
        profile = Profile(extensions=[_post_filter(*p)() for p in plugins], dry_run=dry_run)
        assert run_post_filter(profile, _handle(), POD, _failed(profile)) == expected
        assert len(CALLS) == ran
        assert all(c.startswith("dry_run" if dry_run else "post_filter") for c in CALLS)


def test_the_profile_preemption_switch_takes_its_own_post_filters_out() -> None:
    """``preemption`` decides whether the profile's own PostFilter plugins (DefaultPreemption)
    are in its PostFilter list; the filters' and extensions' stay."""
    CALLS.clear()
    profile = Profile(
        extensions=[_post_filter(*U1)()], post_filters=[_post_filter(*OK)()], preemption=False
    )
    answer = run_post_filter(profile, _handle(), POD, _failed(profile))
    assert answer == PostFilterResult(Status("Unschedulable", "one"))
    profile.preemption = True
    answer = run_post_filter(profile, _handle(), POD, _failed(profile))
    assert answer == PostFilterResult(Status("Success", "found n9"), "n9")
    assert CALLS == ["post_filter example.com/Unschedulableone"] * 2 + [
        "post_filter example.com/Successfound n9"
    ]


def test_a_point_picks_its_plugins_again_when_the_list_changes() -> None:
    """The per-point lists are kept per profile, but never outlive its plugin list."""
    profile = _profile(_answering("Reserve", ALLOW), _answering("Permit", ALLOW))
    handle = _handle()
    CALLS.clear()
    assert run_reserve(profile, handle, POD, "n1") is None
    assert CALLS == ["reserve example.com/ReserveSuccess"]
    profile.extensions.append(_answering("Reserve", REJECT)())
    CALLS.clear()
    failure = run_reserve(profile, handle, POD, "n1")
    assert failure is not None and failure.plugin == "example.com/ReserveUnschedulable"
    assert CALLS == [
        "reserve example.com/ReserveSuccess",
        "reserve example.com/ReserveUnschedulable",
    ]
    profile.extensions[:] = [_answering("Permit", ALLOW)()]
    CALLS.clear()
    assert run_reserve(profile, handle, POD, "n1") is None
    assert CALLS == []
