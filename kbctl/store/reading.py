"""Reading stored documents back: one document's fields and a window of its chunks, and the
ingest figures of the run ledger (``kbctl stats``, ``/metrics``)."""

from __future__ import annotations

from typing import Sequence

from .connection import Conn, columns
from .queries import query
from .runs import RUN_CLASS

__all__ = ["document_row", "document_chunks", "chunk_position", "chunk_row", "ledger_stats", "namespace_names"]

_DOC_COLS = (
    "namespace_id",
    "namespace",
    "id",
    "uri",
    "title",
    "source_type",
    "metadata",
    "chunk_count",
    "char_count",
    "acl",
)
_CHUNK_COLS = ("chunk_id", "position", "text", "heading_path", "page", "token_count")


def document_row(conn: Conn, doc_id: int, ns_ids: Sequence[int]) -> dict | None:
    """Document ``doc_id`` if it is in one of ``ns_ids``, else None."""
    row = conn.execute(query("reading/document"), (doc_id, list(ns_ids))).fetchone()
    return None if row is None else dict(zip(_DOC_COLS, row))


def document_chunks(conn: Conn, ns_id: int, doc_id: int, lo: int, hi: int) -> list[dict]:
    """The document's chunks at positions ``lo..hi``, in order."""
    rows = conn.execute(query("reading/chunks"), (ns_id, doc_id, lo, hi)).fetchall()
    return [dict(zip(_CHUNK_COLS, r)) for r in rows]


def chunk_position(conn: Conn, ns_id: int, doc_id: int, chunk_id: int) -> int | None:
    """The position of chunk ``chunk_id`` in the document, or None when it is not one of its chunks."""
    row = conn.execute(query("reading/chunk_position"), (ns_id, doc_id, chunk_id)).fetchone()
    return None if row is None else row[0]


_ONE_CHUNK_COLS = (
    "chunk_id", "doc_id", "position", "text", "heading_path", "page", "metadata",
    "namespace_id", "uri", "title", "source_type", "document_metadata", "acl",
)  # fmt: skip


def chunk_row(conn: Conn, chunk_id: int, ns_ids: Sequence[int]) -> dict | None:
    """Chunk ``chunk_id`` with its document's fields if it is in one of ``ns_ids``, else None."""
    row = conn.execute(query("reading/chunk"), (chunk_id, list(ns_ids))).fetchone()
    return None if row is None else dict(zip(_ONE_CHUNK_COLS, row))


def ledger_stats(conn: Conn, tenant: str) -> list[dict]:
    """Per namespace of ``tenant``: runs (and by status), ``dead_runs`` (left 'running' by a process
    that is gone), documents, chunks, recorded item errors."""
    cur = conn.execute(query("reading/ledger_stats"), (RUN_CLASS, tenant))
    cols = columns(cur)
    rows = [dict(zip(cols, r)) for r in cur.fetchall()]
    return rows


def namespace_names(conn: Conn, tenant: str) -> list[str]:
    """The names of ``tenant``'s namespaces, sorted (no counts: cheap enough for every request)."""
    return [r[0] for r in conn.execute(query("namespaces/names_of_tenant"), (tenant,))]
