"""The statements behind ``kbctl verify``: counts, orphans, vectors, indexes, lexical statistics and
the self-retrieval sample of one namespace (``sql/queries/checks``)."""

from __future__ import annotations

from psycopg import sql

from .namespaces import Namespace
from .queries import query, template

__all__ = [
    "counts", "orphans", "bad_vectors", "index_names", "lexical_statistics", "lexical_length", "sample_chunks",
    "self_retrieval",
]

_DIST = {"cosine": "<=>", "l2": "<->", "ip": "<#>"}


def _one(conn, name: str, *params):
    return conn.execute(query(name), params).fetchone()[0]


def counts(conn, ns: Namespace) -> tuple[int, int, int]:
    """The namespace's documents, its chunks, and the chunks its documents declare."""
    return (_one(conn, "checks/document_count", ns.id), _one(conn, "checks/chunk_count", ns.id),
            _one(conn, "checks/declared_chunks", ns.id))


def orphans(conn, ns: Namespace) -> tuple[int, int, int]:
    """Postings without a chunk, attachments without a parent, documents without a chunk."""
    return (_one(conn, "checks/orphan_postings", ns.id), _one(conn, "checks/orphan_attachments", ns.id),
            _one(conn, "checks/empty_documents", ns.id))


def bad_vectors(conn, ns: Namespace) -> int:
    """Chunks without a vector of the namespace's profile and dimension."""
    return _one(conn, "checks/bad_vectors", ns.id, ns.profile_id, ns.dimension)


def index_names(conn) -> set[str]:
    """The names of kbctl's indexes."""
    return {r[0] for r in conn.execute(query("checks/index_names"))}


def lexical_statistics(conn, ns: Namespace) -> tuple[int, float] | None:
    """The namespace's lexical statistics (chunk count, total length); None without a row."""
    return conn.execute(query("checks/lexical_stats"), (ns.id,)).fetchone()


def lexical_length(conn, ns: Namespace) -> float:
    """The lexical lengths of the namespace's chunks, summed."""
    return _one(conn, "checks/lexical_length", ns.id)


def sample_chunks(conn, ns: Namespace, sample: int) -> list[tuple]:
    """(id, content hash, vector) of a stable sample of the namespace's chunks."""
    return conn.execute(query("checks/sample_chunks"), (ns.id, sample)).fetchall()


def self_retrieval(conn, ns: Namespace, rows: list[tuple]) -> int:
    """How many sampled chunks find themselves (or their copy) in the top 3 of an HNSW search."""
    q = template("checks/self_retrieval", pid=sql.Literal(ns.profile_id), d=sql.Literal(ns.dimension),
                 op=sql.SQL(_DIST[ns.distance]))
    found = 0
    with conn.transaction():
        conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        for cid, h, emb in rows:
            top = conn.execute(q, (ns.id, emb)).fetchall()
            found += any(r[0] == cid or r[1] == h for r in top)
    return found
