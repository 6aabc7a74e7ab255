"""BM25 of given chunks from the packed segments' forward index (migration 017), in memory.

Pseudo-relevance feedback at a bounded cost (``prf = "rescore"``, ``kbctl.search.feedback.rescore``)
scores every first-round candidate with the expanded query. Reading the candidates' postings from
the postings table costs heap reads that grow with the corpus (3 ms for 200 candidates at 100k
chunks, about 50 ms at a million); a segment's forward index holds each chunk's term ids and tfs,
read once per process (a segment is never rewritten) and gathered with numpy. The scores are the
numbers ``search/candidate_bm25`` computes (the same tf and dl values, the same operations; only
the order of the sum differs). Candidates outside a segment with a forward index (the unpacked
tail, a segment packed before migration 017) are left to that statement.

A segment's arrays are about 8 bytes a posting: 44 MB at 100k chunks, read in about 0.2 s, but 540
MB at a million, about 10 s. A search does not wait for more than ``SYNC_BYTES``: a larger segment
is read on a background thread (over the side connection the caller offers, one read at a time in
the process) while its candidates go to the statement, so a one-shot ``kbctl search`` never pays
the read and a long-lived process (``kbctl serve``, a library, an eval) has it from then on.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..store import lexical as packed
from . import memory, termarrays

__all__ = [
    "candidate_bm25",
    "postings",
    "segments",
    "SYNC_BYTES",
    "clear_cache",
    "trim",
    "stop_loads",
    "wait_for_loads",
]

log = logging.getLogger(__name__)

# Memory kept for segments' forward indexes: ``memory.FORWARD_BYTES`` (``[cache] forward_mb``), least
# recently used out (one is always kept); 0: none is read, the statement scores every candidate.
#: A segment whose term ids take at most this many bytes (about half its arrays: 8M postings, some
#: 0.3 s to read) is read while the search waits; a larger one on a background thread (above).
SYNC_BYTES = 32 << 20


@dataclass(frozen=True)
class _Forward:
    """A segment's forward index; its chunk ids and lengths by ordinal are the lexical lane's
    (``termarrays.segment_docs``, the same segment key), kept there."""

    offsets: np.ndarray  # ordinal o's entries are [offsets[o], offsets[o + 1])
    tids: np.ndarray  # term id per entry
    tfs: np.ndarray  # tf per entry
    terms: dict[str, int]  # term -> id
    names: list[str]  # id -> term

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.offsets, self.tids, self.tfs)) + 64 * len(self.terms)


_LOCK = threading.Lock()
_CACHE: OrderedDict[tuple, _Forward | None] = OrderedDict()
_LOADING: dict[tuple, threading.Thread] = {}  # segments being read in the background
_READER = threading.Lock()  # one background read at a time (they share the side connection)
_SIDES: dict[tuple, Any] = {}  # the side callable each background read was started with
_READING: dict[tuple, Any] = {}  # the connection a background read is running on
_STOPPED: set[tuple] = set()  # reads whose session is closing: not started, or cancelled


def _forget_reads() -> None:
    """In a forked process no background read runs (its thread is the parent's), and a lock a
    parent's thread held at the fork would never be released: the child starts with none."""
    global _LOCK, _READER
    _LOCK, _READER = threading.Lock(), threading.Lock()
    for d in (_LOADING, _SIDES, _READING):
        d.clear()
    _STOPPED.clear()


os.register_at_fork(after_in_child=_forget_reads)


def clear_cache() -> None:
    with _LOCK:
        _CACHE.clear()


def trim() -> None:
    """Cut the cache to ``memory.FORWARD_BYTES`` (the limit changed)."""
    with _LOCK:
        _trim()


def _trim() -> None:  # under _LOCK
    limit = memory.FORWARD_BYTES
    if limit <= 0:
        _CACHE.clear()
    while len(_CACHE) > 1 and sum(x.nbytes for x in _CACHE.values() if x is not None) > limit:
        _CACHE.popitem(last=False)


def wait_for_loads(timeout: float | None = None) -> None:
    """Wait for the background reads under way (tests, benchmarks)."""
    with _LOCK:
        threads = list(_LOADING.values())
    for t in threads:
        t.join(timeout)


def stop_loads(side, timeout: float = 10.0) -> None:
    """Stop the background reads started with ``side`` (a session's ``side_connection``) before the
    session closes its connections: a read not yet begun is dropped, one under way is cancelled
    (its statement, on the server), and their threads are waited for (up to ``timeout``). Closing a
    connection another thread is reading from frees libpq's state under that thread: a one-shot
    search whose first feedback query had just started a read died of SIGSEGV at exit."""
    with _LOCK:
        keys = [key for key, s in _SIDES.items() if s == side]
        _STOPPED.update(keys)
        threads = [_LOADING[key] for key in keys if key in _LOADING]
        conns = [_READING[key] for key in keys if key in _READING]
    for c in conns:
        try:
            c.cancel_safe(timeout=2.0)
        except Exception as e:  # already closed, the server gone: the thread ends on its own
            log.debug("cancelling a forward index read failed: %s", e)
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))


