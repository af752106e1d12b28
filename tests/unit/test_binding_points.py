"""The points after Score: Go's order, its messages, Unreserve on every failure, Permit waits."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, ClassVar

import pytest

from podium.framework.binding import (
    BindingHandle,
    Failure,
    go_duration,
    run_permit,
    run_post_bind,
    run_pre_bind,
    run_pre_bind_pre_flights,
    run_reserve,
    run_unreserve,
    wait_on_permit,
)
from podium.framework.extension import (
    ALLOW,
    SKIP,
    Handle,
    PermitPlugin,
    PostBindPlugin,
    PreBindPlugin,
    ReservePlugin,
    Status,
)
from podium.framework.profile import Profile
from podium.kube.objects import PodInfo, parse_pod
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
    return BindingHandle(client=None, spawn=spawned.append)  # type: ignore[arg-type]


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
    ("built_in", "answers", "expected"),
    [
        pytest.param(False, [], False, id="nothing-to-do"),
        pytest.param(True, [], True, id="volumes-or-claims-to-write"),
        pytest.param(False, [SKIP, SKIP], False, id="all-skip"),
        pytest.param(False, [SKIP, ALLOW], True, id="one-success"),
        pytest.param(True, [SKIP], True, id="built-in-success-plugin-skip"),
        pytest.param(
            True,
            [ERROR, ALLOW],
            Failure(
                'running PreBindPreFlight "example.com/FlightError": the plugin broke',
                "example.com/FlightError",
                rejected=False,
            ),
            id="error-stops-it",
        ),
        pytest.param(
            False,
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
def test_pre_bind_pre_flights(
    built_in: bool, answers: list[Status], expected: bool | Failure
) -> None:
    """RunPreBindPreFlights: Success when some PreBind works, Skip when none, Error
    (or any other code) fails the binding cycle."""
    CALLS.clear()
    profile = _profile(*(_flying(a) for a in answers))
    assert run_pre_bind_pre_flights(profile, _handle(), POD, "n1", built_in) == expected


def test_a_pre_bind_plugin_does_work_unless_it_says_skip() -> None:
    """The default PreBindPreFlight answers Success: the nomination is written."""
    profile = _profile(_answering("PreBind", ALLOW))
    assert run_pre_bind_pre_flights(profile, _handle(), POD, "n1", False) is True
