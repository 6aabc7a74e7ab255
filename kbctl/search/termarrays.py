"""Exact top-k BM25 over packed postings (``kbctl.store.lexical``, migration 016), with numpy.

A segment numbers its chunks 0..n-1 (their ordinals) and holds, per term, the ordinals of the
chunks with the term, their tf, and the term's largest tf and smallest dl. The lane reads the query
terms' rows of every segment in the statement that plans it (``kbctl.store.lexical.plan``), and
scores each segment with numpy into one accumulator of n scores: per term
``w·tf·(k1+1) / (tf + k1·(1 - b + b·dl/avgdl))`` with the statistics of now (N, df and avgdl over
the queried namespaces), the same operations in the same order as the exhaustive statement
(``search/lexical_lane``), so the scores are the same numbers. The k best of each segment (with
every chunk tied with the k-th), merged, are the k best of the namespaces
(``tests/db/test_blockmax.py`` checks the ranking against the exhaustive statement).

MaxScore (``_score``): terms are added largest bound first, and once the bounds of the terms left
sum below a score k chunks already reach, those terms are added only for the chunks that can still
reach it. A long query's common terms hold most of its postings and little of its score: at a
million chunks it adds a quarter of them. Block-max over impact-ordered blocks (migration 014) was
measured before this and replaced: read in rounds with its bookkeeping, it cost more than adding
every posting (docs/benchmarks.md, "The lexical lane").

The rows of common terms (``ROW_MIN`` postings or more) are kept in memory too (``_ROWS``, least
recently used out past ``[cache] term_rows_mb``, ``kbctl.search.memory``): they recur across queries, and the plan statement leaves out
the arrays of the terms this process holds (``held``), so a heavy query does not read its common
terms' megabytes again. A held row is of one segment (its key); when the plan finds the term in a
segment it does not hold (a repack), that row is read by key (``term_rows``).

A segment's chunk ids and lengths (8 + 8 bytes a chunk as numpy arrays) are read once and kept in
memory (``_DOCS``, least recently used out past ``[cache] segments_mb``): a segment is never rewritten (a
repack writes a new one under a new number). So are ``k1·(1 - b + b·dl/avgdl)`` per chunk for the
last few (k1, b, avgdl). The accumulator and the scratch arrays are kept per thread.

Deleted chunks stay in their segment until it is repacked: when the caller says some may be gone
(``check``), the best chunks are checked against the chunks table; one that is gone scores 0 and
the best are taken again. No chunk that is gone is ever returned.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..store import lexical as packed
from . import memory

__all__ = ["top_k", "held", "segment_docs", "Stale", "ROW_MIN", "ESTIMATE_AT", "clear_cache", "trim"]

# Memory kept for segments' chunk ids, lengths and length norms: ``memory.DOCS_BYTES`` (``[cache]
# segments_mb``), least recently used out; 0: read again by every search.
#: θ is estimated (``_score``) only while the terms left hold at least this many postings (and a
#: 32nd of the segment's chunks): below, adding them all costs less than the estimate.
ESTIMATE_AT = 4096


class Stale(Exception):
    """A segment whose terms were read is not there any more: the namespace was repacked meanwhile
    (``kbctl db optimize``). The caller scores the postings instead."""


_LOCK = threading.Lock()
_DOCS: OrderedDict[tuple, tuple[np.ndarray, np.ndarray]] = OrderedDict()  # key → (chunk ids, dl)
_NORMS: OrderedDict[tuple, np.ndarray] = OrderedDict()  # (key, k1, b, avgdl) → k1·(1 - b + b·dl/avgdl)
_NORMS_KEPT = 8
_local = threading.local()
#: Term rows kept in memory: (segment key, term) → (ords, tfs), rows of ROW_MIN postings or more,
#: least recently used out past ``memory.ROW_BYTES`` (``[cache] term_rows_mb``; 0: none kept).
ROW_MIN = 20_000
_ROWS: OrderedDict[tuple, tuple[bytes, bytes]] = OrderedDict()  # (segment key, term) → (ords, tfs)


def held(ns_ids, terms) -> list[str]:
    """The terms whose rows this process holds for some segment of the namespaces."""
    ids = set(ns_ids)
    with _LOCK:
        have = {term for key, term in _ROWS if key[0] in ids}
    return [t for t in terms if t in have]


def _keep_row(key: tuple, term: str, ords: bytes, tfs: bytes) -> None:
    if len(ords) // 4 < ROW_MIN or memory.ROW_BYTES <= 0:
        return
    with _LOCK:
        _ROWS[(key, term)] = (ords, tfs)
        _ROWS.move_to_end((key, term))
        _trim_rows()


def _trim_rows() -> None:  # under _LOCK
    if memory.ROW_BYTES <= 0:
        _ROWS.clear()
    while len(_ROWS) > 1 and sum(len(o) + len(f) for o, f in _ROWS.values()) > memory.ROW_BYTES:
        _ROWS.popitem(last=False)


def _trim_docs() -> None:  # under _LOCK
    if memory.DOCS_BYTES <= 0:
        _DOCS.clear()
        _NORMS.clear()
    while len(_DOCS) > 1 and _cached_bytes() > memory.DOCS_BYTES:
        _DOCS.popitem(last=False)


def trim() -> None:
    """Cut the caches to ``memory``'s limits (they changed)."""
    with _LOCK:
        _trim_docs()
        _trim_rows()


