"""`memql.graphql.mirrors`: the client's records module and the inspector's block of a memory's
fields are what the generator writes from the records, a field added to the records reaches
both, and the client takes what the loosening rule says."""

from __future__ import annotations

import ast
import dataclasses
import re
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field

import pytest

from memql import model
from memql.graphql import mirrors
from memql.model import Kind, Scope
from memql.requests import MemoryDraft, MemoryFilter
from memql.words import api

# the checkout the generator writes into
ROOT = mirrors.PACKAGE.parents[1]


def test_the_client_records_module_is_the_generated_one():
    assert mirrors.RECORDS.read_text(encoding="utf-8") == mirrors.client_records(), (
        f"{mirrors.RECORDS.relative_to(ROOT)} differs from the records: run `{mirrors.COMMAND}`"
    )


def test_the_inspector_block_is_the_generated_one():
    page = mirrors.INSPECTOR.read_text(encoding="utf-8")
    assert mirrors.block_in(page) == mirrors.inspector_block(), (
        f"the block of {mirrors.INSPECTOR.relative_to(ROOT)} differs from `memql.model.Memory`:"
        f" run `{mirrors.COMMAND}`"
    )


def test_the_client_takes_an_enum_by_name_or_value_and_any_iterable_for_a_tuple():
    from memql.client.operations import FilterOptions, ListOptions, MemoryInput, SaveOptions

    given = typing.get_type_hints(MemoryInput)
    assert given["kind"] == Kind | str
    assert given["scope"] == Scope | str | None
    assert given["source_thread_ids"] == Iterable[str]
    assert typing.get_type_hints(SaveOptions)["source_thread_ids"] == Iterable[str]
    assert typing.get_type_hints(FilterOptions)["kinds"] == Iterable[Kind | str] | None
    # a former name takes one value of its list
    assert typing.get_type_hints(ListOptions)["kind"] == Kind | str | None
    defaults = {f.name: f.default for f in dataclasses.fields(MemoryInput)}
    assert defaults == {f.name: f.default for f in dataclasses.fields(MemoryDraft)}


def test_the_client_reads_a_memory_as_graphql_shows_it_in_the_order_it_was_published():
    from memql.client.types import Memory

    fields = dataclasses.fields(Memory)
    shown = [f.name for f in dataclasses.fields(model.Memory) if f.metadata["memql.api"].shown]
    assert [f.name for f in fields][:3] == ["id", "kind", "scope"]
    assert sorted(f.name for f in fields) == sorted(shown)
    assert all(f.default is dataclasses.MISSING for f in fields)
    # an enum of text is shown as its text
    assert typing.get_type_hints(Memory)["invalidation_reason"] == str | None


@dataclass(frozen=True)
class MoodyMemory(model.Memory):
    mood: str | None = field(default=None, metadata=api("How the user felt about it."))


@dataclass(frozen=True)
class MoodyDraft(MemoryDraft):
    mood: str | None = field(default=None, metadata=api("How the user felt about it."))


@dataclass(frozen=True)
class MoodyFilter(MemoryFilter):
    moods: tuple[str, ...] | None = field(default=None, metadata=api("Only these moods."))


def section(text: str, name: str) -> str:
    """The lines of class `name` in the generated module."""
    return text.split(f"class {name}", 1)[1].split("\n\n\n", 1)[0]


def test_a_field_added_to_the_records_reaches_every_mirror(monkeypatch):
    monkeypatch.setattr(model, "Memory", MoodyMemory)
    monkeypatch.setattr(
        model,
        "MEMORY_FIELDS",
        {n: model.unwrap_optional(h) for n, h in typing.get_type_hints(MoodyMemory).items()},
    )
    monkeypatch.setattr(mirrors, "MemoryDraft", MoodyDraft)
    monkeypatch.setattr(mirrors, "MemoryFilter", MoodyFilter)
    text = mirrors.client_records()
    compile(text, "records.py", "exec")
    words = '"""How the user felt about it."""'
    assert f"mood: str | None\n    {words}" in section(text, "MemoryFields")
    assert "mood: str | None = None\n" in section(text, "DraftFields")
    assert "mood: str | None\n" in section(text, "SaveFields")
    assert 'moods: Iterable[str] | None\n    """Only these moods."""' in section(
        text, "FilterFields"
    )
    assert '  mood: "text",\n' in mirrors.inspector_block()


def test_the_words_become_a_string_whose_value_they_are_within_the_width():
    text = 'Says "hi" with a \\ and """quotes""", ' + "then more words " * 12 + '"the end"'
    lines = mirrors.docstring(text, "    ")
    # wrapped: a line break where a space was
    assert ast.literal_eval("\n".join(lines).strip()).split() == text.split()
    assert all(len(line) <= mirrors.WIDTH for line in lines)
    assert mirrors.docstring("One line.", "    ") == ['    """One line."""']


def test_a_type_or_default_without_a_spelling_is_refused_with_the_command_to_teach():
    imports = mirrors.Imports()
    assert imports.literal(Scope.USER) == "Scope.USER"
    assert imports.lines()[-1] == "from memql.model import Scope"
    with pytest.raises(TypeError, match=re.escape(mirrors.COMMAND)):
        imports.spelt(list[int])
    with pytest.raises(TypeError, match=re.escape(mirrors.COMMAND)):
        imports.literal([])


def test_writing_replaces_only_the_inspector_block_and_says_what_changed(tmp_path):
    records, page = tmp_path / "records.py", tmp_path / "app.js"
    start, end = mirrors.INSPECTOR_START, mirrors.INSPECTOR_END
    page.write_text(f"const A = 1;\n{start}\nconst MEMORY_FIELDS = {{}};\n{end}\nconst B = 2;\n")
    assert mirrors.write(records, page) == [records, page]
    assert records.read_text() == mirrors.client_records()
    written = page.read_text()
    assert written == f"const A = 1;\n{start}\n{mirrors.inspector_block()}{end}\nconst B = 2;\n"
    assert mirrors.write(records, page) == []

    page.write_text("const A = 1;\n")
    records.unlink()
    with pytest.raises(ValueError, match="no generated block between"):
        mirrors.write(records, page)
    assert not records.exists() and page.read_text() == "const A = 1;\n"
