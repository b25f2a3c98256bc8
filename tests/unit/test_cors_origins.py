"""The origins other sites' pages may call from (`MEMQL_CORS_ORIGINS`), read without a server."""

from __future__ import annotations

import pytest

from memql.errors import ConfigurationError
from memql.settings import Settings


def test_cors_origins_are_exact_origins_normalised_as_browsers_send_them():
    env = {"MEMQL_CORS_ORIGINS": "https://App.Example:443, http://localhost:5173 ,"}
    assert Settings.from_env(env).cors_origins == ("http://localhost:5173", "https://app.example")
    assert Settings.from_env({}).cors_origins == ()
    for bad in ("*", "https://app.example/path", "app.example", "null"):
        with pytest.raises(ConfigurationError, match="MEMQL_CORS_ORIGINS"):
            Settings.from_env({"MEMQL_CORS_ORIGINS": bad})
