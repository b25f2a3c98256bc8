"""Query vectors kept per instance, so a question asked again skips the model.

Agents ask the same few questions over and over (a context block per turn, the same recall after
every tool call), and embedding a query is most of a recall's time. The vector of a text depends
only on the model, so an entry is keyed by the model and the text, within one project: a hit is
faster than a miss by the whole embedding, and a cache shared across projects would let one
tenant time whether another asked a given question. Bounded (least recently used goes first);
emptied when the embedder's model is no longer the one the entries were made with. Concurrent
requests for the same text share one embedding.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict

from memql import metrics
from memql.embeddings import Embedder, Vector

#: entries kept; a 384-dimension vector is 1.5 KB, so the default holds ~6 MB
DEFAULT_ENTRIES = 4096

Key = tuple[str, uuid.UUID, str]


class QueryVectors:
    def __init__(self, embedder: Embedder, entries: int = DEFAULT_ENTRIES) -> None:
        self._embedder = embedder
        self._max = entries
        self._model = embedder.model
        self._entries: OrderedDict[Key, asyncio.Future[Vector]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()
        metrics.QUERY_VECTORS_KEPT.set(0)

    def vector(self, project_id: uuid.UUID, text: str) -> asyncio.Future[Vector]:
        """The vector of `text`, as a future: started at once, so the caller can do other work
        (bind its session) while the model runs."""
        model = self._embedder.model
        if model != self._model:
            # another model's space: nothing kept may be served for it
            self.clear()
            self._model = model
        if self._max <= 0:
            metrics.QUERY_VECTORS.labels("miss").inc()
            return asyncio.ensure_future(self._embed_one(text))
        key = (model, project_id, text)
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
            metrics.QUERY_VECTORS.labels("hit").inc()
            return found
        metrics.QUERY_VECTORS.labels("miss").inc()
        future = asyncio.ensure_future(self._embed_one(text))
        self._entries[key] = future
        future.add_done_callback(lambda f: self._settled(key, f))
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
        metrics.QUERY_VECTORS_KEPT.set(len(self._entries))
        return future

    async def _embed_one(self, text: str) -> Vector:
        [vector] = await self._embedder.embed([text])
        return vector

    def _settled(self, key: Key, future: asyncio.Future[Vector]) -> None:
        # a failed or cancelled embedding is not kept: the next request tries again
        if (future.cancelled() or future.exception() is not None) and self._entries.get(
            key
        ) is future:
            del self._entries[key]
            metrics.QUERY_VECTORS_KEPT.set(len(self._entries))
