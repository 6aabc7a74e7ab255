"""The statements behind the search lanes: BM25 over the postings, the dense scan, hits, metadata.

The lanes (``kbctl.search.lanes``) decide what to run (the dense path, the split of the lexical
lane, the BM25 weights); the statements are here, the static ones in ``sql/queries/search``.
Dense statements come with the ``SET LOCAL`` settings they run under, in one transaction.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from psycopg import sql

from ..types import FETCH_FACTS, Filter
from . import capabilities
from .connection import Conn, one, scalar
from .filters import filter_sql, lookup_of, narrowable
from .generations import column_of
from .namespaces import Namespace
from .queries import query, template

__all__ = [
    "MIN_ID",
    "MAX_ID",
    "lexical_stats",
    "chunk_total",
    "filtered_size",
    "filtered_count",
    "vocabulary_df",
    "correction_candidates",
    "term_acls",
    "bm25_statement",
    "bm25_rows",
    "candidate_bm25",
    "candidate_distances",
    "median_chunk",
    "with_documents",
    "dense_statement",
    "dense_rows",
    "hit_rows",
    "metadata_keys",
    "chunk_acls",
    "feedback_postings",
    "feedback_vectors",
]

MIN_ID, MAX_ID = -(2**63), 2**63 - 1  # the whole range of chunk ids
_DIST = {"cosine": "<=>", "l2": "<->", "ip": "<#>"}
# Filters read the chunk's metadata. The exact path joins the chunks (the filter drives: its rows
# are few, or the exact path would not be taken); the HNSW path checks each vector the index yields
# by its chunk's primary key, a subplan per row (OFFSET 0 keeps the planner from turning it into a
# join, whose plan depended on fresh statistics: a filtered scan once took 450 ms by walking
# chunks_document instead of the key).
_CHUNKS = sql.SQL(" JOIN kbctl.chunks c ON c.namespace_id = v.namespace_id AND c.id = v.chunk_id")
_EXISTS = sql.SQL(
    "EXISTS (SELECT FROM kbctl.chunks c WHERE c.namespace_id = v.namespace_id AND c.id = v.chunk_id AND {f} OFFSET 0)"
)


def lexical_stats(conn: Conn, ns_ids: list[int]) -> tuple[float, float]:
    """(chunk count, total lexical length) over the namespaces."""
    n, total = one(conn.execute(query("search/lexical_stats"), (ns_ids,)))
    return n, total


def chunk_total(conn: Conn, ns_ids: list[int]) -> int:
    """How many chunks the namespaces hold, from their statistics."""
    return int(scalar(conn.execute(query("search/chunk_total"), (ns_ids,))))


# Equality filters through kbctl.metadata_values (migration 024). Under the tenants' policy every
# other reading of a filter is a sequential scan of the namespace, cheap for a broad filter (its
# limit is soon reached) and dear for a rare one; through the index it is the other way round (the
# lookup reads every entry of the filter). So a statement first reads at most PROBE times its limit
# of chunks plainly: a filter that reaches its limit there is broad and answered as it always was,
# at no more cost; only another is looked up through the index, by the filter with the fewest
# entries. The exact condition always runs after the lookup: the rows are the same either way.
# NARROWING "always" and "never" are for the tests, which compare the two.
NARROWING = "auto"
PROBE = 4  # chunks read plainly per row of the limit, at most
# What the lookup costs, in chunks read plainly (measured at 100k chunks, docs/hardening.md session
# 48): an entry read (and made unique), a chunk looked up by its key and its exact condition tested.
ENTRY, LOOKUP = 0.3, 3.0
METADATA_PROBE = 256  # the least limit the metadata-only search probes with (it orders every match)


def filtered_size(conn: Conn, ns_ids: list[int], filters: tuple[Filter, ...], limit: int) -> int:
    """How many chunks of the namespaces the (non-empty) filters keep, counted up to ``limit``."""
    return filtered_count(conn, ns_ids, filters, limit)[0]


def filtered_count(conn: Conn, ns_ids: list[int], filters: tuple[Filter, ...], limit: int) -> tuple[int, int | None]:
    """``filtered_size``, and the filter the dense lane's exact path narrows by (its index in
    ``filters``; None: none can be). That path is taken only when the count is within its
    threshold, so selective: it narrows whenever a filter can, by the one with the fewest entries."""

    def costs(entries: float, s: float, n: int) -> tuple[float, float]:
        # the lookup reads every entry, then tests chunks by their key until the limit is reached;
        # the plain count reads on until the limit (at the probe's rate) or the namespace's end
        tested = min(entries, limit * entries / (s * n))
        return ENTRY * entries + LOOKUP * tested, min(n, limit / s) - PROBE * limit

    use, best = _narrowing(conn, ns_ids, filters, limit, costs)
    if use == -1:
        return limit, None  # not the exact path's either: it is taken for a selective filter
    fsql, fparams = filter_sql(filters, narrow=use)
    q = template("search/filtered_size", f=fsql)
    return int(scalar(conn.execute(q, [ns_ids, *fparams, limit]))), best


def _narrowing(
    conn: Conn,
    ns_ids: list[int],
    filters: tuple[Filter, ...],
    limit: int,
    costs: Callable[[float, float, int], tuple[float, float]],
) -> tuple[int | None, int | None]:
    """(the filter a statement whose answer needs ``limit`` matches narrows by: its index, None to
    read plainly, -1 when the plain probe found the filters broad (``limit`` matches within the
    first ``PROBE * limit`` chunks); the narrowable filter with the fewest entries).

    From the probe's share of matches ``s``, ``costs(entries, s, chunks)`` gives the lookup's cost
    and the plain reading's still to come (in chunks read plainly): the statement narrows when the
    lookup costs less. Of several filters, by the one with the fewest entries (counted up to what
    the plain reading costs). Never while the planner takes kbctl.chunks for smaller than the
    namespaces (no statistics yet: ``search/narrowing_figures``), nor in namespaces of no more
    than ``PROBE * limit`` chunks, which the plain reading reads at that cost at most."""
    candidates = [i for i, f in enumerate(filters) if narrowable(f)]
    if not candidates or NARROWING == "never":
        return None, None
    single = candidates[0] if len(candidates) == 1 else None
    if NARROWING == "always":
        if single is not None:
            return single, single
        best = min((entry_count(conn, ns_ids, filters[i], 2**62), i) for i in candidates)[1]
        return best, best
    total, planned = one(conn.execute(query("search/narrowing_figures"), (ns_ids,)))
    n = int(total)
    if planned < n / 2:
        return None, None
    if n <= PROBE * limit:  # the plain reading never reads more than the probe would
        return None, single
    fsql, fparams = filter_sql(filters)
    q = template("search/filtered_probe", f=fsql)
    matches = int(scalar(conn.execute(q, [ns_ids, PROBE * limit, *fparams, limit])))
    if matches >= limit:
        return -1, None
    s = max(matches, 0.5) / (PROBE * limit)  # none in the probe: under one in PROBE * limit
    if single is not None:
        lookup, plain = costs(s * n, s, n)
        return (single if lookup < plain else None), single
    plain = costs(0, s, n)[1]
    cap = int(plain / ENTRY) + 1  # more entries than this cost more than the plain reading
    entries, best = min((entry_count(conn, ns_ids, filters[i], cap), i) for i in candidates)
    return (best if entries < cap and costs(entries, s, n)[0] < plain else None), best


def entry_count(conn: Conn, ns_ids: list[int], f: Filter, cap: int) -> int:
    """How many entries of kbctl.metadata_values the equality filter ``f`` looks up, up to ``cap``."""
    return int(scalar(conn.execute(query("search/metadata_entries"), [ns_ids, *lookup_of(f), cap])))


def vocabulary_df(conn: Conn, ns_ids: list[int], terms: Sequence[str]) -> dict[str, int]:
    """Document frequency of each term over the namespaces (absent terms are missing)."""
    return dict(conn.execute(query("search/vocabulary_df"), (ns_ids, list(set(terms)))).fetchall())


def correction_candidates(conn: Conn, ns_ids: list[int], term: str, max_distance: int) -> list[tuple[str, int]]:
    """(term, df) of the 5000 most frequent terms within ``max_distance`` in length of ``term``
    that share its first or second letter."""
    return conn.execute(
        query("search/correction_candidates"),
        (ns_ids, len(term) - max_distance, len(term) + max_distance, term[0], term[1:2]),
    ).fetchall()


def term_acls(conn: Conn, ns_ids: list[int], term: str, limit: int) -> list[tuple[int, Any]]:
    """(namespace id, document ACL) of the documents holding ``term``, from its first ``limit`` postings."""
    return conn.execute(query("search/term_acls"), (ns_ids, term, limit)).fetchall()


def bm25_statement(filters: tuple[Filter, ...]) -> tuple[sql.Composed, list]:
    """The BM25 statement (joined to the chunks when filtered) and the filters' parameters."""
    fsql, fparams = filter_sql(filters)
    join = (
        sql.SQL("")
        if not fparams
        else sql.SQL(" JOIN kbctl.chunks c ON c.namespace_id = p.namespace_id AND c.id = p.chunk_id AND {f}").format(
            f=fsql
        )
    )
    return template("search/lexical_lane", join=join), fparams