def _get(conn, key: tuple, size: int, side) -> _Forward | None:
    """The segment's arrays: cached, else read now (small), else read in the background when the
    caller offers a side connection (None meanwhile: the statement scores its candidates). None
    when the cache is off (``[cache] forward_mb = 0``)."""
    if memory.FORWARD_BYTES <= 0:
        return None
    with _LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
        if key in _LOADING:
            return None
    if size <= SYNC_BYTES:
        return _load(conn, key)
    if side is None:
        return None

    def read() -> None:
        try:
            # wait for the read under way (another segment's, perhaps another session's), unless
            # this one's session is closing meanwhile
            while not _READER.acquire(timeout=0.05):
                with _LOCK:
                    if key in _STOPPED:
                        return
            try:
                with _LOCK:
                    if key in _STOPPED:
                        return
                c = side("forward")
                with _LOCK:
                    if key in _STOPPED:
                        return
                    _READING[key] = c
                _load(c, key)
            finally:
                _READER.release()
        except Exception as e:  # the session closed or cancelled it, the server went away: the statement goes on
            log.debug("reading the forward index of %s failed: %s", key, e)
        finally:
            with _LOCK:
                for d in (_LOADING, _SIDES, _READING):
                    d.pop(key, None)
                _STOPPED.discard(key)

    t = threading.Thread(target=read, daemon=True, name="kbctl-forward")
    with _LOCK:
        if key in _LOADING or key in _CACHE:
            return _CACHE.get(key)
        _LOADING[key], _SIDES[key] = t, side
    t.start()
    return None


def _load(conn, key: tuple) -> _Forward | None:
    """Read a segment's forward index into the cache (None: the segment has none, or is gone)."""
    row = packed.forward(conn, key[0], key[1])
    f = None
    if row is not None:
        terms, offsets, tids, tfs = row
        # native byte order, the stored widths (4 bytes a posting per array); what a query gathers
        # is widened to float64 (``_score``), as the statement computes in double
        f = _Forward(
            offsets=np.frombuffer(offsets, ">i4").astype(np.int32),
            tids=np.frombuffer(tids, ">i4").astype(np.int32),
            tfs=np.frombuffer(tfs, ">f4").astype(np.float32),
            terms={t: i for i, t in enumerate(terms)},
            names=terms,
        )
    with _LOCK:
        _CACHE[key] = f
        _trim()
    return f


def _docs(conn, key: tuple) -> tuple[np.ndarray, np.ndarray] | None:
    """The segment's (chunk ids, lengths) by ordinal, None when it is gone (repacked since)."""
    try:
        return termarrays.segment_docs(conn, key)
    except termarrays.Stale:
        return None


def segments(conn, ns_ids: Sequence[int]) -> list[tuple]:
    """The namespaces' segments as ``postings`` and ``candidate_bm25`` take them (``segs``), so a
    caller asking both reads them once."""
    return packed.forward_segments(conn, sorted(set(ns_ids)))


def _placed(
    conn, keys: Sequence[tuple[int, int]], segs: list[tuple] | None
) -> tuple[dict[tuple, list[tuple[int, int]]], list[tuple[int, int]]]:
    """The keys by the segment (with a forward index) that holds them, and the others. A segment's
    key is its identity and the size of its forward index (its last element)."""
    if segs is None:
        segs = segments(conn, [ns for ns, _ in keys])
    where: dict[tuple, list[tuple[int, int]]] = {}
    rest: list[tuple[int, int]] = []
    for ns, cid in keys:
        seg = next((s for s in segs if s[0] == ns and s[2] < cid <= s[3] and s[6] is not None), None)
        if seg is None:
            rest.append((ns, cid))
        else:
            where.setdefault((*seg[:6], int(seg[6])), []).append((ns, cid))
    return where, rest


