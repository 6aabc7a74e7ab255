"""Generations in the database: a namespace's vectors per (profile, storage), and their states.

A namespace has one ``active`` generation (what searches read and ingest writes), at most one
``shadow`` (being built by ``kbctl reembed``) and at most one ``previous`` (the active one before a
swap, kept for rollback). Vectors live in ``kbctl.vectors`` keyed (namespace, chunk, generation);
each generation has its own partial HNSW index, named after its id (docs/lifecycle.md).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Iterable, Iterator, Sequence

import numpy as np
import psycopg
from psycopg import sql

from ..config import Profile
from ..errors import ConfigError
from .connection import Conn, Cur, one, scalar
from .queries import query, template
from .roles import as_owner

__all__ = [
    "STORAGES",
    "INDEX_CLASS",
    "Generation",
    "hnsw_index_name",
    "create_generation",
    "create_hnsw_index",
    "ensure_index",
    "generations",
    "stored_profile",
    "generation_sizes",
    "missing_chunks",
    "missing_count",
    "write_vectors",
    "set_states",
    "pin_namespace",
    "delete_generation",
    "drop_generation_indexes",
    "generation_ids",
]

log = logging.getLogger(__name__)

STORAGES = ("vector", "halfvec")
#: Advisory lock class of a generation's index build (``ensure_index``), keyed by generation id;
#: next to the namespace ingest (0x6B62), write (0x6B63) and run (0x6B64) classes of ``kbctl.store.runs``.
INDEX_CLASS = 0x6B65
_OPS = {
    ("vector", "cosine"): "vector_cosine_ops",
    ("vector", "l2"): "vector_l2_ops",
    ("vector", "ip"): "vector_ip_ops",
    ("halfvec", "cosine"): "halfvec_cosine_ops",
    ("halfvec", "l2"): "halfvec_l2_ops",
    ("halfvec", "ip"): "halfvec_ip_ops",
}


@dataclass(frozen=True)
class Generation:
    """One generation of a namespace, with its profile as recorded."""

    id: int
    namespace_id: int
    profile_id: int
    profile_name: str
    fingerprint: str
    model: str
    dimension: int
    distance: str
    storage: str
    state: str
    created_at: datetime | None = None
    activated_at: datetime | None = None


def hnsw_index_name(generation_id: int) -> str:
    return f"vectors_hnsw_g{generation_id}"


def column_of(storage: str) -> tuple[str, str]:
    """(column, type) that holds a generation's vectors."""
    return ("half", "halfvec") if storage == "halfvec" else ("embedding", "vector")


def create_generation(
    conn: Conn, ns_id: int, profile_id: int, profile: Profile, storage: str, state: str, *, index: bool = True
) -> int:
    """Record a generation of ``profile`` (recorded already, id ``profile_id``) and, with ``index``,
    build its (empty) HNSW index as the tables' owner; returns its id. A shadow is created without
    one: its index is built once its vectors are in (``ensure_index``), several times faster than
    inserting each vector into the graph."""
    gid = int(
        scalar(conn.execute(query("generations/insert"), (ns_id, profile_id, profile.dimension, storage, state, state)))
    )
    if index:
        with as_owner(conn):
            create_hnsw_index(conn, gid, profile, storage)
    return gid


def ensure_index(conn: Conn, gen: Generation, profile: Profile) -> bool:
    """Build a generation's HNSW index if it has none (``CREATE INDEX CONCURRENTLY``: ingests and
    searches go on; the connection must not be in a transaction); True when this call built it.

    The build runs under the generation's index-build lock (``INDEX_CLASS``). An index being built
    is invalid until its build ends, like one a failed build left: only with the lock held is an
    invalid index known to be a failed one, dropped and built again. A second caller (a swap while
    ``kbctl reembed`` builds) waits for the build in progress, then finds its index valid."""
    name = hnsw_index_name(gen.id)
    if _index_valid(conn, name):
        return False
    with _index_build_lock(conn, gen.id, name):
        valid = _index_valid(conn, name)
        if valid:  # built by the session we waited for
            return False
        with as_owner(conn):
            if valid is not None:  # an invalid one, left by a build that failed
                _drop_index(conn, name)
            create_hnsw_index(conn, gen.id, profile, gen.storage, concurrently=True)
    return True


