"""One live event, resolved and serialised once per distinct (selection, visibility).

Every subscriber of an instance receives the same decoded event object from the bus. Executing
the subscriber's selection on it is the costly step of a delivery, and its result depends only
on the selection, the variables used inside it and what the subscriber may see. So:

- `shared_event` gives every subscriber the same GraphQL object for one domain event;
- `RenderOnce` (the schema's execution context) keeps, on that object, the result of each
  distinct (operation, variables inside the selection, visibility) and hands it out again;
- `encode_once` keeps the JSON text of a result's `data`, so a websocket message costs a string
  join instead of an encoding.

Nothing in a `MemoryEvent` selection depends on who reads it today (visibility is the same for
every reader the stream admits); `visibility` is where a viewer-dependent field would say so.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Mapping
from contextvars import ContextVar
from typing import Any

from graphql import OperationType, VariableNode, visit
from graphql.language import Visitor
from starlette.websockets import WebSocketDisconnect, WebSocketDisconnected

from memql import metrics, model
from memql.graphql import types
from memql.graphql.strawberry_internals import StrawberryGraphQLCoreExecutionContext

# live events kept shared at once (a few seconds of a busy stream); older ones are rebuilt
_SHARED_EVENTS = 1024


class _Shared:
    def __init__(self) -> None:
        self.events: OrderedDict[int, tuple[model.MemoryEvent, types.MemoryEvent]] = OrderedDict()

    def get(self, event: model.MemoryEvent) -> types.MemoryEvent:
        key = id(event)
        found = self.events.get(key)
        # the entry holds the domain event, so its id cannot be reused while it is cached
        if found is not None and found[0] is event:
            return found[1]
        shared = types.MemoryEvent.from_domain(event)
        shared.renders = {}
        self.events[key] = (event, shared)
        if len(self.events) > _SHARED_EVENTS:
            self.events.popitem(last=False)
        return shared


_shared = _Shared()


def shared_event(event: model.MemoryEvent) -> types.MemoryEvent:
    """The GraphQL object of `event`, the same one for every subscriber of this instance."""
    return _shared.get(event)


def visibility(context: Any) -> object:
    """What of an event the reader may see, beyond the stream's own filter: nothing varies."""
    return None


class _VariablesIn(Visitor):
    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def enter_variable(self, node: VariableNode, *_: Any) -> None:
        self.names.add(node.name.value)


_selection_variables: dict[int, tuple[Any, tuple[str, ...]]] = {}


def _variables_inside(operation: Any) -> tuple[str, ...]:
    """Variables used below the root fields (their own arguments, like `since`, only choose
    the events, not how each is rendered)."""
    found = _selection_variables.get(id(operation))
    if found is not None and found[0] is operation:
        return found[1]
    visitor = _VariablesIn()
    for root in operation.selection_set.selections:
        for directive in getattr(root, "directives", None) or ():
            visit(directive, visitor)
        if getattr(root, "selection_set", None) is not None:
            visit(root.selection_set, visitor)
    names = tuple(sorted(visitor.names))
    if len(_selection_variables) > 256:
        _selection_variables.clear()
    _selection_variables[id(operation)] = (operation, names)
    return names


def render_key(operation: Any, variables: Mapping[str, Any], context: Any) -> Hashable:
    """What the rendering of an event depends on: the operation, the values of the variables
    used inside its selection (`variables`: coerced) and the reader's visibility. The same for
    every event of one subscription."""
    used = tuple(
        (name, json.dumps(variables.get(name), sort_keys=True, default=str))
        for name in _variables_inside(operation)
    )
    return (id(operation), used, visibility(context))


class _Render:
    """One execution of a selection on an event, and the JSON of its `data`."""

    __slots__ = ("_data", "operation", "result")

    def __init__(self, operation: Any, result: Any) -> None:
        self.operation = operation
        self.result = result
        self._data: str | None = None

    def data(self) -> str | None:
        """The JSON of `data`, encoded once; None when the result carries errors (those go
        through GraphQL's own error handling)."""
        if self.result.errors:
            return None
        if self._data is None:
            self._data = json.dumps(self.result.data, separators=(",", ":"))
        return self._data


