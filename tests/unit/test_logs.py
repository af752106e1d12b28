"""configure_logging: Podium's records written straight to stderr, kopf's through logging."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

import kopf
import pytest
import structlog

from podium.framework.decision import SCHEMA
from podium.runtime.logs import DEMO_WIDTH, LogFormat, configure_logging
from tests.unit.builders import node, pod
from tests.unit.test_decision import BIG, SMALL, decide, validate

LOGGER = "podium.scheduling.scheduler"
FOREIGN = ("kopf", "kopf.objects", "aiohttp.access")


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """configure_logging changes process-wide state; later tests get it back as it was."""
    config = structlog.get_config()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    foreign = {name: logging.getLogger(name).level for name in FOREIGN}
    yield
    structlog.contextvars.clear_contextvars()
    structlog.configure(**config)
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, value in foreign.items():
        logging.getLogger(name).setLevel(value)


def lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    err = capsys.readouterr().err
    assert err.endswith("\n") or err == ""
    return err.splitlines()


def records(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines(capsys)]


def stamp(record: dict[str, Any]) -> datetime:
    """The record's ISO UTC timestamp, checked to be recent; it is popped from the record."""
    text = record.pop("timestamp")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", text), text
    when = datetime.fromisoformat(text)
    assert when.tzinfo == UTC
    assert abs(datetime.now(UTC) - when) < timedelta(minutes=1)
    return when


def _info(log: Any) -> None:
    log.info("cache_primed", nodes=3, pods=12)


def _bound(log: Any) -> None:
    structlog.contextvars.bind_contextvars(attempt=2)
    log.warning("bind_failed", pod="shop/web-0", status=409)


def _interpolated(log: Any) -> None:
    log.error("bind of %s failed %d times", "web-0", 3)


def _odd_values(log: Any) -> None:
    log.info("odd", counts={1: "a"}, ratio=0.5, missing=None, when=datetime(2026, 1, 2, tzinfo=UTC))


def _surrogate(log: Any) -> None:
    # orjson refuses a lone surrogate; the record still goes out, as json.dumps writes it.
    log.info("bad_text", message="a\ud800b")


# name, what is logged, the record without its timestamp, in key order
CASES: list[tuple[str, Callable[[Any], None], dict[str, Any]]] = [
    (
        "plain",
        _info,
        {"nodes": 3, "pods": 12, "event": "cache_primed", "level": "info", "logger": LOGGER},
    ),
    (
        "contextvars",
        _bound,
        {
            "pod": "shop/web-0",
            "status": 409,
            "event": "bind_failed",
            "attempt": 2,
            "level": "warning",
            "logger": LOGGER,
        },
    ),
    (
        "positional-args",
        _interpolated,
        {"event": "bind of web-0 failed 3 times", "level": "error", "logger": LOGGER},
    ),
    (
        "non-str-keys-and-values",
        _odd_values,
        {
            "counts": {"1": "a"},
            "ratio": 0.5,
            "missing": None,
            "when": "2026-01-02T00:00:00+00:00",
            "event": "odd",
            "level": "info",
            "logger": LOGGER,
        },
    ),
    (
        "lone-surrogate",
        _surrogate,
        {"message": "a\ud800b", "event": "bad_text", "level": "info", "logger": LOGGER},
    ),
]


@pytest.mark.parametrize(("name", "emit", "expected"), CASES, ids=[c[0] for c in CASES])
def test_json_record(
    capsys: pytest.CaptureFixture[str],
    name: str,
    emit: Callable[[Any], None],
    expected: dict[str, Any],
) -> None:
    configure_logging("json", "INFO")
    emit(structlog.get_logger(LOGGER))
    [record] = records(capsys)
    stamp(record)
    assert list(record.items()) == list(expected.items()), name


