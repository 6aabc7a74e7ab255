"""What the store holds of a namespace's documents, read before writing: their content and source
hashes, the source each came from, chunk counts, and the vectors already made for a chunk text
(the embed cache). ``kbctl.store.documents`` writes and removes them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from .connection import Conn, scalar
from .generations import Generation
from .namespaces import Namespace
from .queries import query

__all__ = [
    "stored_hashes",
    "stored_owners",
    "stored_versions",
    "stored_chunks",
    "StoredVersion",
    "stored_uris",
    "stored_uris_of_sources",
    "source_versions",
    "sources_holding",
    "chunk_count_of",
    "cached_vectors",
    "cached_hashes",
    "source_version_count",
]


def stored_hashes(conn: Conn, ns: Namespace, uris: Sequence[str]) -> dict[str, str]:
    """Content hashes of the stored versions of ``uris`` (missing ones are absent)."""
    return dict(conn.execute(query("documents/stored_hashes"), (ns.id, list(uris))).fetchall())


def stored_owners(conn: Conn, ns: Namespace, uris: Sequence[str]) -> dict[str, tuple[str, str]]:
    """(content hash, source URI) of the stored versions of ``uris`` (missing ones are absent)."""
    rows = conn.execute(query("documents/stored_owners"), (ns.id, list(uris)))
    return {u: (h, s) for u, h, s in rows}


@dataclass(frozen=True)
class StoredVersion:
    """What the store holds of one document: enough to tell whether writing it again would change it."""

    id: int
    uri: str
    content_hash: str
    source_uri: str
    parent_uri: str | None
    source_type: str
    acl: tuple[str, ...] | None
    explicit: bool  # its ACL came with it (``acl_explicit``)


def stored_versions(conn: Conn, ns: Namespace, uris: Sequence[str]) -> dict[str, StoredVersion]:
    """The stored versions of ``uris`` and of their stored children, by URI (missing ones are absent)."""
    rows = conn.execute(query("documents/stored_versions"), (ns.id, list(uris), list(uris)))
    return {
        r[1]: StoredVersion(int(r[0]), r[1], r[2], r[3], r[4], r[5], None if r[6] is None else tuple(r[6]), bool(r[7]))
        for r in rows
    }


def stored_chunks(conn: Conn, ns: Namespace, ids: Sequence[int]) -> dict[int, list[tuple]]:
    """Per stored document id, its chunks in order as (content hash, char start, char end, tokens,
    page, heading path, PDF boxes or None): what chunking a document again must give to leave it be."""
    out: dict[int, list[tuple]] = {}
    if not ids:
        return out
    for did, h, start, end, tokens, page, heading, boxes in conn.execute(
        query("documents/stored_chunks"), (ns.id, list(ids))
    ):
        out.setdefault(int(did), []).append((h, start, end, tokens, page, tuple(heading or ()), boxes))
    return out


def stored_uris(conn: Conn, ns: Namespace) -> dict[str, str]:
    """Every stored document URI of a namespace, with the URI of the source it came from."""
    return dict(conn.execute(query("documents/stored_uris"), (ns.id,)).fetchall())


def stored_uris_of_sources(conn: Conn, ns: Namespace, source_uris: Iterable[str]) -> dict[str, list[str]]:
    """Per source URI, the URIs of the stored documents that came from it (in one statement; a
    source with none is absent)."""
    out: dict[str, list[str]] = {}
    sources = list(set(source_uris))
    if sources:
        for uri, source in conn.execute(query("documents/stored_uris_of_sources"), (ns.id, sources)):
            out.setdefault(source, []).append(uri)
    return out


def source_versions(conn: Conn, ns: Namespace, source_uris: Sequence[str]) -> dict[str, tuple[str, list[str]]]:
    """For each stored source URI: its source hash and the URIs of the documents it produced."""
    rows = conn.execute(query("documents/source_versions"), (ns.id, list(source_uris)))
    return {s: (h, list(u)) for s, h, u in rows}


def source_version_count(conn: Conn, ns: Namespace, source_uri: str) -> int:
    """How many versions of ``source_uri`` its stored documents come from (0 when none is stored)."""
    return int(scalar(conn.execute(query("documents/source_version_count"), (ns.id, source_uri))))


def sources_holding(conn: Conn, ns: Namespace, source_uris: Sequence[str], pattern: str) -> set[str]:
    """The stored sources of ``source_uris`` a chunk of which matches ``pattern`` (a regular expression)."""
    if not source_uris:
        return set()
    return {s for (s,) in conn.execute(query("documents/sources_holding"), (ns.id, list(source_uris), pattern))}


def cached_vectors(
    conn: Conn, ns: Namespace, hashes: Iterable[str], generation: Generation | None = None
) -> dict[str, np.ndarray]:
    """Vectors already stored under the profile of this namespace's active generation (or of
    ``generation``) for these chunk hashes, from any generation of the tenant's namespaces."""
    hashes = list(set(hashes))
    if not hashes:
        return {}
    pid, storage = (ns.profile_id, ns.storage) if generation is None else (generation.profile_id, generation.storage)
    # binary: pgvector's text form is parsed number by number (20,000 vectors of 384 floats took
    # 3.7-6.4 s as text, 0.8-0.9 s as binary, the same float32 values)
    rows = conn.execute(query("documents/cached_vectors"), (hashes, pid, storage), binary=True)
    return {h: _as_array(v) for h, v in rows}


def cached_hashes(conn: Conn, ns: Namespace, hashes: Iterable[str], generation: Generation | None = None) -> set[str]:
    """Which of these chunk hashes ``cached_vectors`` would give a vector for, without reading the
    vectors: what a plan, or the check before the model runs, needs."""
    hashes = list(set(hashes))
    if not hashes:
        return set()
    pid, storage = (ns.profile_id, ns.storage) if generation is None else (generation.profile_id, generation.storage)
    return {h for (h,) in conn.execute(query("documents/cached_hashes"), (hashes, pid, storage))}


def _as_array(v: Any) -> np.ndarray:
    """A stored vector as float32 (pgvector >= 0.4 loads ``Vector`` objects, older versions ndarrays)."""
    return np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, dtype=np.float32)


def chunk_count_of(conn: Conn, ns: Namespace, uris: Sequence[str]) -> int:
    """How many chunks the stored documents with these URIs have."""
    return int(scalar(conn.execute(query("documents/chunk_count_of_uris"), (ns.id, list(uris)))))
