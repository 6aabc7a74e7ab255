"""Search: route the query, run the lanes, fuse, shape and cite the hits."""

from __future__ import annotations

import dataclasses
import logging
import math
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..acl import Gate
from ..config import PRF_MODES, Profile
from ..errors import KbctlError, UsageError
from ..store import search as store
from ..store.namespaces import Namespace, check_pin
from ..textutil.analyze import get_analyzer
from ..types import Hit, SearchResult
from ..validate import count
from .access import ACL_COLUMN, anonymous_gate, gated_page, viewable
from .filters import Filter
from .fuse import fuse
from .lanes import LaneHit, correct_terms, dense_lane, effective_ef_search, lexical_lane, vocabulary_df
from .prf import cap_postings, feedback_keys, rm3_terms, rocchio
from .route import route

log = logging.getLogger(__name__)

__all__ = ["SearchOptions", "SearchPlan", "run_search"]

MODES = ("auto", "dense", "lexical", "hybrid")


@dataclass(frozen=True)
class SearchOptions:
    """Per-query settings; ``None`` means the profile's ``[search]`` default."""

    mode: str = "auto"
    k: int | None = None
    filters: tuple[Filter, ...] = ()
    per_doc: int | None = None
    candidates: int | None = None
    fusion: str | None = None
    rrf_k: int | None = None
    dense_weight: float | None = None
    rerank: bool | None = None
    explain: bool = False
    correct: bool = True
    ef_search: int | None = None
    exact_threshold: int | None = None
    prf: str | None = None

    def __post_init__(self) -> None:
        """Check every number once, here, where every caller's query settings arrive (``validate``).

        k and candidates are capped at pgvector's largest ef_search, which an HNSW scan for them uses.
        """
        for what, flag, lo, hi in _RANGES:
            if getattr(self, what) is not None:
                count(what, getattr(self, what), lo, hi, flag=flag)
        w = self.dense_weight
        if w is not None and (isinstance(w, bool) or not isinstance(w, (int, float)) or not 0 <= w <= 1):
            raise UsageError(f"dense_weight must be a number in 0..1, got {w!r}")


MAX_EF_SEARCH = 1000  # pgvector's hnsw.ef_search range is 1..1000; PostgreSQL drops a value outside it
_RANGES = (
    ("k", "-k", 1, MAX_EF_SEARCH),
    ("per_doc", "--per-doc", 0, None),
    ("candidates", "--candidates", 1, MAX_EF_SEARCH),
    ("ef_search", "--ef-search", 1, MAX_EF_SEARCH),
    ("exact_threshold", None, 0, None),
    ("rrf_k", None, 0, None),
)


def run_search(
    conn,
    namespaces: Sequence[Namespace],
    profile: Profile,
    query: str,
    opts: SearchOptions,
    side: Callable[[str], Any] | None = None,
    gate: Gate | None = None,
) -> SearchResult:
    """Answer one query over the given namespaces, all pinned to ``profile``.

    ``gate`` (``kbctl.acl.Gate``) withholds, after fusion and reranking, the hits its principal may
    not view (``kbctl.search.access``); without one the search is anonymous in ``public`` namespaces.

    ``side(purpose)``, when given, returns another connection reserved for ``purpose`` ("dense",
    "lexical"). Hybrid queries then run the dense lane (query embedding and HNSW scan) on the
    "dense" one in a worker thread while the lexical lane runs on ``conn``, and a lexical lane with
    many postings scores half of the chunks on the "lexical" one: the model and two PostgreSQL
    backends work at once. Without it, only the query embedding overlaps the lexical lane.
    """
    if opts.mode not in MODES:
        raise UsageError(f"unknown mode {opts.mode!r}", hint=f"use one of: {', '.join(MODES)}")
    for ns in namespaces:
        check_pin(ns, profile)
    k = opts.k or profile.search.k
    analyzer = get_analyzer(profile.lexical.language)
    strategy = route(query, bool(opts.filters), analyzer)
    names = tuple(n.name for n in namespaces)
    if strategy == "no_match":
        return SearchResult(query, names, "none", strategy, (), notes=("nothing searchable in the query",))
    if strategy == "needs_clarification" and opts.mode == "auto":
        return SearchResult(
            query, names, "none", strategy, (), notes=("the query is too vague to search; ask what it is about",)
        )
    gate = gate or anonymous_gate([n.id for n in namespaces])
    if strategy == "metadata":
        return _noted(_metadata(conn, namespaces, query, opts.filters, k, names, gate), gate, namespaces)
    if strategy == "needs_clarification":
        strategy = "hybrid" if opts.filters else "content"
    mode = "hybrid" if opts.mode == "auto" else opts.mode
    plan = SearchPlan(tuple(namespaces), profile, query, opts, mode, strategy, k, analyzer, names, gate, side)
    result = _ranked(conn, plan)
    depth = max(opts.candidates or profile.search.candidates, k)
    while result.details.get("saturated") and len(result.hits) < k and depth < MAX_EF_SEARCH:
        # Withheld hits left the page short and the lanes were full: ask them for more candidates.
        depth = min(depth * 4, MAX_EF_SEARCH)
        plan = dataclasses.replace(plan, opts=dataclasses.replace(plan.opts, candidates=depth))
        result = _ranked(conn, plan)
    return _noted(result, gate, namespaces)


