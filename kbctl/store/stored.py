"""What the store holds of a namespace's documents, read before writing: their content and source
hashes, the source each came from, chunk counts, and the vectors already made for a chunk text
(the embed cache). ``kbctl.store.documents`` writes and removes them."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np

from .connection import Conn, scalar
from .generations import Generation
from .namespaces import Namespace
from .queries import query

__all__ = [
    "stored_hashes",
    "stored_owners",
    "stored_uris",
    "stored_uris_of_source",
    "source_versions",
    "chunk_count_of",
    "cached_vectors",
]


def stored_hashes(conn: Conn, ns: Namespace, uris: Sequence[str]) -> dict[str, str]:
    """Content hashes of the stored versions of ``uris`` (missing ones are absent)."""
    return dict(conn.execute(query("documents/stored_hashes"), (ns.id, list(uris))).fetchall())


def stored_owners(conn: Conn, ns: Namespace, uris: Sequence[str]) -> dict[str, tuple[str, str]]:
    """(content hash, source URI) of the stored versions of ``uris`` (missing ones are absent)."""
    rows = conn.execute(query("documents/stored_owners"), (ns.id, list(uris)))
    return {u: (h, s) for u, h, s in rows}


def stored_uris(conn: Conn, ns: Namespace) -> dict[str, str]:
    """Every stored document URI of a namespace, with the URI of the source it came from."""
    return dict(conn.execute(query("documents/stored_uris"), (ns.id,)).fetchall())


def stored_uris_of_source(conn: Conn, ns: Namespace, source_uri: str) -> list[tuple[str, str]]:
    """(document URI, source URI) of the stored documents that came from one source."""
    return conn.execute(query("documents/stored_uris_of_source"), (ns.id, source_uri)).fetchall()


def source_versions(conn: Conn, ns: Namespace, source_uris: Sequence[str]) -> dict[str, tuple[str, list[str]]]:
    """For each stored source URI: its source hash and the URIs of the documents it produced."""
    rows = conn.execute(query("documents/source_versions"), (ns.id, list(source_uris)))
    return {s: (h, list(u)) for s, h, u in rows}


def cached_vectors(
    conn: Conn, ns: Namespace, hashes: Iterable[str], generation: Generation | None = None
) -> dict[str, np.ndarray]:
    """Vectors already stored under the profile of this namespace's active generation (or of
    ``generation``) for these chunk hashes, from any generation of the tenant's namespaces."""
    hashes = list(set(hashes))
    if not hashes:
        return {}
    pid, storage = (ns.profile_id, ns.storage) if generation is None else (generation.profile_id, generation.storage)
    rows = conn.execute(query("documents/cached_vectors"), (hashes, pid, storage))
    return {h: _as_array(v) for h, v in rows}


def _as_array(v: Any) -> np.ndarray:
    """A stored vector as float32 (pgvector >= 0.4 loads ``Vector`` objects, older versions ndarrays)."""
    return np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, dtype=np.float32)


def chunk_count_of(conn: Conn, ns: Namespace, uris: Sequence[str]) -> int:
    """How many chunks the stored documents with these URIs have."""
    return int(scalar(conn.execute(query("documents/chunk_count_of_uris"), (ns.id, list(uris)))))
