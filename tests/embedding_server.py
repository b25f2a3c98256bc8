"""A real HTTP server speaking the OpenAI `/v1/embeddings` and TEI `/embed` wire formats.

It serves vectors of the real local model, optionally through a fixed random projection (a
different vector space with another dimension, standing in for another model), and can be told
to stall or fail its first requests so timeouts and retries happen for real.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import numpy as np
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from memql.embeddings.local import LocalEmbedder
from memql.testing import free_port


@dataclass
class Behaviour:
    api_key: str | None = None
    #: the first `stall` requests sleep `stall_seconds` before answering
    stall: int = 0
    stall_seconds: float = 5.0
    #: the first `fail` requests (after any stalled ones) answer 503
    fail: int = 0
    #: every request waits this long first (a slow server)
    delay: float = 0.0
    #: project the local model's vectors to this many dimensions (another vector space)
    project_to: int | None = None
    requests: int = 0
    texts: list[str] = field(default_factory=list)


def build_app(model: LocalEmbedder, behaviour: Behaviour) -> Starlette:
    projection = None
    if behaviour.project_to:
        rng = np.random.default_rng(7)
        projection = rng.standard_normal((model.dimensions, behaviour.project_to)).astype(
            np.float32
        )

    async def vectors(texts: list[str]) -> list[list[float]]:
        behaviour.texts.extend(texts)
        rows = await model.embed(texts)
        if projection is not None:
            rows = [r @ projection for r in rows]
            rows = [r / np.linalg.norm(r) for r in rows]
        return [[float(x) for x in r] for r in rows]

    async def gate() -> Response | None:
        n = behaviour.requests
        if behaviour.delay:
            await asyncio.sleep(behaviour.delay)
        if n <= behaviour.stall:
            await asyncio.sleep(behaviour.stall_seconds)
        elif n <= behaviour.stall + behaviour.fail:
            return JSONResponse({"error": "overloaded"}, status_code=503)
        return None

    async def openai(request: Request) -> Response:
        behaviour.requests += 1
        if behaviour.api_key and request.headers.get("authorization") != (
            f"Bearer {behaviour.api_key}"
        ):
            return JSONResponse({"error": {"message": "invalid api key"}}, status_code=401)
        if (refused := await gate()) is not None:
            return refused
        body = await request.json()
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = await vectors(texts)
        # answer out of order: clients must use `index`
        items = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(data)]
        return JSONResponse(
            {"object": "list", "data": items[::-1], "model": body["model"], "usage": {}}
        )

    async def tei(request: Request) -> Response:
        behaviour.requests += 1
        if (refused := await gate()) is not None:
            return refused
        body = await request.json()
        texts = body["inputs"] if isinstance(body["inputs"], list) else [body["inputs"]]
        return JSONResponse(await vectors(texts))

    return Starlette(
        routes=[
            Route("/v1/embeddings", openai, methods=["POST"]),
            Route("/embed", tei, methods=["POST"]),
        ]
    )


@asynccontextmanager
async def embedding_server(
    model: LocalEmbedder, behaviour: Behaviour | None = None
) -> AsyncIterator[tuple[str, Behaviour]]:
    """Serve on a free loopback port in this event loop; yields the base URL and behaviour."""
    behaviour = behaviour or Behaviour()
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            build_app(model, behaviour),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            # a stalled answer is not waited for when the server stops
            timeout_graceful_shutdown=1,
        )
    )
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", behaviour
    finally:
        server.should_exit = True
        await task
