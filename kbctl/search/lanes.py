"""The two retrieval lanes, each a query inside PostgreSQL scoped to the namespaces first.

Dense: pgvector HNSW over the profile's partial index. When the namespace and filters leave at most
``hnsw.exact_threshold`` rows (peeked once), an exact scan over just those rows runs instead; above
it, HNSW with iterative index scans, so a filtered query still returns k rows.

Lexical: Okapi BM25 computed from the postings kept at ingest,
``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`` and
``tf·(k1 + 1) / (tf + k1·(1 - b + b·dl/avgdl))``, with N, df and avgdl over the queried namespaces.
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


def _ranked(rows: Sequence[tuple[int, int, float]]) -> list[LaneHit]:
    rows = sorted(rows, key=lambda r: (-r[2], r[1]))
    return [LaneHit(ns, cid, float(s), i + 1) for i, (ns, cid, s) in enumerate(rows)]


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
        "SELECT c.namespace_id, c.id, {vec} {op} %s::vector({d}) AS dist FROM kbctl.chunks c"
        " WHERE c.profile_id = {pid} AND c.namespace_id = ANY(%s) AND {f}"
        " ORDER BY {vec} {op} %s::vector({d}) LIMIT %s"
    ).format(vec=vec, op=op, d=sql.Literal(dim), pid=sql.Literal(pid), f=fsql)
    params = [qvec, ns_ids, *fparams, qvec, k]
    with conn.transaction():
        if not exact:
            conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(max(int(ef_search or profile.hnsw["ef_search"]), k))))
            conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        rows = conn.execute(q, params).fetchall()
    return _ranked([(ns, cid, _similarity(profile.distance, d)) for ns, cid, d in rows]), ("exact" if exact else "hnsw")


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
    idf = [terms[t] * math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in present]
    k1, b = float(profile.lexical["k1"]), float(profile.lexical["b"])
    fsql, fparams = filters_sql(filters)
    join = sql.SQL("") if not fparams else sql.SQL(
        " JOIN kbctl.chunks c ON c.namespace_id = p.namespace_id AND c.id = p.chunk_id AND {f}"
    ).format(f=fsql)
    q = sql.SQL(
        "SELECT p.namespace_id, p.chunk_id,"
        " sum(q.w * p.tf * %s / (p.tf + %s * (1 - %s + %s * p.dl / %s))) AS score"
        " FROM unnest(%s::text[], %s::float8[]) AS q(term, w)"
        " JOIN kbctl.lexical_postings p ON p.term = q.term AND p.namespace_id = ANY(%s){join}"
        " GROUP BY p.namespace_id, p.chunk_id ORDER BY score DESC, p.chunk_id LIMIT %s"
    ).format(join=join)
    params = [k1 + 1, k1, b, b, avgdl, present, idf, ns_ids, *fparams, k]
    rows = conn.execute(q, params).fetchall()
    return _ranked(rows)
