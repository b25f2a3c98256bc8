"""Tracing with OpenTelemetry: off unless the standard `OTEL_*` environment asks for it.

It is on when `OTEL_TRACES_EXPORTER` names an exporter (`otlp`, `console`) or an OTLP endpoint
is set (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), unless
`OTEL_TRACES_EXPORTER=none` or `OTEL_SDK_DISABLED=true` (`Settings.tracing`). It needs the
`tracing` extra; asked for without it, the start fails with one line saying how to install it.

On, it traces:
- each HTTP request and websocket (opentelemetry-instrumentation-asgi, the outermost
  middleware; `/healthz`, `/readyz` and `/metrics` left out);
- each GraphQL operation, its parsing, validation and each field with a resolver
  (Strawberry's `OpenTelemetryExtension`; of the resolvers' arguments only numbers, booleans
  and enum values are recorded, never text a caller wrote);
- each database statement of a request (opentelemetry-instrumentation-psycopg; the statement's
  text, never its parameters). The background loops' own statements (the relay's and the
  deliverer's polls, the credential cache's listener) are left out: they would make a trace
  every half second;
- the embedding, the relay's publish and each webhook delivery (`memql.spans`), the delivery's
  `traceparent` sent with the webhook request.

Off, nothing here is imported: the app is built as it was without it.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memql import spans
from memql.embeddings import Embedder, Vector
from memql.errors import ConfigurationError
from memql.settings import Settings

if TYPE_CHECKING:
    from graphql import GraphQLResolveInfo
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from starlette.middleware import Middleware
    from strawberry.extensions import SchemaExtension

EXTRA = "tracing"
# probes and scrapes: a span each would drown the requests
UNTRACED_PATHS = (r"/healthz(\?|$)", r"/readyz(\?|$)", r"/metrics(\?|$)")
SERVICE_NAME = "memql"


@dataclass
class Tracing:
    """Tracing for one app: its tracer provider and the exporters that receive its spans
    (none when the caller brought a provider with its own processors)."""

    provider: TracerProvider
    exporters: tuple[str, ...] = ()
    _instrumented: bool = field(default=False, init=False)

    def middleware(self) -> Middleware:
        """The ASGI middleware that makes each request's span, outermost."""
        from starlette.middleware import Middleware

        return Middleware(_RequestSpans, provider=self.provider)

    def extension(self) -> Callable[[], SchemaExtension]:
        """Strawberry's OpenTelemetry extension, for `build_schema(extensions=...)`."""
        from strawberry.extensions.tracing import OpenTelemetryExtension

        provider = self.provider

        def make() -> SchemaExtension:
            return OpenTelemetryExtension(arg_filter=_plain_arguments, tracer_provider=provider)

        return make

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Export spans, trace database statements and memql's own steps until the end, where
        the spans still queued are flushed."""
        async with AsyncExitStack() as stack:
            for processor in _processors(self.exporters):
                self.provider.add_span_processor(processor)
            stack.callback(self.provider.shutdown)
            self._instrument_psycopg()
            stack.callback(self._uninstrument_psycopg)
            spans.use(self.provider)
            stack.callback(spans.use, None)
            yield

    def _instrument_psycopg(self) -> None:
        from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor

        instrumentor = PsycopgInstrumentor()
        # process-wide: a second traced app in the same process shares the first's
        if not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument(tracer_provider=self.provider, skip_dep_check=True)
            self._instrumented = True

    def _uninstrument_psycopg(self) -> None:
        if self._instrumented:
            from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor

            PsycopgInstrumentor().uninstrument()
            self._instrumented = False


class _RequestSpans:
    """opentelemetry-instrumentation-asgi's middleware, but for the probes (`UNTRACED_PATHS`,
    and what OTEL_PYTHON_ASGI_EXCLUDED_URLS or OTEL_PYTHON_EXCLUDED_URLS add), which make no
    span at all: neither the request's nor their statements' (`/readyz` asks the database)."""

    def __init__(self, app: Any, provider: TracerProvider) -> None:
        from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
        from opentelemetry.util.http import get_excluded_urls, parse_excluded_urls

        self.app = app
        self.probes = parse_excluded_urls(",".join(UNTRACED_PATHS))
        self.configured = get_excluded_urls("ASGI")
        self.traced = OpenTelemetryMiddleware(
            app,
            tracer_provider=provider,
            # a span per ASGI message (each body chunk, each websocket frame) is noise
            exclude_spans=["receive", "send"],
        )

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket") and self._untraced(scope.get("path", "")):
            from opentelemetry.instrumentation.utils import suppress_instrumentation

            with suppress_instrumentation():
                await self.app(scope, receive, send)
            return
        await self.traced(scope, receive, send)

    def _untraced(self, path: str) -> bool:
        return self.probes.url_disabled(path) or self.configured.url_disabled(path)


def tracing_from(settings: Settings, provider: TracerProvider | None = None) -> Tracing | None:
    """The tracing `settings` ask for, or None while it is off. `provider`: one of the
    caller's own, with its own span processors (a test's in-memory exporter), whatever the
    settings say. Asked for without the `tracing` extra: a `ConfigurationError` of one line."""
    if provider is not None:
        return Tracing(provider)
    exporters = settings.tracing
    if not exporters:
        return None
    try:
        import opentelemetry.instrumentation.asgi
        import opentelemetry.instrumentation.psycopg
        from opentelemetry.sdk.resources import SERVICE_NAME as SERVICE_NAME_KEY
        from opentelemetry.sdk.resources import SERVICE_VERSION, Resource
        from opentelemetry.sdk.trace import TracerProvider

        if "otlp" in exporters:
            import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(
            f"tracing is asked for ({_why_on(settings)}) but OpenTelemetry is not installed"
            f" ({exc.name}): pip install 'memql[{EXTRA}]', or unset the OTEL_* variables"
        ) from None
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME_KEY, "")).startswith("unknown_service"):
        # neither OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES names the service
        resource = resource.merge(Resource({SERVICE_NAME_KEY: SERVICE_NAME}))
    resource = resource.merge(Resource({SERVICE_VERSION: _version()}))
    # the sampler is the SDK's, from OTEL_TRACES_SAMPLER (parent-based, always on by default)
    return Tracing(TracerProvider(resource=resource), exporters)


def _why_on(settings: Settings) -> str:
    if settings.traces_exporter:
        return f"OTEL_TRACES_EXPORTER={','.join(settings.traces_exporter)}"
    if settings.otlp_traces_endpoint:
        return "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set"
    return "OTEL_EXPORTER_OTLP_ENDPOINT is set"


def _version() -> str:
    try:
        return importlib.metadata.version("memql")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _processors(exporters: tuple[str, ...]) -> Iterator[SpanProcessor]:
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    for name in exporters:
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            # endpoint, headers, timeout, compression: from OTEL_EXPORTER_OTLP_*
            yield BatchSpanProcessor(OTLPSpanExporter())
        elif name == "console":
            yield BatchSpanProcessor(ConsoleSpanExporter())


def _plain_arguments(arguments: dict[str, Any], info: GraphQLResolveInfo[Any]) -> dict[str, Any]:
    """A resolver's arguments a span may carry: numbers, booleans and enum values (a page's
    size, a scope), never text (a memory's content, a recall query, a key) nor an input."""
    from enum import Enum

    return {
        name: value
        for name, value in arguments.items()
        if isinstance(value, bool | int | float | Enum)
    }


@contextmanager
def untraced_statements() -> Iterator[None]:
    """Inside: database statements make no span (and tasks started here inherit that). The
    lifespan opens memql's background loops inside it."""
    from opentelemetry.instrumentation.utils import suppress_instrumentation

    with suppress_instrumentation():
        yield


class TracedEmbedder:
    """An embedder whose every call is a span (`memql.embed`): the model and how many texts."""

    def __init__(self, embedder: Embedder) -> None:
        self.inner = embedder
        self.model = embedder.model
        self.dimensions = embedder.dimensions

    async def embed(self, texts: list[str]) -> list[Vector]:
        with spans.span(
            "memql.embed", {"memql.embedder.model": self.model, "memql.embed.texts": len(texts)}
        ):
            return await self.inner.embed(texts)

    async def close(self) -> None:
        await self.inner.close()


def traced(embedder: Embedder) -> Embedder:
    """`embedder`, its calls spans while tracing is on; itself while it is off."""
    return TracedEmbedder(embedder) if spans.active() else embedder
