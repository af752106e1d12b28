"""Both event loops `podium run` offers keep their sockets straight under connection churn.

Plain uvloop 0.23 fails this churn about three runs in four with "File
descriptor N is used by transport" (uvloop#738); ``podium.runtime.eventloop``'s
uvloop detaches the socket of a failed connect and passes.
"""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from podium.runtime.eventloop import LOOPS, loop_factory

from . import test_kube_client as churn


async def _churn() -> None:
    async def ok(_: web.Request) -> web.Response:
        return web.json_response({"kind": "Status", "status": "Success"})

    app = web.Application()
    app.router.add_get("/ok", ok)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        await churn.test_connection_resets_and_cancelled_connects_leave_sockets_usable(
            f"http://127.0.0.1:{port}"
        )
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("name", LOOPS)
def test_connection_churn_on_each_loop(name: str) -> None:
    with asyncio.Runner(loop_factory=loop_factory(name)) as runner:
        runner.run(_churn())


def test_unknown_loop_is_refused() -> None:
    with pytest.raises(ValueError, match="uvloop"):
        loop_factory("trio")
