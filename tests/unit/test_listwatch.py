"""The direct pod list-and-watch against a scripted API server: pages, resume, 410, deletes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import kopf
import orjson
import pytest
from aiohttp import web

from podium.handlers.watched import WATCHED, direct_watches, register_watches
from podium.kube.client import KubeClient
from podium.kube.credentials import Credentials
from podium.kube.listwatch import ListWatch, ListWatchSettings
from podium.metrics import Metrics
from podium.policy import default_profile
from podium.scheduling.binder import Binder
from podium.scheduling.scheduler import PodiumScheduler


def _pod(uid: str, version: str) -> dict[str, Any]:
    return {"metadata": {"uid": uid, "name": uid, "resourceVersion": version}}


@dataclass
class _Server:
    """Lists ``pages`` (one per ``continue``), then answers each watch with the next script."""

    pages: list[list[dict[str, Any]]]
    list_versions: list[str]  # one per list; the last repeats
    watches: list[list[dict[str, Any]]]
    lists: int = 0
    watch_versions: list[str] = field(default_factory=list)

    async def pods(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch"):
            self.watch_versions.append(request.query["resourceVersion"])
            script = self.watches.pop(0) if self.watches else []
            resp = web.StreamResponse()
            await resp.prepare(request)
            for event in script:  # split mid-line, as chunked transfer may
                line = orjson.dumps(event) + b"\n"
                await resp.write(line[:7])
                await resp.write(line[7:])
            if not script:
                await asyncio.sleep(0.05)  # a quiet stream the server then ends
            await resp.write_eof()
            return resp
        index = int(request.query.get("continue") or 0)
        assert request.query["limit"] == "2"
        if index == 0:
            self.lists += 1
        version = self.list_versions[min(self.lists, len(self.list_versions)) - 1]
        more = index + 1 < len(self.pages)
        meta = {"resourceVersion": version, "continue": str(index + 1) if more else ""}
        return web.json_response({"metadata": meta, "items": self.pages[index]})


@pytest.fixture
async def serve() -> AsyncIterator[Any]:
    runners: list[web.AppRunner] = []

    async def start(server: _Server) -> KubeClient:
        app = web.Application()
        app.router.add_get("/api/v1/pods", server.pods)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return KubeClient(Credentials(server=f"http://127.0.0.1:{port}"))

    yield start
    for runner in runners:
        await runner.cleanup()


def _recorder() -> tuple[list[tuple[str | None, str]], Any]:
    seen: list[tuple[str | None, str]] = []

    def deliver(event_type: str | None, body: Mapping[str, Any]) -> None:
        seen.append((event_type, body["metadata"]["uid"]))

    return seen, deliver


SETTINGS = ListWatchSettings(page=2, min_watch=0.05, backoffs=(0.01,))


@pytest.mark.parametrize(
    ("cached", "expected_deletes"),
    [
        pytest.param({}, [], id="nothing-cached"),
        pytest.param({"a": "4"}, [], id="listed-kept"),
        pytest.param({"gone": "3"}, ["gone"], id="deleted-in-gap"),
        pytest.param({"later": "12"}, [], id="newer-than-list-kept"),
        pytest.param({"gone": "3", "other": "9", "c": "1"}, ["gone", "other"], id="several"),
    ],
)
async def test_relist_pages_and_synthesises_deletes(
    serve: Any, cached: dict[str, str], expected_deletes: list[str]
) -> None:
    server = _Server([[_pod("a", "4"), _pod("b", "5")], [_pod("c", "6")]], ["10"], [])
    client = await serve(server)
    seen, deliver = _recorder()
    stream = ListWatch(client, "/api/v1/pods", deliver, lambda: cached, SETTINGS)
    await stream.relist()
    await client.close()
    listed = [(None, "a"), (None, "b"), (None, "c")]
    assert seen == listed + [("DELETED", uid) for uid in expected_deletes]
    assert stream.resource_version == "10"
    assert stream.synced.is_set()


async def test_watch_resumes_from_last_version_and_relists_on_410(serve: Any) -> None:
    first = [
        {"type": "ADDED", "object": _pod("x", "11")},
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "15"}}},
        {"type": "MODIFIED", "object": _pod("x", "16")},
    ]
    gone = [{"type": "ERROR", "object": {"kind": "Status", "code": 410}}]
    server = _Server([[_pod("a", "4")]], ["10", "20"], [first, gone])
    client = await serve(server)
    seen, deliver = _recorder()
    cached = {"x": "16"}  # x is gone from the second list, which is newer than its version

    stream = ListWatch(client, "/api/v1/pods", deliver, lambda: cached, SETTINGS)
    task = asyncio.create_task(stream.run())
    for _ in range(200):
        if len(server.watch_versions) == 3:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await client.close()

    # The second watch resumed after the bookmark's successor; the 410 forced a relist.
    assert server.watch_versions == ["10", "16", "20"]
    assert server.lists == 2
    assert seen == [
        (None, "a"),
        ("ADDED", "x"),
        ("MODIFIED", "x"),
        (None, "a"),
        ("DELETED", "x"),
    ]


async def test_direct_rows_bypass_kopf_and_feed_the_same_handler() -> None:
    client = KubeClient(Credentials(server="http://127.0.0.1:1"))
    profiles = {"podium": default_profile("podium")}
    scheduler = PodiumScheduler(Binder(client, "t"), profiles, Metrics())
    registry = kopf.OperatorRegistry()
    register_watches(registry, scheduler)
    kopf_ids = {h.id for h in registry._watching.get_all_handlers()}
    streams = direct_watches(scheduler, client)

    direct = [row.kind.plural for row in WATCHED if row.direct]
    assert direct == ["pods"]
    assert "pods_event" not in kopf_ids
    assert {
        f"{row.kind.plural}_event" for row in WATCHED if not (row.direct or row.optional)
    } <= kopf_ids
    assert [stream.path for stream in streams] == ["/api/v1/pods"]

    pod = {
        "metadata": {"uid": "u1", "name": "p", "namespace": "ns", "resourceVersion": "3"},
        "spec": {"schedulerName": "podium", "containers": [{"name": "c"}]},
    }
    streams[0].deliver(None, pod)
    assert "u1" in scheduler.queue.entries
    assert streams[0].cached() == {"u1": "3"}
    streams[0].deliver("DELETED", {"metadata": {"uid": "u1"}})
    assert "u1" not in scheduler.queue.entries
    await client.close()