def _index_valid(conn: Conn, name: str) -> bool | None:
    """Whether the kbctl index ``name`` is valid; None when there is none."""
    row = conn.execute(query("generations/index_valid"), (name,)).fetchone()
    return None if row is None else bool(row[0])


@contextmanager
def _index_build_lock(conn: Conn, generation_id: int, name: str) -> Iterator[None]:
    """Hold a generation's index-build lock (session level) for the block, waiting while another
    session holds it. The wait polls: a statement waiting for the lock would keep a snapshot open,
    and the holder's ``CREATE INDEX CONCURRENTLY`` waits for every older snapshot to end."""
    delay, told = 0.05, False
    while not scalar(conn.execute(query("generations/try_lock_index"), (INDEX_CLASS, generation_id))):
        if not told:
            log.info("index %s is being built by another session; waiting for that build", name)
            told = True
        time.sleep(delay)
        delay = min(delay * 2, 2.0)
    try:
        yield
    finally:
        conn.execute(query("generations/unlock_index"), (INDEX_CLASS, generation_id))


def _drop_index(conn: Conn, name: str) -> None:
    """Drop a kbctl index, ``CONCURRENTLY`` unless the connection is in a transaction (where that
    cannot run): a plain DROP INDEX locks ``kbctl.vectors`` ACCESS EXCLUSIVE, and every namespace's
    searches and writes queue behind it while it waits for the queries already running. Inside a
    transaction it is a plain drop all the same (its lock held until the caller's commit)."""
    idle = conn.autocommit and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    conn.execute(
        template("generations/drop_index", how=sql.SQL("CONCURRENTLY" if idle else ""), name=sql.Identifier(name))
    )


def create_hnsw_index(
    conn: Conn, generation_id: int, profile: Profile, storage: str, *, concurrently: bool = False
) -> None:
    """The partial HNSW index of one generation's vectors, typed to its dimension and storage, built
    with ``profile.hnsw.build_memory_mb`` of maintenance memory (set for the build, then reset: a
    concurrent build cannot run in a transaction, so the setting is the session's meanwhile)."""
    col, typ = column_of(storage)
    conn.execute(query("generations/build_memory"), (f"{int(profile.hnsw.build_memory_mb)}MB",))
    try:
        _create_hnsw_index(conn, generation_id, profile, storage, col, typ, concurrently)
    finally:
        conn.execute(query("generations/build_memory_reset"))


def _create_hnsw_index(conn: Conn, generation_id: int, profile: Profile, storage: str, col: str, typ: str,
                       concurrently: bool) -> None:  # fmt: skip
    conn.execute(
        template(
            "generations/create_hnsw_index",
            how=sql.SQL("CONCURRENTLY" if concurrently else ""),
            name=sql.Identifier(hnsw_index_name(generation_id)),
            col=sql.Identifier(col),
            typ=sql.SQL(typ),
            dim=sql.Literal(int(profile.dimension)),
            ops=sql.SQL(_OPS[(storage, profile.distance)]),
            m=sql.Literal(profile.hnsw.m),
            efc=sql.Literal(profile.hnsw.ef_construction),
            gid=sql.Literal(int(generation_id)),
        )
    )


def stored_profile(conn: Conn, profile_id: int, like: Profile) -> Profile:
    """The profile a generation's vectors were made with, from its recorded pin: ``like`` (any
    resolved profile, for the settings that do not change what a vector means) with the stored
    embedder, model, dimension, prefixes... Dual writes and catch-ups need no configuration of it."""
    row = one(conn.execute(query("generations/profile"), (profile_id,)))
    name, embedder, model, revision, dim, distance, normalize, qp, dp, max_tokens, settings, fp = row
    settings = settings if isinstance(settings, dict) else json.loads(settings or "{}")
    p = dataclasses.replace(
        like,
        name=name,
        embedder=embedder,
        model=model,
        revision=revision,
        dimension=int(dim),
        distance=distance,
        normalize=bool(normalize),
        query_prefix=qp,
        document_prefix=dp,
        max_tokens=int(max_tokens),
        precision=str(settings.get("precision", like.precision)),
    )
    if p.fingerprint != fp:
        raise ConfigError(
            f"profile {name!r} as recorded (fingerprint {fp}) cannot be rebuilt here (got {p.fingerprint})",
            hint=f"define [profiles.{name}] as it was when the generation was made",
        )
    return p


