"""The event loop ``podium run`` runs on: the stdlib's, or uvloop with its socket fix.

uvloop's ``create_connection(sock=...)``, which aiohttp uses for every new
connection, hands the socket's file descriptor to libuv and, when the connect
is cancelled or fails (a connect timeout, an API server restart), closes that
descriptor without detaching the Python socket (MagicStack/uvloop#738, still
open in 0.23). The socket object later closes the same number again, by then
reused by another connection: "File descriptor N is used by transport" or
EBADF, and the watches end. ``_FixedLoop`` detaches the socket on that path,
so that the descriptor is closed exactly once.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any

__all__ = ["LOOPS", "loop_factory"]

LOOPS = ("asyncio", "uvloop")


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
