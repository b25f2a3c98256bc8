"""The GraphQL conventions client libraries assume: `Node` and `node(id:)`, Relay connections
paged both ways with full `PageInfo` and `totalCount`, ordering, source and time filters, and
recall's `minScore`."""

from __future__ import annotations

import base64
from datetime import datetime, timedelta

from tests.operations import SAVE

PAGE = """
query Page($first: Int, $after: String, $last: Int, $before: String, $orderBy: MemoryOrder,
           $source: JSON, $createdAfter: DateTime, $createdBefore: DateTime,
           $updatedAfter: DateTime, $kinds: [MemoryKind!]) {
  memories(first: $first, after: $after, last: $last, before: $before, orderBy: $orderBy,
           source: $source, createdAfter: $createdAfter, createdBefore: $createdBefore,
           updatedAfter: $updatedAfter, kinds: $kinds) {
    totalCount
    edges { cursor node { id content createdAt updatedAt } }
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
  }
}
"""

NODE = """
query Node($id: ID!) {
  node(id: $id) { __typename id ... on Memory { content kind } }
}
"""

FACTS = [
    "Owns a red bicycle.",
    "Speaks Portuguese at home.",
    "Works night shifts on weekends.",
    "Keeps bees in the garden.",
    "Collects vinyl records of the seventies.",
]


async def save_facts(client) -> list[dict]:
    saved = []
    for n, content in enumerate(FACTS):
        data = await client.ok(
            SAVE,
            {
                "input": {
                    "content": content,
                    "kind": "TOPICAL",
                    "source": {"tool": "slack" if n % 2 else "email", "meta": {"n": n}},
                }
            },
        )
        saved.append(data["saveMemory"]["memory"])
    return saved


def page_of(data: dict) -> tuple[list[str], dict, int]:
    conn = data["memories"]
    return [e["node"]["content"] for e in conn["edges"]], conn["pageInfo"], conn["totalCount"]


async def test_node_fetches_a_memory_by_id_and_hides_other_users_memories(alice, bob):
    [first, *_] = await save_facts(alice)
    node = (await alice.ok(NODE, {"id": first["id"]}))["node"]
    assert node == {
        "__typename": "Memory",
        "id": first["id"],
        "content": FACTS[0],
        "kind": "TOPICAL",
    }
    assert (await bob.ok(NODE, {"id": first["id"]}))["node"] is None
    assert await alice.error(NODE, {"id": "not-a-uuid"}) == "BAD_USER_INPUT"


async def test_pages_forward_and_backward_meet_with_full_page_info(alice):
    await save_facts(alice)
    newest_first = list(reversed(FACTS))

    forward, cursor = [], None
    infos = []
    while True:
        items, info, total = page_of(await alice.ok(PAGE, {"first": 2, "after": cursor}))
        assert total == 5
        forward += items
        infos.append(info)
        if not info["hasNextPage"]:
            break
        cursor = info["endCursor"]
    assert forward == newest_first
    assert [(i["hasPreviousPage"], i["hasNextPage"]) for i in infos] == [
        (False, True),
        (True, True),
        (True, False),
    ]

    backward, cursor = [], None
    while True:
        items, info, _ = page_of(await alice.ok(PAGE, {"last": 2, "before": cursor}))
        backward = items + backward
        if not info["hasPreviousPage"]:
            assert info["hasNextPage"] is True
            break
        cursor = info["startCursor"]
    assert backward == newest_first

    # the last page read from the end: the two oldest, still in the list's order
    items, info, _ = page_of(await alice.ok(PAGE, {"last": 2}))
    assert items == newest_first[-2:]
    assert (info["hasPreviousPage"], info["hasNextPage"]) == (True, False)


async def test_the_default_stays_newest_first_fifty_and_at_most_two_hundred(alice):
    await save_facts(alice)
    items, info, _ = page_of(await alice.ok(PAGE))
    assert items == list(reversed(FACTS))
    assert info["startCursor"] and info["endCursor"]
    assert await alice.error(PAGE, {"first": 201}) == "BAD_USER_INPUT"
    assert await alice.error(PAGE, {"last": 0}) == "BAD_USER_INPUT"
    assert await alice.error(PAGE, {"first": 2, "last": 2}) == "BAD_USER_INPUT"


async def test_order_by_created_or_updated_in_either_direction(alice):
    saved = await save_facts(alice)
    asc = {"field": "CREATED_AT", "direction": "ASC"}
    items, _, _ = page_of(await alice.ok(PAGE, {"orderBy": asc}))
    assert items == FACTS
    two, info, _ = page_of(await alice.ok(PAGE, {"orderBy": asc, "first": 2}))
    rest, _, _ = page_of(await alice.ok(PAGE, {"orderBy": asc, "after": info["endCursor"]}))
    assert two + rest == FACTS

    # absorbing a near-duplicate refreshes updatedAt: the oldest memory is now the freshest
    again = await alice.ok(SAVE, {"input": {"content": FACTS[0], "kind": "TOPICAL"}})
    assert again["saveMemory"]["outcome"] == "ABSORBED"
    updated = {"field": "UPDATED_AT", "direction": "DESC"}
    items, _, _ = page_of(await alice.ok(PAGE, {"orderBy": updated}))
    assert items[0] == FACTS[0]
    assert items[1:] == list(reversed(FACTS[1:]))
    assert saved[0]["id"]


