"""Keyset page cursors, and the window a page request asks for. Pure; raises BadInput.

A cursor names a position in one order: the sort key of a memory (its `created_at` or
`updated_at`) and its id, which breaks ties. It carries that order, so a cursor made while
reading newest-created first is refused by a request in another order instead of silently
jumping to an unrelated place.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass
from datetime import datetime

from memql.errors import BadInput
from memql.model import Memory, Order, OrderField, SortDirection
from memql.requests import PageRequest
from memql.rules import validation
from memql.settings import Limits

_VERSION = "v2"


@dataclass(frozen=True)
class Position:
    """Where a cursor points: the sort key and the id of a memory."""

    at: datetime
    id: uuid.UUID


def sort_key(memory: Memory, field: OrderField) -> datetime:
    return memory.created_at if field is OrderField.CREATED_AT else memory.updated_at


def encode(memory: Memory, order: Order) -> str:
    raw = "|".join(
        (
            _VERSION,
            order.field.value,
            order.direction.value,
            sort_key(memory, order.field).isoformat(),
            str(memory.id),
        )
    )
    return base64.urlsafe_b64encode(raw.encode()).decode()


def decode(cursor: str, order: Order, *, argument: str) -> Position:
    """The position `cursor` names, which must have been made for `order`."""
    try:
        parts = base64.urlsafe_b64decode(cursor.encode()).decode().split("|")
        if len(parts) == 2:
            # cursors made before lists had an order: newest created first
            field, direction = OrderField.CREATED_AT, SortDirection.DESC
            at, ident = parts
        elif len(parts) == 5 and parts[0] == _VERSION:
            field, direction = OrderField(parts[1]), SortDirection(parts[2])
            at, ident = parts[3], parts[4]
        else:
            raise ValueError(cursor)
        position = Position(datetime.fromisoformat(at), uuid.UUID(ident))
    except (ValueError, UnicodeDecodeError):
        raise BadInput(
            f"`{argument}` is not a cursor this API returned", argument=argument
        ) from None
    if (field, direction) != (order.field, order.direction):
        raise BadInput(
            f"`{argument}` is a cursor of another order ({field.name} {direction.name}); pass"
            " the orderBy it was made with, or start again without it",
            argument=argument,
        )
    return position


@dataclass(frozen=True)
class Window:
    """A page request checked (`window`): the order, how many memories, the positions of the
    cursors it lies between, and whether it is read from the end (`last`)."""

    order: Order
    size: int
    after: Position | None = None
    before: Position | None = None
    from_end: bool = False


def window(page: PageRequest, limits: Limits) -> Window:
    """`page` checked: at most one of `first` and `last`, each within its bounds (`first`
    of the default size when neither is given), its cursors made for its order."""
    order = page.order or Order()
    if page.first is not None and page.last is not None:
        raise BadInput("pass `first` or `last`, not both", argument="last")
    if page.last is not None:
        size = validation.number(page, "last", limits)
    else:
        size = validation.number(page, "first", limits, absent=limits.list_default)
    return Window(
        order,
        size,
        after=decode(page.after, order, argument="after") if page.after is not None else None,
        before=decode(page.before, order, argument="before") if page.before is not None else None,
        from_end=page.last is not None,
    )