def generations(conn: Conn, ns_id: int) -> list[Generation]:
    """A namespace's generations, oldest first."""
    return [Generation(*r) for r in conn.execute(query("generations/list"), (ns_id,))]


def generation_sizes(conn: Conn, ns_id: int) -> dict[int, dict[str, int]]:
    """Per generation id: how many vectors it holds, their bytes and its HNSW index's bytes."""
    rows = conn.execute(query("generations/sizes"), (ns_id,))
    return {g: {"vectors": int(n), "vector_bytes": int(vb), "index_bytes": int(ib)} for g, n, vb, ib in rows}


def generation_ids(conn: Conn, ns_id: int) -> list[int]:
    return [int(r[0]) for r in conn.execute(query("generations/ids_of_namespace"), (ns_id,))]


def missing_chunks(conn: Conn, ns_id: int, generation_id: int, after: int, limit: int) -> list[tuple]:
    """(chunk id, content hash, text, heading path, document title) of chunks without a vector in
    the generation, in id order after chunk ``after``."""
    return conn.execute(query("generations/missing"), (ns_id, generation_id, after, limit)).fetchall()


def missing_count(conn: Conn, ns_id: int, generation_id: int) -> tuple[int, int]:
    """(chunks, distinct chunk texts) without a vector in the generation."""
    n, texts = one(conn.execute(query("generations/missing_count"), (ns_id, generation_id)))
    return int(n), int(texts)


def write_vectors(cur: Cur, ns_id: int, gen: Generation, rows: Iterable[tuple[int, np.ndarray]]) -> set[int]:
    """Copy (chunk id, vector) rows into a generation, inside the caller's transaction; the ids of
    the chunks whose vector was written. A chunk that has a vector there already, or is gone, is
    skipped."""
    cur.execute(query("documents/stage_vectors"))
    with cur.copy(query("documents/copy_vectors")) as cp:
        cp.set_types(["integer", "bigint", "integer", "integer", "integer", "text", "vector"])
        for cid, vec in rows:
            cp.write_row(
                (ns_id, cid, gen.id, gen.profile_id, gen.dimension, gen.storage, np.asarray(vec, dtype=np.float32))
            )
    cur.execute(query("documents/insert_vectors"))
    kept = {cid for (cid,) in cur.fetchall()}
    cur.execute(query("documents/clear_stage_vectors"))
    return kept


def set_states(conn: Conn, ns_id: int, states: Sequence[tuple[int, str]]) -> None:
    """Give generations new states in one statement (the one-per-state rule holds at commit)."""
    conn.execute(query("generations/set_state"), ([g for g, _ in states], [s for _, s in states], ns_id))


def pin_namespace(conn: Conn, ns_id: int, gen: Generation) -> None:
    """The namespace row's profile pin follows its active generation."""
    conn.execute(query("generations/pin_namespace"), (gen.profile_id, gen.dimension, ns_id))


def delete_generation(conn: Conn, ns_id: int, generation_id: int) -> None:
    """Delete a generation with its vectors, inside the caller's transaction (the index goes after
    commit: ``drop_generation_indexes``)."""
    conn.execute(query("generations/delete"), (ns_id, generation_id))


def delete_empty_shadow(conn: Conn, ns_id: int, generation_id: int) -> bool:
    """Delete a shadow generation if it holds no vector (inside the caller's transaction); whether it did."""
    return conn.execute(query("generations/delete_empty_shadow"), (ns_id, generation_id)).fetchone() is not None


def drop_generation_indexes(conn: Conn, generation_ids: Iterable[int]) -> None:
    """Drop the HNSW indexes of generations that are gone (as the tables' owner), ``CONCURRENTLY``
    outside a transaction: the callers drop after their transaction commits, so the other
    namespaces' searches and writes of ``kbctl.vectors`` go on meanwhile (``_drop_index``)."""
    ids = list(generation_ids)
    if not ids:
        return
    with as_owner(conn):
        for gid in ids:
            _drop_index(conn, hnsw_index_name(gid))
