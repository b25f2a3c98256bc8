"""The embedder seam: every provider turns texts into unit vectors of one model's space."""

from __future__ import annotations

from typing import Protocol

import numpy as np
from numpy.typing import NDArray

Vector = NDArray[np.float32]


class Embedder(Protocol):
    #: the model whose vector space this embedder writes; recorded on every memory
    model: str
    dimensions: int

    async def embed(self, texts: list[str]) -> list[Vector]:
        """Embed `texts` in order, one unit-length vector each; batched where it helps."""
        ...

    async def close(self) -> None:
        """Release whatever the embedder holds."""
        ...
