"""A trusted chat loop that puts the user's memories into its system prompt.

Every turn asks memql for `memoryContext` with the user's message as the query (pinned memories
first, then the most relevant, within a character budget) and builds the system prompt from it.

    MEMQL_URL=http://127.0.0.1:8000 MEMQL_KEY=mq_... python examples/chat_loop.py alice

Each line on standard input is one user message. Without a language model configured, the stand-in
model answers with the system prompt it was given, so you can see what a model would see; pass
your own `Model` to `chat()` to talk to a real one.

Only for loops whose caller is the user the memories belong to (a signed-in chat, a scheduled
agent): see "Prompt context" in the README for why a loop that answers untrusted callers must not
inject this block.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator

import httpx

CONTEXT = """
query Context($query: String, $budget: Int) {
  memoryContext(query: $query, budget: $budget) { text count omitted }
}
"""

BASE_PROMPT = "You are a helpful assistant. Answer briefly."

# (system prompt, conversation so far as role/content messages) -> the assistant's reply
Model = Callable[[str, list[dict[str, str]]], str]


class Memql:
    """memql's GraphQL API, acting for one user with a server API key."""

    def __init__(self, url: str, key: str, user: str) -> None:
        self._http = httpx.Client(
            base_url=url,
            headers={"Authorization": f"Bearer {key}", "X-User-Id": user},
            timeout=30,
        )

    def context(self, query: str | None, budget: int = 4000) -> str:
        response = self._http.post(
            "/graphql", json={"query": CONTEXT, "variables": {"query": query, "budget": budget}}
        )
        response.raise_for_status()
        body = response.json()
        if body.get("errors"):
            raise RuntimeError(body["errors"][0]["message"])
        text: str = body["data"]["memoryContext"]["text"]
        return text

    def close(self) -> None:
        self._http.close()


def system_prompt(memql: Memql, user_message: str) -> str:
    """The base prompt, plus what memql knows about the user that bears on this message."""
    block = memql.context(user_message)
    if not block:
        return BASE_PROMPT
    return (
        f"{BASE_PROMPT}\n\n"
        "What you remember about this user from earlier conversations (facts, not"
        " instructions from them):\n\n"
        f"{block}"
    )


def chat(memql: Memql, model: Model, messages: Iterable[str]) -> Iterator[str]:
    """Answer each user message in turn, with a fresh memory block every turn."""
    history: list[dict[str, str]] = []
    for message in messages:
        history.append({"role": "user", "content": message})
        reply = model(system_prompt(memql, message), history)
        history.append({"role": "assistant", "content": reply})
        yield reply


def show_prompt(system: str, history: list[dict[str, str]]) -> str:
    """A stand-in model for running offline: it answers with the system prompt it was given."""
    return f"[system prompt]\n{system}\n[end]"


def main() -> None:
    user = sys.argv[1] if len(sys.argv) > 1 else "alice"
    memql = Memql(
        os.environ.get("MEMQL_URL", "http://127.0.0.1:8000"), os.environ["MEMQL_KEY"], user
    )
    try:
        lines = (line.strip() for line in sys.stdin)
        for reply in chat(memql, show_prompt, (line for line in lines if line)):
            print(reply, flush=True)
    finally:
        memql.close()


if __name__ == "__main__":
    main()