def test_json_line_is_compact_orjson_with_one_newline(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("json", "INFO")
    structlog.get_logger(LOGGER).info("cache_primed", node="ü", nodes=3)
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert re.fullmatch(
        r'\{"node":"ü","nodes":3,"event":"cache_primed","level":"info",'
        r'"logger":"podium\.scheduling\.scheduler","timestamp":"[^"]+Z"\}\n',
        err,
    )


def test_decision_record_from_a_real_cycle_matches_the_schema(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("json", "INFO")
    record = decide([BIG, SMALL], pod("web-0", cpu="2"), 2)
    structlog.get_logger(LOGGER).info("decision", **record)
    [line] = lines(capsys)
    logged = validate(line)
    stamp(logged)
    assert logged == {**record, "event": "decision", "level": "info", "logger": LOGGER}
    assert logged["schema"] == SCHEMA


def test_exception_is_rendered_into_the_record(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("json", "INFO")
    try:
        raise RuntimeError("watch closed")
    except RuntimeError:
        structlog.get_logger(LOGGER).exception("watch_failed", kind="Pod")
    [record] = records(capsys)
    assert (record["kind"], record["event"], record["level"]) == ("Pod", "watch_failed", "error")
    assert record["exception"].startswith("Traceback (most recent call last):")
    assert record["exception"].endswith("RuntimeError: watch closed")


class Exploding:
    """A value whose rendering fails: a filtered record must never be rendered."""

    def __str__(self) -> str:
        raise AssertionError("a filtered record was rendered")


# --log-level, the events that come out of debug/info/warning/error calls
LEVELS: list[tuple[str, list[str]]] = [
    ("DEBUG", ["d", "i", "w", "e"]),
    ("INFO", ["i", "w", "e"]),
    ("WARNING", ["w", "e"]),
    ("ERROR", ["e"]),
]


@pytest.mark.parametrize(("level", "events"), LEVELS, ids=[c[0] for c in LEVELS])
def test_level_filters_podiums_records(
    capsys: pytest.CaptureFixture[str], level: str, events: list[str]
) -> None:
    configure_logging("json", level)
    log = structlog.get_logger(LOGGER)
    for method, event in (
        (log.debug, "d"),
        (log.info, "i"),
        (log.warning, "w"),
        (log.error, "e"),
    ):
        method(event, value=Exploding() if event not in events else 1)
    assert [r["event"] for r in records(capsys)] == events


def _kopf_object_warning() -> None:
    ref = {"kind": "Pod", "name": "web-0", "namespace": "shop", "uid": "u"}
    settings = kopf.OperatorSettings()
    settings.posting.enabled = False  # kopf's own handler would post it as a k8s Event
    logging.getLogger("kopf.objects").warning(
        "Handler %r failed", "on_pod", extra={"k8s_ref": ref, "settings": settings}
    )


def _kopf_info() -> None:
    logging.getLogger("kopf.activities").info("Startup done")


def _kopf_objects_info() -> None:
    logging.getLogger("kopf.objects").info("Handler succeeded")


def _aiohttp_access() -> None:
    logging.getLogger("aiohttp.access").info("GET /metrics 200")


def _library_warning() -> None:
    logging.getLogger("kopf.x").warning("slow %s", "watch", extra={"retries": 2})


# name, the stdlib call, the JSON record it gives at INFO (None: filtered)
FOREIGN_CASES: list[tuple[str, Callable[[], None], dict[str, Any] | None]] = [
    (
        "kopf-object-ref",
        _kopf_object_warning,
        {
            "event": "Handler 'on_pod' failed",
            "level": "warning",
            "logger": "kopf.objects",
            "namespace": "shop",
            "object": "Pod/web-0",
        },
    ),
    (
        "kopf-info",
        _kopf_info,
        {"event": "Startup done", "level": "info", "logger": "kopf.activities"},
    ),
    ("kopf-objects-info", _kopf_objects_info, None),
    ("aiohttp-access", _aiohttp_access, None),
    (
        "extras",
        _library_warning,
        {"event": "slow watch", "level": "warning", "logger": "kopf.x", "retries": 2},
    ),
]


@pytest.mark.parametrize(
    ("name", "emit", "expected"), FOREIGN_CASES, ids=[c[0] for c in FOREIGN_CASES]
)
def test_foreign_stdlib_record(
    capsys: pytest.CaptureFixture[str],
    name: str,
    emit: Callable[[], None],
    expected: dict[str, Any] | None,
) -> None:
    configure_logging("json", "INFO")
    emit()
    got = records(capsys)
    for record in got:
        stamp(record)
    assert got == ([] if expected is None else [expected]), name


UNFIT = (
    "0/40 nodes are available: 40 Insufficient cpu. preemption: 0/40 nodes are available: "
    "40 No preemption victims found for incoming pod."
)


def test_demo_decision_is_one_short_line(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("demo", "INFO")
    log = structlog.get_logger(LOGGER)
    record = decide([BIG, SMALL], pod("web-0", cpu="2"), 2)
    log.info("decision", **record)
    unfit = decide([node(f"tiny-{i}", cpu="1") for i in range(40)], pod("huge", cpu="64"), 0)
    log.info("decision", **{**unfit, "message": UNFIT})
    scheduled, unschedulable = lines(capsys)
    assert re.fullmatch(
        r"\d\d:\d\d:\d\d  default/web-0 -> big  \(2/2 nodes fit, 0\.2 ms\)", scheduled
    )
    assert unschedulable.endswith(
        "  default/huge unschedulable: 0/40 nodes are available: 40 Insufficient cpu. ..."
    )
    assert max(len(scheduled), len(unschedulable)) <= DEMO_WIDTH


# formats configured one after the other; the last one renders
TWICE: list[tuple[LogFormat, LogFormat, str]] = [
    ("json", "json", r'\{"nodes":3,"event":"cache_primed",.*\}'),
    ("json", "demo", r"\d\d:\d\d:\d\d  cache_primed nodes=3"),
    ("demo", "console", r".*cache_primed.*nodes=3.*"),
    ("console", "json", r'\{"nodes":3,"event":"cache_primed",.*\}'),
]


@pytest.mark.parametrize(("first", "second", "line"), TWICE, ids=[f"{a}-{b}" for a, b, _ in TWICE])
def test_configuring_twice_writes_each_record_once(
    capsys: pytest.CaptureFixture[str], first: LogFormat, second: LogFormat, line: str
) -> None:
    configure_logging(first, "INFO")
    configure_logging(second, "INFO")
    structlog.get_logger(LOGGER).info("cache_primed", nodes=3)
    logging.getLogger("kopf.x").warning("kopf_said")
    own, foreign = lines(capsys)
    assert re.fullmatch(line, own), own
    assert "kopf_said" in foreign


def _buffered() -> tuple[TextIO, Callable[[], bytes]]:
    raw = io.BytesIO()
    return io.TextIOWrapper(raw, encoding="utf-8", write_through=True), raw.getvalue


def _text_only() -> tuple[TextIO, Callable[[], bytes]]:
    stream = io.StringIO()
    return stream, lambda: stream.getvalue().encode()


# a stderr with a binary buffer (as the real one) and one without
STREAMS: list[tuple[str, Callable[[], tuple[TextIO, Callable[[], bytes]]]]] = [
    ("binary-buffer", _buffered),
    ("text-only", _text_only),
]


@pytest.mark.parametrize(("name", "make"), STREAMS, ids=[c[0] for c in STREAMS])
def test_records_follow_the_current_stderr(
    name: str, make: Callable[[], tuple[TextIO, Callable[[], bytes]]]
) -> None:
    configure_logging("json", "INFO")
    log = structlog.get_logger(LOGGER)
    stream, written = make()
    with contextlib.redirect_stderr(stream):
        log.info("cache_primed", nodes=3)
    [line] = written().splitlines()
    assert json.loads(line)["event"] == "cache_primed", name


class ClosedPipe(io.StringIO):
    """stderr whose reader has gone: every write fails as a closed pipe does."""

    def write(self, _: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.parametrize("fmt", ["json", "demo", "console"])
def test_a_failed_write_does_not_reach_the_caller(fmt: LogFormat) -> None:
    configure_logging(fmt, "INFO")
    log = structlog.get_logger(LOGGER)
    with contextlib.redirect_stderr(ClosedPipe()):
        log.info("decision", pod="web-0", namespace="shop", result="scheduled", node="n")
        log.warning("lease_renew_failed", error="x")
