"""The binder's manners: refused Bindings, Retry-After, and Event series.

The Event series follow client-go's events/v1 recorder (tools/events), which
kube-scheduler uses: POST the first, PATCH the second into a series, count
the rest in memory, PATCH open series every 30 minutes and once more when
they have been idle for 6.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest

from podium.kube.client import ApiError, KubeClient
from podium.kube.credentials import CredentialError
from podium.kube.objects import PodInfo, parse_pod
from podium.metrics import Metrics
from podium.scheduling.binder import Binder, BindOutcome, EventRecorder
from tests.unit.builders import pod

Call = tuple[str, str, Any]


class FakeClient:
    """Records calls; ``fail(method, path)`` may raise to script an answer."""

    def __init__(self, fail: Callable[[str, str], None] = lambda m, p: None) -> None:
        self.calls: list[Call] = []
        self.fail = fail
        self.metrics = Metrics()
        self.pods: dict[str, Any] = {}

    async def _call(self, method: str, path: str, body: Any = None) -> Any:
        self.calls.append((method, path, body))
        self.fail(method, path)
        if method == "GET":
            return self.pods[path.rsplit("/", 1)[1]]
        return {}

    async def get(self, path: str) -> Any:
        return await self._call("GET", path)

    async def post(self, path: str, body: Any) -> Any:
        return await self._call("POST", path, body)

    async def patch(self, path: str, body: Any) -> Any:
        return await self._call("PATCH", path, body)


def podinfo(name: str = "p", version: str = "7") -> PodInfo:
    body = pod(name)
    body["metadata"]["resourceVersion"] = version
    return parse_pod(body)


@pytest.fixture
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr("podium.scheduling.binder.asyncio.sleep", sleep)
    return slept


# -- Bindings ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "slept"),
    [
        (ApiError(401, {"message": "Unauthorized"}), []),
        (ApiError(403, {"message": "denied by admission"}), []),
        (ApiError(429, {"message": "throttled"}, retry_after=3.0), [3.0]),
        (CredentialError("exec plugin failed"), []),
    ],
    ids=["401", "403", "429", "no-credentials"],
)
async def test_bindings_refused_before_they_apply_are_retried_without_a_read(
    no_sleep: list[float], error: Exception, slept: list[float]
) -> None:
    def fail(method: str, path: str) -> None:
        if method == "POST":
            raise error

    fake = FakeClient(fail)
    outcome, why = await Binder(cast(KubeClient, fake), "i").bind(podinfo(), "n1")
    assert outcome is BindOutcome.RETRY
    # As client-go prints an API error: the server's message alone.
    assert why == (error.message if isinstance(error, ApiError) else str(error))
    assert [m for m, *_ in fake.calls] == ["POST"]  # no re-read: nothing to settle
    assert no_sleep == slept


async def test_an_unknown_outcome_is_read_back_waiting_as_long_as_retry_after_says(
    no_sleep: list[float],
) -> None:
    target = podinfo()
    reads = iter(
        [ApiError(503, {}, retry_after=4.0), ApiError(500, {}), None]
    )  # two failed reads, then the truth

    def fail(method: str, path: str) -> None:
        if method == "POST":
            raise ApiError(500, {"message": "etcd timed out"})
        error = next(reads)
        if error is not None:
            raise error

    fake = FakeClient(fail)
    fake.pods[target.name] = {"metadata": {"uid": target.uid}, "spec": {"nodeName": "n1"}}
    binder = Binder(cast(KubeClient, fake), "i", resolve_backoff=0.2)
    outcome, _ = await binder.bind(target, "n1")
    assert outcome is BindOutcome.BOUND
    assert no_sleep == [4.0, 0.4]  # the server's 4 s, then the backoff resumes


async def test_a_refused_read_waits_the_longest_backoff_and_keeps_the_reservation(
    no_sleep: list[float],
) -> None:
    target = podinfo()
    reads = iter([403, 403, 401, 0])

    def fail(method: str, path: str) -> None:
        if method == "POST":
            raise TimeoutError("bind timed out")
        code = next(reads)
        if code:
            raise ApiError(code, {})

    fake = FakeClient(fail)
    fake.pods[target.name] = {"metadata": {"uid": target.uid}, "spec": {}}
    binder = Binder(cast(KubeClient, fake), "i", resolve_backoff=0.2, resolve_max_backoff=5.0)
    outcome, _ = await binder.bind(target, "n1")
    assert outcome is BindOutcome.RETRY  # the read finally answered: not bound
    assert no_sleep == [5.0, 5.0, 5.0]


# -- Event series ------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def recorder(fake: FakeClient, clock: Clock) -> EventRecorder:
    return EventRecorder(cast(KubeClient, fake), "podium-0", backoff=0, clock=clock)


def verbs(fake: FakeClient) -> list[str]:
    return [f"{m} {p.rsplit('/', 1)[1]}" if m == "PATCH" else m for m, p, _ in fake.calls]


async def test_repeats_become_one_event_whose_series_count_grows() -> None:
    fake, clock = FakeClient(), Clock()
    events = recorder(fake, clock)
    target = podinfo()
    for _ in range(5):
        clock.now += 10
        await events.record(target, "FailedScheduling", "0/3 nodes", "podium", "Warning")
    name = fake.calls[0][2]["metadata"]["name"]
    assert verbs(fake) == ["POST", f"PATCH {name}"]  # the rest only counted
    assert fake.calls[1][2]["series"]["count"] == 2
    assert fake.calls[1][2]["series"]["lastObservedTime"]
    posted = fake.calls[0][2]
    assert (posted["reason"], posted["type"], posted["action"]) == (
        "FailedScheduling",
        "Warning",
        "Scheduling",
    )
    assert posted["regarding"]["resourceVersion"] == "7"
    counts = fake.metrics.events
    assert [counts.labels(a)._value.get() for a in ("create", "patch", "aggregate")] == [1, 1, 3]

    clock.now += 359  # still open: the 30-minute refresh writes the count
    await events.finish()
    await events.refresh()
    assert fake.calls[-1][2]["series"]["count"] == 5
    assert set(fake.calls[-1][2]) == {"series"}  # only the series changes
    clock.now += 2  # idle for 6 minutes: written once more, then forgotten
    await events.finish()
    assert [c[2]["series"]["count"] for c in fake.calls[1:]] == [2, 5, 5]
    assert events.cache == {}
    await events.record(target, "FailedScheduling", "0/3 nodes", "podium", "Warning")
    assert verbs(fake)[-1] == "POST"  # a new Event after the series ended


@pytest.mark.parametrize(
    ("change", "new_event"),
    [
        ({}, False),
        ({"note": "0/4 nodes"}, True),  # a new message is never hidden in a series
        ({"version": "8"}, True),  # the PodScheduled condition changed: a new Event
        ({"reason": "Scheduled", "kind": "Normal"}, True),
        ({"controller": "other"}, True),
        ({"uid": "uid-recreated"}, True),  # a new pod of the same name
    ],
    ids=["same", "note", "resource-version", "reason", "controller", "uid"],
)
async def test_what_makes_a_repeat(change: dict[str, str], new_event: bool) -> None:
    fake, clock = FakeClient(), Clock()
    events = recorder(fake, clock)
    body = pod("p")
    body["metadata"]["resourceVersion"] = "7"
    await events.record(parse_pod(body), "FailedScheduling", "0/3 nodes", "podium", "Warning")
    body["metadata"]["resourceVersion"] = change.get("version", "7")
    body["metadata"]["uid"] = change.get("uid", body["metadata"]["uid"])
    await events.record(
        parse_pod(body),
        change.get("reason", "FailedScheduling"),
        change.get("note", "0/3 nodes"),
        change.get("controller", "podium"),
        change.get("kind", "Warning"),
    )
    assert [m for m, *_ in fake.calls] == (["POST", "POST"] if new_event else ["POST", "PATCH"])


async def test_series_patch_of_an_expired_event_creates_it_with_the_series() -> None:
    def fail(method: str, path: str) -> None:
        if method == "PATCH":
            raise ApiError(404, {"message": "not found"})

    fake, clock = FakeClient(fail), Clock()
    events = recorder(fake, clock)
    target = podinfo()
    await events.record(target, "FailedScheduling", "0/3 nodes", "podium", "Warning")
    await events.record(target, "FailedScheduling", "0/3 nodes", "podium", "Warning")
    assert [m for m, *_ in fake.calls] == ["POST", "PATCH", "POST"]
    recreated = fake.calls[2][2]
    assert recreated["series"]["count"] == 2
    assert recreated["metadata"]["name"] == fake.calls[0][2]["metadata"]["name"]


async def test_single_events_are_forgotten_after_six_minutes() -> None:
    fake, clock = FakeClient(), Clock()
    events = recorder(fake, clock)
    await events.record(podinfo(), "FailedScheduling", "0/3 nodes", "podium", "Warning")
    clock.now = 300
    await events.finish()
    assert len(events.cache) == 1
    clock.now = 361
    await events.finish()
    assert events.cache == {}
    assert [m for m, *_ in fake.calls] == ["POST"]  # nothing to write for a single Event