@dataclass(frozen=True)
class SearchPlan:
    """One routed query, ready for the lanes: what ``run_search`` decided, handed to ``_ranked``."""

    namespaces: tuple[Namespace, ...]
    profile: Profile
    query: str
    opts: SearchOptions
    mode: str  # lanes to run: dense | lexical | hybrid
    strategy: str  # the route's answer: content | hybrid
    k: int
    analyzer: Any
    names: tuple[str, ...]
    gate: Gate
    side: Callable[[str], Any] | None = None  # another connection per purpose ("dense", "lexical")


def _noted(result: SearchResult, gate: Gate, namespaces) -> SearchResult:
    """``result`` with the access gate's notes: how many hits were withheld (a count only), and why
    documents without an ACL are hidden in a ``deny`` namespace."""
    notes = list(result.notes)
    why = gate.deny_note({n.id: n.name for n in namespaces})
    if why:
        notes.append(why)
    if result.withheld:
        notes.append(f"withheld {result.withheld} hit(s) this principal may not view")
    details = {a: b for a, b in result.details.items() if a != "saturated"}
    return dataclasses.replace(result, notes=tuple(notes), details=details)


def _ranked(conn, plan: SearchPlan) -> SearchResult:
    namespaces, profile, query, opts, mode = plan.namespaces, plan.profile, plan.query, plan.opts, plan.mode
    strategy, k, analyzer, names, side, gate = plan.strategy, plan.k, plan.analyzer, plan.names, plan.side, plan.gate
    s = profile.search
    prf = opts.prf or s.prf
    if prf not in PRF_MODES:
        raise UsageError(f"unknown prf {prf!r}", hint=f"use one of: {', '.join(PRF_MODES)}")
    # A search with feedback reads deeper lanes in both rounds (prf_candidates; docs/retrieval-quality.md).
    feedback = prf == "hybrid" and mode == "hybrid"
    depth = max(opts.candidates or (s.prf_candidates if feedback else s.candidates), k)
    ns_ids = [n.id for n in namespaces]
    lanes: dict[str, list[LaneHit]] = {}
    notes: list[str] = []
    details: dict = {}
    degraded = False
    timings: dict[str, float] = {}
    terms: dict[str, float] = {}
    qvec = None
    lexical_info: dict[str, float] = {}
    # In hybrid mode the dense lane starts on a worker thread (the model releases the GIL; the
    # HNSW scan runs on the side connection) while the lexical lane runs here.
    pending = (
        _search_pool().submit(_dense_job, side, namespaces, profile, query, depth, opts) if mode == "hybrid" else None
    )
    if mode in ("lexical", "hybrid"):
        t0 = time.perf_counter()
        terms, corrections = _query_terms(conn, ns_ids, query, analyzer, profile, opts.correct)
        if corrections:
            details["corrections"] = corrections
            notes.append("corrected: " + ", ".join(f"{a} → {b}" for a, b in corrections.items()))
        helper = None if side is None else (lambda fn: _search_pool().submit(lambda: fn(side("lexical"))))
        lanes["lexical"] = lexical_lane(
            conn, namespaces, terms, depth, opts.filters, profile, helper=helper, info=lexical_info
        )
        timings["lexical_ms"] = (time.perf_counter() - t0) * 1000
    if mode in ("dense", "hybrid"):
        t0 = time.perf_counter()
        dense = None
        try:
            if pending is not None:
                qvec, dense, t0 = pending.result()
            else:
                qvec = _embed_query(profile, query)
        except KbctlError as e:
            if mode == "dense" and opts.mode == "dense":
                raise
            degraded = True
            notes.append(f"dense lane unavailable ({e.message}); answered from the lexical lane")
            qvec = None
            if "lexical" not in lanes:
                terms, _ = _query_terms(conn, ns_ids, query, analyzer, profile, opts.correct)
                lanes["lexical"] = lexical_lane(conn, namespaces, terms, depth, opts.filters, profile)
        if qvec is not None and dense is None:
            dense = _dense_scan(conn, namespaces, qvec, depth, opts, profile)
        if dense is not None:
            lanes["dense"], details["dense_path"] = dense
            if details["dense_path"] != "exact":
                details["ef_search"] = effective_ef_search(profile, opts.ef_search, depth)
            timings["dense_ms"] = (time.perf_counter() - t0) * 1000
    fusion: dict[str, Any] = {
        "method": opts.fusion or s.fusion,
        "rrf_k": opts.rrf_k or s.rrf_k,
        "dense_weight": opts.dense_weight if opts.dense_weight is not None else s.dense_weight,
    }
    fused = fuse(lanes, **fusion)
    if feedback and not degraded and qvec is not None and terms and fused:
        t0 = time.perf_counter()
        seen = [key for key, _ in fused[:depth]]  # feedback only from what the principal may view
        allowed, _ = viewable(gate, fused[:depth], store.chunk_acls(conn, seen))
        lanes, fused, details["prf"] = _feedback_round(
            conn, namespaces, profile, terms, qvec, lanes, allowed or fused[:0], depth, opts, fusion, side
        )
        timings["prf_ms"] = (time.perf_counter() - t0) * 1000
    per_doc = opts.per_doc if opts.per_doc is not None else s.per_doc
    rows = _fetch(conn, [key for key, _ in fused[: max(depth, k)]])
    use_rerank = opts.rerank if opts.rerank is not None else bool(profile.rerank.kind)
    limit = max(k, profile.rerank.top_n) if use_rerank else k
    ordered, reranked, withheld = gated_page(
        gate,
        fused,
        rows,
        k,
        limit,
        shape=lambda window: _shape(fused, rows, per_doc, s.dedupe_threshold, window),
        rerank=lambda page: _maybe_rerank(profile, query, page, rows, opts, notes),
        fetch=lambda keys: _fetch(conn, keys),
    )
    details["saturated"] = bool(withheld) and any(len(v) >= depth for v in lanes.values())
    if reranked:
        details["reranked"] = True
    scale = _relevance(lanes, fusion, profile.distance, lexical_info.get("bound"), reranked)
    by_key = {name: {(h.namespace_id, h.chunk_id): h for h in hs} for name, hs in lanes.items()}
    hits = tuple(_hit(i + 1, score, rows[key], by_key, key, scale) for i, (key, score) in enumerate(ordered[:k]))
    details["timings_ms"] = {a: round(b, 2) for a, b in timings.items()}
    # Which generation answered (each namespace's, read once when the search began): a swap while
    # the search ran does not change it (docs/lifecycle.md).
    details["generations"] = {n.name: n.generation_id for n in namespaces}
    return SearchResult(
        query, names, mode, strategy, hits, degraded=degraded, notes=tuple(notes), details=details, withheld=withheld
    )


