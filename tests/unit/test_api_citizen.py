"""The API client as a good citizen: Retry-After, rate budgets, one re-authentication.

A scripted aiohttp server plays kube-apiserver; sleeps are recorded instead of
slept where the test is about how long the client would wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from podium.kube.client import (
    MAX_RETRIES,
    MAX_RETRY_WAIT,
    ApiError,
    Budget,
    KubeClient,
    TokenBucket,
    budget_of,
)
from podium.kube.credentials import Credentials, FileToken
from podium.metrics import Metrics
from podium.runtime.wiring import KopfLogin

Answer = tuple[int, dict[str, str], Any]


@dataclass
class Script:
    """Answers requests with ``answer(n, request)``; records (method, path, token)."""

    answer: Callable[[int, web.Request], Answer] = lambda n, r: (200, {}, {"ok": n})
    seen: list[tuple[str, str, str]] = field(default_factory=list)
    url: str = ""

    async def handle(self, request: web.Request) -> web.Response:
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        self.seen.append((request.method, request.path, token))
        status, headers, body = self.answer(len(self.seen), request)
        return web.json_response(body, status=status, headers=headers)


@pytest.fixture
async def script() -> AsyncIterator[Script]:
    served = Script()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", served.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    served.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    yield served
    await runner.cleanup()


class Sleeps(list[float]):
    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


def status(code: int, retry_after: str | None = None) -> Answer:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return code, headers, {"kind": "Status", "code": code, "message": f"answer {code}"}


# -- Retry-After -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "retry_after", "sent", "waits"),
    [
        (429, "2", 2, [2.0]),  # throttled: wait as asked, then succeed
        (503, "1", 2, [1.0]),  # unavailable with Retry-After
        (500, "3", 2, [3.0]),  # any 5xx with Retry-After (client-go's checkWait)
        (429, "600", 2, [MAX_RETRY_WAIT]),  # an hour-long ask is shortened
        (503, None, 1, []),  # no Retry-After: the caller decides
        (429, "soon", 1, []),  # not whole seconds: ignored, as client-go does
        (409, "1", 1, []),  # not 429/5xx: never retried
    ],
)
async def test_retry_after_is_honoured_for_429_and_5xx(
    script: Script, first: int, retry_after: str | None, sent: int, waits: list[float]
) -> None:
    script.answer = lambda n, r: status(first, retry_after) if n == 1 else (201, {}, {"n": n})
    sleeps, metrics = Sleeps(), Metrics()
    client = KubeClient(Credentials(server=script.url), sleep=sleeps, metrics=metrics)
    try:
        if sent == 2:
            assert await client.post("/api/v1/namespaces/a/pods/p/binding", {}) == {"n": 2}
        else:
            with pytest.raises(ApiError) as raised:
                await client.post("/api/v1/namespaces/a/pods/p/binding", {})
            assert raised.value.status == first
    finally:
        await client.close()
    assert len(script.seen) == sent
    assert sleeps == waits
    assert metrics.retry_after.labels(str(first))._value.get() == len(waits)


async def test_retry_after_gives_up_after_ten_retries_with_the_servers_wait(
    script: Script,
) -> None:
    script.answer = lambda n, r: status(429, "1")
    sleeps = Sleeps()
    client = KubeClient(Credentials(server=script.url), sleep=sleeps)
    try:
        with pytest.raises(ApiError) as raised:
            await client.get("/api/v1/pods")
    finally:
        await client.close()
    assert (raised.value.status, raised.value.retry_after) == (429, 1.0)
    assert len(script.seen) == MAX_RETRIES + 1
    assert sleeps == [1.0] * MAX_RETRIES


# -- rate budgets ------------------------------------------------------------------------------


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


async def test_token_bucket_spends_its_burst_then_paces_at_qps() -> None:
    fake = FakeTime()
    bucket = TokenBucket(qps=10, burst=3, clock=fake.clock, sleep=fake.sleep)
    waits = [await bucket.take() for _ in range(6)]
    assert waits == pytest.approx([0, 0, 0, 0.1, 0.1, 0.1])
    fake.now += 10  # an idle second saves tokens, never more than the burst
    assert [await bucket.take() for _ in range(4)] == pytest.approx([0, 0, 0, 0.1])


async def test_token_bucket_without_qps_never_waits() -> None:
    fake = FakeTime()
    bucket = TokenBucket(qps=0, burst=0, clock=fake.clock, sleep=fake.sleep)
    assert [await bucket.take() for _ in range(1000)] == [0.0] * 1000
    assert fake.slept == []


async def test_concurrent_callers_are_served_in_arrival_order() -> None:
    bucket = TokenBucket(qps=50, burst=1)
    order: list[int] = []

    async def call(i: int) -> None:
        await bucket.take()
        order.append(i)

    await asyncio.gather(*(call(i) for i in range(8)))
    assert order == list(range(8))


@pytest.mark.parametrize(
    ("method", "path", "budget"),
    [
        ("POST", "/api/v1/namespaces/a/pods/p/binding", Budget.BINDINGS),
        ("PATCH", "/api/v1/namespaces/a/pods/p/status", Budget.REPORTS),
        ("POST", "/apis/events.k8s.io/v1/namespaces/a/events", Budget.REPORTS),
        ("PATCH", "/apis/events.k8s.io/v1/namespaces/a/events/e1", Budget.REPORTS),
        ("GET", "/api/v1/namespaces/a/pods/p", Budget.DEFAULT),
        ("PUT", "/apis/coordination.k8s.io/v1/namespaces/a/leases/podium", Budget.DEFAULT),
        ("DELETE", "/api/v1/namespaces/a/pods/victim", Budget.DEFAULT),
        ("GET", "/api/v1/pods/status", Budget.DEFAULT),
    ],
)
def test_requests_are_charged_to_their_budget(method: str, path: str, budget: Budget) -> None:
    assert budget_of(method, path) is budget


async def test_a_flood_of_reports_never_delays_bindings(script: Script) -> None:
    """kube-scheduler #135900: status patches and Events queued behind a shared
    limiter delayed Bindings. Here 40 reports wait their turn (2 per second),
    while 3 Bindings sent during the flood go at once."""
    metrics = Metrics()
    client = KubeClient(Credentials(server=script.url), qps=2, burst=2, metrics=metrics)
    loop = asyncio.get_running_loop()
    sent: dict[str, float] = {}

    async def report(i: int) -> None:
        await client.patch(f"/api/v1/namespaces/a/pods/p{i}/status", {})

    async def bind(i: int) -> None:
        started = loop.time()
        await client.post(f"/api/v1/namespaces/a/pods/b{i}/binding", {})
        sent[f"b{i}"] = loop.time() - started

    flood = [asyncio.create_task(report(i)) for i in range(40)]
    await asyncio.sleep(0.05)
    try:
        await asyncio.gather(*(bind(i) for i in range(2)))
        await asyncio.sleep(0.6)
        await bind(2)  # the binding budget refilled meanwhile
        assert max(sent.values()) < 0.25, sent
        assert not all(t.done() for t in flood)  # the reports are still waiting
    finally:
        for task in flood:
            task.cancel()
        await asyncio.gather(*flood, return_exceptions=True)
        await client.close()
    reports = metrics.rate_limited.labels("reports")._sum.get()
    assert reports > 0
    assert metrics.rate_limited.labels("bindings")._sum.get() == 0


# -- one re-authentication ---------------------------------------------------------------------


def accepting(valid: set[str]) -> Callable[[int, web.Request], Answer]:
    def answer(n: int, request: web.Request) -> Answer:
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        return (200, {}, {"n": n}) if token in valid else status(401)

    return answer


async def test_a_401_rereads_the_token_file_once_and_the_request_goes_through(
    script: Script, tmp_path: Path
) -> None:
    path = tmp_path / "token"
    path.write_text("A")
    script.answer = accepting({"A"})
    metrics = Metrics()
    client = KubeClient(Credentials(server=script.url, tokens=FileToken(path)), metrics=metrics)
    try:
        await client.get("/api/v1/pods")
        path.write_text("B")  # rotated on disk; the server stops accepting A
        script.answer = accepting({"B"})
        assert await client.get("/api/v1/pods") == {"n": 3}
    finally:
        await client.close()
    assert [token for *_, token in script.seen] == ["A", "A", "B"]
    assert metrics.reauthentications._value.get() == 1
    assert not client.unauthenticated


async def test_a_token_still_refused_is_reported_not_retried(
    script: Script, tmp_path: Path
) -> None:
    """401 after the one re-authentication: no loop. The request fails, the client
    turns unauthenticated (readiness), counts it and logs it once; the next
    accepted answer clears it."""
    path = tmp_path / "token"
    path.write_text("A")
    script.answer = accepting(set())
    metrics = Metrics()
    client = KubeClient(Credentials(server=script.url, tokens=FileToken(path)), metrics=metrics)
    try:
        for _ in range(3):
            with pytest.raises(ApiError) as raised:
                await client.get("/api/v1/pods")
            assert raised.value.status == 401
        assert len(script.seen) == 3  # one request each: the file held nothing new
        assert client.unauthenticated
        assert metrics.auth_failures.labels("401")._value.get() == 3
        path.write_text("B")
        script.answer = accepting({"B"})
        await client.get("/api/v1/pods")  # re-read after its 401, then accepted
        assert not client.unauthenticated
    finally:
        await client.close()
    assert [token for *_, token in script.seen][-2:] == ["A", "B"]


@pytest.mark.parametrize("code", [403, 401])
async def test_refusals_without_a_rotating_token_are_not_retried(script: Script, code: int) -> None:
    script.answer = lambda n, r: status(code)
    metrics = Metrics()
    client = KubeClient(Credentials(server=script.url, token="fixed"), metrics=metrics)
    try:
        with pytest.raises(ApiError):
            await client.get("/apis/policy/v1/poddisruptionbudgets")
    finally:
        await client.close()
    assert len(script.seen) == 1
    assert metrics.auth_failures.labels(str(code))._value.get() == 1
    assert client.unauthenticated is (code == 401)  # 403 is about one resource, not who we are


async def test_concurrent_401s_reread_the_token_file_once(script: Script, tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("A")
    source = FileToken(path)
    client = KubeClient(Credentials(server=script.url, tokens=source))
    try:
        await client.get("/x")
        path.write_text("B")
        script.answer = accepting({"B"})
        await asyncio.gather(*(client.get("/x") for _ in range(20)))
    finally:
        await client.close()
    assert source.fetches == 2


# -- kopf's login ------------------------------------------------------------------------------


async def test_kopf_login_hands_out_the_rotated_token_after_a_401(
    script: Script, tmp_path: Path
) -> None:
    path = tmp_path / "token"
    path.write_text("A")
    script.answer = accepting({"A"})
    client = KubeClient(Credentials(server=script.url, tokens=FileToken(path)))
    login = KopfLogin(client, pace=(0.01,))
    try:
        assert (await login()).token == "A"
        path.write_text("B")  # kopf got a 401 with A and calls login again
        script.answer = accepting({"B"})
        assert (await login()).token == "B"
    finally:
        await client.close()


async def test_kopf_login_waits_at_a_slowing_pace_while_the_token_is_refused(
    script: Script, tmp_path: Path
) -> None:
    path = tmp_path / "token"
    path.write_text("A")
    script.answer = accepting(set())
    client = KubeClient(Credentials(server=script.url, tokens=FileToken(path)))
    login = KopfLogin(client, pace=(0.01, 0.02, 0.04))
    try:
        pending = asyncio.create_task(login())
        await asyncio.sleep(0.3)
        assert not pending.done()  # kopf's clients wait instead of looping on 401s
        checks = len(script.seen)
        assert 4 <= checks <= 20, checks  # 0.01, 0.02, then every 0.04 s: paced
        assert client.unauthenticated
        path.write_text("B")
        script.answer = accepting({"B"})
        info = await asyncio.wait_for(pending, 1)
    finally:
        await client.close()
    assert info.token == "B"
    assert not client.unauthenticated
