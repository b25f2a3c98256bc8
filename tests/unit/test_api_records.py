"""Every transport says what the operations' records say (`memql.requests`): the arguments and
inputs of `schema.graphql`, the MCP tools' schemas, the Python client's documents and the
inspector's. Any drift in a name, a description, a bound or a default fails here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from graphql import (
    GraphQLArgument,
    GraphQLInputField,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLSchema,
    TypeInfo,
    TypeInfoVisitor,
    Visitor,
    build_schema,
    get_named_type,
    parse,
    validate,
    value_from_ast,
    visit,
)

from memql import requests
from memql.graphql import mirrors
from memql.requests import (
    ContextQuery,
    MemoryDraft,
    MemoryFilter,
    MemoryRef,
    PageRequest,
    RecallQuery,
    graphql_name,
    less,
    mcp_name,
)
from memql.settings import LIMITS

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = build_schema((ROOT / "schema.graphql").read_text())
INSPECTOR = ROOT / "src" / "memql" / "http" / "web" / "inspector" / "app.js"

# each GraphQL field taking records: the records, whether it keeps the former names, and the
# arguments of its own
GRAPHQL_OPERATIONS: dict[tuple[str, str], tuple[tuple[requests.Part, ...], bool, set[str]]] = {
    ("Query", "memories"): ((MemoryFilter, PageRequest), True, set()),
    ("Query", "recall"): ((RecallQuery,), False, set()),
    ("Query", "memoryContext"): ((ContextQuery,), False, set()),
    ("Mutation", "supersedeMemory"): ((MemoryRef,), False, {"input"}),
    ("Mutation", "retireMemory"): ((MemoryRef,), False, set()),
}
# each MCP tool: the records it takes and whether it keeps the former names
MCP_TOOLS: dict[str, tuple[tuple[requests.Part, ...], bool]] = {
    "recall_memory": ((RecallQuery,), False),
    "list_memories": ((MemoryFilter, PageRequest), True),
    "save_memory": ((less(MemoryDraft, "source"),), False),
    "supersede_memory": ((less(MemoryDraft, "key", "scope", "source"), MemoryRef), False),
    "forget_memory": ((MemoryRef,), False),
}


def graphql_words(arg: requests.Arg) -> str:
    return requests.describe(arg.api, LIMITS, lambda v: v.name)


def agents_words(arg: requests.Arg) -> str:
    return requests.describe(arg.api, LIMITS, lambda v: v.value, agents=True)


def shown_default(arg: requests.Arg) -> Any:
    shown = requests.default(arg.api, LIMITS)
    if shown is not None:
        return shown
    if arg.default is requests.REQUIRED:
        return requests.REQUIRED
    return list(arg.default) if isinstance(arg.default, tuple) else arg.default


def check_graphql(arg: requests.Arg, found: GraphQLArgument | GraphQLInputField, where: str):
    assert found.description == graphql_words(arg), where
    default = shown_default(arg)
    if default is requests.REQUIRED:
        assert isinstance(found.type, GraphQLNonNull), where
        assert found.ast_node is not None and found.ast_node.default_value is None, where
    else:
        assert found.ast_node is not None and found.ast_node.default_value is not None, where
        assert value_from_ast(found.ast_node.default_value, found.type) == default, where
    listed = found.type.of_type if isinstance(found.type, GraphQLNonNull) else found.type
    assert isinstance(listed, GraphQLList) == arg.is_list, where


@pytest.mark.parametrize("where", GRAPHQL_OPERATIONS, ids="{0[0]}.{0[1]}".format)
def test_each_graphql_operation_takes_its_records_arguments_and_no_other(where):
    records, former, own = GRAPHQL_OPERATIONS[where]
    parent = SCHEMA.type_map[where[0]]
    assert isinstance(parent, GraphQLObjectType)
    field = parent.fields[where[1]]
    args = requests.arguments(*records)
    formers = {requests.camel(a.api.was) for a in args if former and a.api.was}
    assert set(field.args) == {graphql_name(a) for a in args} | formers | own
    for arg in args:
        check_graphql(arg, field.args[graphql_name(arg)], f"{where}: {arg.name}")
    for arg in args:
        if former and arg.api.was:
            old = field.args[requests.camel(arg.api.was)]
            assert old.deprecation_reason, arg.api.was
            assert get_named_type(old.type) == get_named_type(field.args[graphql_name(arg)].type)


def test_the_former_names_are_kept_where_they_were_only():
    assert "kind" in SCHEMA.query_type.fields["memories"].args
    assert "kind" not in SCHEMA.query_type.fields["recall"].args


def test_the_save_input_is_a_memory_draft():
    save = SCHEMA.type_map["SaveMemoryInput"]
    args = requests.arguments(MemoryDraft)
    assert set(save.fields) == {graphql_name(a) for a in args}
    for arg in args:
        check_graphql(arg, save.fields[graphql_name(arg)], f"SaveMemoryInput.{arg.name}")


@pytest.mark.parametrize("name", MCP_TOOLS)
def test_each_mcp_tool_takes_its_records_arguments_offered_to_agents(name):
    from memql.mcp.tools import BY_NAME

    records, former = MCP_TOOLS[name]
    schema = BY_NAME[name].args.input_schema()
    props = schema["properties"]
    args = [a for a in requests.arguments(*records) if a.api.for_agents]
    formers = {a.api.was for a in args if former and a.api.was}
    assert set(props) == {mcp_name(a) for a in args} | formers
    for arg in args:
        prop = props[mcp_name(arg)]
        assert prop["description"] == agents_words(arg), arg.name
        for bound, key in ((arg.api.minimum, "minimum"), (arg.api.maximum, "maximum")):
            assert prop.get(key) == requests.bound(bound, LIMITS), f"{name}.{arg.name} {key}"
        assert (mcp_name(arg) in schema.get("required", [])) == (arg.default is requests.REQUIRED)
        assert (prop.get("type") == "array") == arg.is_list, arg.name
    for old in formers:
        assert props[old]["deprecated"] is True


# --- selections: the client's and the inspector's documents ---------------------------------


def memory_fields(schema: GraphQLSchema) -> set[str]:
    memory = schema.type_map["Memory"]
    assert isinstance(memory, GraphQLObjectType)
    return set(memory.fields)


def selection(text: str) -> set[str]:
    return set(text.split())


def test_the_client_selects_every_field_of_a_memory():
    from memql.client.types import MEMORY_FIELDS

    assert selection(MEMORY_FIELDS) == memory_fields(SCHEMA)


def client_operations() -> list[Any]:
    from memql.client import operations as ops
    from memql.client.operations import MemoryInput

    item = MemoryInput("Likes tea.", "topical", source={"via": "test"})
    return [
        ops.viewer(),
        ops.event_cursor(),
        ops.memory("0b0e8a8e-5c7f-4e49-a8b5-1f7cf2a8c1aa"),
        ops.memories(kinds=["topical"], categories=["work"], first=5, order_by="updated_at"),
        ops.memories(total_count=True),
        ops.history("0b0e8a8e-5c7f-4e49-a8b5-1f7cf2a8c1aa"),
        ops.recall("tea", kinds=["episodic"], limit=3, min_score=0.1),
        ops.context("tea", budget=100),
        ops.save("Likes tea.", "topical"),
        ops.save_many([item]),
        ops.supersede(item, key="drink"),
        ops.retire(key="drink"),
        ops.restore("0b0e8a8e-5c7f-4e49-a8b5-1f7cf2a8c1aa"),
        ops.erase("0b0e8a8e-5c7f-4e49-a8b5-1f7cf2a8c1aa"),
        ops.erase_user_memories(),
        ops.webhooks(),
        ops.add_webhook("https://example.com/hook"),
        ops.remove_webhook("0b0e8a8e-5c7f-4e49-a8b5-1f7cf2a8c1aa"),
    ]


def test_every_client_document_is_valid_against_the_schema():
    for operation in client_operations():
        errors = validate(SCHEMA, parse(operation.document))
        assert errors == [], operation.document


def test_the_client_takes_every_argument_of_the_records_by_its_field_name():
    from memql.client.operations import ListOptions, RecallOptions

    listed = {a.name for a in requests.arguments(MemoryFilter, PageRequest)}
    # the order as the client spells it; the former names, deprecated
    assert set(ListOptions.__annotations__) == (listed - {"order"}) | {
        "order_by",
        "direction",
        "total_count",
        "kind",
        "category",
    }
    recalled = {a.name for a in requests.arguments(RecallQuery)} - {"text"}
    assert set(RecallOptions.__annotations__) == recalled


def inspector_memory() -> str:
    """The inspector's selection of a memory: the keys of its `MEMORY_FIELDS` (the block
    `memql.graphql.mirrors` writes), as `MEMORY` joins them."""
    block = mirrors.block_in(INSPECTOR.read_text())
    return " ".join(re.findall(r"^  (\w+): ", block, re.MULTILINE))


def inspector_documents() -> dict[str, str]:
    """The inspector's GraphQL documents (template literals), with `${MEMORY}` filled in."""
    text = INSPECTOR.read_text()
    assert 'const MEMORY = Object.keys(MEMORY_FIELDS).join(" ");' in text
    return {
        name: doc.replace("${MEMORY}", inspector_memory())
        for name, doc in re.findall(r"const (\w+) = `([^`]*)`;", text)
        if doc.lstrip().startswith(("query", "mutation", "subscription"))
    }


