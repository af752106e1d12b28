"""KubeClient under connection churn, on the event loop Podium runs on.

When kube-apiserver restarts, every pooled connection is reset and reconnects
fail or time out mid-connect, many at once. The loop must keep its sockets
straight through that: an event loop that reuses a file descriptor it still
counts as open breaks later connects with "File descriptor N is used by
transport" or EBADF, and kopf's watchers end the operator on it.
"""

from __future__ import annotations

import asyncio
import errno
import random
import socket
import struct
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from podium.kube.client import KubeClient
from podium.kube.credentials import Credentials

RESETS = 150  # rounds of concurrent failing requests
CONCURRENCY = 20


async def _resetting_server() -> tuple[socket.socket, asyncio.Task[None]]:
    """Accepts, then resets each connection at once or closes it a few ms later."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(1024)
    server.setblocking(False)
    loop = asyncio.get_running_loop()
    rng = random.Random(7)

    async def accept() -> None:
        while True:
            conn, _ = await loop.sock_accept(server)
            if rng.random() < 0.5:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                conn.close()
            else:
                loop.call_later(rng.random() * 0.01, conn.close)

    return server, asyncio.create_task(accept())


@pytest.fixture
async def healthy_url() -> AsyncIterator[str]:
    async def ok(_: web.Request) -> web.Response:
        return web.json_response({"kind": "Status", "status": "Success"})

    app = web.Application()
    app.router.add_get("/ok", ok)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_connection_resets_and_cancelled_connects_leave_sockets_usable(
    healthy_url: str,
) -> None:
    loop = asyncio.get_running_loop()
    stray: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: stray.append(context))
    server, acceptor = await _resetting_server()
    port = server.getsockname()[1]
    rng = random.Random(11)
    failures: dict[str, int] = {}

    async def failing(client: KubeClient) -> None:
        # Cancel some requests in the middle of their connect, as a timeout does.
        try:
            await asyncio.wait_for(client.get("/api"), timeout=rng.random() * 0.01)
        except Exception as exc:
            assert not isinstance(exc, RuntimeError), exc  # "File descriptor N is used by ..."
            failures[type(exc).__name__] = failures.get(type(exc).__name__, 0) + 1

    churned = KubeClient(
        Credentials(server=f"https://127.0.0.1:{port}", insecure=True), pool_size=CONCURRENCY
    )
    healthy = KubeClient(Credentials(server=healthy_url), pool_size=4)
    try:
        for _ in range(RESETS):
            await asyncio.gather(*(failing(churned) for _ in range(CONCURRENCY)))
            answers = await asyncio.gather(*(healthy.get("/ok") for _ in range(4)))
            assert answers == [{"kind": "Status", "status": "Success"}] * 4
    finally:
        acceptor.cancel()
        server.close()
        await churned.close()
        await healthy.close()
        loop.set_exception_handler(previous)

    assert sum(failures.values()) == RESETS * CONCURRENCY, failures
    bad_fd = [c for c in stray if getattr(c.get("exception"), "errno", None) == errno.EBADF]
    assert bad_fd == [], [repr(c["exception"]) for c in bad_fd]
