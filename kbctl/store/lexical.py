"""Packed postings (migration 016): segments of term arrays, and what the lane reads of them.

Writing: ``pack`` packs a namespace's unpacked tail (or, ``full``, all of it) into a segment, under
the namespace's ingest lock so no chunk of the range can still arrive. The postings table stays
the record (ingest writes it, deletions cascade from it); segments are derived from it and can be
dropped and rebuilt at any time (``repack``).

Reading: ``plan`` (which namespaces are packed, and the query terms' arrays in their segments, in
one statement), ``docs`` (a segment's chunk ids and lengths by ordinal), ``alive``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .connection import Conn, scalar
from .queries import query
from .roles import as_owner, check_registered, tenant_gone_said
from .runs import LOCK_CLASS, write_lock

__all__ = [
    "Segment",
    "forward",
    "forward_segments",
    "segments",
    "watermarks",
    "Packed",
    "state",
    "plan",
    "tail_chunks",
    "PACK_MIN",
    "maintain",
    "lacks_forward",
    "repack",
    "pack",
    "all_namespaces",
    "drop",
    "docs",
    "alive",
]

#: Parallel key arrays (numpy).
Array = np.ndarray

#: A namespace is packed once it has this many chunks, and a new segment is written once this many
#: are unpacked: below it, scoring every posting of the tail costs a few milliseconds at most.
PACK_MIN = 5000
#: More segments than this and an ingest merges all but the first (the largest) into one.
MAX_SEGMENTS = 12
_NONE = -(2**63)


@dataclass(frozen=True)
class Segment:
    namespace_id: int
    segment: int
    lo: int  # exclusive
    hi: int  # inclusive
    chunks: int


def segments(conn: Conn, ns_ids: Sequence[int]) -> list[Segment]:
    return [Segment(*r) for r in conn.execute(query("lexical/segments"), (list(ns_ids),))]


def watermarks(conn: Conn, ns_ids: Sequence[int]) -> dict[int, int]:
    """Each namespace's highest packed chunk id (namespaces without segments are missing)."""
    out: dict[int, int] = {}
    for s in segments(conn, ns_ids):
        out[s.namespace_id] = max(out.get(s.namespace_id, _NONE), s.hi)
    return out


@dataclass(frozen=True)
class Packed:
    """A packed namespace as the lane sees it: its watermark, its unpacked tail (up to ``TAIL_LIMIT``),
    and how many of its packed chunks were deleted since (None: unknown, the tail is that large)."""

    namespace_id: int
    hi: int
    tail: int
    dead: int | None


#: The tail is counted up to this many chunks.
TAIL_LIMIT = 100_000


def state(conn: Conn, ns_ids: Sequence[int]) -> dict[int, Packed]:
    """The packed namespaces among ``ns_ids`` (the others are missing), in one statement."""
    out = {}
    for ns_id, hi, chunks, tail, now in conn.execute(query("lexical/state"), (list(ns_ids), TAIL_LIMIT)):
        dead = None if tail >= TAIL_LIMIT else max(0, int(chunks) + int(tail) - int(now))
        out[ns_id] = Packed(ns_id, int(hi), int(tail), dead)
    return out


def plan(
    conn: Conn, ns_ids: Sequence[int], terms: Sequence[str], held: Sequence[str] = ()
) -> tuple[dict[int, Packed], list[tuple]]:
    """``state`` and the arrays of ``terms`` in one statement (one round trip, one snapshot): the
    packed namespaces among ``ns_ids``, and (namespace_id, term, segment, ords, tfs, max_tf, min_dl,
    key) per query term and segment, the arrays as bytes; ``key`` identifies the segment ((namespace, segment, lo,
    hi, chunks, built_at): numbers are not reused, and the rest tells two databases' apart).
    ``held``: terms whose arrays the caller holds in memory; their ords and tfs come back None."""
    packs: dict[int, Packed] = {}
    dirs: list[tuple] = []
    with conn.cursor(binary=True) as cur:
        rows = cur.execute(
            query("lexical/plan"), (list(ns_ids), TAIL_LIMIT, list(held), list(held), list(terms))
        ).fetchall()
    for ns_id, hi, chunks, tail, now, term, seg, ords, tfs, max_tf, min_dl, s_lo, s_hi, s_chunks, built in rows:
        if ns_id not in packs:
            dead = None if tail >= TAIL_LIMIT else max(0, int(chunks) + int(tail) - int(now))
            packs[ns_id] = Packed(ns_id, int(hi), int(tail), dead)
        if term is not None:
            key = (ns_id, seg, s_lo, s_hi, s_chunks, built)
            dirs.append((ns_id, term, seg, ords, tfs, float(max_tf), float(min_dl), key))
    return packs, dirs