def _feedback_round(
    conn,
    namespaces,
    profile: Profile,
    terms: dict[str, float],
    qvec,
    lanes,
    fused,
    depth: int,
    opts: SearchOptions,
    fusion: dict,
    side,
):
    """Hybrid pseudo-relevance feedback (``kbctl.search.prf``): the best documents of the fused
    first round expand the BM25 query (RM3, from their stored postings) and move the query vector
    (Rocchio, from their stored vectors); both lanes run again, as in the first round (the dense one
    on the side connection while the lexical one runs here), and are fused the same way."""
    s = profile.search
    doc_of = {
        (h.namespace_id, h.chunk_id): (h.namespace_id, h.document_id)
        for hits in lanes.values()
        for h in hits
        if h.document_id is not None
    }
    feedback = feedback_keys(fused, doc_of, s.prf_docs)
    keys = [key for key, _ in feedback]
    vkeys = keys[: s.prf_vector_docs]
    vectors = store.feedback_vectors(conn, vkeys, [n.generation_id for n in namespaces])
    qvec2 = rocchio(qvec, [vectors[key] for key in vkeys if key in vectors], s.prf_vector_weight)

    def dense_round(c):
        return _dense_scan(c, namespaces, qvec2, depth, opts, profile)[0]

    pending = _search_pool().submit(lambda: dense_round(side("dense"))) if side is not None else None
    expanded = rm3_terms(terms, feedback, store.feedback_postings(conn, keys), s.prf_terms, s.prf_query_weight)
    df = vocabulary_df(conn, [n.id for n in namespaces], list(expanded))
    expanded = cap_postings(expanded, list(terms), df, s.prf_max_postings)
    helper = None if side is None else (lambda fn: _search_pool().submit(lambda: fn(side("lexical"))))
    new = {"lexical": lexical_lane(conn, namespaces, expanded, depth, opts.filters, profile, helper=helper)}
    new["dense"] = pending.result() if pending is not None else dense_round(conn)
    added = sorted((t for t in expanded if t not in terms), key=lambda t: -expanded[t])
    info = {"docs": len(feedback), "vector_docs": len(vectors), "terms": added, "candidates": depth}
    return new, fuse(new, **fusion), info


