"""HTTP/1.1 keep-alive connections to the API server, for short request-answer calls.

Every scheduled pod costs two writes (its Binding and its Scheduled Event), and
aiohttp's general client spends more CPU per call than the scheduling cycle that
decided it: URL objects, a cookie jar, a task per request body, a timer per
timeout, header multidicts. The API server needs none of that. Each connection
here is one asyncio protocol that writes a request in a single ``write`` and parses
the status line, the headers it needs and a Content-Length or chunked body.

Errors are the stdlib's, as the callers expect from any request: ``ConnectionError``
(an ``OSError``) when the connection breaks or the answer is malformed, and
``TimeoutError``. A request is never sent twice: the caller decides what a lost
answer means. Watches stream for hours and stay on aiohttp.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["Answer", "ConnectionPool", "parse_answer"]


@dataclass(frozen=True, slots=True)
class Answer:
    """One HTTP answer: the status, its headers (names in lower case) and the body."""

    status: int
    headers: dict[str, str]
    body: bytes


class _Incomplete(Exception):
    """More bytes are needed before the answer can be parsed."""


_HEADER_END = b"\r\n\r\n"
# The API server closes a connection idle for 90 s; one idle this long is not used
# again, so that a request never races that close.
IDLE_LIMIT = 60.0
_NO_BODY = frozenset({204, 304})


def _chunked(data: bytes | bytearray, start: int) -> tuple[bytes, int]:
    """A chunked body from ``start``: its bytes and the offset after it."""
    parts: list[bytes] = []
    at = start
    while True:
        line_end = data.find(b"\r\n", at)
        if line_end < 0:
            raise _Incomplete
        size_text = bytes(data[at:line_end]).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise ConnectionError(f"malformed chunk size {size_text[:20]!r}") from None
        at = line_end + 2
        if size == 0:
            # Trailers, if any, end with an empty line.
            end = data.find(b"\r\n", at)
            while end != at:
                if end < 0:
                    raise _Incomplete
                at = end + 2
                end = data.find(b"\r\n", at)
            return b"".join(parts), at + 2
        if len(data) < at + size + 2:
            raise _Incomplete
        parts.append(bytes(data[at : at + size]))
        at += size + 2


def parse_answer(data: bytes | bytearray, eof: bool = False) -> tuple[Answer, int, bool] | None:
    """The first complete answer in ``data``, the bytes it used and whether the
    connection may carry another request; ``None`` while it is incomplete.

    ``eof``: the server closed the connection, which ends a body of no declared length.
    """
    head_end = data.find(_HEADER_END)
    if head_end < 0:
        return None
    lines = bytes(data[:head_end]).decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest.partition(" ")[0]
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise ConnectionError(f"malformed status line {lines[0][:40]!r}")
    status = int(code)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon:
            raise ConnectionError(f"malformed header line {line[:40]!r}")
        headers[name.strip().lower()] = value.strip()
    start = head_end + 4
    keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
    if 100 <= status < 200:
        # An interim answer (we never send Expect); the real one follows.
        later = parse_answer(data[start:], eof)
        if later is None:
            return None
        answer, used, keep = later
        return answer, start + used, keep
    if status in _NO_BODY:
        return Answer(status, headers, b""), start, keep
    if "chunked" in headers.get("transfer-encoding", "").lower():
        if not data.endswith(_HEADER_END):
            # A whole chunked body ends with an empty line: until the bytes do, a large
            # LIST is not walked chunk by chunk again on every read.
            return None
        try:
            body, end = _chunked(data, start)
        except _Incomplete:
            return None
        return Answer(status, headers, body), end, keep
    length_text = headers.get("content-length")
    if length_text is not None:
        if not length_text.isdigit():
            raise ConnectionError(f"malformed content-length {length_text[:20]!r}")
        end = start + int(length_text)
        if len(data) < end:
            return None
        return Answer(status, headers, bytes(data[start:end])), end, keep
    if not eof:
        return None
    return Answer(status, headers, bytes(data[start:])), len(data), False


class _Connection(asyncio.Protocol):
    """One connection: at most one request in flight, its answer parsed as bytes arrive."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[Answer] | None = None
        self.reusable = True
        self.idle_since = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream transport

    def send(self, request: bytes, waiter: asyncio.Future[Answer]) -> None:
        assert self.transport is not None
        self.waiter = waiter
        self.transport.write(request)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._deliver(eof=False)

    def eof_received(self) -> bool:
        self._deliver(eof=True)
        self.reusable = False
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.reusable = False
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            error = ConnectionResetError("the API server closed the connection")
            if exc is not None:
                error.__cause__ = exc
            waiter.set_exception(error)

    def _deliver(self, eof: bool) -> None:
        waiter = self.waiter
        if waiter is None:
            if self.buffer:  # bytes nobody asked for: this connection is not in step
                self.abort()
            return
        try:
            parsed = parse_answer(self.buffer, eof)
        except ConnectionError as exc:
            self.waiter = None
            self.abort()
            if not waiter.done():
                waiter.set_exception(exc)
            return
        if parsed is None:
            return
        answer, used, keep = parsed
        del self.buffer[:used]
        self.waiter = None
        if not keep or self.buffer:
            self.abort()
        if not waiter.done():
            waiter.set_result(answer)

    def abort(self) -> None:
        self.reusable = False
        if self.transport is not None:
            self.transport.abort()