def tail_chunks(conn: Conn, ns_id: int, limit: int) -> int:
    """How many chunks of the namespace are not packed yet, counted up to ``limit``."""
    mark = watermarks(conn, [ns_id]).get(ns_id, _NONE)
    return int(scalar(conn.execute(query("lexical/tail_chunks"), (ns_id, mark, limit))))


def maintain(conn: Conn, ns_id: int, *, tenant: str, lacking: bool | None = None) -> dict | None:
    """After an ingest: pack the tail once it holds ``PACK_MIN`` chunks, and merge the segments
    after the first when there are more than ``MAX_SEGMENTS``. A namespace with a segment packed
    before migration 017 (no forward index, so feedback reads its candidates' postings) is packed
    again whole, once, as ``kbctl db optimize`` would (``lacking``: ``lacks_forward``'s answer, when
    the caller asked it already). None when nothing was due. ``tenant``: the namespace's, required
    (see ``pack``)."""
    with tenant_gone_said(conn, tenant):
        if lacks_forward(conn, ns_id) if lacking is None else lacking:
            return repack(conn, ns_id, tenant=tenant)
        if tail_chunks(conn, ns_id, PACK_MIN) < PACK_MIN:
            return None
        merge = len(segments(conn, [ns_id])) >= MAX_SEGMENTS
        return pack(conn, ns_id, keep=1 if merge else None, tenant=tenant)


def lacks_forward(conn: Conn, ns_id: int) -> bool:
    """Whether a segment of the namespace was packed before migration 017 (it has no forward index):
    ``maintain`` then packs the namespace again whole."""
    return any(s[6] is None for s in forward_segments(conn, [ns_id]))


def repack(conn: Conn, ns_id: int, *, tenant: str) -> dict | None:
    """Rewrite the namespace's segments as one, without the chunks deleted since (``kbctl db
    optimize``); a namespace under ``PACK_MIN`` chunks loses its segments. None when it has none
    and is too small to pack. ``tenant``: the namespace's, required (see ``pack``)."""
    with tenant_gone_said(conn, tenant):
        small = int(scalar(conn.execute(query("lexical/tail_chunks"), (ns_id, _NONE, PACK_MIN)))) < PACK_MIN
        if small:
            had = bool(segments(conn, [ns_id]))
            drop(conn, ns_id)
            return {"segment": None, "chunks": 0, "postings": 0} if had else None
        return pack(conn, ns_id, keep=0, tenant=tenant)


def pack(conn: Conn, ns_id: int, *, tenant: str, keep: int | None = None) -> dict:
    """Pack the namespace's unpacked chunks into a new segment; with ``keep``, every segment after
    the first ``keep`` (0: all of them) is replaced: their chunks are packed again, into one. The
    arrays hold tf and dl, not scores: any BM25 parameters and statistics score them. One transaction, under the namespace's ingest lock (taken at transaction level:
    an ingest holding it on this session passes, another session's waits). Returns {"segment",
    "chunks", "postings"} (segment None when there was nothing to pack).

    ``tenant`` (the namespace's) is required: its lock is taken shared with the write lock, as
    every writer of its documents takes it, and the tenant must still be registered, so a pack is
    wholly before the tenant's delete or refused after it (``TenantNotFound``). (Optional once, it
    was left out by callers that knew no tenant, and their packs ran through a delete unlocked.)"""
    with tenant_gone_said(conn, tenant), conn.transaction():
        conn.execute(query("lexical/lock"), (LOCK_CLASS, ns_id))
        write_lock(conn, ns_id, tenant)  # workers write without the ingest lock: none is mid-write now
        check_registered(conn, tenant)  # a delete that was first took the namespace with it
        have = segments(conn, [ns_id])
        kept = have if keep is None else have[:keep]
        after = kept[-1].segment if kept else 0  # segments numbered above this are replaced
        lo = max((s.hi for s in kept), default=_NONE)
        hi = scalar(conn.execute(query("lexical/newest_chunk"), (ns_id,)))
        if hi is None or hi <= lo:
            if len(kept) < len(have):
                conn.execute(query("lexical/drop_range"), (ns_id, after, 2**31 - 1))
            return {"segment": None, "chunks": 0, "postings": 0}
        chunks = int(scalar(conn.execute(query("lexical/chunks_in_range"), (ns_id, lo, hi))))
        # The new segment's number is above every existing one; the ones it replaces go after it is written.
        seg = int(scalar(conn.execute(query("lexical/insert_segment"), (ns_id, lo, hi, ns_id))))
        with as_owner(conn):  # the planner's figures of the table the pack reads (lexical/analyze_postings)
            conn.execute(query("lexical/analyze_postings"))
        conn.execute(query("lexical/pack_settings"))
        postings = int(scalar(conn.execute(query("lexical/pack_arrays"), (ns_id, lo, hi, seg))))
        conn.execute(query("lexical/finish_segment"), (chunks, postings, ns_id, seg))
        if len(kept) < len(have):
            conn.execute(query("lexical/drop_range"), (ns_id, after, seg))
    return {"segment": seg, "chunks": chunks, "postings": postings}