class RenderOnce(StrawberryGraphQLCoreExecutionContext):
    """Executes a subscription event once per distinct selection and visibility."""

    def execute_operation(self, serially: bool | None = None) -> Any:
        root = self.root_value
        renders = getattr(root, "renders", None)
        if renders is None or self.operation.operation is not OperationType.SUBSCRIPTION:
            return super().execute_operation(serially)
        key = render_key(self.operation, self.variable_values.coerced, self.context_value)
        found = renders.get(key)
        if found is not None and found.operation is self.operation:
            return found.result
        metrics.EVENT_RENDERS.inc()
        result = super().execute_operation(serially)
        if hasattr(result, "__await__"):
            return self._keep(renders, key, result)
        renders[key] = _Render(self.operation, result)
        return result

    async def _keep(self, renders: dict[Any, Any], key: Any, pending: Any) -> Any:
        result = await pending
        renders[key] = _Render(self.operation, result)
        return result


def rendered_data(event: types.MemoryEvent, operation: Any, key: Hashable) -> str | None:
    """The JSON `data` of `operation` on `event` if it was executed already (`key`:
    `render_key`) without errors; None otherwise."""
    found = event.renders.get(key) if event.renders is not None else None
    if found is None or found.operation is not operation:
        return None
    data: str | None = found.data()
    return data


class _EncodedData:
    def __init__(self) -> None:
        self.texts: OrderedDict[int, tuple[object, str]] = OrderedDict()

    def encode(self, data: object) -> str:
        key = id(data)
        found = self.texts.get(key)
        if found is not None and found[0] is data:
            return found[1]
        text = json.dumps(data, separators=(",", ":"))
        self.texts[key] = (data, text)
        if len(self.texts) > _SHARED_EVENTS:
            self.texts.popitem(last=False)
        return text


_encoded = _EncodedData()


def encode_once(message: object) -> str | None:
    """The JSON of a websocket `next` message whose payload is only `data`, with that data
    encoded once for every subscriber it goes to; None for any other message."""
    if not isinstance(message, dict) or message.get("type") != "next" or len(message) != 3:
        return None
    payload = message.get("payload")
    if not isinstance(payload, dict) or set(payload) != {"data"}:
        return None
    data = _encoded.encode(payload["data"])
    return f'{{"id":{json.dumps(message["id"])},"type":"next","payload":{{"data":{data}}}}}'


class LiveSink:
    """Where a websocket subscription writes its live events: straight to the socket, in the
    operation's own message (`head` is that message up to its `data`), with the data encoded
    once for every subscriber. The per-result machinery (execution, extensions, the message
    dictionary and its JSON) is for the events that need it: the first of each selection,
    replays, errors."""

    __slots__ = ("_head", "_send_text")

    def __init__(self, send_text: Callable[[str], Awaitable[None]], head: str) -> None:
        self._send_text = send_text
        self._head = head

    async def send(self, data: str) -> None:
        metrics.LIVE_WRITES.inc()
        try:
            await self._send_text(f"{self._head}{data}}}}}")
        except (WebSocketDisconnect, WebSocketDisconnected):
            # the connection is gone or closing: its handler sees the close and cancels this
            # operation, which is how a subscription ends whether or not it was writing then
            await asyncio.get_running_loop().create_future()


# the sink of the websocket operation running in the current task, if any
live_sink: ContextVar[LiveSink | None] = ContextVar("memql_live_sink", default=None)


def transport_ws_sink(send_text: Callable[[str], Awaitable[None]], operation_id: str) -> LiveSink:
    """graphql-transport-ws: `{"id": …, "type": "next", "payload": {"data": …}}`."""
    head = f'{{"id":{json.dumps(operation_id)},"type":"next","payload":{{"data":'
    return LiveSink(send_text, head)


def graphql_ws_sink(send_text: Callable[[str], Awaitable[None]], operation_id: str) -> LiveSink:
    """graphql-ws (legacy): `{"type": "data", "id": …, "payload": {"data": …}}`."""
    head = f'{{"type":"data","id":{json.dumps(operation_id)},"payload":{{"data":'
    return LiveSink(send_text, head)
