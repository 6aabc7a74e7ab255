"""Reranking: a pluggable stage over the top N fused candidates.

A reranker is anything with ``score(query, texts) -> list[float]``. The built-in one is a
sentence-transformers ``CrossEncoder`` loaded from a model name or a local path
(``[profile.rerank] kind = "cross-encoder"``, ``model = ...``). Other rerankers (an HTTP service, an
LLM) implement the same protocol and register with ``register_reranker``.

A reranker that cannot load or fails degrades to the fused order with a note, never an error.
Metadata-only results never reach this stage.
"""

from __future__ import annotations

import logging
import os
from typing import Callable, Protocol, Sequence

from ..config import RERANK_KINDS, Profile

log = logging.getLogger(__name__)

__all__ = ["Reranker", "CrossEncoderReranker", "register_reranker", "get_reranker", "rerank"]


class Reranker(Protocol):
    def score(self, query: str, texts: Sequence[str]) -> list[float]: ...


class CrossEncoderReranker:
    """A sentence-transformers cross-encoder, on the CPU."""

    def __init__(self, model: str, allow_download: bool = False) -> None:
        if not allow_download:
            os.environ["HF_HUB_OFFLINE"] = "1"
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from sentence_transformers import CrossEncoder

            self._model = CrossEncoder(model, device="cpu")

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        return [float(s) for s in self._model.predict([(query, t) for t in texts], show_progress_bar=False)]


_FACTORIES: dict[str, Callable[[Profile], Reranker]] = {
    "cross-encoder": lambda p: CrossEncoderReranker(p.rerank.model, p.allow_download),
}
_LOADED: dict[tuple[str, str], Reranker] = {}


def register_reranker(kind: str, factory: Callable[[Profile], Reranker]) -> None:
    """Make a reranker kind available to profiles (``[profile.rerank] kind = "<kind>"``).

    Register before loading the profiles that name it: a profile's kind is checked when it loads.
    """
    _FACTORIES[kind] = factory
    RERANK_KINDS.add(kind)


def get_reranker(profile: Profile) -> Reranker:
    kind, model = profile.rerank.kind or "cross-encoder", profile.rerank.model
    key = (kind, model)
    if key not in _LOADED:
        if kind not in _FACTORIES:
            raise ValueError(f"unknown reranker kind {kind!r}")
        if not model and kind == "cross-encoder":
            raise ValueError("no cross-encoder model configured ([profile.rerank] model)")
        _LOADED[key] = _FACTORIES[kind](profile)
    return _LOADED[key]


def rerank(profile: Profile, query: str, ordered: list, texts: dict, notes: list[str]) -> list:
    """Reorder the top ``rerank.top_n`` of ``ordered`` [(key, score)] by the reranker's scores."""
    n = profile.rerank.top_n
    head, tail = ordered[:n], ordered[n:]
    try:
        scores = get_reranker(profile).score(query, [texts[key] for key, _ in head])
    except Exception as e:  # any failure: keep the fused order
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        log.info("reranker unavailable: %s", msg)  # said once, by the note (-v shows this line too)
        notes.append(f"reranker unavailable ({msg}); kept the fused order")
        return ordered
    reranked = sorted(zip((k for k, _ in head), scores), key=lambda kv: -kv[1])
    return reranked + tail
