"""`memql.rules.pagination`: a cursor names one position in one order; it is read back only in
that order, and anything else is refused naming the argument it came in. A page request becomes
a window: first or last within the list's bounds, its cursors positions in its own order."""

from __future__ import annotations

import base64
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from memql.errors import BadInput
from memql.model import Order, OrderField, SortDirection
from memql.requests import PageRequest
from memql.rules import pagination
from memql.settings import LIMITS
from tests.factories import memory

CREATED = datetime(2026, 1, 1, 9, 30, 15, 123456, tzinfo=UTC)
UPDATED = CREATED + timedelta(days=3)
MEMORY = replace(memory("Likes tea."), created_at=CREATED, updated_at=UPDATED)
ORDERS = [Order(field, direction) for field in OrderField for direction in SortDirection]


def order_id(order: Order) -> str:
    return f"{order.field.name}-{order.direction.name}"


def cursor_of(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


@pytest.mark.parametrize("order", ORDERS, ids=order_id)
def test_a_cursor_reads_back_as_the_sort_key_and_id_of_its_memory(order: Order):
    cursor = pagination.encode(MEMORY, order)
    at = CREATED if order.field is OrderField.CREATED_AT else UPDATED
    assert pagination.decode(cursor, order, argument="after") == pagination.Position(at, MEMORY.id)


OTHER_ORDERS = [(made, read) for made in ORDERS for read in ORDERS if made != read]


@pytest.mark.parametrize(
    ("made", "read"),
    OTHER_ORDERS,
    ids=[f"{order_id(made)}-read-{order_id(read)}" for made, read in OTHER_ORDERS],
)
def test_a_cursor_of_another_order_is_refused_naming_the_order_it_was_made_for(made, read):
    cursor = pagination.encode(MEMORY, made)
    with pytest.raises(BadInput) as refused:
        pagination.decode(cursor, read, argument="after")
    assert refused.value.message.startswith(
        f"`after` is a cursor of another order ({made.field.name} {made.direction.name});"
    )
    assert refused.value.extensions == {"argument": "after"}


def test_a_cursor_made_before_lists_had_an_order_is_newest_created_first():
    old = cursor_of(f"{CREATED.isoformat()}|{MEMORY.id}")
    assert pagination.decode(old, Order(), argument="after") == pagination.Position(
        CREATED, MEMORY.id
    )
    with pytest.raises(BadInput, match="another order"):
        pagination.decode(old, Order(OrderField.UPDATED_AT), argument="after")


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "not base64 at all!",
        cursor_of("v2|created_at|desc|yesterday|" + str(uuid.uuid4())),
        cursor_of(f"v2|created_at|desc|{CREATED.isoformat()}|not-a-uuid"),
        cursor_of(f"v2|created_at|sideways|{CREATED.isoformat()}|{uuid.uuid4()}"),
        cursor_of(f"v2|priority|desc|{CREATED.isoformat()}|{uuid.uuid4()}"),
        cursor_of(f"v3|created_at|desc|{CREATED.isoformat()}|{uuid.uuid4()}"),
        cursor_of(f"v2|created_at|desc|{CREATED.isoformat()}"),
        base64.urlsafe_b64encode(b"\xff\xfe|x").decode(),  # not UTF-8
    ],
)
def test_anything_but_a_cursor_this_api_made_is_refused(cursor: str):
    with pytest.raises(BadInput) as refused:
        pagination.decode(cursor, Order(), argument="before")
    assert refused.value.message == "`before` is not a cursor this API returned"
    assert refused.value.extensions == {"argument": "before"}


def refused(call, *args, **kwargs) -> BadInput:
    with pytest.raises(BadInput) as caught:
        call(*args, **kwargs)
    return caught.value


def test_a_page_takes_first_or_last_within_the_list_s_bounds():
    assert pagination.window(PageRequest(), LIMITS) == pagination.Window(
        Order(), LIMITS.list_default
    )
    assert pagination.window(PageRequest(last=3), LIMITS).from_end
    error = refused(pagination.window, PageRequest(first=2, last=2), LIMITS)
    assert error.extensions == {"argument": "last"}
    error = refused(pagination.window, PageRequest(first=LIMITS.list_max + 1), LIMITS)
    assert error.extensions == {"field": "first"}
    assert refused(pagination.window, PageRequest(last=0), LIMITS).extensions == {"field": "last"}


def test_a_page_s_cursors_are_positions_in_its_own_order():
    m = memory("Prefers tea.")
    newest = Order()
    cursor = pagination.encode(m, newest)
    window = pagination.window(PageRequest(after=cursor), LIMITS)
    assert window.after == pagination.Position(m.created_at, m.id)
    updated = Order(OrderField.UPDATED_AT, SortDirection.ASC)
    error = refused(pagination.window, PageRequest(before=cursor, order=updated), LIMITS)
    assert error.extensions == {"argument": "before"}
    assert refused(pagination.window, PageRequest(after=str(uuid.uuid4())), LIMITS)
