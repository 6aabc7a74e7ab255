"""Exact top-k BM25 over packed postings (``kbctl.store.lexical``), with block-max pruning.

A term's postings in a segment are stored in blocks ordered by impact, each with its largest tf
and smallest dl. With the query's statistics (N, df, avgdl of now, not of packing time), a
block's bound ``w·tf·(k1+1) / (tf + k1·(1 - b + b·dl/avgdl))`` at (max tf, min dl) is at least
the score of any of its postings, since the term weight grows with tf and falls with dl.

The search takes blocks in decreasing bound, in rounds (one round trip each, a few thousand
postings the first, four times more each next), and scores them with numpy. After a round, with
θ the k-th best partial score and ``next(t)`` the bound of term t's best block not yet read:

- a chunk not seen at all scores at most ``U = Σ next(t)``; once ``U < θ`` none can enter the top k;
- a seen chunk scores at most its partial score plus ``next(t)`` for each term it was not seen in:
  the candidates are the chunks whose bound reaches θ.

When the candidates are few enough (or every block was read), their missing postings are read by
key from ``kbctl.lexical_postings`` and their scores completed: the result is the same top k as
scoring every posting (``tests/db/test_blockmax.py`` checks it against the exhaustive statement).

Deleted chunks stay in their segment until it is repacked: a candidate is checked against the
chunks table, and when a chunk that set θ is gone, θ is recomputed without it and the search
goes on. No chunk that is gone is ever returned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..store import lexical as packed

__all__ = ["top_k", "Stale", "FIRST_ROUND", "MAX_CANDIDATES", "LOOKUP_COST"]

#: Postings read in the first round; each next round reads four times more.
FIRST_ROUND = 4096
#: Candidates completed by key lookups at most; more, and another round of blocks narrows them first.
MAX_CANDIDATES = 2000
#: What one key lookup costs in postings read from blocks (measured: a lookup is a B-tree descent,
#: a block posting 16 bytes decoded by numpy). More lookups than the next round's postings / this,
#: and the next round is read instead.
LOOKUP_COST = 24
_EPS = 1e-12


class Stale(Exception):
    """A block of the directory read was not there any more: the namespace was repacked meanwhile
    (``kbctl db optimize``). The caller scores the postings instead."""


@dataclass
class _Blocks:
    """Every block of the query's terms, best bound first (parallel arrays)."""

    ns: np.ndarray
    term: np.ndarray  # index into the query's terms
    seg: np.ndarray
    blk: np.ndarray
    size: np.ndarray
    bound: np.ndarray


@dataclass
class _Read:
    ids: list[np.ndarray] = field(default_factory=list)
    ns: list[np.ndarray] = field(default_factory=list)
    score: list[np.ndarray] = field(default_factory=list)
    term: list[np.ndarray] = field(default_factory=list)
    postings: int = 0
    rounds: int = 0


def _bm25(w: float, tf, dl, k1: float, b: float, avgdl: float):
    """BM25's term weight, as the exhaustive statement computes it (the same operations in the same order)."""
    return w * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))


def _directory(rows, terms: list[str], weights: np.ndarray, k1, b, avgdl) -> _Blocks:
    index = {t: i for i, t in enumerate(terms)}
    parts: list[tuple[np.ndarray, ...]] = []
    for ns_id, term, seg, sizes, max_tfs, min_dls in rows:
        n = np.frombuffer(sizes, ">i4").astype(np.int64)
        ti = index[term]
        tf = np.frombuffer(max_tfs, ">f4").astype(np.float64)
        dl = np.frombuffer(min_dls, ">f4").astype(np.float64)
        parts.append(
            (
                np.full(len(n), ns_id, np.int64),
                np.full(len(n), ti, np.int64),
                np.full(len(n), seg, np.int64),
                np.arange(len(n), dtype=np.int64),
                n,
                _bm25(float(weights[ti]), tf, dl, k1, b, avgdl),
            )
        )
    if not parts:
        e = np.zeros(0, np.int64)
        return _Blocks(e, e, e, e, e, np.zeros(0))
    cols = [np.concatenate(c) for c in zip(*parts)]
    order = np.argsort(-cols[5], kind="stable")
    return _Blocks(*(c[order] for c in cols))