def all_namespaces(conn: Conn) -> list[tuple[int, str, str]]:
    """(id, name, tenant) of every namespace the connection sees (the owner: all of them)."""
    return conn.execute(query("lexical/all_namespaces")).fetchall()


def drop(conn: Conn, ns_id: int) -> None:
    """Drop the namespace's segments: its lexical lane reads the postings table alone again."""
    with conn.transaction():
        conn.execute(query("lexical/drop_segments"), (ns_id, ns_id, 0))


def docs(conn: Conn, ns_id: int, segment: int) -> tuple[bytes, bytes] | None:
    """(chunk ids, lengths) of a segment's chunks by ordinal, as bytes (big-endian int8 and float4);
    None when the segment is gone (repacked since the caller read its terms)."""
    with conn.cursor(binary=True) as cur:
        row = cur.execute(query("lexical/docs"), (ns_id, segment)).fetchone()
    return None if row is None else (bytes(row[0]), bytes(row[1]))


def forward_segments(conn: Conn, ns_ids: Sequence[int]) -> list[tuple]:
    """(namespace id, segment, lo, hi, chunks, built at, bytes of its forward index's term ids or
    None) of the namespaces' segments."""
    return conn.execute(query("lexical/forward_segments"), (list(ns_ids),)).fetchall()


def forward(conn: Conn, ns_id: int, segment: int) -> tuple[list[str], bytes, bytes, bytes] | None:
    """A segment's forward index: (its terms, by term id; offsets; term ids; tfs), the arrays as
    bytes (big-endian int4, int4, float4); None when the segment has none (packed before migration
    017) or is gone."""
    with conn.cursor(binary=True) as cur:
        row = cur.execute(query("lexical/forward"), (ns_id, segment)).fetchone()
    return None if row is None else (list(row[0]), bytes(row[1]), bytes(row[2]), bytes(row[3]))


def term_rows(conn: Conn, ns_id: int, segment: int, terms: Sequence[str]) -> dict[str, tuple[bytes, bytes]]:
    """term → (ords, tfs) of a segment's rows of ``terms``."""
    with conn.cursor(binary=True) as cur:
        rows = cur.execute(query("lexical/term_rows"), (ns_id, segment, list(terms))).fetchall()
    return {t: (bytes(o), bytes(f)) for t, o, f in rows}


def _csv(values: Array | Sequence[int]) -> str:
    """A comma-separated list (``string_to_array`` in SQL): one string to send instead of an array
    of thousands of elements, each encoded on its own."""
    return ",".join(map(str, values.tolist() if hasattr(values, "tolist") else values))


def alive(conn: Conn, ns_ids: Array, chunk_ids: Array) -> set[int]:
    """The ids of the chunks keyed by the parallel arrays (namespace, chunk) that still exist."""
    if not len(chunk_ids):
        return set()
    with conn.cursor(binary=True) as cur:
        return {r[0] for r in cur.execute(query("lexical/alive"), (_csv(ns_ids), _csv(chunk_ids)))}
