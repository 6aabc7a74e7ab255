"""The two retrieval lanes, each a query inside PostgreSQL scoped to the namespaces first.

Dense: pgvector HNSW over the active generation's partial index. When the namespace and filters leave at most
``hnsw.exact_threshold`` rows (peeked once), an exact scan over just those rows runs instead; above
it, HNSW with iterative index scans, so a filtered query still returns k rows.

Lexical: Okapi BM25 computed from the postings kept at ingest,
``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`` and
``tf·(k1 + 1) / (tf + k1·(1 - b + b·dl/avgdl))``, with N, df and avgdl over the queried namespaces.
A namespace of ``PACK_MIN`` chunks or more is packed (``kbctl.store.lexical``: segments holding
each term's chunks and tfs as compact arrays, written after an ingest and rewritten by ``kbctl db
optimize``) and its top k comes from ``termarrays``, which reads the query terms' arrays in the
statement that plans the lane and adds them up with numpy: every posting counted, as the
exhaustive statement does, at a fraction of its cost. Its unpacked tail (the chunks above the
newest segment), smaller namespaces and filtered queries are scored from every posting in SQL
(``search/lexical_lane``): index-only scans of the postings key, which INCLUDEs tf and dl.

Each hit carries its chunk's document id, so fusion can rank documents as well as chunks.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
from concurrent.futures import Future, wait
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ..acl import Gate
from ..config import Profile
from ..store import lexical as packed
from ..store import search as store
from ..store.namespaces import Namespace
from . import termarrays
from .filters import Filter

__all__ = [
    "LaneHit",
    "dense_lane",
    "dense_statement",
    "effective_ef_search",
    "lexical_lane",
    "vocabulary_df",
    "bm25_weights",
    "similarity",
    "correct_terms",
    "search_pool",
    "submit",
    "jobs",
    "viewable_term",
]


@dataclass(frozen=True)
class LaneHit:
    namespace_id: int
    chunk_id: int
    score: float
    rank: int
    document_id: int | None = None


def _ranked(rows: Sequence[tuple]) -> list[LaneHit]:
    """Hits best first from ``(namespace_id, chunk_id, score[, document_id])`` rows."""
    rows = sorted(rows, key=lambda r: (-round(r[2], 9), r[1]))  # rounding: equal sums added in another order tie
    return [LaneHit(r[0], r[1], float(r[2]), i + 1, r[3] if len(r) > 3 else None) for i, r in enumerate(rows)]


def dense_lane(
    conn,
    namespaces: Sequence[Namespace],
    qvec: np.ndarray,
    k: int,
    filters: tuple[Filter, ...],
    profile: Profile,
    *,
    ef_search: int | None = None,
    exact_threshold: int | None = None,
) -> tuple[list[LaneHit], str]:
    """Top-k chunks by vector similarity; returns the hits and the path taken (hnsw | exact | hnsw+exact).

    Each namespace's active generation (as read when the search began) has its own index: over
    several namespaces, each is scanned for k and the lists merge by similarity (one profile, so
    the scores compare).
    """
    if len({n.generation_id for n in namespaces}) > 1:
        parts = [
            dense_lane(conn, [n], qvec, k, filters, profile, ef_search=ef_search, exact_threshold=exact_threshold)
            for n in namespaces
        ]
        rows = [(h.namespace_id, h.chunk_id, h.score, h.document_id) for hits, _ in parts for h in hits]
        merged = sorted(rows, key=lambda r: (-round(r[2], 9), r[1]))[:k]
        return _ranked(merged), "+".join(sorted({p for _, p in parts}))
    ns_ids = [n.id for n in namespaces]
    threshold = profile.hnsw.exact_threshold if exact_threshold is None else exact_threshold
    size, narrow = _filtered_size(conn, ns_ids, filters, threshold)
    exact = size <= threshold
    path = "exact" if exact else "hnsw"
    rows = _dense_rows(conn, namespaces, qvec, k, filters, profile, exact, ef_search, narrow)
    if not exact and len(rows) < min(k, size):
        # The iterative scan gave up (hnsw.max_scan_tuples) before finding k rows that exist: the
        # namespace or filter keeps too small a part of the index. Finish with the exact scan.
        rows = _dense_rows(conn, namespaces, qvec, k, filters, profile, True, None, narrow)
        path = "hnsw+exact"
    return _ranked([(ns, cid, similarity(profile.distance, d), did) for ns, cid, d, did in rows]), path


def _dense_rows(conn, namespaces, qvec, k, filters, profile, exact: bool, ef_search, narrow=None) -> list[tuple]:
    return store.dense_rows(
        conn, dense_statement(namespaces, qvec, k, filters, profile, exact=exact, ef_search=ef_search, narrow=narrow)
    )


def dense_statement(
    namespaces: Sequence[Namespace],
    qvec: np.ndarray,
    k: int,
    filters: tuple[Filter, ...],
    profile: Profile,
    *,
    exact: bool,
    ef_search: int | None = None,
    narrow: int | None = None,
) -> tuple[Any, list, list[Any]]:
    """The dense query, its parameters and the ``SET LOCAL`` statements to run before it (the
    profile's ``[hnsw]`` settings; ``kbctl.store.search.dense_statement``; ``narrow`` the filter
    the exact path looks its chunks up by, ``kbctl.store.search.filtered_count``'s)."""
    return store.dense_statement(
        namespaces,
        qvec,
        k,
        filters,
        profile.distance,
        exact=exact,
        ef_search=effective_ef_search(profile, ef_search, k),
        max_scan_tuples=profile.hnsw.max_scan_tuples,
        narrow=narrow,
    )


def effective_ef_search(profile: Profile, ef_search: int | None, k: int) -> int:
    """The ef_search an HNSW scan for k rows runs with: the query's or the profile's, at least k."""
    return max(ef_search or profile.hnsw.ef_search, k)


def bm25_weights(terms: dict[str, float], present: Sequence[str], df: dict[str, int], n: float) -> list[float]:
    """Each present term's query weight times its idf, ``ln(1 + (N - df + 0.5) / (df + 0.5))``."""
    return [terms[t] * math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in present]


def similarity(distance: str, d: float) -> float:
    """A lane score from a pgvector distance: higher is nearer."""
    return 1.0 - d if distance == "cosine" else -d


def _filtered_size(conn, ns_ids: list[int], filters: tuple[Filter, ...], threshold: int) -> tuple[int, int | None]:
    """How many rows the namespaces and filters leave, counted up to threshold + 1, and the filter
    the exact path narrows by (``kbctl.store.search.filtered_count``)."""
    if not filters:
        return store.chunk_total(conn, ns_ids), None
    return store.filtered_count(conn, ns_ids, filters, threshold + 1)


def vocabulary_df(conn, ns_ids: list[int], terms: Sequence[str]) -> dict[str, int]:
    """Document frequency of each term over the namespaces (absent terms are missing)."""
    return store.vocabulary_df(conn, ns_ids, terms)


def correct_terms(
    conn,
    ns_ids: list[int],
    missing: Sequence[str],
    max_distance: int,
    viewable: Callable[[str], bool] | None = None,
) -> dict[str, str]:
    """For each term not in the vocabulary, the nearest term within ``max_distance`` edits (the most
    frequent of the nearest).

    Candidates share the first or second letter and are within ``max_distance`` in length (the 5000
    most frequent such terms); Levenshtein distances are computed by rapidfuzz (C++, with a cutoff),
    ~100× faster than a Python loop: a misspelled word costs about a millisecond, not 50.
    ``viewable(term)``, when given, says whether a document the searching principal may view holds
    the term: candidates are tried best first and the first viewable one is taken, so a correction
    never names a word only withheld documents hold (``viewable_term``).
    """
    from rapidfuzz import process
    from rapidfuzz.distance import Levenshtein

    out = {}
    for t in missing:
        if len(t) < 4 or any(c.isdigit() for c in t) or max_distance <= 0:
            continue  # short words and identifiers are not guessed at
        rows = store.correction_candidates(conn, ns_ids, t, max_distance)
        close = process.extract(
            t, [term for term, _ in rows], scorer=Levenshtein.distance, score_cutoff=max_distance, limit=None
        )
        ranked = sorted((dist, -rows[i][1], rows[i][0]) for _, dist, i in close)
        best = next((term for _, _, term in ranked if viewable is None or viewable(term)), None)
        if best is not None:
            out[t] = best
    return out


# The postings read to decide whether the principal may view a document holding a correction: a
# few first (usually enough: 0.4 ms against 4-5 ms for a term of 18,000 postings at 100k chunks),
# then up to the cap.
VIEWABLE_FIRST, VIEWABLE_POSTINGS = 16, 1000


def viewable_term(conn, ns_ids: list[int], gate: Gate) -> Callable[[str], bool] | None:
    """For the spelling corrector, ``term -> bool``: whether a document holding the term (among its
    first ``VIEWABLE_POSTINGS`` postings) is one ``gate`` lets through; ``None`` for an unrestricted
    gate. Fails closed: a term whose sampled documents are all withheld is not offered, even if a
    later one could be viewed (the query keeps its misspelling)."""
    if gate.unrestricted:
        return None

    def check(term: str) -> bool:
        for limit in (VIEWABLE_FIRST, VIEWABLE_POSTINGS):
            rows = store.term_acls(conn, ns_ids, term, limit)
            if any(gate.allows(ns, acl) for ns, acl in rows):
                return True
            if len(rows) < limit:
                return False  # every posting read: none viewable
        return False

    return check


_POOL = None


def search_pool():
    """Worker threads of a search: the dense lane, the second half of a split lexical lane or of a
    rescore's BM25 statement, a feedback step's vector half (created on first use). Their jobs never
    wait on each other, so a small pool cannot deadlock."""
    global _POOL
    if _POOL is None:
        from concurrent.futures import ThreadPoolExecutor

        _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="kbctl-search")
    return _POOL