def _query_terms(conn, ns_ids, query, analyzer, profile, correct: bool) -> tuple[dict[str, float], dict[str, str]]:
    terms: dict[str, float] = {}
    for t in analyzer.terms(query):
        terms[t] = terms.get(t, 0.0) + 1.0
    if not correct or not terms:
        return terms, {}
    df = vocabulary_df(conn, ns_ids, list(terms))
    missing = [t for t in terms if t not in df]
    fixes = correct_terms(conn, ns_ids, missing, profile.lexical.max_edit_distance)
    for bad, good in fixes.items():
        terms[good] = terms.get(good, 0.0) + terms.pop(bad)
    return terms, fixes


_POOL = None


def _search_pool():
    """Worker threads for the dense lane and the second half of a split lexical lane (created on
    first use). Their jobs never wait on each other, so a small pool cannot deadlock."""
    global _POOL
    if _POOL is None:
        from concurrent.futures import ThreadPoolExecutor

        _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="kbctl-search")
    return _POOL


def _dense_job(side, namespaces, profile: Profile, query: str, depth: int, opts: SearchOptions):
    """The dense lane for a worker thread: (query vector, (hits, path) or None, start time).

    Without a side connection only the embedding runs here; the caller scans on its connection.
    """
    t0 = time.perf_counter()
    qvec = _embed_query(profile, query)
    if side is None:
        return qvec, None, t0
    return qvec, _dense_scan(side("dense"), namespaces, qvec, depth, opts, profile), t0


def _dense_scan(conn, namespaces, qvec, depth: int, opts: SearchOptions, profile: Profile):
    """The dense lane with the query's own filters and HNSW settings: (hits, path)."""
    return dense_lane(
        conn,
        namespaces,
        qvec,
        depth,
        opts.filters,
        profile,
        ef_search=opts.ef_search,
        exact_threshold=opts.exact_threshold,
    )


def _embed_query(profile: Profile, query: str):
    from ..embed import get_embedder

    # "query": the backend that loads fastest (ONNX, never torch when ONNX agrees), not the one
    # ingest uses for throughput; both agree with fp32 (kbctl.embed.precision).
    return get_embedder(profile, purpose="query").embed_query(query)


