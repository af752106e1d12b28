"""Opt-in OpenTelemetry traces of scheduling attempts (docs/tracing.md).

kube-scheduler has no tracing. Podium's is off unless ``podium run --tracing-endpoint``
names an OTLP/HTTP receiver: then ``configure`` imports the OpenTelemetry SDK (the
``podium[tracing]`` extra) and sets ``tracer``. The scheduler reads ``tracer`` once per
attempt; while it is None no span is made and OpenTelemetry is not even imported.

Spans are written after the fact from the ``time.perf_counter`` reads the cycle already
takes for its metrics, turned into wall-clock nanoseconds with one offset, so a traced
cycle takes no extra clock read per plugin.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "AttemptTrace",
    "Attributes",
    "TracingError",
    "begin",
    "configure",
    "parse_endpoint",
    "parse_sampling",
    "shutdown",
    "tracer",
]

INSTALL_HINT = "pip install 'podium[tracing]'"
TRACES_PATH = "/v1/traces"

Attributes = Mapping[str, str | int | float | bool]

tracer: Tracer | None = None
"""The tracer of ``podium run --tracing-endpoint``; None (the default) traces nothing."""

_provider: TracerProvider | None = None
_offset_ns = 0  # time.time_ns() - time.perf_counter_ns(), read when tracing starts


class TracingError(ValueError):
    """A tracing setting ``podium run`` refuses at start."""


def parse_endpoint(url: str) -> str:
    """The OTLP/HTTP traces URL for ``--tracing-endpoint``: an http(s) URL with a host;
    a URL without a path gets the OTLP traces path (as OTEL_EXPORTER_OTLP_ENDPOINT does)."""
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError on a port that is not a number
    except ValueError as exc:
        raise TracingError(f"--tracing-endpoint {url!r}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TracingError(
            f"--tracing-endpoint {url!r}: need an http:// or https:// URL with a host, "
            "such as http://otel-collector:4318"
        )
    if port == 0 or parts.query or parts.fragment:
        raise TracingError(f"--tracing-endpoint {url!r}: need a port above 0 and no query")
    if parts.path in ("", "/"):
        return f"{parts.scheme}://{parts.netloc}{TRACES_PATH}"
    return url


def parse_sampling(text: str) -> float:
    """``--tracing-sampling``: the share of attempts traced, a number in [0, 1]."""
    try:
        ratio = float(text)
    except ValueError:
        raise TracingError(f"--tracing-sampling {text!r}: not a number") from None
    if not math.isfinite(ratio) or not 0.0 <= ratio <= 1.0:
        raise TracingError(f"--tracing-sampling {text!r}: need a ratio from 0 to 1")
    return ratio


def configure(sampling: float, endpoint: str = "", exporter: SpanExporter | None = None) -> None:
    """Start tracing: spans of a ``sampling`` share of attempts (parent-based, so a
    sampled attempt keeps all its children) go in batches to the OTLP/HTTP ``endpoint``,
    or one by one to ``exporter`` when given (tests, embedding programs)."""
    global tracer, _provider, _offset_ns
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError as exc:
        raise TracingError(
            f"tracing needs the OpenTelemetry SDK and OTLP exporter ({exc.name} is "
            f"missing): {INSTALL_HINT}"
        ) from None
    shutdown()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "podium"}),
        sampler=ParentBased(TraceIdRatioBased(sampling)),
    )
    if exporter is None:
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    else:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    _offset_ns = time.time_ns() - time.perf_counter_ns()
    _provider = provider
    tracer = provider.get_tracer("podium")


def shutdown() -> None:
    """Stop tracing, sending what is still batched."""
    global tracer, _provider
    provider, _provider, tracer = _provider, None, None
    if provider is not None:
        provider.shutdown()


def _ns(seconds: float) -> int:
    """A ``time.perf_counter()`` reading as wall-clock nanoseconds since the epoch."""
    return _offset_ns + int(seconds * 1e9)


def begin(name: str, attributes: Attributes, started: float) -> AttemptTrace | None:
    """A root span from ``started`` (a perf_counter reading), or None when tracing is off
    or the sampler dropped it: then the attempt makes no further span."""
    if tracer is None:
        return None
    span = tracer.start_span(name, attributes=attributes, start_time=_ns(started))
    if not span.is_recording():
        return None
    return AttemptTrace(tracer, span, started)


@dataclass(slots=True)
class AttemptTrace:
    """An open attempt span and the spans below it, written as the attempt goes.

    ``mark`` is where the last written child ended: ``point`` writes the next extension
    point from there to now, so each hook in the scheduler is one call.
    """

    tracer: Tracer  # the one that began it, so a late span never finds tracing stopped
    span: Span
    mark: float
    # The binding cycle's span while it is open; extension points then go below it.
    binding: Span | None = None

    def child(
        self,
        name: str,
        start: float,
        end: float,
        attributes: Attributes | None = None,
        parent: Span | None = None,
    ) -> Span:
        """A finished span from ``start`` to ``end`` (perf_counter readings) below
        ``parent``, else below the open binding cycle, else below the attempt."""
        from opentelemetry.trace import set_span_in_context

        context = set_span_in_context(parent or self.binding or self.span)
        span = self.tracer.start_span(
            name, context=context, attributes=attributes, start_time=_ns(start)
        )
        span.end(end_time=_ns(end))
        return span

    def point(self, name: str, now: float) -> None:
        """The extension point ``name`` ran from ``mark`` to ``now``."""
        self.child(name, self.mark, now)
        self.mark = now

    def open_binding(self, name: str, now: float, attributes: Attributes) -> None:
        """The binding cycle starts: a child of the attempt that later points go below."""
        from opentelemetry.trace import set_span_in_context

        self.binding = self.tracer.start_span(
            name,
            context=set_span_in_context(self.span),
            attributes=attributes,
            start_time=_ns(now),
        )
        self.mark = now

    def end(self, now: float, attributes: Attributes, error: str = "") -> None:
        """The attempt is over: close the binding cycle, if open, and the attempt."""
        from opentelemetry.trace import Status, StatusCode

        for span in (self.binding, self.span):
            if span is None:
                continue
            span.set_attributes(attributes)
            if error:
                span.set_status(Status(StatusCode.ERROR, error))
            span.end(end_time=_ns(now))
        self.binding = None