def bm25_rows(
    conn: Conn,
    statement: tuple[sql.Composed, list],
    ns_ids: list[int],
    terms: list[str],
    weights: list[float],
    *,
    k1: float,
    b: float,
    avgdl: float,
    k: int,
    lo: int = MIN_ID,
    hi: int = MAX_ID,
) -> list[tuple]:
    """(namespace_id, chunk_id, score) of the top k chunks with ids in [lo, hi] (``bm25_statement``)."""
    q, fparams = statement
    with conn.transaction():
        conn.execute(query("search/lexical_settings"))
        return conn.execute(q, [k1 + 1, k1, b, b, avgdl, terms, weights, ns_ids, lo, hi, *fparams, k]).fetchall()


def candidate_bm25(
    conn: Conn,
    keys: Sequence[tuple[int, int]],
    terms: list[str],
    weights: list[float],
    *,
    k1: float,
    b: float,
    avgdl: float,
) -> dict[tuple[int, int], float]:
    """BM25 of the chunks ``keys`` only, keyed by (namespace_id, chunk_id); a chunk holding none of
    the terms is missing (score 0). Reads only the candidates' postings."""
    if not keys or not terms:
        return {}
    want = set(keys)
    rows = conn.execute(
        query("search/candidate_bm25"),
        (k1 + 1, k1, b, b, avgdl, terms, weights, sorted({a for a, _ in keys}), [c for _, c in keys], terms),
    ).fetchall()
    return {(a, c): float(s) for a, c, s in rows if (a, c) in want}