async def test_a_cursor_is_refused_by_another_order_and_a_forged_one_by_any(alice):
    await save_facts(alice)
    _, info, _ = page_of(await alice.ok(PAGE, {"first": 2}))
    asc = {"field": "CREATED_AT", "direction": "ASC"}
    assert await alice.error(PAGE, {"after": info["endCursor"], "orderBy": asc}) == (
        "BAD_USER_INPUT"
    )
    updated = {"field": "UPDATED_AT", "direction": "DESC"}
    assert await alice.error(PAGE, {"before": info["startCursor"], "orderBy": updated}) == (
        "BAD_USER_INPUT"
    )
    assert await alice.error(PAGE, {"after": "bm90IGEgY3Vyc29y"}) == "BAD_USER_INPUT"
    assert await alice.error(PAGE, {"before": "%%%"}) == "BAD_USER_INPUT"


async def test_a_cursor_made_before_lists_had_an_order_still_reads_newest_first(alice):
    saved = await save_facts(alice)
    third = saved[2]
    legacy = base64.urlsafe_b64encode(f"{third['createdAt']}|{third['id']}".encode()).decode()
    items, _, _ = page_of(await alice.ok(PAGE, {"after": legacy}))
    assert items == [FACTS[1], FACTS[0]]


async def test_lists_filter_on_source_by_containment(alice):
    await save_facts(alice)
    items, _, total = page_of(await alice.ok(PAGE, {"source": {"tool": "slack"}}))
    assert (items, total) == ([FACTS[3], FACTS[1]], 2)
    items, _, _ = page_of(await alice.ok(PAGE, {"source": {"meta": {"n": 4}}}))
    assert items == [FACTS[4]]
    items, _, total = page_of(await alice.ok(PAGE, {"source": {"tool": "fax"}}))
    assert (items, total) == ([], 0)
    assert await alice.error(PAGE, {"source": ["tool"]}) == "BAD_USER_INPUT"


async def test_lists_filter_on_created_and_updated_time_ranges(alice):
    saved = await save_facts(alice)
    created = [datetime.fromisoformat(m["createdAt"]) for m in saved]
    items, _, total = page_of(
        await alice.ok(
            PAGE,
            {"createdAfter": created[1].isoformat(), "createdBefore": created[3].isoformat()},
        )
    )
    assert (items, total) == ([FACTS[2], FACTS[1]], 2)
    later = (created[-1] + timedelta(seconds=1)).isoformat()
    assert page_of(await alice.ok(PAGE, {"createdAfter": later}))[0] == []
    await alice.ok(SAVE, {"input": {"content": FACTS[2], "kind": "TOPICAL"}})  # absorbed
    items, _, _ = page_of(await alice.ok(PAGE, {"updatedAfter": created[-1].isoformat()}))
    assert sorted(items) == sorted([FACTS[2], FACTS[4]])
    bad = {"createdAfter": created[3].isoformat(), "createdBefore": created[1].isoformat()}
    assert await alice.error(PAGE, bad) == "BAD_USER_INPUT"


async def test_total_count_follows_the_filters_not_the_page(alice):
    await save_facts(alice)
    await alice.ok(SAVE, {"input": {"content": "Visited Lisbon in May.", "kind": "EPISODIC"}})
    _, _, total = page_of(await alice.ok(PAGE, {"first": 1}))
    assert total == 6
    _, _, total = page_of(await alice.ok(PAGE, {"first": 1, "kinds": ["EPISODIC"]}))
    assert total == 1


RECALL_MIN = """
query($q: String!, $min: Float) { recall(query: $q, minScore: $min) { score memory { content } } }
"""


async def test_a_count_alone_is_the_count_of_the_full_list_and_checks_the_same_arguments(alice):
    """`memories { totalCount }` reads no page, yet counts what the list admits and refuses
    what the list refuses; with edges, pageInfo or a fragment beside it the page is read."""
    await save_facts(alice)
    full = page_of(await alice.ok(PAGE, {"first": 2}))
    assert full[2] == len(FACTS) and len(full[0]) == 2
    alone = await alice.ok(
        '{ a: memories(first: 1) { totalCount } b: memories(first: 1, contains: "zzz-none")'
        " { __typename totalCount } }"
    )
    assert alone == {
        "a": {"totalCount": len(FACTS)},
        "b": {"__typename": "MemoryConnection", "totalCount": 0},
    }
    fragment = await alice.ok(
        "{ memories(first: 1) { ... on MemoryConnection { totalCount edges { cursor } } } }"
    )
    assert fragment["memories"]["totalCount"] == len(FACTS)
    assert len(fragment["memories"]["edges"]) == 1
    assert await alice.error("{ memories(first: 0) { totalCount } }") == "BAD_USER_INPUT"
    assert await alice.error("{ memories(first: 201) { totalCount } }") == "BAD_USER_INPUT"
    assert await alice.error('{ memories(after: "forged") { totalCount } }') == "BAD_USER_INPUT"