def postings(
    conn, keys: Sequence[tuple[int, int]], side=None, segs: list[tuple] | None = None
) -> tuple[list[tuple[int, int, str, float, float]], list[tuple[int, int]]]:
    """((namespace id, chunk id, term, tf, dl) of every posting of the ``keys`` that lie in a
    segment whose forward index is in memory (or small enough to read now), as
    ``store.feedback_postings`` gives them; the other keys). ``side(purpose)``: a connection for a
    background read of a large segment; ``segs``: ``segments`` of the keys' namespaces, if read."""
    if not keys:
        return [], []
    where, rest = _placed(conn, keys, segs)
    out: list[tuple[int, int, str, float, float]] = []
    for (*ident, size), members in where.items():
        f = _get(conn, tuple(ident), size, side)
        docs = _docs(conn, tuple(ident)) if f is not None else None
        if f is None or docs is None:
            rest.extend(members)
            continue
        ids, dls = docs
        for ns, cid in members:
            o = int(np.searchsorted(ids, cid))
            if o >= len(ids) or ids[o] != cid:
                continue
            s, e, dl = int(f.offsets[o]), int(f.offsets[o + 1]), float(dls[o])
            out.extend((ns, cid, f.names[t], float(tf), dl) for t, tf in zip(f.tids[s:e].tolist(), f.tfs[s:e].tolist()))
    return out, rest


def candidate_bm25(
    conn,
    keys: Sequence[tuple[int, int]],
    terms: list[str],
    weights: list[float],
    *,
    k1: float,
    b: float,
    avgdl: float,
    side=None,
    segs: list[tuple] | None = None,
) -> tuple[dict[tuple[int, int], float], list[tuple[int, int]]]:
    """(BM25 of the candidates ``keys`` that lie in a segment whose forward index is in memory (or
    small enough to read now), keyed by (namespace id, chunk id), a chunk holding none of the terms
    missing as in the SQL; the other candidates, for ``store.candidate_bm25``). ``side``, ``segs``:
    as for ``postings``."""
    if not keys or not terms:
        return {}, list(keys)
    where, rest = _placed(conn, keys, segs)
    out: dict[tuple[int, int], float] = {}
    for (*ident, size), members in where.items():
        f = _get(conn, tuple(ident), size, side)
        docs = _docs(conn, tuple(ident)) if f is not None else None
        if f is None or docs is None:  # being read, or repacked since: the statement scores them
            rest.extend(members)
            continue
        out.update(_score(f, *docs, members, terms, weights, k1, b, avgdl))
    return out, rest


def _score(
    f: _Forward, ids: np.ndarray, dls: np.ndarray, members, terms, weights, k1: float, b: float, avgdl: float
) -> dict[tuple[int, int], float]:
    w = np.zeros(len(f.terms) + 1)  # the last slot: terms the segment does not hold
    for t, x in zip(terms, weights):
        tid = f.terms.get(t)
        if tid is not None:
            w[tid] = x
    cids = np.array([c for _, c in members], dtype=np.int64)
    ords = np.searchsorted(ids, cids)
    ok = (ords < len(ids)) & (ids[np.minimum(ords, len(ids) - 1)] == cids)
    ords, members = ords[ok], [m for m, y in zip(members, ok) if y]
    if not len(ords):
        return {}
    starts, ends = f.offsets[ords].astype(np.int64), f.offsets[ords + 1].astype(np.int64)
    lengths = ends - starts
    idx = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths) + np.arange(lengths.sum())
    tw = w[f.tids[idx]]
    tf = f.tfs[idx].astype(np.float64)
    dl = np.repeat(dls[ords].astype(np.float64), lengths)
    part = tw * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))
    bounds = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    scores = np.add.reduceat(part, bounds)
    hits = np.add.reduceat((tw != 0).astype(np.int64), bounds)
    return {m: float(s) for m, s, h in zip(members, scores, hits) if h}
