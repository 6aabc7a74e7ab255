"""How a ranked row becomes a cited ``Hit``: its 0–1 relevance, its lanes, its citation."""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from ..types import Hit, place
from .lanes import LaneHit

__all__ = ["relevance_scale", "cited_hit", "citation", "clamp01"]


def relevance_scale(
    lanes: dict[str, list[LaneHit]], fusion: dict, distance: str, bound: float | None, reranked: bool
) -> Callable[[float], float | None]:
    """Score → a 0–1 relevance a person can read: the score over the best this query could score.

    Fused: RRF's best is rank 1 in every lane (``lanes / (rrf_k + 1)``), convex's is 1 (top of both
    lanes). Dense alone: the cosine similarity. Lexical alone: BM25 over its bound (every query term
    with tf → ∞). Reranked: the cross-encoder's logit through a sigmoid.
    """
    if reranked:
        return lambda x: 1.0 / (1.0 + math.exp(-x))
    if len(lanes) > 1:
        best = 1.0 if fusion["method"] == "convex" else len(lanes) / (fusion["rrf_k"] + 1.0)
        return lambda x: x / best
    if "dense" in lanes:
        return (lambda x: x) if distance == "cosine" else (lambda x: None)
    return (lambda x: x / bound) if bound else (lambda x: None)


def cited_hit(
    rank: int,
    score,
    r: tuple,
    lanes: dict[str, dict[tuple[int, int], LaneHit]],
    key,
    scale: Callable[[float], float | None] | None = None,
) -> Hit:
    _ns_id, cid, did, text, meta, heading, page, _pos, uri, title, ns_name = r[:11]
    lane_info: dict[str, dict[str, Any]] = {}
    for name, hits in lanes.items():
        h = hits.get(key)
        lane_info[name] = {"rank": None, "score": None} if h is None else {"rank": h.rank, "score": round(h.score, 6)}
    return Hit(
        rank=rank,
        score=None if score is None else round(float(score), 6),
        doc_id=did,
        chunk_id=cid,
        source=_display_source(uri, meta),
        title=title,
        text=text,
        namespace=ns_name,
        metadata=_with_link(meta, uri, text),
        citation=citation(title, _display_source(uri, meta), page, heading),
        lanes=lane_info,
        relevance=None if score is None or scale is None else clamp01(scale(float(score))),
    )


def _with_link(meta: dict, uri: str, text: str) -> dict:
    """The chunk's metadata; for a web page, with ``link``: its url opening at the passage (``#:~:text=``)."""
    from ..textutil.fragment import text_fragment_link

    out = dict(meta)
    if uri.startswith(("http://", "https://")) and meta.get("source_type") == "html":
        link = text_fragment_link(uri, text)
        if link:
            out["link"] = link
    return out


def clamp01(x: float | None) -> float | None:
    return None if x is None else round(min(1.0, max(0.0, x)), 3)


def _display_source(uri: str, meta: dict) -> str:
    return str(meta.get("path") or uri) if uri.startswith("file://") else uri


def citation(title: str, source: str, page: int | None, heading: Sequence[str] | None) -> str:
    """A human-readable citation: title, source, and page or section when known."""
    parts = [title or source]
    if source and source != title:
        parts.append(f"({source})")
    where = place(page, heading)
    if where:
        parts.append(where)
    return " ".join(parts)
