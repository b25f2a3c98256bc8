"""Mutation resolvers: parse arguments, call the service, map to GraphQL types. No SQL here."""

from __future__ import annotations

import strawberry

from memql.graphql.arguments import takes_records
from memql.graphql.context import Info
from memql.graphql.inputs import SaveMemoryInput
from memql.graphql.types import (
    AddWebhookPayload,
    EraseResult,
    IdArg,
    Memory,
    NearDuplicate,
    SaveMemoryPayload,
    SupersedeMemoryPayload,
    Webhook,
)
from memql.requests import MemoryRef
from memql.rules.validation import parse_id


@strawberry.type
class Mutation:
    @strawberry.mutation(
        description="Save a memory: CREATED, ABSORBED into a same-kind near-duplicate (same id),"
        " or SUPERSEDED when its key is live."
    )
    async def save_memory(self, info: Info, input: SaveMemoryInput) -> SaveMemoryPayload:
        result = await info.context.service.save(info.context.principal, input.to_domain())
        return SaveMemoryPayload.from_domain(result)

    @strawberry.mutation(description="Save many memories atomically, each with its own outcome.")
    async def save_memories(
        self, info: Info, inputs: list[SaveMemoryInput]
    ) -> list[SaveMemoryPayload]:
        results = await info.context.service.save_many(
            info.context.principal, [i.to_domain() for i in inputs]
        )
        return [SaveMemoryPayload.from_domain(r) for r in results]

    @strawberry.mutation(
        description="Replace a live memory (by id, or by key within scope) with a new version."
    )
    @takes_records()
    async def supersede_memory(
        self, info: Info, input: SaveMemoryInput, ref: MemoryRef
    ) -> SupersedeMemoryPayload:
        result = await info.context.service.supersede(
            info.context.principal, input.to_domain(), ref
        )
        assert result.superseded is not None
        return SupersedeMemoryPayload(
            memory=Memory.from_domain(result.memory),
            superseded=Memory.from_domain(result.superseded),
            near_duplicates=[
                NearDuplicate(memory=Memory.from_domain(d.memory), similarity=d.similarity)
                for d in result.near_duplicates
            ],
        )

    @strawberry.mutation(description="Retire a live memory (soft removal; restorable).")
    @takes_records()
    async def retire_memory(self, info: Info, ref: MemoryRef) -> Memory:
        memory = await info.context.service.retire(info.context.principal, ref)
        return Memory.from_domain(memory)

    @strawberry.mutation(description="Bring a retired memory back.")
    async def restore_memory(self, info: Info, id: IdArg) -> Memory:
        memory = await info.context.service.restore(info.context.principal, parse_id(id))
        return Memory.from_domain(memory)

    @strawberry.mutation(
        description="Hard-delete a memory with every version and event payload. Server"
        " credentials only."
    )
    async def erase_memory(self, info: Info, id: IdArg) -> EraseResult:
        result = await info.context.service.erase(info.context.principal, parse_id(id))
        return EraseResult(erased=result.erased)

    @strawberry.mutation(
        description="Hard-delete every memory of the calling user in this project. Server"
        " credentials only."
    )
    async def erase_user_memories(self, info: Info) -> EraseResult:
        result = await info.context.service.erase_user(info.context.principal)
        return EraseResult(erased=result.erased)

    @strawberry.mutation(
        description="Register an HTTP endpoint that receives this project's memory events"
        " (`events`: only these types). Server credentials only; the signing secret is in the"
        " answer, and only there."
    )
    async def add_webhook(
        self, info: Info, url: str, events: list[str] | None = None
    ) -> AddWebhookPayload:
        webhook, secret = await info.context.service.webhooks.add(
            info.context.principal, url, events
        )
        return AddWebhookPayload(webhook=Webhook.from_domain(webhook), secret=secret)

    @strawberry.mutation(description="Stop delivering to an endpoint. Server credentials only.")
    async def remove_webhook(self, info: Info, id: strawberry.ID) -> bool:
        await info.context.service.webhooks.remove(
            info.context.principal, parse_id(id, argument="id", what="webhook id")
        )
        return True