def _maybe_rerank(profile: Profile, query: str, ordered, rows, opts: SearchOptions, notes: list[str]):
    use = opts.rerank if opts.rerank is not None else bool(profile.rerank.kind)
    if not use or not ordered:
        return ordered, False
    from .rerank import rerank

    before = len(notes)
    texts = {key: rows[key][3] for key, _ in ordered}
    out = rerank(profile, query, ordered, texts, notes)
    return out, len(notes) == before


def _fetch(conn, keys: list[tuple[int, int]]) -> dict[tuple[int, int], tuple]:
    return store.hit_rows(conn, keys)


def _shape(fused, rows, per_doc: int, dedupe: float, limit: int | None = None):
    """Keep at most ``per_doc`` chunks per document and drop near-duplicate texts.

    Walks the fused order and stops once ``limit`` hits are kept (the page, or the reranker's
    window): what comes after cannot change them, and the near-duplicate check is quadratic.
    """
    out: list[tuple[Any, float]] = []
    per: dict[tuple, int] = {}
    seen = _ShingleIndex(dedupe)
    exact: set[int] = set()
    for key, score in fused:
        if limit is not None and len(out) >= limit:
            break
        r = rows.get(key)
        if r is None:
            continue
        doc = (r[0], r[2])
        if per_doc and per.get(doc, 0) >= per_doc:
            continue
        if dedupe < 1.0:
            words = _W.findall(r[3].lower())
            same = hash(tuple(words))  # an exact copy (up to case and punctuation) needs no shingles
            if same in exact:
                continue
            sh = _shingles(words)
            if seen.has_near_duplicate(sh):
                continue
            exact.add(same)
            seen.add(sh)
        per[doc] = per.get(doc, 0) + 1
        out.append((key, score))
    return out


_W = re.compile(r"\w+")