def top_k(
    conn,
    ns_ids: Sequence[int],
    terms: list[str],
    weights: Sequence[float],
    k: int,
    *,
    k1: float,
    b: float,
    avgdl: float,
    check: bool = True,
    info: dict | None = None,
    directory: list[tuple] | None = None,
) -> list[tuple[int, int, float]]:
    """(namespace_id, chunk_id, score) of the k best packed chunks of the namespaces, best first
    (ties by chunk id); ``weights`` are the terms' query weights with idf. ``check``: look up
    whether candidates still exist (not needed when no packed chunk was deleted since packing).
    ``info`` receives what the search read: rounds, blocks, postings, candidates, lookups, dead.
    ``directory``: the terms' block directories, when read already (``kbctl.store.lexical.plan``).
    Raises ``Stale`` when a block of the directory is gone (the namespace was repacked since)."""
    w = np.asarray(weights, dtype=np.float64)
    rows = directory if directory is not None else packed.directory(conn, ns_ids, terms)
    bl = _directory(rows, terms, w, k1, b, avgdl)
    nblocks, nterms = len(bl.size), len(terms)
    read = _Read()
    taken, budget, more = 0, FIRST_ROUND, True
    dead: set[int] = set()
    alive: set[int] = set()
    lookups = 0
    while True:
        if more and taken < nblocks:
            end = min(nblocks, taken + int(np.searchsorted(np.cumsum(bl.size[taken:]), budget)) + 1)
            _read_blocks(conn, bl, taken, end, terms, w, k1, b, avgdl, read)
            taken, budget = end, budget * 4
        if not read.ids:
            return _finish(info, read, taken, 0, 0, dead, [])
        nxt = np.zeros(nterms)
        if taken < nblocks:
            np.maximum.at(nxt, bl.term[taken:], bl.bound[taken:])
        unseen = float(nxt.sum())
        ids = np.concatenate(read.ids)
        tterm = np.concatenate(read.term)
        uniq, first, inv = _group(ids)
        partial = np.bincount(inv, weights=np.concatenate(read.score), minlength=len(uniq))
        upper = partial + unseen - np.bincount(inv, weights=nxt[tterm], minlength=len(uniq))
        live = ~np.isin(uniq, np.fromiter(dead, np.int64, len(dead))) if dead else np.ones(len(uniq), bool)
        theta = _kth(partial[live], k)
        cand = np.flatnonzero(live & (upper >= theta - _EPS * theta)) if theta > 0 else np.flatnonzero(live)
        if taken < nblocks:
            if not unseen < theta * (1 - _EPS) or len(cand) > MAX_CANDIDATES:
                more = True
                continue
            # Complete by lookups, or read on: whichever reads less.
            open_terms = int((nxt > 0).sum())
            seen_open = np.bincount(inv, weights=(nxt[tterm] > 0), minlength=len(uniq))[cand]
            if (len(cand) * open_terms - seen_open.sum()) * LOOKUP_COST > budget:
                more = True
                continue
        # The candidates: do they still exist (a packed chunk may have been deleted since)?
        ns_all = np.concatenate(read.ns)
        todo = np.array([j for j in cand if int(uniq[j]) not in alive] if check else [], dtype=np.int64)
        if len(todo):
            found = packed.alive(conn, ns_all[first[todo]], uniq[todo])
            alive |= found
            dead |= {int(c) for c in uniq[todo] if int(c) not in found}
            lookups += len(todo)
            setters = cand[np.argsort(-partial[cand], kind="stable")][:k]
            if any(int(uniq[j]) in dead for j in setters):
                more = False
                continue  # a chunk that set θ is gone: θ again without it
        if dead:
            cand = np.array([j for j in cand if int(uniq[j]) not in dead], dtype=np.int64)
        # Complete their scores with the postings not read yet, by key.
        pn, pc, pt = _missing(tterm, inv, cand, uniq, ns_all[first[cand]], nxt)
        add: dict[int, float] = {}
        index = {t: i for i, t in enumerate(terms)}
        for cid, term, tf, dl in packed.lookup(conn, pn, pc, pt, terms):
            add[cid] = add.get(cid, 0.0) + float(_bm25(float(w[index[term]]), float(tf), float(dl), k1, b, avgdl))
        lookups += len(pc)
        out = [(int(ns_all[first[j]]), int(uniq[j]), float(partial[j]) + add.get(int(uniq[j]), 0.0)) for j in cand]
        out.sort(key=lambda r: (-round(r[2], 9), r[1]))
        return _finish(info, read, taken, len(cand), lookups, dead, out[:k])


