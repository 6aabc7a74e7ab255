"""The feedback step of a hybrid search: pseudo-relevance feedback from the fused first round.

``prf = "hybrid"`` (the quality mode) runs both lanes again with the expanded query and the moved
vector (``second_round``); ``prf = "rescore"`` (the default) scores the first round's candidates
again with them instead (``rescore``: its cost grows with the candidates, not the corpus). The
expansion itself (RM3, Rocchio, the lanes' agreement) is ``kbctl.search.prf``; the candidates'
term frequencies come from the packed segments' forward index (``kbctl.search.forward``) or the
postings. The engine (``kbctl.search.engine``) decides whether a query takes the step.
"""

from __future__ import annotations

from typing import Any, Callable

from .. import telemetry
from ..config import Profile
from ..store import search as store
from .filters import Filter
from .lanes import LaneHit, bm25_weights, lexical_lane, similarity, submit, vocabulary_df
from .prf import cap_postings, feedback_keys, rm3_terms, rocchio

__all__ = ["SPLIT_CANDIDATES", "documents_of", "lane_chunks", "rescore", "second_round"]


def lane_chunks(lanes) -> dict[tuple[int, int], int | None]:
    """Every chunk of the lanes, (namespace id, chunk id), in lane order, with its document id
    (``None`` when no lane gave one)."""
    order: dict[tuple[int, int], int | None] = {}
    for hits in lanes.values():
        for h in hits:
            if order.get((h.namespace_id, h.chunk_id)) is None:
                order[(h.namespace_id, h.chunk_id)] = h.document_id
    return order


def documents_of(chunks: dict[tuple[int, int], int | None]) -> dict[tuple[int, int], tuple[int, int]]:
    """chunk key -> document key, (namespace id, document id), of the chunks whose document is known."""
    return {key: (key[0], d) for key, d in chunks.items() if d is not None}


def second_round(
    conn,
    namespaces,
    profile: Profile,
    terms: dict[str, float],
    qvec,
    lanes,
    fused,
    depth: int,
    filters: tuple[Filter, ...],
    scan: Callable[[Any, Any], list[LaneHit]],
    side,
):
    """Hybrid pseudo-relevance feedback (``kbctl.search.prf``): the best documents of the fused
    first round expand the BM25 query (RM3, from their stored postings) and move the query vector
    (Rocchio, from their stored vectors); both lanes run again, as in the first round (the dense one
    on the side connection while the lexical one runs here): (the new lanes, not gated yet, the
    round's details). ``lanes`` and ``fused`` are the gated first round: feedback comes only from
    what the principal may view. ``scan(connection, vector)`` is the dense lane as the first round
    ran it (its filters and HNSW settings), ``filters`` the lexical lane's."""
    s = profile.search
    feedback = feedback_keys(fused, documents_of(lane_chunks(lanes)), s.prf_docs)
    keys = [key for key, _ in feedback]
    vkeys = keys[: s.prf_vector_docs]
    vectors = store.feedback_vectors(conn, vkeys, [n.generation_id for n in namespaces])
    qvec2 = rocchio(qvec, [vectors[key] for key in vkeys if key in vectors], s.prf_vector_weight)

    def dense_round(c):
        return scan(c, qvec2)

    pending = submit(lambda: dense_round(side("dense"))) if side is not None else None
    expanded = rm3_terms(terms, feedback, _postings(conn, keys, side), s.prf_terms, s.prf_query_weight)
    df = vocabulary_df(conn, [n.id for n in namespaces], list(expanded))
    expanded = cap_postings(expanded, list(terms), df, s.prf_max_postings)
    helper = None if side is None else (lambda fn: submit(lambda: fn(side("lexical"))))
    new = {"lexical": lexical_lane(conn, namespaces, expanded, depth, filters, profile, helper=helper)}
    new["dense"] = pending.result() if pending is not None else dense_round(conn)
    added = sorted((t for t in expanded if t not in terms), key=lambda t: -expanded[t])
    info = {"docs": len(feedback), "vector_docs": len(vectors), "terms": added, "candidates": depth}
    return new, info


