"""The API client's keep-alive connections (podium.kube.http): answers parsed from
bytes, and a pool that reuses, limits and discards connections as it must."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from podium.kube import http
from podium.kube.http import Answer, ConnectionPool, parse_answer

_JSON = b'{"kind":"Status"}'


@pytest.mark.parametrize(
    ("data", "eof", "status", "body", "left", "keep"),
    [
        (
            b"HTTP/1.1 201 Created\r\nContent-Length: 17\r\n\r\n" + _JSON,
            False,
            201,
            _JSON,
            0,
            True,
        ),
        # a second answer behind the first is not consumed
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}HTTP/1.1", False, 200, b"{}", 8, True),
        # chunked, with a chunk extension and a trailer
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b'3;x=y\r\n{"a\r\n5\r\n":1}\n\r\n0\r\nX-Trailer: 1\r\n\r\n',
            False,
            200,
            b'{"a":1}\n',
            0,
            True,
        ),
        (b"HTTP/1.1 204 No Content\r\n\r\n", False, 204, b"", 0, True),
        (
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
            False,
            200,
            b"{}",
            0,
            False,
        ),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}", False, 200, b"{}", 0, False),
        # no declared length: the body ends with the connection
        (b"HTTP/1.1 500 Oops\r\n\r\nbroken", True, 500, b"broken", 0, False),
        # an interim answer comes before the real one
        (
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
            False,
            200,
            b"{}",
            0,
            True,
        ),
    ],
)
def test_answers_are_parsed(
    data: bytes, eof: bool, status: int, body: bytes, left: int, keep: bool
) -> None:
    """``left``: the bytes after the answer, which belong to the next one."""
    parsed = parse_answer(data, eof)
    assert parsed is not None
    answer, consumed, reusable = parsed
    assert (answer.status, answer.body, len(data) - consumed, reusable) == (
        status,
        body,
        left,
        keep,
    )


def test_header_names_are_lower_case() -> None:
    parsed = parse_answer(b"HTTP/1.1 429 Too Many\r\nRetry-After: 3\r\nContent-Length: 0\r\n\r\n")
    assert parsed is not None
    assert parsed[0].headers == {"retry-after": "3", "content-length": "0"}


@pytest.mark.parametrize(
    "data",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 2",  # headers not ended
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{}",  # body short
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n",  # no last chunk
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab",  # chunk short
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: 1\r\n",  # trailer open
        b"HTTP/1.1 200 OK\r\n\r\nbody",  # no length, connection still open
        # a chunk whose data ends with an empty line, the last chunk still to come
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nab\r\n\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n",  # interim, then nothing whole
    ],
)
def test_incomplete_answers_wait_for_more(data: bytes) -> None:
    assert parse_answer(data) is None


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"SMTP ready\r\n\r\n", "status line"),
        (b"HTTP/1.1 OK 200\r\n\r\n", "status line"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "header line"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "content-length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n", "chunk size"),
    ],
)
def test_malformed_answers_are_connection_errors(data: bytes, match: str) -> None:
    with pytest.raises(ConnectionError, match=match):
        parse_answer(data)


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            await reader.readexactly(int(line.split(b":")[1]))
    return head


def _ok(body: bytes = b"{}") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


class _Server:
    """A loopback HTTP server whose behaviour each test scripts, counting connections."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.open = 0
        self.most_open = 0
        self.server: asyncio.Server | None = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            await self.handler(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.open -= 1
            writer.close()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/prefix"

    async def __aexit__(self, *_: object) -> None:
        assert self.server is not None
        self.server.close()


async def _keep_alive(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        head = await _read_request(reader)
        path = head.split(b" ")[1]
        writer.write(_ok(b'"' + path + b'"'))
        await writer.drain()


def _slow(delay: float) -> Handler:
    """A keep-alive server that answers each request ``delay`` seconds after reading it."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await _read_request(reader)
            await asyncio.sleep(delay)
            writer.write(_ok())
            await writer.drain()

    return serve


async def test_sequential_requests_share_one_connection() -> None:
    server = _Server(_keep_alive)
    async with server as url:
        pool = ConnectionPool(url, None, limit=4)
        answers = [await pool.request("GET", f"/p{i}?a=b", {}, None, 5) for i in range(5)]
        await pool.close()
    assert [a.body for a in answers] == [b'"/prefix/p%d?a=b"' % i for i in range(5)]
    assert server.connections == 1


async def test_concurrent_requests_never_open_more_than_the_limit() -> None:
    server = _Server(_slow(0.01))
    async with server as url:
        pool = ConnectionPool(url, None, limit=3)
        answers = await asyncio.gather(
            *(pool.request("POST", "/x", {}, b"{}", 5) for _ in range(20))
        )
        await pool.close()
    assert all(a == Answer(200, {"content-length": "2"}, b"{}") for a in answers)
    assert server.most_open == 3
    assert server.connections == 3


async def test_a_closed_connection_fails_its_request_and_the_next_one_reconnects() -> None:
    served = 0

    async def close_first(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal served
        served += 1
        await _read_request(reader)
        if served == 1:
            return  # closed without an answer
        writer.write(_ok())
        await writer.drain()
        await _keep_alive(reader, writer)

    server = _Server(close_first)
    async with server as url:
        pool = ConnectionPool(url, None, limit=2)
        with pytest.raises(ConnectionResetError):
            await pool.request("POST", "/bind", {}, b"{}", 5)
        assert (await pool.request("POST", "/bind", {}, b"{}", 5)).status == 200
        await pool.close()
    assert server.connections == 2


async def test_a_connection_the_server_closes_while_idle_is_not_reused() -> None:
    async def one_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(_ok())
        await writer.drain()

    server = _Server(one_answer)
    async with server as url:
        pool = ConnectionPool(url, None, limit=1)
        for _ in range(3):
            assert (await pool.request("GET", "/", {}, None, 5)).status == 200
            await asyncio.sleep(0.05)  # the close reaches the client
        await pool.close()
    assert server.connections == 3


async def test_connection_close_in_the_answer_retires_the_connection() -> None:
    async def closing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}")
        await writer.drain()
        await reader.read()

    server = _Server(closing)
    async with server as url:
        pool = ConnectionPool(url, None, limit=1)
        for _ in range(2):
            assert (await pool.request("GET", "/", {}, None, 5)).body == b"{}"
        await pool.close()
    assert server.connections == 2


async def test_an_answer_in_pieces_is_assembled() -> None:
    async def pieces(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        data = (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b'4\r\n{"a"\r\n3\r\n:1}\r\n0\r\n\r\n'
        )
        for i in range(0, len(data), 7):
            writer.write(data[i : i + 7])
            await writer.drain()
            await asyncio.sleep(0.001)
        await _keep_alive(reader, writer)

    server = _Server(pieces)
    async with server as url:
        pool = ConnectionPool(url, None, limit=1)
        assert (await pool.request("GET", "/", {}, None, 5)).body == b'{"a":1}'
        assert (await pool.request("GET", "/again", {}, None, 5)).status == 200
        await pool.close()
    assert server.connections == 1


async def test_no_answer_in_time_is_a_timeout_and_the_connection_is_dropped() -> None:
    calls = 0

    async def silent_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            await _read_request(reader)
            await reader.read()  # never answers
            return
        await _keep_alive(reader, writer)

    server = _Server(silent_once)
    async with server as url:
        pool = ConnectionPool(url, None, limit=1)
        with pytest.raises(TimeoutError):
            await pool.request("GET", "/", {}, None, 0.1)
        assert (await pool.request("GET", "/", {}, None, 5)).status == 200
        await pool.close()
    assert server.connections == 2


async def test_a_cancelled_request_drops_its_connection_and_frees_its_place() -> None:
    server = _Server(_slow(0.2))
    async with server as url:
        pool = ConnectionPool(url, None, limit=1)
        first = asyncio.create_task(pool.request("GET", "/", {}, None, 5))
        await asyncio.sleep(0.05)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert (await pool.request("GET", "/", {}, None, 5)).status == 200
        await pool.close()
    assert server.connections == 2


async def test_an_idle_connection_past_the_limit_is_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http, "IDLE_LIMIT", 0.05)
    server = _Server(_keep_alive)
    async with server as url:
        pool = ConnectionPool(url, None, limit=1)
        await pool.request("GET", "/", {}, None, 5)
        await asyncio.sleep(0.1)
        await pool.request("GET", "/", {}, None, 5)
        await pool.close()
    assert server.connections == 2


async def test_closing_the_pool_fails_its_waiters() -> None:
    server = _Server(_slow(0.2))
    async with server as url:
        pool = ConnectionPool(url, None, limit=1)
        busy = asyncio.create_task(pool.request("GET", "/", {}, None, 5))
        await asyncio.sleep(0.05)
        waiting = asyncio.create_task(pool.request("GET", "/", {}, None, 5))
        await asyncio.sleep(0.01)
        await pool.close()
        with pytest.raises(ConnectionError, match="closed"):
            await waiting
        assert (await busy).status == 200


@pytest.mark.parametrize("server", ["ftp://host", "https://", "host:6443"])
def test_a_server_address_must_be_http(server: str) -> None:
    with pytest.raises(ValueError, match="http"):
        ConnectionPool(server, None, limit=1)


async def test_accept_is_json_unless_the_caller_names_another() -> None:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await _read_request(reader)
            writer.write(_ok(head))
            await writer.drain()

    server = _Server(echo)
    async with server as url:
        pool = ConnectionPool(url, None, limit=1)
        plain = (await pool.request("GET", "/", {}, None, 5)).body
        chosen = (await pool.request("GET", "/", {"Accept": "application/x"}, None, 5)).body
        await pool.close()
    assert b"\r\nAccept: application/json\r\n" in plain
    assert b"\r\nAccept: application/x\r\n" in chosen
    assert b"application/json" not in chosen