def candidate_distances(
    conn: Conn, keys: Sequence[tuple[int, int]], qvec: np.ndarray, distance: str, generation_ids: Sequence[int]
) -> dict[tuple[int, int], float]:
    """The distance (the profile's ``distance``) from ``qvec`` to each chunk of ``keys`` that has a
    vector in the given generations, keyed by (namespace_id, chunk_id)."""
    if not keys:
        return {}
    want = set(keys)
    q = template("search/candidate_distances", op=sql.SQL(_DIST[distance]))
    rows = conn.execute(q, (qvec, sorted({a for a, _ in keys}), [c for _, c in keys], list(generation_ids))).fetchall()
    return {(a, c): float(d) for a, c, d in rows if (a, c) in want}


def median_chunk(conn: Conn, ns_ids: list[int], offset: int) -> int | None:
    """The id of the chunk at ``offset`` in id order over the namespaces."""
    row = conn.execute(query("search/median_chunk"), (ns_ids, offset)).fetchone()
    return int(row[0]) if row else None


def with_documents(conn: Conn, rows: Sequence[tuple]) -> list[tuple]:
    """``rows`` of (namespace_id, chunk_id, score) with each chunk's document id appended."""
    if not rows:
        return []
    docs = dict(
        ((a, c), d)
        for a, c, d in conn.execute(query("search/chunk_documents"), ([r[0] for r in rows], [r[1] for r in rows]))
    )
    return [(a, c, s, docs.get((a, c))) for a, c, s in rows]


def dense_statement(
    namespaces: Sequence[Namespace],
    qvec: np.ndarray,
    k: int,
    filters: tuple[Filter, ...],
    distance: str,
    *,
    exact: bool,
    ef_search: int,
    max_scan_tuples: int,
    narrow: int | None = None,
) -> tuple[sql.Composed, list, list[sql.Composable]]:
    """The dense query over one generation (the namespaces', all the same), its parameters and the
    ``SET LOCAL`` statements to run before it.

    ``exact`` orders by the bare column, which the HNSW index (on ``embedding::vector(dim)``, or
    ``half::halfvec(dim)``) cannot serve, so the exact path really scans only the rows the WHERE
    clause leaves. The generation id is a literal: the planner matches it to the generation's
    partial index whatever the plan cache does with parameters. ``narrow``: the filter the exact
    path looks its chunks up by in kbctl.metadata_values (``filtered_count``'s; the HNSW path tests
    each vector's chunk by its key and never narrows).
    """
    ns = namespaces[0]
    gid, dim = ns.generation_id, ns.dimension
    col, typ = column_of(ns.storage)
    fsql, fparams = filter_sql(filters, narrow=narrow if exact else None)
    bare = sql.SQL("v.{}").format(sql.Identifier(col))
    vec = bare if exact else sql.SQL("{}::{}({})").format(bare, sql.SQL(typ), sql.Literal(dim))
    q = template(
        "search/dense_lane",
        vec=vec,
        op=sql.SQL(_DIST[distance]),
        typ=sql.SQL(typ),
        d=sql.Literal(dim),
        gid=sql.Literal(gid),
        join=_CHUNKS if filters and exact else sql.SQL(""),
        f=_EXISTS.format(f=fsql) if filters and not exact else fsql,
    )
    settings: list[sql.Composable] = []
    if not exact:
        settings = [
            sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(ef_search)),
            sql.SQL("SET LOCAL hnsw.iterative_scan = relaxed_order"),
            sql.SQL("SET LOCAL hnsw.max_scan_tuples = {}").format(sql.Literal(max_scan_tuples)),
            # The path is decided by the caller, by the filtered set's size. A planner misestimate must
            # not turn "hnsw" into a sort over every vector of the namespace (83 ms instead of 4 at 10k).
            sql.SQL("SET LOCAL enable_sort = off"),
        ]
    return q, [qvec, [n.id for n in namespaces], *fparams, qvec, k], settings