def test_the_inspector_selects_every_field_of_a_memory():
    assert selection(inspector_memory()) == memory_fields(SCHEMA)


def test_every_inspector_document_is_valid_against_the_schema():
    documents = inspector_documents()
    assert {"MEMORIES", "RECALL", "SAVE", "EVENTS"} <= set(documents)
    for name, document in documents.items():
        assert validate(SCHEMA, parse(document)) == [], name


def deprecated_in(document: str) -> list[str]:
    """The deprecated fields and arguments `document` uses."""
    info = TypeInfo(SCHEMA)
    found: list[str] = []

    class Uses(Visitor):
        def enter_field(self, node: Any, *_: Any) -> None:
            field = info.get_field_def()
            if field is not None and field.deprecation_reason:
                found.append(f"{info.get_parent_type()}.{node.name.value}")

        def enter_argument(self, node: Any, *_: Any) -> None:
            argument = info.get_argument()
            if argument is not None and argument.deprecation_reason:
                found.append(f"argument {node.name.value}")

    visit(parse(document), TypeInfoVisitor(info, Uses()))
    return found


def test_no_client_or_inspector_document_uses_a_deprecated_field_or_argument():
    from memql.client.events import SUBSCRIPTION

    assert deprecated_in("subscription { memoryEvents { occurredAt } }") == [
        "MemoryEvent.occurredAt"
    ]
    assert validate(SCHEMA, parse(SUBSCRIPTION)) == []
    documents = [o.document for o in client_operations()] + [SUBSCRIPTION]
    documents += list(inspector_documents().values())
    for document in documents:
        assert deprecated_in(document) == [], document
