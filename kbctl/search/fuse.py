"""Fusion of the lanes' ranked lists.

- ``rrf``: reciprocal rank fusion, ``Σ 1 / (rrf_k + rank)`` over the lanes that found a chunk.
- ``convex``: ``w·dense + (1 - w)·lexical`` of min-max normalised scores (0 for a lane that missed).

Both reward a chunk found by both lanes over one found by one at the same ranks.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from .lanes import LaneHit

__all__ = ["fuse", "FUSIONS"]

FUSIONS = ("rrf", "convex")

Key = tuple[int, int]


def fuse(lanes: Mapping[str, Sequence[LaneHit]], *, method: str = "rrf", rrf_k: int = 60, dense_weight: float = 0.5) -> list[tuple[Key, float]]:
    """One ranked list of (namespace_id, chunk_id) with fused scores, best first."""
    if len(lanes) == 1:
        (hits,) = lanes.values()
        return [((h.namespace_id, h.chunk_id), h.score) for h in hits]
    if method == "rrf":
        scores = _rrf(lanes, rrf_k)
    elif method == "convex":
        scores = _convex(lanes, dense_weight)
    else:
        from ..errors import UsageError

        raise UsageError(f"unknown fusion {method!r}", hint=f"use one of: {', '.join(FUSIONS)}")
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


def _rrf(lanes: Mapping[str, Sequence[LaneHit]], k: int) -> dict[Key, float]:
    out: dict[Key, float] = {}
    for hits in lanes.values():
        for h in hits:
            key = (h.namespace_id, h.chunk_id)
            out[key] = out.get(key, 0.0) + 1.0 / (k + h.rank)
    return out


def _convex(lanes: Mapping[str, Sequence[LaneHit]], w: float) -> dict[Key, float]:
    weights = {"dense": w, "lexical": 1.0 - w}
    out: dict[Key, float] = {}
    for name, hits in lanes.items():
        if not hits:
            continue
        lo, hi = min(h.score for h in hits), max(h.score for h in hits)
        span = (hi - lo) or 1.0
        for h in hits:
            key = (h.namespace_id, h.chunk_id)
            out[key] = out.get(key, 0.0) + weights.get(name, 0.5) * (h.score - lo) / span
    return out
