"""`memql.tracing` and `memql.spans`: off, the app is built without a trace of OpenTelemetry and
memql's own spans are one shared no-op; asked for without the `tracing` extra, `memql serve`
says in one line how to install it; what a resolver's span may carry of its arguments."""

from __future__ import annotations

import sys
from enum import Enum

import pytest

from memql import cli, spans, tracing
from memql.app import create_app
from memql.errors import ConfigurationError
from memql.settings import Settings
from memql.testing import HashEmbedder, free_port

ON = Settings(otlp_endpoint="http://127.0.0.1:4318")


def test_off_by_default_the_app_has_no_tracing_middleware_nor_extension():
    assert tracing.tracing_from(Settings()) is None
    app = create_app(Settings())
    assert not [m for m in app.user_middleware if m.cls.__name__ == "_RequestSpans"]
    graphql = next(r for r in app.routes if getattr(r, "path", "") == "/graphql")
    extensions = graphql.app.schema.extensions  # type: ignore[attr-defined]
    assert not [e for e in extensions if "OpenTelemetry" in repr(e)]


def test_on_the_app_has_the_request_middleware_outermost_and_the_strawberry_extension():
    app = create_app(ON)
    assert app.user_middleware[0].cls.__name__ == "_RequestSpans"
    graphql = next(r for r in app.routes if getattr(r, "path", "") == "/graphql")
    made = [e() for e in graphql.app.schema.extensions if callable(e)]  # type: ignore[attr-defined]
    from strawberry.extensions.tracing import OpenTelemetryExtension

    assert isinstance(made[0], OpenTelemetryExtension)


def test_off_memql_spans_are_one_shared_no_op():
    assert not spans.active()
    first, second = spans.span("memql.embed", {"a": 1}), spans.span("other", client=True)
    assert first is second
    with first as span:
        assert span is None
    headers: dict[str, str] = {}
    spans.inject(headers)
    spans.set_attribute("x", 1)
    spans.failed("why")
    assert headers == {}


def test_the_service_is_named_memql_unless_the_environment_names_it(monkeypatch):
    from opentelemetry.sdk.resources import SERVICE_NAME

    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    traced = tracing.tracing_from(ON)
    assert traced is not None and traced.exporters == ("otlp",)
    assert traced.provider.resource.attributes[SERVICE_NAME] == "memql"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "memory-eu")
    traced = tracing.tracing_from(ON)
    assert traced is not None
    assert traced.provider.resource.attributes[SERVICE_NAME] == "memory-eu"


def test_asked_for_without_the_extra_the_start_is_refused_in_one_line(monkeypatch):
    for name in [m for m in sys.modules if m.startswith("opentelemetry.sdk")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk", None)
    with pytest.raises(ConfigurationError) as refused:
        tracing.tracing_from(Settings(traces_exporter=("console",)))
    line = str(refused.value)
    assert "\n" not in line
    assert "OTEL_TRACES_EXPORTER=console" in line
    assert "pip install 'memql[tracing]'" in line


def test_memql_serve_without_the_extra_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    # an installation without the SDK: importing it fails as a missing module does
    for name in [n for n in sys.modules if n.startswith("opentelemetry.sdk")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk", None)
    for name, value in {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
        "MEMQL_PORT": str(free_port()),
        "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/memql",
    }.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["serve"]) == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    # the module named is the first of the SDK's that could not be imported
    assert last.startswith(
        "memql: tracing is asked for (OTEL_EXPORTER_OTLP_ENDPOINT is set) but OpenTelemetry is"
        " not installed (opentelemetry.sdk"
    ), last
    assert last.endswith("): pip install 'memql[tracing]', or unset the OTEL_* variables"), last
    assert "Traceback" not in err


class Scope(Enum):
    USER = "user"


def test_a_resolver_span_keeps_numbers_booleans_and_enums_never_text_or_inputs():
    kept = tracing._plain_arguments(
        {
            "limit": 3,
            "minScore": 0.5,
            "includeInvalidated": True,
            "scope": Scope.USER,
            "query": "where is the spare key",
            "input": {"content": "a secret"},
            "kinds": ["TOPICAL"],
            "after": None,
        },
        None,  # type: ignore[arg-type]
    )
    assert kept == {"limit": 3, "minScore": 0.5, "includeInvalidated": True, "scope": Scope.USER}


async def test_the_traced_embedder_is_the_embedder_itself_while_tracing_is_off():
    embedder = HashEmbedder()
    assert tracing.traced(embedder) is embedder
    wrapped = tracing.TracedEmbedder(embedder)
    assert (wrapped.model, wrapped.dimensions) == (embedder.model, embedder.dimensions)
    [vector] = await wrapped.embed(["a text"])
    assert (vector == embedder.vector("a text")).all()
