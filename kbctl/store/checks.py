"""The statements behind ``kbctl verify``: counts, orphans, vectors, indexes, lexical statistics and
the sampled chunks (looked up exactly, and through HNSW for the recall figure) of one namespace (``sql/queries/checks``)."""

from __future__ import annotations

from typing import Any

from psycopg import sql

from . import capabilities
from .connection import Conn, scalar
from .generations import column_of
from .namespaces import Namespace
from .queries import query, template

__all__ = [
    "counts",
    "orphans",
    "bad_vectors",
    "index_names",
    "lexical_statistics",
    "lexical_length",
    "sample_chunks",
    "sample_lookup",
    "hnsw_found",
]

_DIST = {"cosine": "<=>", "l2": "<->", "ip": "<#>"}


def _one(conn: Conn, name: str, *params: Any) -> Any:
    return scalar(conn.execute(query(name), params))


def counts(conn: Conn, ns: Namespace) -> tuple[int, int, int]:
    """The namespace's documents, its chunks, and the chunks its documents declare."""
    return (
        _one(conn, "checks/document_count", ns.id),
        _one(conn, "checks/chunk_count", ns.id),
        _one(conn, "checks/declared_chunks", ns.id),
    )


def orphans(conn: Conn, ns: Namespace) -> tuple[int, int, int]:
    """Postings without a chunk, attachments without a parent, documents without a chunk."""
    return (
        _one(conn, "checks/orphan_postings", ns.id),
        _one(conn, "checks/orphan_attachments", ns.id),
        _one(conn, "checks/empty_documents", ns.id),
    )


def bad_vectors(conn: Conn, ns: Namespace) -> int:
    """Chunks without a vector in the namespace's active generation."""
    return _one(conn, "checks/bad_vectors", ns.id, ns.generation_id)


def index_names(conn: Conn) -> set[str]:
    """The names of kbctl's indexes."""
    return {r[0] for r in conn.execute(query("checks/index_names"))}


def lexical_statistics(conn: Conn, ns: Namespace) -> tuple[int, float] | None:
    """The namespace's lexical statistics (chunk count, total length); None without a row."""
    return conn.execute(query("checks/lexical_stats"), (ns.id,)).fetchone()


def lexical_length(conn: Conn, ns: Namespace) -> float:
    """The lexical lengths of the namespace's chunks, summed."""
    return _one(conn, "checks/lexical_length", ns.id)


def sample_chunks(conn: Conn, ns: Namespace, sample: int) -> list[tuple]:
    """(id, content hash, vector) of a stable sample of the namespace's chunks."""
    return conn.execute(query("checks/sample_chunks"), (ns.generation_id, ns.id, sample)).fetchall()


def sample_lookup(conn: Conn, ns: Namespace, ids: list[int]) -> dict[int, tuple]:
    """For each sampled chunk id, looked up exactly (no HNSW): (distance to itself, chunks strictly
    nearer to its vector, chunks of the namespace with its hash and another vector, lexical length,
    summed term frequencies of its postings, postings whose document length disagrees)."""
    col, _ = column_of(ns.storage)
    q = template("checks/sample_lookup", op=sql.SQL(_DIST[ns.distance]), col=sql.Identifier(col))
    return {r[0]: tuple(r[1:]) for r in conn.execute(q, (ns.generation_id, ns.id, ids))}


def hnsw_found(conn: Conn, ns: Namespace, rows: list[tuple], k: int, *, ef_search: int, max_scan_tuples: int) -> int:
    """How many sampled chunks (id, hash, vector, distance to itself) an HNSW search for k rows finds,
    under the settings a search runs with: the chunk itself, a copy (its hash) or a chunk at its
    own distance (a tie: vectors equal to its own)."""
    q = template(
        "checks/hnsw_recall",
        gid=sql.Literal(ns.generation_id),
        col=sql.Identifier(column_of(ns.storage)[0]),
        typ=sql.SQL(column_of(ns.storage)[1]),
        d=sql.Literal(ns.dimension),
        op=sql.SQL(_DIST[ns.distance]),
    )
    found = 0
    with conn.transaction():
        for stmt in (
            sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(ef_search)),
            sql.SQL("SET LOCAL hnsw.iterative_scan = relaxed_order"),
            sql.SQL("SET LOCAL hnsw.max_scan_tuples = {}").format(sql.Literal(max_scan_tuples)),
            sql.SQL("SET LOCAL enable_sort = off"),  # as a search: the index, never a sort of the namespace
        ):
            if capabilities.accepts(conn, stmt.as_string(conn)):  # an older pgvector lacks some hnsw.*
                conn.execute(stmt)
        for cid, h, emb, own in rows:
            top = conn.execute(q, (emb, ns.id, emb, k)).fetchall()
            found += any(r[0] == cid or r[1] == h or (own is not None and r[2] <= own + 1e-6) for r in top)
    return found
