"""The MCP prompt that teaches an agent when to save a memory and when to skip."""

from __future__ import annotations

DISCIPLINE_NAME = "memory_discipline"
DISCIPLINE_TITLE = "How to use long-term memory"
DISCIPLINE_DESCRIPTION = (
    "When to save a memory and when to skip, how to keep one fact in one place, and what each"
    " kind means."
)

DISCIPLINE = """\
You have a long-term memory about the user you act for (and, where allowed, the project).
Memories outlive this conversation and are recalled into conversations that have not happened
yet. Keep it small, true and useful.

Before answering, call `recall_memory` when earlier conversations may matter.

Save (`save_memory`) only what is all of:
- durable: still true next week (a preference, a fact about the user or the project, a
  decision, a standing instruction, a dated event worth remembering);
- reusable: likely to change a future answer;
- not a secret: never passwords, API keys, tokens, card or account numbers, or health, legal
  or financial details the user did not ask you to remember.

Skip: small talk, what is only true for this task, what you can look up again, guesses, and
anything the user asked you not to keep.

Write each memory as one self-contained statement in the third person ("Prefers concise
status updates."), without "today" or "recently": put a date in episodic memories instead.

One fact, one memory:
- give a fact that will be refined a stable `key` (e.g. `preferred-language`, `home-city`);
  saving again with the same key replaces the old version in place;
- when `save_memory` reports `near_duplicates` and one of them states the same fact, call
  `supersede_memory` on it rather than keeping two copies;
- an equivalent save is `absorbed` into the existing memory: nothing to do;
- when a memory turns out wrong or no longer true, `forget_memory` it (or supersede it with
  the corrected statement).

Kinds:
- `topical`: a stable fact or preference ("Works at Globex.", "Prefers metric units.");
- `episodic`: a dated one-off event ("On 2026-03-02 moved the launch to April.");
- `operational`: a procedure you should follow ("Always answer in English.").

Scopes: `user` (the default) is private to this user; use `project` only for what every user
of the project should share.
"""
