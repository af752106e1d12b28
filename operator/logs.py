"""structlog JSON (or console) logging for Podium and for kopf's own records.

kopf logs through the stdlib ``logging`` module; routing the root logger
through structlog's ProcessorFormatter gives both the same renderer, ISO UTC
timestamps and stable keys.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal

import orjson
import structlog

__all__ = ["configure_logging"]

LogFormat = Literal["json", "console"]


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


def configure_logging(fmt: LogFormat = "json", level: str = "INFO") -> None:
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer(serializer=_dumps)
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
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
    logging.getLogger("kopf").setLevel(max(logging.INFO, root.level))
    logging.getLogger("kopf.objects").setLevel(max(logging.WARNING, root.level))
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