def _forget_pool() -> None:
    """In a forked process the pool's threads are not there: a job submitted to it never ran, and
    the search waited for it for ever. The child makes its own pool on its first search."""
    global _POOL
    _POOL = None


os.register_at_fork(after_in_child=_forget_pool)

_JOBS: contextvars.ContextVar[list[Future] | None] = contextvars.ContextVar("kbctl_search_jobs", default=None)


def submit(fn: Callable[..., Any], *args: Any) -> Future:
    """Run ``fn(*args)`` on the search pool, as a job of the search under way (``jobs``): that search
    does not return, or raise, before the job has ended."""
    future = search_pool().submit(fn, *args)
    started = _JOBS.get()
    if started is not None:
        started.append(future)
    return future


@contextlib.contextmanager
def jobs() -> Iterator[None]:
    """The scope of one search: every job it ``submit``s has ended when the block is left, however
    it is left. A job runs on one of the session's side connections; left running after its search
    failed, it met the next search on the same connection (the retry after a serialization failure,
    the next request a server gave the session to) and broke its transaction."""
    token = _JOBS.set([])
    try:
        yield
    finally:
        started = _JOBS.get() or []
        _JOBS.reset(token)
        for future in started:
            future.cancel()  # not started yet: it never runs
        wait(started)


# A query whose terms have more postings than this is scored in two halves of the chunk ids at once
# when the caller offers a second connection (``helper``).
SPLIT_POSTINGS = 30_000
_MEDIANS: dict[tuple, int | None] = {}