def rescore(conn, namespaces, profile: Profile, terms: dict[str, float], qvec, lanes, fused, lexical_info: dict, side):
    """Pseudo-relevance feedback at a bounded cost (``prf = "rescore"``): the same RM3 query and
    Rocchio vector as ``second_round``, but instead of running both lanes again, every candidate
    of the first round (the union of the gated lanes) is scored by both: BM25 of the expanded query
    (from the candidates' own postings) and the distance of the moved query vector (to their stored
    vectors, in PostgreSQL). Its cost grows with the candidates, not with the corpus or the
    expansion terms' postings. Each lane then ranks every candidate, so fusion sees both lanes'
    evidence for each (a chunk one lane missed is no longer scored 0 by it). The vector half runs on
    the side connection while the lexical half runs here, when the caller offers one (``side``).
    Returns the rescored lanes (gated already: they hold only the gated first round's chunks) and
    the step's details."""
    from . import forward  # imported on first use: a cold search that takes no feedback never needs it

    s = profile.search
    order = lane_chunks(lanes)
    feedback = feedback_keys(fused, documents_of(order), s.prf_docs)
    keys = [key for key, _ in feedback]
    cands = list(order)
    ns_ids = [n.id for n in namespaces]
    gens = [n.generation_id for n in namespaces]
    vkeys = keys[: s.prf_vector_docs]

    def vector_half(c) -> tuple[dict, int]:
        vectors = store.feedback_vectors(c, vkeys, gens)
        moved = rocchio(qvec, [vectors[key] for key in vkeys if key in vectors], s.prf_vector_weight)
        return store.candidate_distances(c, cands, moved, profile.distance, gens), len(vectors)

    pending = submit(telemetry.bound(lambda: vector_half(side("dense")))) if side is not None else None
    segs = forward.segments(conn, ns_ids)  # read once: the feedback postings and the candidates' BM25
    expanded = rm3_terms(terms, feedback, _postings(conn, keys, side, segs), s.prf_terms, s.prf_query_weight)
    n, total = lexical_info.get("stats") or store.lexical_stats(conn, ns_ids)
    df = vocabulary_df(conn, ns_ids, list(expanded))
    present = [t for t in expanded if t in df]
    weight = bm25_weights(expanded, present, df, n)
    k1, b = profile.lexical.k1, profile.lexical.b
    avgdl = float(total) / float(n or 1) or 1.0
    bm25 = _candidate_bm25(conn, cands, present, weight, k1, b, avgdl, side, segs)
    lexical_info["bound"] = sum(weight) * (k1 + 1)
    dist, nvec = pending.result() if pending is not None else vector_half(conn)
    sim = {key: similarity(profile.distance, d) for key, d in dist.items()}
    new = {
        "lexical": _rescored([(key, bm25.get(key, 0.0), order[key]) for key in cands]),
        "dense": _rescored([(key, sim[key], order[key]) for key in cands if key in sim]),
    }
    added = sorted((t for t in expanded if t not in terms), key=lambda t: -expanded[t])
    info = {"docs": len(feedback), "vector_docs": nvec, "terms": added, "candidates": len(cands), "applied": True}
    return new, info


def _postings(conn, keys, side=None, segs=None) -> list:
    """The feedback chunks' postings: from the forward index where a segment has one, else stored
    (``segs``: ``forward.segments``, if read)."""
    from . import forward

    rows, rest = forward.postings(conn, keys, side, segs)
    return rows + store.feedback_postings(conn, rest)


def _candidate_bm25(conn, cands, terms, weights, k1: float, b: float, avgdl: float, side, segs=None) -> dict:
    """BM25 of the candidates: from the packed segments' forward index in memory (``forward``),
    the others (the unpacked tail) by ``store.candidate_bm25``; with a side connection, half of
    those there at the same time (the statement's cost is reading each candidate's postings)."""
    from . import forward

    done, cands = forward.candidate_bm25(conn, cands, terms, weights, k1=k1, b=b, avgdl=avgdl, side=side, segs=segs)
    return {**done, **_statement_bm25(conn, cands, terms, weights, k1, b, avgdl, side)}


def _statement_bm25(conn, cands, terms, weights, k1: float, b: float, avgdl: float, side) -> dict:
    if not cands:
        return {}
    if side is None or len(cands) < 2 * SPLIT_CANDIDATES:
        return store.candidate_bm25(conn, cands, terms, weights, k1=k1, b=b, avgdl=avgdl)
    half = len(cands) // 2
    other = submit(
        telemetry.bound(
            lambda: store.candidate_bm25(side("lexical"), cands[half:], terms, weights, k1=k1, b=b, avgdl=avgdl)
        )
    )
    out = store.candidate_bm25(conn, cands[:half], terms, weights, k1=k1, b=b, avgdl=avgdl)
    out.update(other.result())
    return out


SPLIT_CANDIDATES = 50  # rescoring splits its BM25 statement in two from twice this many candidates


def _rescored(rows: list[tuple[tuple[int, int], float, int | None]]) -> list[LaneHit]:
    rows = sorted(rows, key=lambda r: (-round(r[1], 9), r[0][1]))
    return [LaneHit(key[0], key[1], float(sc), i + 1, d) for i, (key, sc, d) in enumerate(rows)]