def _fill(conn, rows: list[tuple], stats: dict) -> list[tuple]:
    """``rows`` with the arrays the plan left out (held here) filled in: from memory, or read again
    when the held copy was of another segment. ``stats`` counts ``held`` and ``reread`` rows."""
    out: list[tuple] = []
    missing: dict[tuple, list[tuple]] = {}
    for r in rows:
        ns, term, seg, ords, tfs, max_tf, min_dl, key = r
        if ords is None:
            with _LOCK:
                hit = _ROWS.get((key, term))
                if hit is not None:
                    _ROWS.move_to_end((key, term))
            if hit is None:
                missing.setdefault((ns, seg, key), []).append(r)
                continue
            ords, tfs = hit
            stats["held"] = stats.get("held", 0) + 1
        else:
            _keep_row(key, term, ords, tfs)
        out.append((ns, term, seg, ords, tfs, max_tf, min_dl, key))
    for (ns, seg, key), rs in missing.items():
        got = packed.term_rows(conn, ns, seg, [r[1] for r in rs])
        for r in rs:
            if r[1] not in got:
                raise Stale(f"segment {seg} of namespace {ns} is gone")
            o, f = got[r[1]]
            stats["reread"] = stats.get("reread", 0) + 1
            _keep_row(key, r[1], o, f)
            out.append((ns, r[1], seg, o, f, r[5], r[6], key))
    return out


def _cached_bytes() -> int:
    return sum(a.nbytes + b.nbytes for a, b in _DOCS.values()) + sum(a.nbytes for a in _NORMS.values())


def segment_docs(conn, key: tuple) -> tuple[np.ndarray, np.ndarray]:
    """A segment's (chunk ids, lengths) by ordinal, from memory or read once (``key``: the
    segment's identity, as ``store.lexical.plan`` gives it). Raises ``Stale`` when it is gone."""
    with _LOCK:
        hit = _DOCS.get(key)
        if hit is not None:
            _DOCS.move_to_end(key)
            return hit
    row = packed.docs(conn, key[0], key[1])
    if row is None:
        raise Stale(f"segment {key[1]} of namespace {key[0]} is gone")
    ids = np.frombuffer(row[0], ">i8").astype(np.int64)
    dls = np.frombuffer(row[1], ">f4").astype(np.float64)
    if memory.DOCS_BYTES <= 0:
        return ids, dls
    with _LOCK:
        _DOCS[key] = (ids, dls)
        _trim_docs()
    return ids, dls


def _norms(key: tuple, dls: np.ndarray, k1: float, b: float, avgdl: float) -> np.ndarray:
    """``k1·(1 - b + b·dl/avgdl)`` per chunk of the segment (as the exhaustive statement computes it)."""
    nkey = (key, k1, b, avgdl)
    with _LOCK:
        hit = _NORMS.get(nkey)
        if hit is not None:
            _NORMS.move_to_end(nkey)
            return hit
    norm = k1 * (1 - b + b * dls / avgdl)
    if memory.DOCS_BYTES <= 0:
        return norm
    with _LOCK:
        _NORMS[nkey] = norm
        while len(_NORMS) > _NORMS_KEPT:
            _NORMS.popitem(last=False)
    return norm


def clear_cache() -> None:
    """Forget every segment kept in memory (tests; a process that wants the memory back)."""
    with _LOCK:
        _DOCS.clear()
        _NORMS.clear()
        _ROWS.clear()


def _scratch(name: str, n: int, dtype: Any) -> np.ndarray:
    """A per-thread array of at least ``n`` elements, reused: a fresh multi-megabyte array costs
    its page faults again on every query."""
    bufs = getattr(_local, "bufs", None)
    if bufs is None:
        bufs = _local.bufs = {}
    a = bufs.get(name)
    if a is None or len(a) < n:
        a = bufs[name] = np.empty(max(n, 1 << 16), dtype)
    return a[:n]


@dataclass
class _Term:
    """One query term's arrays in a segment, and the bound no posting of it exceeds."""

    term: str
    ords: bytes
    tfs: bytes
    postings: int
    bound: float


