"""The GraphQL transport: Strawberry types and inputs, resolvers, the schema and its ASGI
endpoint. Resolvers parse arguments, call `MemoryService` and map the result; nothing below
this package imports it."""
