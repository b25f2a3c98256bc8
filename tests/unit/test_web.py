"""The GraphiQL page without a browser: what it says when its files were not built."""

from __future__ import annotations

from memql.http import web


def test_without_its_built_files_the_page_says_how_to_build_them(tmp_path, monkeypatch):
    monkeypatch.setattr(web, "VENDOR", tmp_path / "vendor")
    page = web.graphiql_html()
    assert "GraphiQL's files are not built" in page
    assert "python web/build.py" in page
    assert "<script" not in page
