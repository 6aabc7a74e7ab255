"""Writing and removing documents: each document's old chunks are replaced in one transaction.

A batch of documents is written in one transaction: the old versions (chunks, postings, vocabulary
counts) are removed and the new ones copied in with binary COPY, so a reader sees either the old or
the new version of each document, never half of one, and a killed run leaves no orphans.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np
from psycopg.types.json import Jsonb

from ..errors import ProfileMismatchError
from ..textutil.analyze import Analyzer
from ..types import Document, EmbeddedChunk
from .namespaces import Namespace

__all__ = ["stored_hashes", "cached_vectors", "write_documents", "delete_documents", "stored_uris", "stored_uris_of_source", "source_versions", "WriteStats"]

_CHUNK_COLS = (
    "namespace_id, id, document_id, position, text, token_count, char_start, char_end, heading_path,"
    " page, content_hash, metadata, profile_id, dimension, embedding, lex_length"
)
_CHUNK_TYPES = [
    "integer", "bigint", "bigint", "integer", "text", "integer", "integer", "integer", "text[]",
    "integer", "text", "jsonb", "integer", "integer", "vector", "real",
]


@dataclass(frozen=True)
class WriteStats:
    documents: int
    chunks: int
    replaced: int


def stored_hashes(conn, ns: Namespace, uris: Sequence[str]) -> dict[str, str]:
    """Content hashes of the stored versions of ``uris`` (missing ones are absent)."""
    rows = conn.execute(
        "SELECT uri, content_hash FROM kbctl.documents WHERE namespace_id = %s AND uri = ANY(%s)",
        (ns.id, list(uris)),
    )
    return dict(rows.fetchall())


def stored_uris(conn, ns: Namespace) -> dict[str, str]:
    """Every stored document URI of a namespace, with the URI of the source it came from."""
    return dict(conn.execute("SELECT uri, source_uri FROM kbctl.documents WHERE namespace_id = %s", (ns.id,)).fetchall())


def stored_uris_of_source(conn, ns: Namespace, source_uri: str) -> list[tuple[str, str]]:
    """(document URI, source URI) of the stored documents that came from one source."""
    return conn.execute(
        "SELECT uri, source_uri FROM kbctl.documents WHERE namespace_id = %s AND source_uri = %s", (ns.id, source_uri)
    ).fetchall()


def source_versions(conn, ns: Namespace, source_uris: Sequence[str]) -> dict[str, tuple[str, list[str]]]:
    """For each stored source URI: its source hash and the URIs of the documents it produced."""
    rows = conn.execute(
        "SELECT source_uri, min(source_hash), array_agg(uri) FROM kbctl.documents"
        " WHERE namespace_id = %s AND source_uri = ANY(%s) GROUP BY source_uri HAVING count(DISTINCT source_hash) = 1",
        (ns.id, list(source_uris)),
    )
    return {s: (h, list(u)) for s, h, u in rows}


def cached_vectors(conn, ns: Namespace, hashes: Iterable[str]) -> dict[str, np.ndarray]:
    """Vectors already stored under this namespace's profile for these chunk hashes."""
    hashes = list(set(hashes))
    if not hashes:
        return {}
    rows = conn.execute(
        "SELECT DISTINCT ON (content_hash) content_hash, embedding FROM kbctl.chunks"
        " WHERE profile_id = %s AND content_hash = ANY(%s)",
        (ns.profile_id, hashes),
    )
    return {h: _as_array(v) for h, v in rows}


def _as_array(v) -> np.ndarray:
    """A stored vector as float32 (pgvector >= 0.4 loads ``Vector`` objects, older versions ndarrays)."""
    return np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, dtype=np.float32)


def write_documents(
    conn,
    ns: Namespace,
    items: Sequence[tuple[Document, Sequence[EmbeddedChunk]]],
    analyzer: Analyzer,
    *,
    title_weight: float = 1.0,
    run_id: int | None = None,
    sources: Mapping[str, tuple[str, str]] | None = None,
) -> WriteStats:
    """Replace the stored versions of these documents with the given ones, atomically.

    ``sources`` maps a document URI to its (source URI, source hash), for the unchanged-source check.
    """
    sources = sources or {}
    _check_dimensions(ns, items)
    if not items:
        return WriteStats(0, 0, 0)
    uris = [d.uri for d, _ in items]
    with conn.transaction():
        replaced = _delete(conn, ns, uris)
        doc_ids = _next_ids(conn, "documents", len(items))
        nchunks = sum(len(c) for _, c in items)
        chunk_ids = iter(_next_ids(conn, "chunks", nchunks))
        postings: list[tuple[str, int, float, float]] = []
        lengths = 0.0
        with conn.cursor() as cur:
            with cur.copy(
                "COPY kbctl.documents (namespace_id, id, uri, parent_uri, source_uri, source_hash, title,"
                " source_type, content_hash, metadata, char_count, chunk_count, run_id) FROM STDIN"
            ) as cp:
                for (d, chunks), did in zip(items, doc_ids):
                    su, sh = sources.get(d.uri, (d.uri, ""))
                    cp.write_row((ns.id, did, d.uri, d.parent_uri, su, sh, d.title, d.source_type, d.content_hash,
                                  json.dumps(dict(d.metadata), default=str), len(d.text), len(chunks), run_id))
            with cur.copy(f"COPY kbctl.chunks ({_CHUNK_COLS}) FROM STDIN (FORMAT BINARY)") as cp:
                cp.set_types(_CHUNK_TYPES)
                for (d, chunks), did in zip(items, doc_ids):
                    meta = _chunk_meta_base(d)
                    tags = meta.get("tags")
                    tags = tags if isinstance(tags, list) else []
                    boost = " ".join(str(t) for t in tags)
                    for ec in chunks:
                        c = ec.chunk
                        cid = next(chunk_ids)
                        tf = analyzer.counts(c.text, f"{c.header} {boost}".strip(), title_weight)
                        length = float(sum(tf.values()))
                        lengths += length
                        postings.extend((t, cid, f, length) for t, f in tf.items())
                        m = dict(meta, heading_path=list(c.heading_path), page=c.page)
                        cp.write_row((ns.id, cid, did, c.position, c.text, c.token_count, c.char_start, c.char_end,
                                      list(c.heading_path), c.page, c.content_hash, Jsonb(m), ns.profile_id,
                                      ns.dimension, np.asarray(ec.embedding, dtype=np.float32), length))
            _write_postings(cur, ns, postings)
        _add_stats(conn, ns, nchunks, lengths)
    return WriteStats(len(items), nchunks, replaced)


