"""Both event loops `podium run` offers keep their sockets straight under connection churn,
and the stdlib loop's TLS read buffers are small.

Plain uvloop 0.23 fails this churn about three runs in four with "File
descriptor N is used by transport" (uvloop#738); ``podium.runtime.eventloop``'s
uvloop detaches the socket of a failed connect and passes.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import ssl
from pathlib import Path

import pytest
from aiohttp import web

from podium.devcluster.pki import write_pki
from podium.runtime.eventloop import LOOPS, TLS_READ_BUFFER, loop_factory, small_tls_buffers

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


async def test_small_tls_buffers_carry_a_large_answer_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 1 MiB answer over TLS arrives intact through the 32 KiB read buffer."""
    monkeypatch.setattr(
        asyncio.sslproto.SSLProtocol, "max_size", asyncio.sslproto.SSLProtocol.max_size
    )
    small_tls_buffers()
    pki = write_pki(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(pki.serving_cert, pki.serving_key)
    client_ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
    payload = bytes(range(256)) * 4096

    async def answer(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(payload)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    async with server:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client_ctx, server_hostname="127.0.0.1"
        )
        protocol = writer.transport._ssl_protocol  # type: ignore[attr-defined]
        assert len(protocol._ssl_buffer) == TLS_READ_BUFFER == 32 * 1024
        assert await reader.read() == payload
        writer.close()