Helper = Callable[[Callable[[Any], Any]], "Future[Any]"]


def lexical_lane(
    conn,
    namespaces: Sequence[Namespace],
    terms: dict[str, float],
    k: int,
    filters: tuple[Filter, ...],
    profile: Profile,
    *,
    helper: Helper | None = None,
    info: dict | None = None,
) -> list[LaneHit]:
    """Top-k chunks by Okapi BM25 over the query terms (term → query weight).

    ``helper(fn)`` runs ``fn(connection)`` on another connection in parallel and returns a Future.
    With it, a query with many postings is split at the namespace's median chunk id: each half is
    aggregated by its own backend, and the two top-k lists merge into exactly the single query's
    top k (every chunk lies in one half, with its whole score). ``info``, when given, receives
    ``bound``: the score no chunk can reach (every term's weight times k1 + 1, tf → ∞), and
    ``postings``: how many postings the query's terms have.
    """
    if not terms:
        return []
    ns_ids = [n.id for n in namespaces]
    n, total = store.lexical_stats(conn, ns_ids)
    if not n:
        return []
    avgdl = float(total) / float(n) or 1.0
    df = vocabulary_df(conn, ns_ids, list(terms))
    present = [t for t in terms if t in df]
    if not present:
        return []
    weight = bm25_weights(terms, present, df, n)
    k1, b = profile.lexical.k1, profile.lexical.b
    if info is not None:
        info["stats"] = (n, total)  # for a rescoring of the candidates (prf = "rescore")
        info["bound"] = sum(weight) * (k1 + 1)
        info["postings"] = sum(df[t] for t in present)  # what scoring every posting reads (the trace's)
    statement = store.bm25_statement(filters)

    def part(c, ids: list[int], lo: int, hi: int) -> list[tuple]:
        return store.bm25_rows(c, statement, ids, present, weight, k1=k1, b=b, avgdl=avgdl, k=k, lo=lo, hi=hi)

    # Packed namespaces (not under filters, which the postings statement applies before ranking):
    # their segments' term arrays, plus their unpacked tail from the postings.
    packs, directory = ({}, []) if filters else packed.plan(conn, ns_ids, present, termarrays.held(ns_ids, present))
    rows: list[tuple] = []
    check = any(p.dead != 0 for p in packs.values())

    def blocks(check: bool) -> list[tuple]:
        stats: dict = {}
        out = termarrays.top_k(
            conn, present, weight, k, k1=k1, b=b, avgdl=avgdl, rows=directory, check=check, info=stats
        )
        if info is not None:
            info["packed"] = stats
        return out

    if packs:
        try:
            rows += blocks(check)
            rows += [r for p in packs.values() if p.tail for r in part(conn, [p.namespace_id], p.hi + 1, _MAX_ID)]
        except termarrays.Stale:  # repacked while this query ran: every posting, as for an unpacked namespace
            packs, rows = {}, []
    plain = [i for i in ns_ids if i not in packs]
    mid = None
    if plain and not packs and helper is not None and sum(df[t] for t in present) > SPLIT_POSTINGS:
        mid = _median_chunk(conn, plain, int(n))
    if plain and (mid is None or helper is None):
        rows += part(conn, plain, _MIN_ID, _MAX_ID)
    elif plain and helper is not None and mid is not None:
        upper = helper(lambda c: part(c, plain, mid + 1, _MAX_ID))
        rows += part(conn, plain, _MIN_ID, mid) + upper.result()
    top = store.with_documents(conn, sorted(rows, key=lambda r: (-round(r[2], 9), r[1]))[:k])
    if packs and not check and any(r[3] is None for r in top):
        # A chunk is gone though the statistics said none was deleted: check every candidate.
        rest = [r for r in rows if r[0] not in packs or r[1] > packs[r[0]].hi]
        try:
            rows = rest + blocks(True)
        except termarrays.Stale:
            rows = rest + part(conn, list(packs), _MIN_ID, max(p.hi for p in packs.values()))
        top = store.with_documents(conn, sorted(rows, key=lambda r: (-round(r[2], 9), r[1]))[:k])
    return _ranked(top)


_MIN_ID, _MAX_ID = store.MIN_ID, store.MAX_ID


def _median_chunk(conn, ns_ids: list[int], n: int) -> int | None:
    """The median chunk id of the namespaces (cached per namespaces and chunk count).

    A stale cache entry (the namespace changed but kept its count) only unbalances the two halves;
    the result is exact for any split point.
    """
    key = (tuple(sorted(ns_ids)), n)
    if key not in _MEDIANS:
        mid = store.median_chunk(conn, ns_ids, n // 2)
        if len(_MEDIANS) > 256:
            _MEDIANS.clear()
        _MEDIANS[key] = mid
    return _MEDIANS[key]
