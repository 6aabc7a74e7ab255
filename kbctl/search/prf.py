"""Hybrid pseudo-relevance feedback: the fused first round's best documents expand both queries.

- **RM3** (lexical lane): ``P(t|R) ∝ Σ_d P(t|d)·P(d|q)`` over the feedback chunks, with
  ``P(t|d) = tf / dl`` from their stored BM25 postings and ``P(d|q)`` their fused scores (normalised
  to sum to 1); the ``terms`` most likely terms are kept and mixed with the original query,
  ``w·P(t|q) + (1 − w)·P(t|R)``. The result is a weighted BM25 query (the lane multiplies each
  weight by the term's idf).
- **Rocchio** (dense lane): ``q + w·centroid`` of the stored vectors of the best ``vector_docs``
  feedback chunks (both unit length), re-normalised.

Feedback is taken from the *fused* list only: expanding one lane from its own top documents was
fragile in the experiments that motivated this (docs/retrieval-quality.md).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

__all__ = ["feedback_keys", "rm3_terms", "cap_postings", "rocchio", "lane_agreement"]

Key = tuple[int, int]


def feedback_keys(fused: Sequence[tuple[Key, float]], doc_of: Mapping[Key, object], n: int) -> list[tuple[Key, float]]:
    """The best chunk of each of the first ``n`` documents of the fused list, with its score."""
    out: list[tuple[Key, float]] = []
    seen: set = set()
    for key, score in fused:
        d = doc_of.get(key, key)
        if d in seen:
            continue
        seen.add(d)
        out.append((key, float(score)))
        if len(out) >= n:
            break
    return out


def rm3_terms(
    query_terms: Mapping[str, float],
    feedback: Sequence[tuple[Key, float]],
    postings: Sequence[tuple[int, int, str, float, float]],
    n_terms: int,
    query_weight: float,
) -> dict[str, float]:
    """The RM3 query: term → weight (summing to 1), original terms included."""
    if not feedback or not postings:
        total_q = sum(query_terms.values()) or 1.0
        return {t: w / total_q for t, w in query_terms.items()}
    top = sorted(relevance_model(feedback, postings).items(), key=lambda kv: (-kv[1], kv[0]))[:n_terms]
    return rm3_mix(query_terms, top, query_weight)


def relevance_model(
    feedback: Sequence[tuple[Key, float]], postings: Sequence[tuple[int, int, str, float, float]]
) -> dict[str, float]:
    """RM1's P(w|R) up to a constant: each feedback chunk's term frequencies over its length,
    weighted by P(d|q) from the fused scores (positive in both fusions), normalised to sum to 1."""
    raw = {key: max(s, 0.0) + 1e-9 for key, s in feedback}
    z = sum(raw.values())
    pdq = {key: v / z for key, v in raw.items()}
    rel: dict[str, float] = {}
    for ns, cid, term, tf, dl in postings:
        w = pdq.get((ns, cid))
        if w is None or not dl:
            continue
        rel[term] = rel.get(term, 0.0) + w * float(tf) / float(dl)
    return rel


def rm3_mix(
    query_terms: Mapping[str, float], top: Sequence[tuple[str, float]], query_weight: float
) -> dict[str, float]:
    """The original query (normalised) at ``query_weight``, the expansion ``top`` (term, weight),
    normalised, at the rest."""
    total_q = sum(query_terms.values()) or 1.0
    zr = sum(v for _, v in top) or 1.0
    out = {t: query_weight * (w / total_q) for t, w in query_terms.items()}
    for t, v in top:
        out[t] = out.get(t, 0.0) + (1.0 - query_weight) * v / zr
    return out


def cap_postings(
    weights: Mapping[str, float], original: Sequence[str], df: Mapping[str, int], cap: int
) -> dict[str, float]:
    """Keep the original terms, then the expansion terms by weight while their summed df fits ``cap``.

    Terms missing from the vocabulary are dropped (they have no postings)."""
    out = {t: w for t, w in weights.items() if t in original}
    used = 0
    for t, w in sorted(weights.items(), key=lambda kv: (-kv[1], kv[0])):
        if t in out or t not in df:
            continue
        if used + df[t] > cap:
            continue
        used += df[t]
        out[t] = w
    return out


def rocchio(qvec: np.ndarray, vectors: Sequence[np.ndarray], weight: float) -> np.ndarray:
    """``q + weight·centroid(vectors)`` (both unit length), re-normalised; the query itself without vectors."""
    if not len(vectors) or weight <= 0:
        return qvec
    q = np.asarray(qvec, dtype=np.float32)
    c = np.mean(np.stack([np.asarray(v, dtype=np.float32) for v in vectors]), axis=0)
    c /= np.linalg.norm(c) or 1.0
    out = q / (np.linalg.norm(q) or 1.0) + weight * c
    return (out / (np.linalg.norm(out) or 1.0)).astype(np.float32)


def lane_agreement(lanes: Mapping[str, Sequence], n: int = 10) -> float:
    """How far the lanes agree on the first round: the share of the lexical lane's first ``n``
    documents that are among the dense lane's first ``n`` (of the shorter list when a lane found
    fewer; 0 when either lane is empty). A
    query-performance predictor that needs no judgements: when two unrelated views of relevance
    agree, the first round is likely good, and feedback from it likely helps."""
    tops = []
    for name in ("lexical", "dense"):
        seen: list = []
        for h in lanes.get(name, ()):
            d = (h.namespace_id, h.document_id if h.document_id is not None else ("chunk", h.chunk_id))
            if d not in seen:
                seen.append(d)
                if len(seen) >= n:
                    break
        tops.append(seen)
    if not tops[0] or not tops[1]:
        return 0.0
    return len(set(tops[0]) & set(tops[1])) / float(min(len(tops[0]), len(tops[1])))