def _check_dimensions(ns: Namespace, items) -> None:
    """Refuse vectors of another size before touching anything (the schema refuses them too)."""
    for _doc, chunks in items:
        for ec in chunks:
            if len(ec.embedding) != ns.dimension:
                raise ProfileMismatchError(
                    f"a {len(ec.embedding)}-d vector cannot be stored in namespace {ns.name!r}, which is pinned to"
                    f" {ns.profile_name} ({ns.model}, {ns.dimension}-d); nothing was written",
                    hint="embed with the namespace's profile, or ingest into a new namespace",
                )


def delete_documents(conn, ns: Namespace, uris: Sequence[str]) -> int:
    """Remove documents (and their children, chunks and postings); returns how many went."""
    if not uris:
        return 0
    with conn.transaction():
        return _delete(conn, ns, list(uris))


def _chunk_meta_base(d: Document) -> dict:
    meta = dict(d.metadata)
    meta.setdefault("source_type", d.source_type)
    meta.setdefault("title", d.title)
    meta["uri"] = d.uri
    return json.loads(json.dumps(meta, default=str))


def _next_ids(conn, table: str, n: int) -> list[int]:
    if n == 0:
        return []
    rows = conn.execute(
        "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)", (f"kbctl.{table}", n)
    ).fetchall()
    return [int(r[0]) for r in rows]


def _write_postings(cur, ns: Namespace, postings: list[tuple[str, int, float, float]]) -> None:
    with cur.copy("COPY kbctl.lexical_postings (namespace_id, term, chunk_id, tf, dl) FROM STDIN (FORMAT BINARY)") as cp:
        cp.set_types(["integer", "text", "bigint", "real", "real"])
        for t, cid, f, dl in postings:
            cp.write_row((ns.id, t, cid, f, dl))
    df = Counter(p[0] for p in postings)
    if df:
        cur.execute(
            "INSERT INTO kbctl.lexical_vocab (namespace_id, term, df)"
            " SELECT %s, t, n FROM unnest(%s::text[], %s::int[]) AS x(t, n)"
            " ON CONFLICT (namespace_id, term) DO UPDATE SET df = kbctl.lexical_vocab.df + EXCLUDED.df",
            (ns.id, list(df.keys()), list(df.values())),
        )


def _add_stats(conn, ns: Namespace, nchunks: int, length: float) -> None:
    conn.execute(
        "INSERT INTO kbctl.lexical_stats (namespace_id, chunk_count, total_length) VALUES (%s, %s, %s)"
        " ON CONFLICT (namespace_id) DO UPDATE SET chunk_count = kbctl.lexical_stats.chunk_count + EXCLUDED.chunk_count,"
        " total_length = kbctl.lexical_stats.total_length + EXCLUDED.total_length",
        (ns.id, nchunks, length),
    )


def _delete(conn, ns: Namespace, uris: list[str]) -> int:
    """Delete documents by URI, with their child documents, inside the caller's transaction."""
    ids = [r[0] for r in conn.execute(
        "SELECT id FROM kbctl.documents WHERE namespace_id = %s AND (uri = ANY(%s) OR parent_uri = ANY(%s))",
        (ns.id, uris, uris),
    )]
    if not ids:
        return 0
    conn.execute(
        "WITH old AS (SELECT p.term, count(*) AS n FROM kbctl.lexical_postings p"
        " JOIN kbctl.chunks c ON c.namespace_id = p.namespace_id AND c.id = p.chunk_id"
        " WHERE c.namespace_id = %s AND c.document_id = ANY(%s) GROUP BY p.term)"
        " UPDATE kbctl.lexical_vocab v SET df = v.df - old.n FROM old"
        " WHERE v.namespace_id = %s AND v.term = old.term",
        (ns.id, ids, ns.id),
    )
    conn.execute("DELETE FROM kbctl.lexical_vocab WHERE namespace_id = %s AND df <= 0", (ns.id,))
    n, length = conn.execute(
        "SELECT count(*), coalesce(sum(lex_length), 0) FROM kbctl.chunks WHERE namespace_id = %s AND document_id = ANY(%s)",
        (ns.id, ids),
    ).fetchone()
    _add_stats(conn, ns, -int(n), -float(length))
    conn.execute("DELETE FROM kbctl.documents WHERE namespace_id = %s AND id = ANY(%s)", (ns.id, ids))
    return len(ids)