class _ShingleIndex:
    """The shingle sets kept so far, indexed by their prefixes (prefix filtering): a set's prefix is
    its ``|s| − ⌈t·|s|⌉ + 1`` smallest hashes, and two sets with Jaccard ≥ t always share a prefix
    element (J ≥ t implies |a ∩ b| ≥ t·max(|a|, |b|)). So a new set is compared, exactly, only with
    the kept sets that share one; about 10 index entries per set at t = 0.9 instead of every pair.
    Comparing 100 hits pairwise cost ~5,000 set intersections per query, the largest part of an
    eval's depth-100 search."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self.sets: list[frozenset[int]] = []
        self.index: dict[int, list[int]] = {}
        self._last: tuple[frozenset[int], list[int]] = (frozenset(), [])

    def _prefix(self, sh: frozenset[int]) -> list[int]:
        n = len(sh)
        return sorted(sh)[: max(1, n - math.ceil(self.threshold * n) + 1)]

    def has_near_duplicate(self, sh: frozenset[int]) -> bool:
        if not sh:
            return False
        self._last = (sh, self._prefix(sh))
        candidates = {i for h in self._last[1] for i in self.index.get(h, ())}
        return any(_near_duplicate(sh, self.sets[i], self.threshold) for i in candidates)

    def add(self, sh: frozenset[int]) -> None:
        i = len(self.sets)
        self.sets.append(sh)
        prefix = self._last[1] if self._last[0] is sh else self._prefix(sh)
        for h in prefix:
            self.index.setdefault(h, []).append(i)


def _shingles(text: str | list[str]) -> frozenset[int]:
    """Word 3-shingles of ``text`` (or of its words, lower-cased), single words if shorter, as hashes:
    set operations on ints are several times faster than on tuples of strings, and a 64-bit
    collision is negligible here."""
    w = _W.findall(text.lower()) if isinstance(text, str) else text
    return frozenset(map(hash, zip(w, w[1:], w[2:]))) or frozenset(map(hash, w))


def _near_duplicate(a: frozenset, b: frozenset, threshold: float) -> bool:
    """Jaccard(a, b) >= threshold; sets whose sizes alone rule it out (J ≤ min/max) are skipped."""
    if not a or not b:
        return False
    la, lb = len(a), len(b)
    if min(la, lb) < threshold * max(la, lb):
        return False
    inter = len(a & b)
    return inter >= threshold * (la + lb - inter)


def _relevance(
    lanes: dict[str, list[LaneHit]], fusion: dict, distance: str, bound: float | None, reranked: bool
) -> Callable[[float], float | None]:
    """Score → a 0–1 relevance a person can read: the score over the best this query could score.

    Fused: RRF's best is rank 1 in every lane (``lanes / (rrf_k + 1)``), convex's is 1 (top of both
    lanes). Dense alone: the cosine similarity. Lexical alone: BM25 over its bound (every query term
    with tf → ∞). Reranked: the cross-encoder's logit through a sigmoid.
    """
    import math

    if reranked:
        return lambda x: 1.0 / (1.0 + math.exp(-x))
    if len(lanes) > 1:
        best = 1.0 if fusion["method"] == "convex" else len(lanes) / (fusion["rrf_k"] + 1.0)
        return lambda x: x / best
    if "dense" in lanes:
        return (lambda x: x) if distance == "cosine" else (lambda x: None)
    return (lambda x: x / bound) if bound else (lambda x: None)


def _hit(
    rank: int,
    score,
    r: tuple,
    lanes: dict[str, dict[tuple[int, int], LaneHit]],
    key,
    scale: Callable[[float], float | None] | None = None,
) -> Hit:
    _ns_id, cid, did, text, meta, heading, page, _pos, uri, title, ns_name = r[:11]
    lane_info: dict[str, dict[str, Any]] = {}
    for name, hits in lanes.items():
        h = hits.get(key)
        lane_info[name] = {"rank": None, "score": None} if h is None else {"rank": h.rank, "score": round(h.score, 6)}
    return Hit(
        rank=rank,
        score=None if score is None else round(float(score), 6),
        doc_id=did,
        chunk_id=cid,
        source=_display_source(uri, meta),
        title=title,
        text=text,
        namespace=ns_name,
        metadata=_with_link(meta, uri, text),
        citation=citation(title, _display_source(uri, meta), page, heading),
        lanes=lane_info,
        relevance=None if score is None or scale is None else _clamp01(scale(float(score))),
    )


def _with_link(meta: dict, uri: str, text: str) -> dict:
    """The chunk's metadata; for a web page, with ``link``: its url opening at the passage (``#:~:text=``)."""
    from ..textutil.fragment import text_fragment_link

    out = dict(meta)
    if uri.startswith(("http://", "https://")) and meta.get("source_type") == "html":
        link = text_fragment_link(uri, text)
        if link:
            out["link"] = link
    return out


def _clamp01(x: float | None) -> float | None:
    return None if x is None else round(min(1.0, max(0.0, x)), 3)


def _display_source(uri: str, meta: dict) -> str:
    return str(meta.get("path") or uri) if uri.startswith("file://") else uri


def citation(title: str, source: str, page: int | None, heading: Sequence[str] | None) -> str:
    """A human-readable citation: title, source, and page or section when known."""
    parts = [title or source]
    if source and source != title:
        parts.append(f"({source})")
    if page:
        parts.append(f"p. {page}")
    if heading:
        parts.append("§ " + " › ".join(heading))
    return " ".join(parts)


def _metadata(conn, namespaces, query, filters: tuple[Filter, ...], k: int, names, gate: Gate) -> SearchResult:
    """Filters only: matching chunks in a stable order, no score, no reranking; gated like the
    ranked strategies, reading four times more matches while withheld ones leave the page short."""
    want = k
    while True:
        keys = store.metadata_keys(conn, [n.id for n in namespaces], filters, want)
        rows = _fetch(conn, keys)
        kept, withheld = viewable(gate, [(key, None) for key in keys], {key: r[ACL_COLUMN] for key, r in rows.items()})
        if len(kept) >= k or len(keys) < want:
            break
        want *= 4
    kept = kept[:k]
    if len(kept) == k:  # count only what was withheld ahead of the last hit shown
        last = keys.index(kept[-1][0])
        withheld = last + 1 - k
    hits = tuple(_hit(i + 1, None, rows[key], {}, key) for i, (key, _) in enumerate(kept))
    return SearchResult(query, names, "metadata", "metadata", hits, withheld=withheld)