class ConnectionPool:
    """Up to ``limit`` keep-alive connections to one server; callers beyond wait in turn."""

    def __init__(self, server: str, context: ssl.SSLContext | None, limit: int) -> None:
        url = urlsplit(server)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"not an http(s) server address: {server!r}")
        self.host = url.hostname
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self.prefix = url.path.rstrip("/")
        self.context = context if url.scheme == "https" else None
        authority = url.netloc.rpartition("@")[2]
        self._head = f"Host: {authority}\r\nUser-Agent: podium\r\n"
        self.limit = max(1, limit)
        self._idle: collections.deque[_Connection] = collections.deque()
        self._open = 0
        self._waiting: collections.deque[asyncio.Future[None]] = collections.deque()
        self._closed = False

    async def request(
        self,
        method: str,
        target: str,
        headers: dict[str, str],
        body: bytes | None,
        timeout: float,  # noqa: ASYNC109 - one deadline covers connect, send and answer
    ) -> Answer:
        """Send one request (``target``: path and query) and read its answer.

        ``Accept`` is ``application/json`` unless ``headers`` names another."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        connection = self._take_idle(loop.time())
        if connection is None:
            async with asyncio.timeout_at(deadline):
                connection = await self._acquire()
        head = [f"{method} {self.prefix}{target} HTTP/1.1\r\n{self._head}"]
        if "Accept" not in headers:
            head.append("Accept: application/json\r\n")
        head.extend(f"{name}: {value}\r\n" for name, value in headers.items())
        head.append(f"Content-Length: {len(body)}\r\n\r\n" if body is not None else "\r\n")
        request = "".join(head).encode("latin-1")
        if body:
            request += body
        waiter: asyncio.Future[Answer] = loop.create_future()
        timer = loop.call_at(deadline, _expire, waiter)
        try:
            connection.send(request, waiter)
            answer = await waiter
        except BaseException:
            connection.abort()  # an answer may still come: the connection is out of step
            raise
        finally:
            timer.cancel()
            self._release(connection)
        return answer

    def _take_idle(self, now: float) -> _Connection | None:
        """The most recently used idle connection that is still open, if any."""
        while self._idle:
            connection = self._idle.pop()
            if connection.reusable and now - connection.idle_since < IDLE_LIMIT:
                return connection
            connection.abort()
            self._open -= 1
        return None

    async def _acquire(self) -> _Connection:
        loop = asyncio.get_running_loop()
        while True:
            connection = self._take_idle(loop.time())
            if connection is not None:
                return connection
            if self._closed:
                raise ConnectionError("the connection pool is closed")
            if self._open < self.limit:
                self._open += 1
                try:
                    return await self._connect()
                except BaseException:
                    self._open -= 1
                    self._wake()
                    raise
            turn = asyncio.get_running_loop().create_future()
            self._waiting.append(turn)
            try:
                await turn
            except BaseException:
                if turn.done() and not turn.cancelled():
                    self._wake()  # pass the turn on
                raise

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        transport, connection = await loop.create_connection(
            _Connection,
            self.host,
            self.port,
            ssl=self.context,
            server_hostname=self.host if self.context is not None else None,
        )
        connection.transport = transport  # uvloop calls connection_made only later
        return connection

    def _release(self, connection: _Connection) -> None:
        if connection.reusable and not self._closed:
            connection.idle_since = asyncio.get_running_loop().time()
            self._idle.append(connection)
        else:
            connection.abort()
            self._open -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiting:
            turn = self._waiting.popleft()
            if not turn.done():
                turn.set_result(None)
                return

    async def close(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().abort()
            self._open -= 1
        while self._waiting:
            turn = self._waiting.popleft()
            if not turn.done():
                turn.set_exception(ConnectionError("the connection pool is closed"))


def _expire(waiter: asyncio.Future[Answer]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError("no answer from the API server in time"))
