"""`memql.settings`: each setting declared once (variable, parser, meaning), read from an
environment by one loop, refused in one line naming its variable, and the configuration table of
the documentation printed from the same declarations."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from memql import settings
from memql.errors import ConfigurationError
from memql.model import Access, Grant, Weights
from memql.settings import Fixed, Settings, Variable

ROOT = Path(__file__).resolve().parents[2]
# the page that holds the configuration table (found in it by its markers)
TABLE_PAGE = ROOT / "docs" / "configuration.md"


@pytest.mark.parametrize(
    ("env", "name", "value"),
    [
        # text, as it is
        ({"DATABASE_URL": " postgresql://db/memql"}, "database_url", " postgresql://db/memql"),
        # text without surrounding blanks
        ({"MEMQL_METRICS_TOKEN": " t0ken\n"}, "metrics_token", "t0ken"),
        # a path, with the home directory expanded
        ({"MEMQL_DATA_DIR": "~/memql-data"}, "data_dir", Path.home() / "memql-data"),
        # one of the allowed values, in any case
        ({"MEMQL_EMBEDDINGS_RUNTIME": " OpenVINO "}, "embeddings_runtime", "openvino"),
        (
            {"MEMQL_EMBEDDER": "TEI", "MEMQL_EMBEDDINGS_URL": "u", "MEMQL_EMBEDDINGS_MODEL": "m"},
            "embedder",
            "tei",
        ),
        # integers at their bounds
        ({"MEMQL_PORT": "0"}, "port", 0),
        ({"MEMQL_BATCH_MAX": "100"}, "batch_max", 100),
        ({"MEMQL_POOL_MAX_SIZE": "2"}, "pool_max_size", 2),
        ({"MEMQL_EMBEDDINGS_DIMENSIONS": "256"}, "embeddings_dimensions", 256),
        # booleans, in their spellings
        ({"MEMQL_WEBHOOKS_ALLOW_PRIVATE": "yes"}, "webhooks_allow_private", True),
        ({"MEMQL_WEBHOOKS_ALLOW_PRIVATE": " TRUE "}, "webhooks_allow_private", True),
        ({"MEMQL_GRAPHIQL": "Off"}, "graphiql", False),
        ({"MEMQL_INTROSPECTION": "0"}, "introspection", False),
        # fractions in (0, 1], seconds in (0, 3600], rates of 0 or more
        ({"MEMQL_POOL_PROJECT_SHARE": "1"}, "pool_project_share", 1.0),
        ({"MEMQL_EMBEDDINGS_TIMEOUT": "2.5"}, "embeddings_timeout", 2.5),
        ({"MEMQL_WEBHOOKS_BACKOFF_MAX": "3600"}, "webhooks_backoff_max", 3600.0),
        ({"MEMQL_RATE_PER_KEY": "0"}, "rate_per_key", 0.0),
        ({"MEMQL_RATE_PER_PROJECT": "12.5"}, "rate_per_project", 12.5),
        # a grant, recall weights, origins
        (
            {"MEMQL_AGENT_GRANT": "user=read, project=NONE"},
            "agent_grant",
            Grant(user=Access.READ, project=Access.NONE),
        ),
        (
            {"MEMQL_RECALL_WEIGHTS": "vector=0.5,lexical=0.5,half_life_days=30"},
            "recall_weights",
            Weights(0.5, 0.5, 0.0, 0.0, 30.0),
        ),
        (
            {"MEMQL_CORS_ORIGINS": "https://App.Example:443,http://localhost:5173"},
            "cors_origins",
            ("http://localhost:5173", "https://app.example"),
        ),
    ],
)
def test_each_kind_of_value_is_read_into_its_field(env, name, value):
    assert getattr(Settings.from_env(env), name) == value


@pytest.mark.parametrize(
    ("variable", "raw", "says"),
    [
        ("MEMQL_PORT", "eighty", "MEMQL_PORT='eighty' is not an integer"),
        ("MEMQL_SUBSCRIBER_QUEUE", "0", "MEMQL_SUBSCRIBER_QUEUE='0' must be at least 1"),
        ("MEMQL_POOL_MAX_SIZE", "1", "MEMQL_POOL_MAX_SIZE='1' must be at least 2"),
        ("MEMQL_BATCH_MAX", "101", "MEMQL_BATCH_MAX='101' must be at most 100"),
        ("MEMQL_EMBEDDER", " Bert", "MEMQL_EMBEDDER='bert' is not one of local, openai, tei"),
        (
            "MEMQL_EMBEDDINGS_RUNTIME",
            "cuda",
            "MEMQL_EMBEDDINGS_RUNTIME='cuda' is not one of auto, openvino, onnxruntime",
        ),
        ("MEMQL_GRAPHIQL", "maybe", "MEMQL_GRAPHIQL='maybe' is not a boolean (true/false)"),
        ("MEMQL_ABSORB_THRESHOLD", "1.5", "MEMQL_ABSORB_THRESHOLD='1.5' must be in (0, 1]"),
        ("MEMQL_EMBEDDINGS_TIMEOUT", "ten", "MEMQL_EMBEDDINGS_TIMEOUT='ten' is not a number"),
        (
            "MEMQL_EMBEDDINGS_TIMEOUT",
            "0",
            "MEMQL_EMBEDDINGS_TIMEOUT='0' must be in (0, 3600] seconds",
        ),
        (
            "MEMQL_EMBEDDINGS_TIMEOUT",
            "nan",
            "MEMQL_EMBEDDINGS_TIMEOUT='nan' must be in (0, 3600] seconds",
        ),
        (
            "MEMQL_WEBHOOKS_TIMEOUT",
            "3601",
            "MEMQL_WEBHOOKS_TIMEOUT='3601' must be in (0, 3600] seconds",
        ),
        (
            "MEMQL_RATE_PER_KEY",
            "inf",
            "MEMQL_RATE_PER_KEY='inf' must be 0 (off) or a rate a second",
        ),
        (
            "MEMQL_RATE_PER_PROJECT",
            "-1",
            "MEMQL_RATE_PER_PROJECT='-1' must be 0 (off) or a rate a second",
        ),
        (
            "MEMQL_CLIENT_GRANT",
            "user=read",
            "MEMQL_CLIENT_GRANT: 'user=read' must name both user and project",
        ),
        (
            "MEMQL_RECALL_WEIGHTS",
            "speed=1",
            "MEMQL_RECALL_WEIGHTS='speed=1': expected name=value pairs with names vector, lexical,"
            " recency, pinned, half_life_days",
        ),
        (
            "MEMQL_CORS_ORIGINS",
            "*",
            "MEMQL_CORS_ORIGINS: list exact origins (https://app.example), not '*'",
        ),
    ],
)
def test_a_bad_value_of_each_kind_is_refused_in_one_line_naming_its_variable(variable, raw, says):
    with pytest.raises(ConfigurationError) as refused:
        Settings.from_env({variable: raw})
    assert str(refused.value) == says


def test_every_variable_that_can_be_wrong_is_refused_by_name_and_only_free_text_never_is():
    free_text = {settings.text, settings.stripped, settings.path}
    for _, variable in settings.variables():
        refusals = []
        for raw in ("nonsense", "-1", "1e9", "*"):
            try:
                variable.parse(variable.name, raw)
            except ConfigurationError as exc:
                refusals.append(str(exc))
        if variable.parse in free_text:
            assert refusals == [], variable.name
            continue
        assert refusals, f"{variable.name} accepts every value tried"
        for line in refusals:
            assert line.startswith((f"{variable.name}=", f"{variable.name}:")), line
            assert "\n" not in line


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"MEMQL_METRICS_PORT": "8000"}, "MEMQL_METRICS_PORT must differ from MEMQL_PORT"),
        (
            {"MEMQL_EMBEDDER": "openai", "MEMQL_EMBEDDINGS_MODEL": "m"},
            "MEMQL_EMBEDDER=openai needs MEMQL_EMBEDDINGS_URL and MEMQL_EMBEDDINGS_MODEL",
        ),
        (
            {"MEMQL_READ_DATABASE_URL": "postgresql://standby/memql"},
            "MEMQL_READ_DATABASE_URL needs DATABASE_URL: the embedded PostgreSQL has no standby",
        ),
        (
            {"MEMQL_WEBHOOKS_CONNECTIONS": "5"},
            "MEMQL_WEBHOOKS_PROJECT_CONNECTIONS must not exceed MEMQL_WEBHOOKS_CONNECTIONS",
        ),
        (
            {"MEMQL_WEBHOOKS_BACKOFF_MIN": "61"},
            "MEMQL_WEBHOOKS_BACKOFF_MIN must not exceed MEMQL_WEBHOOKS_BACKOFF_MAX",
        ),
        (
            {"MEMQL_NEAR_DUPLICATE_THRESHOLD": "0.96"},
            "MEMQL_NEAR_DUPLICATE_THRESHOLD must not exceed MEMQL_ABSORB_THRESHOLD",
        ),
    ],
)
def test_settings_that_contradict_each_other_are_refused_naming_both(env, says):
    with pytest.raises(ConfigurationError) as refused:
        Settings.from_env(env)
    assert str(refused.value) == says


def test_an_unset_or_empty_variable_leaves_the_default_and_others_are_ignored():
    assert Settings.from_env({}) == Settings()
    assert Settings.from_env(
        {"MEMQL_PORT": "", "MEMQL_GRAPHIQL": "", "MEMQL_NOT_A_SETTING": "x"}
    ) == (Settings())
    assert Settings.from_env({"MEMQL_PORT": "9000"}) == Settings(port=9000)


def test_from_env_reads_the_process_environment_when_given_none(monkeypatch):
    monkeypatch.setenv("MEMQL_SUBSCRIBER_QUEUE", "7")
    assert Settings.from_env().subscriber_queue == 7


def test_every_field_is_declared_once_with_a_variable_or_a_reason_it_has_none():
    declared = dict(settings.declarations())
    assert [f.name for f in declared] == [f.name for f in fields(Settings)]
    names = [v.name for v in declared.values() if isinstance(v, Variable)]
    assert len(names) == len(set(names)), "a variable sets two fields"
    for name in names:
        # OpenTelemetry's own names for what turns tracing on
        assert re.fullmatch(r"MEMQL_[A-Z0-9_]+|DATABASE_URL|REDIS_URL|OTEL_[A-Z_]+", name), name
    not_set = {f.name: d for f, d in declared.items() if isinstance(d, Fixed)}
    assert set(not_set) == {"pool_min_size", "limits"}
    assert all(len(d.why) > 40 for d in not_set.values())
    assert all(v.meaning for v in declared.values() if isinstance(v, Variable))
    assert settings.variable_of("embeddings_timeout") == "MEMQL_EMBEDDINGS_TIMEOUT"
    with pytest.raises(KeyError, match="pool_min_size"):
        settings.variable_of("pool_min_size")


def test_a_declaration_that_cannot_be_shown_in_the_table_is_refused_when_written():
    with pytest.raises(TypeError, match="one line"):
        settings.setting("MEMQL_X", settings.text, "a | b", default=None)
    with pytest.raises(TypeError, match="factory"):
        settings.setting("MEMQL_X", settings.path, "where", factory=Path.cwd)


def test_the_table_shows_one_row_per_variable_with_its_default():
    table = settings.markdown_table().splitlines()
    assert table[:2] == ["| variable | meaning | default |", "|---|---|---|"]
    rows = {row.split(" | ")[0].strip("| `"): row for row in table[2:]}
    assert list(rows) == [v.name for _, v in settings.variables()]
    assert rows["MEMQL_PORT"].endswith("| `8000` |")
    assert rows["MEMQL_GRAPHIQL"].endswith("| `true` |")
    assert rows["MEMQL_READ_WAIT_SECONDS"].endswith("| `0.05` |")
    assert rows["MEMQL_CLIENT_GRANT"].endswith("| `user=read-write,project=read` |")
    assert rows["MEMQL_BATCH_MAX"].endswith("| `0` (off) |")
    assert rows["MEMQL_METRICS_PORT"].endswith("| unset: on the API port |")
    assert rows["MEMQL_CORS_ORIGINS"].endswith(
        "| none: only same-origin pages and non-browser clients |"
    )
    assert "~/.local/share/memql" in rows["MEMQL_DATA_DIR"]


def test_the_documented_configuration_table_is_the_declared_one():
    documented = settings.table_in(TABLE_PAGE.read_text(encoding="utf-8"))
    assert documented == settings.markdown_table(), (
        f"the configuration table of {TABLE_PAGE.name} differs from the declarations in"
        f" memql/settings.py: run `python -m memql.settings --write {TABLE_PAGE.relative_to(ROOT)}`"
    )


def test_writing_the_table_replaces_only_what_lies_between_the_markers(tmp_path, capsys):
    page = tmp_path / "configuration.md"
    start, end = settings.TABLE_START, settings.TABLE_END
    page.write_text(f"# Configuration\n\n{start}\n| old | table |\n{end}\n\nAfter.\n")
    assert settings.main(["--write", str(page)]) == 0
    written = page.read_text()
    assert written.startswith(f"# Configuration\n\n{start}\n\n| variable |")
    assert written.endswith(f"\n\n{end}\n\nAfter.\n")
    assert settings.table_in(written) == settings.markdown_table()
    assert settings.with_table(written) == written

    page.write_text("# No table here\n")
    assert settings.main(["--write", str(page)]) == 1
    assert "no configuration table between" in capsys.readouterr().err
    assert page.read_text() == "# No table here\n"

    assert settings.main(["--markdown"]) == 0
    assert capsys.readouterr().out == settings.markdown_table()


# ---- the rules of particular settings ---------------------------------------------------------


def test_metrics_settings_are_read_and_checked():
    s = Settings.from_env(
        {"MEMQL_METRICS_PORT": "9100", "MEMQL_METRICS_TOKEN": "t", "MEMQL_BATCH_MAX": "5"}
    )
    assert (s.metrics_port, s.metrics_token, s.batch_max) == (9100, "t", 5)
    assert Settings.from_env({}).batch_max == 0
    for env in (
        {"MEMQL_METRICS_PORT": "8000"},
        {"MEMQL_BATCH_MAX": "1000"},
        {"MEMQL_BATCH_MAX": "-1"},
        {"MEMQL_PERSISTED_QUERIES": "lots"},
    ):
        with pytest.raises(ConfigurationError):
            Settings.from_env(env)


def test_recall_weights_are_read_from_the_environment():
    s = Settings.from_env(
        {"MEMQL_RECALL_WEIGHTS": "vector=0.6, lexical=0.3, recency=0.05, pinned=0.05"}
    )
    assert s.recall_weights == Weights(0.6, 0.3, 0.05, 0.05, 90.0)
    s = Settings.from_env({"MEMQL_RECALL_WEIGHTS": "lexical=1,half_life_days=7"})
    assert s.recall_weights == Weights(0.0, 1.0, 0.0, 0.0, 7.0)


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("vector=0.5", "sum to 1"),
        ("vector=1.2,lexical=-0.2", "in [0, 1]"),
        ("vector=1,speed=0", "expected name=value pairs"),
        ("vector=one", "is not a number"),
        ("vector=1,half_life_days=0", "half-life must be positive"),
    ],
)
def test_bad_recall_weights_refuse_to_start_with_a_reason(raw, says):
    with pytest.raises(ConfigurationError, match=re.escape(says)):
        Settings.from_env({"MEMQL_RECALL_WEIGHTS": raw})


def test_cors_origins_are_exact_origins_normalised_as_browsers_send_them():
    env = {"MEMQL_CORS_ORIGINS": "https://App.Example:443, http://localhost:5173 ,"}
    assert Settings.from_env(env).cors_origins == ("http://localhost:5173", "https://app.example")
    assert Settings.from_env({}).cors_origins == ()
    for bad in ("*", "https://app.example/path", "app.example", "null"):
        with pytest.raises(ConfigurationError, match="MEMQL_CORS_ORIGINS"):
            Settings.from_env({"MEMQL_CORS_ORIGINS": bad})


@pytest.mark.parametrize(
    ("env", "exporters"),
    [
        ({}, ()),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, ("otlp",)),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, ("otlp",)),
        ({"OTEL_TRACES_EXPORTER": "console"}, ("console",)),
        ({"OTEL_TRACES_EXPORTER": "OTLP, console,otlp"}, ("otlp", "console")),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318"}, ()),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, ()),
    ],
)
def test_tracing_is_on_when_an_exporter_or_an_otlp_endpoint_is_set(env, exporters):
    assert Settings.from_env(env).tracing == exporters


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER='zipkin': 'zipkin'"),
        ({"OTEL_TRACES_EXPORTER": "otlp,none"}, "'none' is not one of otlp, console"),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL='grpc'"),
    ],
)
def test_a_tracing_variable_memql_cannot_honour_is_refused_naming_it(env, named):
    with pytest.raises(ConfigurationError) as refused:
        Settings.from_env(env)
    assert named in str(refused.value)
