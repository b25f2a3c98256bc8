"""memql's own spans (an embedding, the relay's publish, a webhook's delivery) and the trace
context a webhook request carries.

While tracing is off (the default; `memql.tracing` turns it on from the `OTEL_*` environment)
every call here is a check of one module variable: no OpenTelemetry import, no object made, one
shared no-op context manager. The API is imported only once a tracer provider is in use.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider
    from opentelemetry.util.types import AttributeValue

INSTRUMENTATION = "memql"

_OFF: AbstractContextManager[None] = nullcontext()
# the tracer of the provider in use; None while tracing is off
_tracer: Tracer | None = None


def use(provider: TracerProvider | None) -> None:
    """Trace memql's own steps with `provider`'s tracer from now on; None turns them off."""
    global _tracer
    _tracer = None if provider is None else provider.get_tracer(INSTRUMENTATION)


def active() -> bool:
    return _tracer is not None


def span(
    name: str, attributes: Mapping[str, AttributeValue] | None = None, *, client: bool = False
) -> AbstractContextManager[Span | None]:
    """A span named `name`, current inside the block (the span, or None while tracing is off).
    `client`: a call to another service (a webhook's receiver), so a span of kind CLIENT. An
    exception leaving the block is recorded on the span and sets its status to error."""
    if _tracer is None:
        return _OFF
    from opentelemetry.trace import SpanKind

    kind = SpanKind.CLIENT if client else SpanKind.INTERNAL
    return _tracer.start_as_current_span(name, kind=kind, attributes=attributes)


def inject(headers: MutableMapping[str, str]) -> None:
    """Add the current trace context to `headers` (`traceparent`, and `tracestate` or `baggage`
    where there is one; the propagators `OTEL_PROPAGATORS` names); nothing while tracing is
    off."""
    if _tracer is None:
        return
    from opentelemetry import propagate

    propagate.inject(headers)


def set_attribute(name: str, value: AttributeValue) -> None:
    """Set `name` on the current span; nothing while tracing is off."""
    if _tracer is None:
        return
    from opentelemetry import trace

    trace.get_current_span().set_attribute(name, value)


def failed(description: str) -> None:
    """Mark the current span as failed, saying why (an answer that is not a success, where no
    exception says so); nothing while tracing is off."""
    if _tracer is None:
        return
    from opentelemetry import trace

    trace.get_current_span().set_status(trace.StatusCode.ERROR, description)