def _terms(rows: list[tuple], w: dict[str, float], k1: float, b: float, avgdl: float) -> list[_Term]:
    """The segment's rows as ``_Term``s, largest bound first. A bound is the term weight at the
    row's largest tf and smallest dl (the weight rises with tf and falls with dl), a hair above the
    computed value so that no posting's computed weight exceeds it by a rounding."""
    out = []
    for term, ords, tfs, max_tf, min_dl in rows:
        tf = max_tf
        bound = w[term] * tf * (k1 + 1) / (tf + k1 * (1 - b + b * min_dl / avgdl)) if tf > 0 else 0.0
        out.append(_Term(term, ords, tfs, len(ords) // 4, bound * (1 + 1e-9) + 1e-12))
    out.sort(key=lambda t: -t.bound)
    return out


def _add(acc: np.ndarray, t: _Term, w: float, norm: np.ndarray, k1: float, only: np.ndarray | None) -> int:
    """Add term ``t``'s weights into ``acc``; with ``only`` (a mask over the segment's chunks), for
    the masked chunks alone (the others cannot reach the top k, ``_score``). Returns the postings
    scored."""
    n = t.postings
    o = _scratch("o", n, np.intp)
    o[:] = np.frombuffer(t.ords, ">i4")
    raw = np.frombuffer(t.tfs, np.uint8) if len(t.tfs) == n else np.frombuffer(t.tfs, ">f4")
    if only is not None:
        keep = np.flatnonzero(only[o])
        o = o[keep]
        raw = raw[keep]
        n = len(keep)
    tf = _scratch("tf", n, np.float64)
    tf[:] = raw
    den = _scratch("den", n, np.float64)
    np.take(norm, o, out=den)
    np.add(tf, den, out=den)  # tf + k1·(1 - b + b·dl/avgdl)
    np.multiply(tf, w, out=tf)  # w·tf·(k1 + 1) / (…): the statement's order of operations
    np.multiply(tf, k1 + 1, out=tf)
    np.divide(tf, den, out=tf)
    np.add.at(acc, o, tf)  # a term's ordinals are distinct: one addition per chunk and term
    return n


def _score(
    terms: list[_Term], w: dict[str, float], norm: np.ndarray, k1: float, k: int, prune: bool
) -> tuple[np.ndarray, float, int]:
    """The segment's accumulator, the threshold its pruning assumed, and the postings scored.

    MaxScore over a dense accumulator: terms are added largest bound first. Once the bounds of the
    terms left sum below θ, a score at least k chunks already reach, a chunk not yet seen cannot
    reach the top k, and neither can a seen one whose score so far is below θ minus that sum: the
    terms left are added only for the others (the common terms of a long query hold most of its
    postings and little of its score). θ is estimated from a sample of the accumulator, cheaply
    and without proof; ``_best`` checks that the k-th best score reaches it, and the caller
    scores the segment again without pruning when it does not (so the result is always exact).
    """
    acc = _scratch("acc", len(norm), np.float64)
    acc.fill(0.0)
    suffix = np.cumsum([t.bound for t in terms][::-1])[::-1] if terms else np.zeros(0)
    theta, scored, i = 0.0, 0, 0
    big = max(len(norm) // 32, ESTIMATE_AT)  # θ is worth estimating before a term of this many postings
    while i < len(terms):
        if prune and terms[i].postings >= big and scored:
            theta = max(theta, _estimate(acc, k))
            if theta > 0 and suffix[i] < theta:
                break
        scored += _add(acc, terms[i], w[terms[i].term], norm, k1, None)
        i += 1
    if i < len(terms):
        only = acc >= theta - float(suffix[i])  # the chunks that can still reach θ
        for t in terms[i:]:
            scored += _add(acc, t, w[t.term], norm, k1, only)
    else:
        theta = 0.0
    return acc, theta, scored


def _estimate(acc: np.ndarray, k: int) -> float:
    """A score that probably about 2k chunks of ``acc`` reach (from every _SAMPLE-th chunk)."""
    sample = acc[::_SAMPLE]
    j = max(2, -(-2 * k // _SAMPLE))
    if len(sample) <= j:
        return 0.0
    return float(np.partition(sample, len(sample) - j)[len(sample) - j])


_SAMPLE = 64  # one chunk in this many is sampled for a threshold (``_largest``)


def _largest(acc: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The positions of the ``m`` largest values of ``acc`` (any order), and the positions that
    hold every value at least as large as the smallest of them (None: all of acc).

    A threshold first: the 8·m/_SAMPLE-th largest of every _SAMPLE-th value leaves about 8·m values
    above it, which are partitioned (a sample that leaves fewer than m falls back to all of them).
    Partitioning all of acc for its m largest costs 3 ms at a million, and numpy's selection of the
    top m directly (kth = len - m) is far slower when most of acc is one value (the zeros).
    """
    n = len(acc)
    if n > 64 * m:
        sample = acc[::_SAMPLE]
        j = max(1, 8 * m // _SAMPLE)
        if len(sample) > j:
            theta = float(np.partition(sample, len(sample) - j)[len(sample) - j])
            if theta > 0:
                above = np.flatnonzero(acc >= theta)
                if len(above) >= m:
                    return above[np.argpartition(-acc[above], m - 1)[:m]], above
    neg = _scratch("neg", n, np.float64)
    np.negative(acc, out=neg)
    return np.argpartition(neg, m - 1)[:m], None


def _best(
    conn, ns_id: int, ids: np.ndarray, acc: np.ndarray, k: int, check: bool, dead: set[int], theta: float
) -> list[tuple] | None:
    """(namespace_id, chunk_id, score) of the segment's k best chunks that exist, with every chunk
    tied with the k-th; a chunk found gone scores 0 and the best are taken again. None when the
    pruning assumed a threshold ``theta`` that fewer than k chunks reach (``_score``): then chunks
    it skipped could belong to the top k."""
    while True:
        m = min(k, len(acc))
        if m <= 0:
            return []
        at, pool = _largest(acc, m)
        kth = float(acc[at].min())
        if kth <= 0:
            at = np.flatnonzero(acc > 0)
        elif pool is None:  # the ties with the k-th: the ranking breaks them by chunk id, as the statement does
            at = np.flatnonzero(acc >= kth - 1e-9 * kth)
        else:
            at = pool[acc[pool] >= kth - 1e-9 * kth]
        if theta > 0 and kth * (1 - 1e-9) < theta:  # the ties' window must lie above every skipped score
            return None
        if not check or not len(at):
            break
        cids = ids[at]
        unknown = [int(c) for c in cids if int(c) not in dead]
        alive = packed.alive(conn, np.full(len(unknown), ns_id, np.int64), np.asarray(unknown, np.int64))
        gone = [i for i, c in zip(at, cids) if int(c) not in alive]
        if not gone:
            break
        dead.update(int(ids[i]) for i in gone)
        acc[np.asarray(gone, np.intp)] = 0.0
    return [(ns_id, int(ids[i]), float(acc[i])) for i in at]


def top_k(
    conn,
    terms: Sequence[str],
    weights: Sequence[float],
    k: int,
    *,
    k1: float,
    b: float,
    avgdl: float,
    rows: list[tuple],
    check: bool = True,
    info: dict | None = None,
    prune: bool = True,
) -> list[tuple[int, int, float]]:
    """(namespace_id, chunk_id, score) of the k best packed chunks, best first (ties by chunk id),
    and every chunk tied with the k-th; ``weights`` are the terms' query weights with idf, ``rows``
    the terms' arrays per segment (``kbctl.store.lexical.plan``). ``check``: whether a packed chunk
    may have been deleted since packing (then the best are checked against the chunks table).
    ``prune``: MaxScore (``_score``); without it every posting is added. ``info`` receives what the
    search read: segments, postings (of the terms), scored (postings added), rescored (segments
    scored again when the pruning's threshold proved too high), dead, held (term rows taken from
    memory), reread (held rows of a segment since replaced, read again). Raises ``Stale`` when a
    segment is gone (the namespace was repacked since ``rows`` were read)."""
    w = {t: float(x) for t, x in zip(terms, weights)}
    fill: dict[str, int] = {}
    rows = _fill(conn, rows, fill)
    by_segment: dict[tuple, list[tuple]] = {}
    for _ns, term, _seg, ords, tfs, max_tf, min_dl, key in rows:
        by_segment.setdefault(key, []).append((term, ords, tfs, max_tf, min_dl))
    out: list[tuple[int, int, float]] = []
    dead: set[int] = set()
    postings = scored = rescored = 0
    for key, trows in by_segment.items():
        ids, dls = segment_docs(conn, key)
        norm = _norms(key, dls, k1, b, avgdl)
        seg_terms = _terms(trows, w, k1, b, avgdl)
        postings += sum(t.postings for t in seg_terms)
        acc, theta, n = _score(seg_terms, w, norm, k1, k, prune)
        scored += n
        best = _best(conn, key[0], ids, acc, k, check, dead, theta)
        if best is None:  # fewer than k chunks reach the threshold the pruning assumed: every posting
            rescored += 1
            acc, _, n = _score(seg_terms, w, norm, k1, k, False)
            scored += n
            best = _best(conn, key[0], ids, acc, k, check, dead, 0.0)
        out += best or []
    out.sort(key=lambda r: (-round(r[2], 9), r[1]))
    if info is not None:
        info.update(segments=len(by_segment), postings=postings, scored=scored, rescored=rescored, dead=len(dead))
        info.update(held=fill.get("held", 0), reread=fill.get("reread", 0))
    return out
