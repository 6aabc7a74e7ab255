"""Administration for ``kbctl db``: server facts, and ``optimize`` (vacuum, analyze, reindex)."""

from __future__ import annotations

from psycopg import sql

from ..errors import DatabaseError
from .connection import Conn, scalar
from .db import _first_line
from .queries import query

__all__ = [
    "free_connections",
    "optimize",
    "server_versions",
    "tables",
    "table_size",
    "btree_indexes",
    "reindex_index",
    "vacuum",
]


def optimize(conn: Conn, *, reindex: bool = False, full: bool = False) -> list[dict]:
    """VACUUM (ANALYZE) every kbctl table; with ``reindex``, rebuild its B-tree indexes concurrently.

    ``full`` runs ``VACUUM (FULL, ANALYZE)`` instead: every table and index is rewritten (rows
    take the current storage layout, e.g. vectors inline after migration 005, and HNSW indexes
    are rebuilt), under an exclusive lock: searches and ingests wait until it is done.

    Bulk ingests and replaced documents leave B-tree pages half full, the BM25 postings key (read
    by every lexical query, index-only) among them; a rebuild compacts it (docs/benchmarks.md).
    ``REINDEX … CONCURRENTLY`` does not block searches or ingests. HNSW indexes are left alone
    (VACUUM repairs their graph; a rebuild costs minutes per 100k vectors).
    Returns one row per table: its size with indexes before and after, in bytes.
    """
    import psycopg

    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE or not conn.autocommit:
        raise DatabaseError("optimize needs an autocommit connection outside a transaction")
    out = []
    for t in tables(conn):
        before = table_size(conn, t)
        try:
            if reindex and not full:
                for idx in btree_indexes(conn, t):
                    reindex_index(conn, idx)
            vacuum(conn, t, full=full)
        except psycopg.Error as e:
            raise DatabaseError(
                f"optimizing kbctl.{t} failed: {_first_line(e)}",
                hint="VACUUM and REINDEX need the owner of kbctl's tables (or a superuser)",
            ) from None
        out.append({"table": t, "bytes_before": before, "bytes_after": table_size(conn, t)})
    return out


def server_versions(conn: Conn) -> tuple[str, str | None]:
    """(PostgreSQL version, pgvector version or None when the extension is not installed)."""
    version = scalar(conn.execute(query("admin/server_version")))
    ext = conn.execute(query("admin/pgvector_version")).fetchone()
    return version, ext[0] if ext else None


def free_connections(conn: Conn) -> tuple[int, int]:
    """How many more connections an ordinary role can open now, and the server's ``max_connections``."""
    free, limit = conn.execute(query("admin/free_connections")).fetchone() or (0, 0)
    return max(int(free), 0), int(limit)


def tables(conn: Conn) -> list[str]:
    """kbctl's tables, but the migration ledger, by name."""
    return [r[0] for r in conn.execute(query("admin/tables"))]


def table_size(conn: Conn, table: str) -> int:
    """A kbctl table's size with its indexes and TOAST, in bytes."""
    return int(scalar(conn.execute(query("admin/table_size"), (table,))))


def btree_indexes(conn: Conn, table: str) -> list[str]:
    """The B-tree indexes of a kbctl table, by name."""
    return [r[0] for r in conn.execute(query("admin/btree_indexes"), (table,)).fetchall()]


def reindex_index(conn: Conn, index: str) -> None:
    """Rebuild a kbctl index concurrently (searches and ingests go on; needs autocommit)."""
    conn.execute(sql.SQL("REINDEX INDEX CONCURRENTLY {}").format(sql.Identifier("kbctl", index)))


def vacuum(conn: Conn, table: str, *, full: bool = False) -> None:
    """``VACUUM (ANALYZE)`` a kbctl table; ``full`` rewrites it and its indexes under an exclusive lock."""
    conn.execute(
        sql.SQL("VACUUM ({} ANALYZE) {}").format(sql.SQL("FULL," if full else ""), sql.Identifier("kbctl", table))
    )
