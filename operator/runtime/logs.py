"""structlog JSON (or console) logging for Podium and for kopf's own records.

kopf logs through the stdlib ``logging`` module; routing the root logger
through structlog's ProcessorFormatter gives both the same renderer, ISO UTC
timestamps and stable keys. ``demo`` is for ``make demo``: one short line
per record, a decision as "pod -> node" or the reason it is unschedulable.
"""

from __future__ import annotations

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
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.typing.Processor
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer(serializer=_dumps)
    elif fmt == "demo":
        renderer = demo_line
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    structlog.configure(
        processors=[
            *shared,
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.ExtraAdder(), _kopf_extras],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
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
