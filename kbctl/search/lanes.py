"""The two retrieval lanes, each a query inside PostgreSQL scoped to the namespaces first.

Dense: pgvector HNSW over the profile's partial index. When the namespace and filters leave at most
``hnsw.exact_threshold`` rows (peeked once), an exact scan over just those rows runs instead; above
it, HNSW with iterative index scans, so a filtered query still returns k rows.

Lexical: Okapi BM25 computed from the postings kept at ingest,
``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`` and
``tf·(k1 + 1) / (tf + k1·(1 - b + b·dl/avgdl))``, with N, df and avgdl over the queried namespaces.
On large collections the posting lists of common terms dominate the cost, so the lane prunes them
exactly (MaxScore): it scores the rarer terms first, and when the common terms together cannot lift
a chunk that matched none of the rarer ones past the k-th score (a term adds less than
``weight·idf·(k1 + 1)``), it adds their contributions only to the candidates that can still make
the top k. The result is the same top k as scoring every posting (up to float rounding).

Each hit carries its chunk's document id, so fusion can rank documents as well as chunks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from psycopg import sql

from ..config import Profile
from ..store.namespaces import Namespace
from .filters import Filter, filters_sql

__all__ = ["LaneHit", "dense_lane", "lexical_lane", "vocabulary_df", "correct_terms"]

_DIST = {"cosine": "<=>", "l2": "<->", "ip": "<#>"}


@dataclass(frozen=True)
class LaneHit:
    namespace_id: int
    chunk_id: int
    score: float
    rank: int
    document_id: int | None = None


def _ranked(rows: Sequence[tuple]) -> list[LaneHit]:
    """Hits best first from ``(namespace_id, chunk_id, score[, document_id])`` rows."""
    rows = sorted(rows, key=lambda r: (-round(r[2], 9), r[1]))  # rounding: equal sums added in another order tie
    return [LaneHit(r[0], r[1], float(r[2]), i + 1, r[3] if len(r) > 3 else None) for i, r in enumerate(rows)]


def dense_lane(
    conn, namespaces: Sequence[Namespace], qvec: np.ndarray, k: int, filters: tuple[Filter, ...], profile: Profile,
    *, ef_search: int | None = None, exact_threshold: int | None = None,
) -> tuple[list[LaneHit], str]:
    """Top-k chunks by vector similarity; returns the hits and the path taken (hnsw | exact)."""
    ns_ids = [n.id for n in namespaces]
    pid, dim = namespaces[0].profile_id, namespaces[0].dimension
    fsql, fparams = filters_sql(filters)
    threshold = int(profile.hnsw["exact_threshold"] if exact_threshold is None else exact_threshold)
    size = _filtered_size(conn, ns_ids, fsql, fparams, threshold)
    exact = size <= threshold
    op = sql.SQL(_DIST[profile.distance])
    # The HNSW index is on embedding::vector(dim); ordering by the bare column cannot use it, so the
    # exact path really scans only the rows the WHERE clause leaves.
    vec = sql.SQL("c.embedding") if exact else sql.SQL("c.embedding::vector({d})").format(d=sql.Literal(dim))
    q = sql.SQL(
        "SELECT c.namespace_id, c.id, {vec} {op} %s::vector({d}) AS dist, c.document_id FROM kbctl.chunks c"
        " WHERE c.profile_id = {pid} AND c.namespace_id = ANY(%s) AND {f}"
        " ORDER BY {vec} {op} %s::vector({d}) LIMIT %s"
    ).format(vec=vec, op=op, d=sql.Literal(dim), pid=sql.Literal(pid), f=fsql)
    params = [qvec, ns_ids, *fparams, qvec, k]
    with conn.transaction():
        if not exact:
            conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(max(int(ef_search or profile.hnsw["ef_search"]), k))))
            conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        rows = conn.execute(q, params).fetchall()
    return _ranked([(ns, cid, _similarity(profile.distance, d), did) for ns, cid, d, did in rows]), ("exact" if exact else "hnsw")


def _similarity(distance: str, d: float) -> float:
    return 1.0 - d if distance == "cosine" else -d


def _filtered_size(conn, ns_ids: list[int], fsql: sql.Composable, fparams: list, threshold: int) -> int:
    """How many rows the namespaces and filters leave, counted up to threshold + 1."""
    if not fparams:
        row = conn.execute("SELECT coalesce(sum(chunk_count), 0) FROM kbctl.lexical_stats WHERE namespace_id = ANY(%s)", (ns_ids,)).fetchone()
        return int(row[0])
    q = sql.SQL(
        "SELECT count(*) FROM (SELECT 1 FROM kbctl.chunks c WHERE c.namespace_id = ANY(%s) AND {f} LIMIT %s) x"
    ).format(f=fsql)
    return int(conn.execute(q, [ns_ids, *fparams, threshold + 1]).fetchone()[0])


def vocabulary_df(conn, ns_ids: list[int], terms: Sequence[str]) -> dict[str, int]:
    """Document frequency of each term over the namespaces (absent terms are missing)."""
    rows = conn.execute(
        "SELECT term, sum(df)::int FROM kbctl.lexical_vocab WHERE namespace_id = ANY(%s) AND term = ANY(%s) GROUP BY term",
        (ns_ids, list(set(terms))),
    )
    return dict(rows.fetchall())


def correct_terms(conn, ns_ids: list[int], missing: Sequence[str], max_distance: int) -> dict[str, str]:
    """For each term not in the vocabulary, the most frequent term within ``max_distance`` edits."""
    out = {}
    for t in missing:
        if len(t) < 4 or any(c.isdigit() for c in t) or max_distance <= 0:
            continue  # short words and identifiers are not guessed at
        rows = conn.execute(
            "SELECT term, sum(df) AS df FROM kbctl.lexical_vocab WHERE namespace_id = ANY(%s)"
            " AND length(term) BETWEEN %s AND %s AND (left(term, 1) = %s OR substr(term, 2, 1) = %s)"
            " GROUP BY term ORDER BY df DESC LIMIT 5000",
            (ns_ids, len(t) - max_distance, len(t) + max_distance, t[0], t[1:2]),
        ).fetchall()
        best = min(
            ((_edit_distance(t, term, max_distance), -df, term) for term, df in rows),
            default=None,
        )
        if best and best[0] <= max_distance:
            out[t] = best[2]
    return out


def _edit_distance(a: str, b: str, cap: int) -> int:
    """Levenshtein distance, giving up (cap + 1) once it must exceed ``cap``."""
    if abs(len(a) - len(b)) > cap:
        return cap + 1
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        if min(cur) > cap:
            return cap + 1
        prev = cur
    return prev[-1]


# MaxScore pruning is tried when the query's postings exceed this many rows; terms found in more
# than PRUNE_DF of the chunks are the "common" ones scored last.
PRUNE_POSTINGS = 20_000
PRUNE_DF = 0.1

_BM25 = "sum(q.w * p.tf * %s / (p.tf + %s * (1 - %s + %s * p.dl / %s)))"


def lexical_lane(
    conn, namespaces: Sequence[Namespace], terms: dict[str, float], k: int, filters: tuple[Filter, ...], profile: Profile
) -> list[LaneHit]:
    """Top-k chunks by Okapi BM25 over the query terms (term → query weight)."""
    if not terms:
        return []
    ns_ids = [n.id for n in namespaces]
    n, total = conn.execute(
        "SELECT coalesce(sum(chunk_count), 0)::float8, coalesce(sum(total_length), 0)::float8 FROM kbctl.lexical_stats WHERE namespace_id = ANY(%s)",
        (ns_ids,),
    ).fetchone()
    if not n:
        return []
    avgdl = float(total) / float(n) or 1.0
    df = vocabulary_df(conn, ns_ids, list(terms))
    present = [t for t in terms if t in df]
    if not present:
        return []
    weight = {t: terms[t] * math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in present}
    k1, b = float(profile.lexical["k1"]), float(profile.lexical["b"])
    bm25 = [k1 + 1, k1, b, b, avgdl]
    fsql, fparams = filters_sql(filters)
    join = sql.SQL("") if not fparams else sql.SQL(
        " JOIN kbctl.chunks c ON c.namespace_id = p.namespace_id AND c.id = p.chunk_id AND {f}"
    ).format(f=fsql)
    common = [t for t in present if df[t] > PRUNE_DF * n]
    rows = None
    if common and len(common) < len(present) and sum(df[t] for t in present) > PRUNE_POSTINGS:
        rare = [t for t in present if t not in common]
        rows = _maxscore(conn, ns_ids, rare, common, weight, k, (k1 + 1), bm25, join, fparams)
    if rows is None:
        q = sql.SQL(
            "SELECT p.namespace_id, p.chunk_id, " + _BM25 + " AS score"
            " FROM unnest(%s::text[], %s::float8[]) AS q(term, w)"
            " JOIN kbctl.lexical_postings p ON p.term = q.term AND p.namespace_id = ANY(%s){join}"
            " GROUP BY p.namespace_id, p.chunk_id ORDER BY score DESC, p.chunk_id LIMIT %s"
        ).format(join=join)
        rows = conn.execute(q, [*bm25, present, [weight[t] for t in present], ns_ids, *fparams, k]).fetchall()
    return _ranked(_with_documents(conn, rows))


def _maxscore(conn, ns_ids, rare, common, weight, k, tf_bound, bm25, join, fparams) -> list[tuple] | None:
    """Exact top k scoring ``common`` terms only for chunks that can still reach it; None: not prunable.

    Round 1 scores the rare terms and takes the k-th best score θ. A common term adds less than
    ``weight·(k1 + 1)``; if all of them together add less than θ, a chunk with no rare term cannot
    reach the top k, nor can one whose rare-term score plus that bound stays below θ. Round 2 adds
    the common terms' exact contributions to the remaining candidates, by primary-key lookups.
    """
    bound = sum(weight[t] * tf_bound for t in common)
    q = sql.SQL(
        "WITH e AS (SELECT p.namespace_id, p.chunk_id, " + _BM25 + " AS score"
        " FROM unnest(%s::text[], %s::float8[]) AS q(term, w)"
        " JOIN kbctl.lexical_postings p ON p.term = q.term AND p.namespace_id = ANY(%s){join}"
        " GROUP BY p.namespace_id, p.chunk_id),"
        " th AS (SELECT score AS theta FROM e ORDER BY score DESC OFFSET %s LIMIT 1)"
        " SELECT e.namespace_id, e.chunk_id, e.score FROM e, th WHERE th.theta > %s AND e.score >= th.theta - %s"
    ).format(join=join)
    cand = conn.execute(q, [*bm25, rare, [weight[t] for t in rare], ns_ids, *fparams, k - 1, bound, bound]).fetchall()
    if len(cand) < k:
        return None
    extra = conn.execute(
        "SELECT p.namespace_id, p.chunk_id, " + _BM25 + " AS score"
        " FROM unnest(%s::int[], %s::bigint[]) AS c(ns, id)"
        " CROSS JOIN unnest(%s::text[], %s::float8[]) AS q(term, w)"
        " JOIN kbctl.lexical_postings p ON p.namespace_id = c.ns AND p.term = q.term AND p.chunk_id = c.id"
        " GROUP BY p.namespace_id, p.chunk_id",
        [*bm25, [r[0] for r in cand], [r[1] for r in cand], common, [weight[t] for t in common]],
    ).fetchall()
    scores = {(a, c): float(s) for a, c, s in cand}
    for a, c, s in extra:
        scores[(a, c)] += float(s)
    best = sorted(scores.items(), key=lambda kv: (-round(kv[1], 9), kv[0][1]))[:k]
    return [(a, c, s) for (a, c), s in best]


def _with_documents(conn, rows: Sequence[tuple]) -> list[tuple]:
    """``rows`` of (namespace_id, chunk_id, score) with each chunk's document id appended."""
    if not rows:
        return []
    docs = dict(((a, c), d) for a, c, d in conn.execute(
        "SELECT c.namespace_id, c.id, c.document_id FROM unnest(%s::int[], %s::bigint[]) AS x(ns, id)"
        " JOIN kbctl.chunks c ON c.namespace_id = x.ns AND c.id = x.id",
        ([r[0] for r in rows], [r[1] for r in rows]),
    ))
    return [(a, c, s, docs.get((a, c))) for a, c, s in rows]
