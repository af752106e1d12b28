"""structlog JSON (or console) logging for Podium and for kopf's own records.

Podium writes a decision record per scheduled pod, so its own records skip the
stdlib ``logging`` module: a filtering bound logger drops records below
``--log-level`` before any processor runs, the processors render the line, and
one write per record puts it on stderr (JSON as orjson bytes on stderr's binary
buffer). The writer looks ``sys.stderr`` up at each write, so a swapped stream
(pytest's capture) gets the lines. kopf and aiohttp log through ``logging``;
the root logger's handler renders their records with the same processors
through structlog's ProcessorFormatter, so both kinds of line carry the same
keys. ``demo`` is for ``make demo``: one short line per record, a decision as
"pod -> node" or the reason it is unschedulable.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Literal

import orjson
import structlog

__all__ = ["configure_logging", "demo_line"]

LogFormat = Literal["json", "console", "demo"]

DEMO_WIDTH = 100
_HIDDEN = frozenset({"timestamp", "level", "logger", "event", "schema"})


def _kopf_extras(
    _: object, __: str, event: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """kopf attaches its settings and object refs as extras; keep only a short ref."""
    event.pop("settings", None)
    event.pop("k8s_skip", None)
    ref = event.pop("k8s_ref", None)
    if isinstance(ref, dict):
        if ref.get("namespace"):
            event.setdefault("namespace", ref["namespace"])
        event.setdefault("object", f"{ref.get('kind', '')}/{ref.get('name', '')}")
    return event


def _dumps(value: object, **_: object) -> str:
    """orjson for the JSON renderer: about 8x faster than json.dumps on a decision record."""
    return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


_LINE = orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE


def _json_line(_: object, __: str, event: structlog.typing.EventDict) -> bytes:
    """Podium's own record as the bytes of one JSON line: ``_dumps`` plus the newline."""
    try:
        return orjson.dumps(event, default=str, option=_LINE)
    except orjson.JSONEncodeError:
        # orjson refuses lone surrogates and integers past 64 bits; the record still goes out.
        return (json.dumps(event, default=str) + "\n").encode()


class _Stderr:
    """structlog's wrapped logger: one write of the rendered line to the current sys.stderr.

    ``name`` is what structlog.get_logger was given, for the ``logger`` key. A
    failed write is dropped, as logging's handlers drop it: a log that cannot be
    written must not stop scheduling.
    """

    __slots__ = ("name",)

    def __init__(self, name: str = "") -> None:
        self.name = name


class _JsonStderr(_Stderr):
    def msg(self, line: bytes) -> None:
        stream = sys.stderr
        buffer = getattr(stream, "buffer", None)
        try:
            if buffer is None:
                stream.write(line.decode())
                stream.flush()
            else:
                buffer.write(line)
                buffer.flush()
        except OSError:
            pass

    debug = info = warning = error = critical = msg


class _TextStderr(_Stderr):
    def msg(self, line: str) -> None:
        stream = sys.stderr
        try:
            stream.write(line + "\n")
            stream.flush()
        except OSError:
            pass

    debug = info = warning = error = critical = msg


def _short(value: object) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return text if " " not in text else repr(text)


def _clip(line: str, width: int = DEMO_WIDTH) -> str:
    """Cut to ``width`` columns, after the last whole sentence that fits if there is one."""
    if len(line) <= width:
        return line
    cut = line[: width - 4]
    sentence = cut.rfind(". ")
    return (cut[: sentence + 1] if sentence > width // 2 else cut) + " ..."


def demo_line(_: object, __: str, event: structlog.typing.EventDict) -> str:
    """One line of at most 100 columns; decision records read as sentences."""
    stamp = str(event.get("timestamp", ""))[11:19]
    name = event.get("event")
    if name == "decision":
        pod = f"{event.get('namespace')}/{event.get('pod')}"
        result = event.get("result")
        if result == "scheduled":
            nodes = event.get("nodes") or {}
            fit = f"{nodes.get('feasible', '?')}/{nodes.get('total', '?')} nodes fit"
            took = float(event.get("duration_ms") or 0)
            text = f"{pod} -> {event.get('node')}  ({fit}, {took:.1f} ms)"
        elif result == "dry_run":
            text = f"{pod} would go to {event.get('node')} (dry run)"
        else:
            text = f"{pod} {result}: {event.get('message')}"
        return _clip(f"{stamp}  {text}")
    level = str(event.get("level", "info"))
    marker = "" if level in ("info", "debug") else f"{level.upper()} "
    fields = " ".join(f"{k}={_short(v)}" for k, v in event.items() if k not in _HIDDEN)
    return _clip(f"{stamp}  {marker}{name} {fields}".rstrip())


def configure_logging(fmt: LogFormat = "json", level: str = "INFO") -> None:
    """Send Podium's records straight to stderr and other libraries' through the root logger.

    Calling it again replaces the configuration rather than adding to it (the
    root logger keeps a single handler). A structlog logger keeps the
    configuration of its first use (cache_logger_on_first_use), so configure
    before Podium logs.
    """
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    own: structlog.typing.Processor
    foreign: structlog.typing.Processor
    writer: type[_Stderr]
    if fmt == "json":
        own, foreign, writer = (
            _json_line,
            structlog.processors.JSONRenderer(serializer=_dumps),
            _JsonStderr,
        )
    elif fmt == "demo":
        own = foreign = demo_line
        writer = _TextStderr
    else:
        own = foreign = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
        writer = _TextStderr
    structlog.configure(
        processors=[
            *shared,
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            own,
        ],
        logger_factory=writer,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.ExtraAdder(), _kopf_extras],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, foreign],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # kopf logs every handled event at INFO; at scheduler volumes that is noise.
    kopf_level = logging.WARNING if fmt == "demo" else logging.INFO
    logging.getLogger("kopf").setLevel(max(kopf_level, root.level))
    logging.getLogger("kopf.objects").setLevel(max(logging.WARNING, root.level))
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