def _group(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(ids, return_index=True, return_inverse=True)`` (``first`` any occurrence), by
    direct addressing when the ids span a range not much larger than their count (chunk ids of a
    namespace are nearly consecutive): linear time instead of a sort."""
    base = int(ids.min())
    span = int(ids.max()) - base + 1
    if span > max(8 * len(ids), 1 << 20):
        return np.unique(ids, return_index=True, return_inverse=True)
    off = ids - base
    present = np.zeros(span, dtype=bool)
    present[off] = True
    slots = np.flatnonzero(present)
    pos = np.empty(span, dtype=np.int64)
    pos[slots] = np.arange(len(slots))
    inv = pos[off]
    first = np.empty(len(slots), dtype=np.int64)
    first[inv] = np.arange(len(ids))
    return slots + base, first, inv


def _kth(scores: np.ndarray, k: int) -> float:
    """The k-th largest score, 0 when there are fewer than k."""
    if len(scores) < k:
        return 0.0
    return float(np.partition(scores, len(scores) - k)[len(scores) - k])


def _read_blocks(conn, bl: _Blocks, lo: int, hi: int, terms, w, k1, b, avgdl, read: _Read) -> None:
    """Read blocks [lo, hi) of the order and score their postings (decoded once for the round)."""
    index = {t: i for i, t in enumerate(terms)}
    rows = packed.blocks(conn, bl.ns[lo:hi], bl.term[lo:hi], bl.seg[lo:hi], bl.blk[lo:hi], terms)
    if len(rows) != hi - lo:
        raise Stale(f"{hi - lo - len(rows)} of {hi - lo} blocks gone")
    want = {(int(bl.ns[i]), int(bl.seg[i]), int(bl.blk[i]), int(bl.term[i])): int(bl.size[i]) for i in range(lo, hi)}
    if any(want.get((r[0], r[2], r[3], index[r[1]])) != len(r[5]) // 4 for r in rows):
        raise Stale("a block changed size since its directory was read")
    if rows:
        cid = np.frombuffer(b"".join(r[4] for r in rows), ">i8").astype(np.int64)
        tf = np.frombuffer(b"".join(r[5] for r in rows), ">f4").astype(np.float64)
        dl = np.frombuffer(b"".join(r[6] for r in rows), ">f4").astype(np.float64)
        sizes = np.fromiter((len(r[5]) // 4 for r in rows), np.int64, len(rows))
        term = np.repeat(np.fromiter((index[r[1]] for r in rows), np.int64, len(rows)), sizes)
        read.ids.append(cid)
        read.ns.append(np.repeat(np.fromiter((r[0] for r in rows), np.int64, len(rows)), sizes))
        read.score.append(_bm25(w[term], tf, dl, k1, b, avgdl))
        read.term.append(term)
        read.postings += len(cid)
    read.rounds += 1


def _missing(tterm, inv, cand, uniq, cns, nxt) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(namespace ids, chunk ids, term indexes) of each candidate's terms not read yet that could
    still add (their term has blocks left)."""
    open_terms = np.flatnonzero(nxt > 0)
    e = np.zeros(0, np.int64)
    if not len(open_terms) or not len(cand):
        return e, e, e
    pos = np.full(len(uniq), -1, dtype=np.int64)
    pos[cand] = np.arange(len(cand))
    seen = np.zeros((len(cand), len(nxt)), dtype=bool)
    hit = pos[inv]
    sel = hit >= 0
    seen[hit[sel], tterm[sel]] = True
    rows, cols = np.nonzero(~seen[:, open_terms])
    return cns[rows], uniq[cand][rows], open_terms[cols]


def _finish(info, read: _Read, taken: int, candidates: int, lookups: int, dead: set[int], out):
    if info is not None:
        info.update(
            rounds=read.rounds,
            blocks=taken,
            postings=read.postings,
            candidates=candidates,
            lookups=lookups,
            dead=len(dead),
        )
    return out
