"""Fusion of the lanes' ranked lists, at the level of documents as well as chunks.

- ``rrf``: reciprocal rank fusion, ``Σ 1 / (rrf_k + rank)`` over the lanes that found a chunk.
- ``convex``: ``w·dense + (1 - w)·lexical`` of min-max normalised scores (0 for a lane that missed).

Both reward a chunk found by both lanes over one found by one at the same ranks.

Lanes rank chunks, but evidence is about documents: the lexical lane may find a document through
one chunk and the dense lane through another, and a long document's several chunks push other
documents down a lane's list. So ranks are counted in documents (a chunk's rank is one plus the
number of other documents ranked above it in that lane), and each document's best chunk (its
*representative*: the highest chunk-level fused score) gets the document's fused score, made of the
document's best rank (or score) in every lane that found any of its chunks. The other chunks of
the document keep their own chunk-level fused score (ranks counted in chunks), which is never
higher, so within a document chunks stay in the order of their own evidence. With one chunk per
document this is plain chunk-level fusion; a hit without a document id counts as a document of its
own.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from .lanes import LaneHit

__all__ = ["fuse", "merge_by_rank", "FUSIONS"]

FUSIONS = ("rrf", "convex")

Key = tuple[int, int]


def fuse(
    lanes: Mapping[str, Sequence[LaneHit]], *, method: str = "rrf", rrf_k: int = 60, dense_weight: float = 0.5
) -> list[tuple[Key, float]]:
    """One ranked list of (namespace_id, chunk_id) with fused scores, best first."""
    if len(lanes) == 1:
        (hits,) = lanes.values()
        return [((h.namespace_id, h.chunk_id), h.score) for h in hits]
    if method == "rrf":
        doc_contrib, own_contrib = _rrf(lanes, rrf_k, by_document=True), _rrf(lanes, rrf_k, by_document=False)
    elif method == "convex":
        doc_contrib = own_contrib = _convex(lanes, dense_weight)
    else:
        from ..errors import UsageError, echo

        raise UsageError(f"unknown fusion {echo(method)}", hint=f"use one of: {', '.join(FUSIONS)}")
    scores = _combine(lanes, doc_contrib, own_contrib)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


def _doc(h: LaneHit) -> tuple:
    return (h.namespace_id, h.document_id) if h.document_id is not None else ("chunk", h.namespace_id, h.chunk_id)


def _combine(
    lanes: Mapping[str, Sequence[LaneHit]],
    doc_contrib: Mapping[str, dict[Key, float]],
    own_contrib: Mapping[str, dict[Key, float]],
) -> dict[Key, float]:
    """Chunk scores: own contributions summed; each document's best chunk gets the document's score.

    ``own_contrib[lane][chunk]`` is the chunk's own contribution in that lane; a document's
    contribution in a lane is the best of its chunks' ``doc_contrib``.
    """
    own: dict[Key, float] = {}
    doc_of: dict[Key, tuple] = {}
    doc_lane: dict[tuple, dict[str, float]] = {}
    for name, hits in lanes.items():
        for h in hits:
            key, d = (h.namespace_id, h.chunk_id), _doc(h)
            c = doc_contrib[name][key]
            own[key] = own.get(key, 0.0) + own_contrib[name][key]
            doc_of[key] = d
            best = doc_lane.setdefault(d, {})
            best[name] = max(best.get(name, c), c)
    rep: dict[tuple, Key] = {}
    for key in sorted(own, key=lambda k: (-own[k], k)):
        rep.setdefault(doc_of[key], key)
    out = dict(own)
    for d, key in rep.items():
        out[key] = sum(doc_lane[d].values())
    return out


def _rrf(lanes: Mapping[str, Sequence[LaneHit]], k: int, *, by_document: bool) -> dict[str, dict[Key, float]]:
    """``1 / (k + rank)`` with ranks counted in documents, or in chunks."""
    out: dict[str, dict[Key, float]] = {}
    for name, hits in lanes.items():
        seen: set = set()
        lane = out[name] = {}
        for i, h in enumerate(sorted(hits, key=lambda h: h.rank), 1):
            seen.add(_doc(h))
            lane[(h.namespace_id, h.chunk_id)] = 1.0 / (k + (len(seen) if by_document else i))
    return out


def _convex(lanes: Mapping[str, Sequence[LaneHit]], w: float) -> dict[str, dict[Key, float]]:
    """The lane's weight times its min-max normalised score.

    A lane whose hits all score alike (one hit, or a tie) has no worst: each is its best (1), not
    its worst (0), which would weigh a lane's only find like a lane that missed it.
    """
    weights = {"dense": w, "lexical": 1.0 - w}
    out: dict[str, dict[Key, float]] = {}
    for name, hits in lanes.items():
        lane = out[name] = {}
        if not hits:
            continue
        lo, hi = min(h.score for h in hits), max(h.score for h in hits)
        weight = weights.get(name, 0.5)
        for h in hits:
            lane[(h.namespace_id, h.chunk_id)] = weight * ((h.score - lo) / (hi - lo) if hi > lo else 1.0)
    return out


def merge_by_rank(groups: Sequence[Sequence[tuple]], rrf_k: int = 60) -> list[tuple[int, int, int, float]]:
    """Ranked lists of disjoint hits (one per group of namespaces searched with its own profile:
    their scores are of different models, never compared) merged by reciprocal rank fusion: each
    hit's ``1 / (rrf_k + rank)``, its rank counted in documents as ``fuse`` counts a lane's (one
    plus the number of other documents ranked above it in its group). ``groups[i]`` lists each hit's
    document (any hashable; None: a document of its own), best first. Returns (group, position in
    it, rank, score), best first: ties by position, then group, so equal ranks alternate between
    groups and each group's own order is kept (its scores never rise down its list)."""
    out = []
    for g, docs in enumerate(groups):
        seen: set = set()
        for i, doc in enumerate(docs):
            seen.add(("chunk", i) if doc is None else doc)
            out.append((g, i, len(seen), 1.0 / (rrf_k + len(seen))))
    return sorted(out, key=lambda t: (-t[3], t[1], t[0]))