def dense_rows(conn: Conn, statement: tuple[sql.Composed, list, list[sql.Composed]]) -> list[tuple]:
    """Run a ``dense_statement`` under its settings: (namespace_id, chunk_id, distance, document_id) rows."""
    q, params, settings = statement
    with conn.transaction():
        for stmt in settings:
            if capabilities.accepts(conn, stmt.as_string(conn)):  # an older pgvector lacks some hnsw.*
                conn.execute(stmt)
        return conn.execute(q, params).fetchall()


def hit_rows(conn: Conn, keys: list[tuple[int, int]]) -> dict[tuple[int, int], tuple]:
    """What each hit (namespace_id, chunk_id) shows, keyed by it: ids, text, metadata (the chunk's,
    with its document's fetch facts), heading path, page, position, document URI and title,
    namespace name."""
    if not keys:
        return {}
    rows = conn.execute(
        query("search/hits"), (sorted(FETCH_FACTS), [a for a, _ in keys], [b for _, b in keys])
    ).fetchall()
    return {(r[0], r[1]): r for r in rows}


def chunk_acls(conn: Conn, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], list[str] | None]:
    """The document ACL of each chunk of ``keys`` (absent: the chunk is gone)."""
    if not keys:
        return {}
    rows = conn.execute(query("search/chunk_acls"), ([a for a, _ in keys], [b for _, b in keys])).fetchall()
    return {(a, b): acl for a, b, acl in rows}


def feedback_postings(conn: Conn, keys: Sequence[tuple[int, int]]) -> list[tuple[int, int, str, float, float]]:
    """(namespace_id, chunk_id, term, tf, dl) of every stored posting of the chunks ``keys``."""
    if not keys:
        return []
    return conn.execute(query("search/feedback_postings"), ([a for a, _ in keys], [b for _, b in keys])).fetchall()


def feedback_vectors(
    conn: Conn, keys: Sequence[tuple[int, int]], generation_ids: Sequence[int]
) -> dict[tuple[int, int], np.ndarray]:
    """The stored embedding of each chunk of ``keys`` in the given generations (those a search
    reads, one per namespace), keyed by (namespace_id, chunk_id)."""
    if not keys:
        return {}
    rows = conn.execute(
        query("search/feedback_vectors"), ([a for a, _ in keys], [b for _, b in keys], list(generation_ids))
    ).fetchall()
    return {(a, b): np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, dtype=np.float32) for a, b, v in rows}


def metadata_keys(conn: Conn, ns_ids: list[int], filters: tuple[Filter, ...], k: int) -> list[tuple[int, int]]:
    """The first k chunks the filters keep, by document URI and position. It reads every match (to
    order them): plainly, the whole namespace; through kbctl.metadata_values, every match by its
    key, unless the probe finds the filters broad (``_narrowing``)."""
    limit = max(k, METADATA_PROBE)

    def costs(entries: float, s: float, n: int) -> tuple[float, float]:
        return (ENTRY + LOOKUP) * entries, n - PROBE * limit

    narrow, _ = _narrowing(conn, ns_ids, filters, limit, costs)
    fsql, fparams = filter_sql(filters, narrow=None if narrow == -1 else narrow)
    q = template("search/metadata_matches", f=fsql)
    return [(a, b) for a, b in conn.execute(q, [ns_ids, *fparams, k])]
