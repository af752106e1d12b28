"""The event loop ``podium run`` runs on: the stdlib's, or uvloop with its socket fix.

uvloop's ``create_connection(sock=...)``, which aiohttp uses for every new
connection, hands the socket's file descriptor to libuv and, when the connect
is cancelled or fails (a connect timeout, an API server restart), closes that
descriptor without detaching the Python socket (MagicStack/uvloop#738, still
open in 0.23). The socket object later closes the same number again, by then
reused by another connection: "File descriptor N is used by transport" or
EBADF, and the watches end. ``_FixedLoop`` detaches the socket on that path,
so that the descriptor is closed exactly once.

The stdlib loop's TLS transport gives every connection a 256 KiB read buffer,
zeroed and so resident, whatever the connection carries: 64 API connections and
kopf's watch streams held about 20 MiB in them. ``small_tls_buffers`` makes it
32 KiB, two TLS records; a read only ever returns one record's 16 KiB at most.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any

__all__ = ["LOOPS", "TLS_READ_BUFFER", "loop_factory", "small_tls_buffers"]

LOOPS = ("asyncio", "uvloop")
TLS_READ_BUFFER = 32 * 1024


def _uvloop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    import uvloop

    class _FixedLoop(uvloop.Loop):
        async def create_connection(
            self, protocol_factory: Any, host: Any = None, port: Any = None, **kwargs: Any
        ) -> Any:
            sock = kwargs.get("sock")
            if not isinstance(sock, socket.socket) or sock.type != socket.SOCK_STREAM:
                return await super().create_connection(protocol_factory, host, port, **kwargs)
            try:
                return await super().create_connection(protocol_factory, host, port, **kwargs)
            except BaseException:
                sock.detach()  # libuv owned and closed the descriptor (uvloop#738)
                raise

    return _FixedLoop


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """A factory for ``asyncio.Runner``: ``asyncio`` (the stdlib's) or ``uvloop``."""
    if name == "uvloop":
        return _uvloop_factory()
    if name == "asyncio":
        return asyncio.new_event_loop
    raise ValueError(f"unknown event loop {name!r}; choose from {', '.join(LOOPS)}")


def small_tls_buffers() -> None:
    """Shrink the stdlib TLS transport's per-connection read buffer (uvloop has its own)."""
    import asyncio.sslproto

    asyncio.sslproto.SSLProtocol.max_size = TLS_READ_BUFFER
