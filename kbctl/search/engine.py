"""Search: route the query, run the lanes, fuse, shape and cite the hits."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from .. import telemetry
from ..acl import Gate
from ..config import FUSIONS, PRF_MODES, Profile
from ..errors import KbctlError, UsageError, echo
from ..store import search as store
from ..store.namespaces import Namespace, check_pin
from ..textutil.analyze import ANALYZER_VERSION, has_cjk, query_analyzer
from ..types import Hit, SearchResult
from ..validate import count
from .access import ACL_COLUMN, anonymous_gate, gate_lanes, gated_page, viewable, withheld_marks
from .cite import cited_hit, clamp01, relevance_scale
from .feedback import rescore, second_round
from .filters import Filter
from .fuse import fuse, merge_by_rank
from .lanes import (
    LaneHit,
    correct_terms,
    dense_lane,
    effective_ef_search,
    jobs,
    lexical_lane,
    submit,
    viewable_term,
    vocabulary_df,
)
from .prf import lane_agreement
from .route import route
from .shape import Distinct, shape

log = logging.getLogger(__name__)

__all__ = ["SearchOptions", "SearchPlan", "run_grouped", "run_search"]

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
        if self.dense_weight is not None:
            check_option("dense_weight", self.dense_weight)
        # the names too, here and not where they are used: a query with nothing searchable (no_match)
        # or one lane (no fusion) uses neither, and an unknown one passed without a word
        for what, value, names in (("fusion", self.fusion, FUSIONS), ("prf", self.prf, PRF_MODES)):
            if value is not None and value not in names:
                raise UsageError(f"unknown {what} {echo(value)}", hint=f"use one of: {', '.join(names)}")


MAX_EF_SEARCH = 1000  # pgvector's hnsw.ef_search range is 1..1000; PostgreSQL drops a value outside it
_RANGES = (
    ("k", "-k", 1, MAX_EF_SEARCH),
    ("per_doc", "--per-doc", 0, None),
    ("candidates", "--candidates", 1, MAX_EF_SEARCH),
    ("ef_search", "--ef-search", 1, MAX_EF_SEARCH),
    ("exact_threshold", None, 0, None),
    ("rrf_k", None, 1, None),  # 1/(k + rank); 0 used to mean "the profile's" (``opts.rrf_k or s.rrf_k``)
)


def check_option(what: str, value: Any, flag: str | None = None) -> None:
    """``value`` checked as the search option ``what`` is (``SearchOptions``), a ``UsageError``
    naming ``flag`` when it would be refused: ``kbctl eval sweep`` reads its grid this way before
    its first search."""
    for name, own_flag, lo, hi in _RANGES:
        if name == what:
            count(what, value, lo, hi, flag=flag or own_flag)
    if what == "dense_weight":
        label = f"dense_weight ({flag})" if flag else "dense_weight"
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise UsageError(f"{label} must be a number in 0..1, got {value!r}", hint=f"give {flag or what} 0..1")


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

    ``gate`` (``kbctl.acl.Gate``) withholds the hits its principal may not view from the lanes,
    before fusion, and again from the page (``kbctl.search.access``); without one the search is
    anonymous in ``public`` namespaces. How many were withheld is reported for queries without
    filters only (``_noted``): with one, the count would tell whether a withheld document's
    metadata matches it.

    ``side(purpose)``, when given, returns another connection reserved for ``purpose`` ("dense",
    "lexical"). Hybrid queries then run the dense lane (query embedding and HNSW scan) on the
    "dense" one in a worker thread while the lexical lane runs on ``conn``, and a lexical lane with
    many postings scores half of the chunks on the "lexical" one: the model and two PostgreSQL
    backends work at once. Without it, only the query embedding overlaps the lexical lane.

    Traced as ``kbctl.search`` (``kbctl.telemetry``, docs/telemetry.md), its steps as children.
    """
    return _traced(
        query, namespaces, profile.name, opts.k or profile.search.k, opts,
        lambda: _routed(conn, namespaces, profile, query, opts, side, gate),
    )  # fmt: skip


def _traced(
    query: str, namespaces, profile: str | list[str], k: int, opts: SearchOptions, answer: Callable[[], SearchResult]
) -> SearchResult:
    """``answer()`` traced as ``kbctl.search`` (``run_search``, ``run_grouped``), its steps as children."""
    attrs = {
        "kbctl.namespaces": [n.name for n in namespaces],
        "kbctl.profile": profile,
        "kbctl.mode": opts.mode,
        "kbctl.k": k,
        "kbctl.filters": len(opts.filters),
        **telemetry.query_attributes(query),
    }
    # ``jobs``: the lanes' worker-thread jobs on the side connections end before the search returns
    # or raises, so the next search on this session (a retry, a server's next request) finds them free.
    with telemetry.span("kbctl.search", attrs, root=True) as span, jobs():
        result = answer()
        span.set_attributes(
            {
                "kbctl.strategy": result.strategy,
                "kbctl.lanes": result.mode,
                "kbctl.hits": len(result.hits),
                "kbctl.withheld": result.withheld,
                "kbctl.degraded": result.degraded,
            }
        )
    return result


def _routed(
    conn,
    namespaces,
    profile: Profile,
    query: str,
    opts: SearchOptions,
    side,
    gate,
    routed: str | None = None,
    places: dict[bytes, int] | None = None,
) -> SearchResult:
    """``run_search`` without its span: route the query (unless ``routed`` gives its strategy: one
    group of a search over several profiles, ``run_grouped``), then answer it by its strategy.
    ``places`` gets each withheld hit's mark and place in the page (``_ranked``; ``run_grouped``)."""
    if opts.mode not in MODES:
        raise UsageError(f"unknown mode {echo(opts.mode)}", hint=f"use one of: {', '.join(MODES)}")
    if len({ns.fingerprint for ns in namespaces}) > 1:
        from ..errors import ProfileMismatchError

        pins = " and ".join(f"{ns.name!r} ({ns.profile_name})" for ns in namespaces)
        raise ProfileMismatchError(
            f"namespaces {pins} are pinned to different profiles; a search with one profile ranks them"
            " with one query vector and one analyzer",
            hint="leave out the profile: namespaces of different profiles are then searched apart, each with"
            " its own, and merged by rank",
        )
    for ns in namespaces:
        check_pin(ns, profile, conn)
    k = opts.k or profile.search.k
    # each namespace's postings were made by its recorded analyzer version: the query's terms are
    # that version's (the union of them over namespaces made before and after a version change)
    analyzer = query_analyzer(profile.lexical.language, {ns.analyzer for ns in namespaces})
    strategy = routed or route(query, bool(opts.filters), analyzer)
    names = tuple(n.name for n in namespaces)
    unranked = _unranked(query, names, strategy, opts)
    if unranked is not None:
        return unranked
    gate = gate or anonymous_gate([n.id for n in namespaces])
    if strategy == "metadata":
        return _noted(_metadata(conn, namespaces, query, opts.filters, k, names, gate), gate, namespaces, True)
    if strategy == "needs_clarification":
        strategy = "hybrid" if opts.filters else "content"
    mode = "hybrid" if opts.mode == "auto" else opts.mode
    plan = SearchPlan(tuple(namespaces), profile, query, opts, mode, strategy, k, analyzer, names, gate, side)
    first = plan
    result = _ranked(conn, plan, places)
    depth = max(opts.candidates or profile.search.candidates, k)
    while result.details.get("saturated") and len(result.hits) < k and depth < MAX_EF_SEARCH:
        # Withheld hits left the page short and the lanes were full: ask them for more candidates.
        depth = min(depth * 4, MAX_EF_SEARCH)
        plan = dataclasses.replace(plan, opts=dataclasses.replace(plan.opts, candidates=depth))
        result = _ranked(conn, plan, places)
    if opts.filters and plan is not first:
        result = dataclasses.replace(result, details=_as_asked(result.details, first))
    if mode != "dense" and has_cjk(query):
        result = dataclasses.replace(result, notes=(*result.notes, *_older_analyzer(namespaces)))
    return _noted(result, gate, namespaces, bool(opts.filters))


def _unranked(query: str, names: tuple[str, ...], strategy: str, opts: SearchOptions) -> SearchResult | None:
    """The answer of a query routed to nothing to rank (nothing searchable; too vague, in mode
    auto), else None: ``_routed``'s and ``_grouped``'s alike."""
    if strategy == "no_match":
        return SearchResult(query, names, "none", strategy, (), notes=("nothing searchable in the query",))
    if strategy == "needs_clarification" and opts.mode == "auto":
        return SearchResult(
            query, names, "none", strategy, (), notes=("the query is too vague to search; ask what it is about",)
        )
    return None


#: RRF's constant in the merge of a search over namespaces of several profiles (``run_grouped``).
GROUPS_RRF_K = 60


def run_grouped(
    conn,
    groups: Sequence[tuple[Sequence[Namespace], Profile]],
    query: str,
    opts: SearchOptions,
    side: Callable[[str], Any] | None = None,
    gate: Gate | None = None,
) -> SearchResult:
    """Answer one query over namespaces pinned to several profiles: ``groups`` holds each profile's
    namespaces (in the order first given) and the profile that searches them.

    A search ranks with one profile (one query vector, one analyzer), and two models' vectors or
    scores are never compared: each group is searched as ``run_search`` searches it, with its own
    profile, its first ``k`` hits; the groups' ranked hits are then merged by reciprocal rank fusion
    over their ranks (``fuse.merge_by_rank``, rrf_k 60) and the first ``k`` kept that are not
    near-duplicates of a better-ranked one (a group's page's rule, across groups). A hit's ``score``
    is that fused score and its ``relevance`` the score over the best one (rank 1: ``1 / 61``), as
    for a fused search. Its ``lanes["group"]`` holds its rank in its group as the merge counts it
    (in documents), its score in the merge (``1 / (60 + rank)``) and its own score in its group
    (``fused``; what made it is the group's ``scored_by``). ``k`` is the
    query's, else the first group's profile's. The query is routed once, by the first group's
    analyzer (the first namespace given): every group takes that strategy, and a note says so when
    another group's analyzer routes it otherwise. A query answered without ranking (nothing
    searchable, too vague, filters only) is answered as ``run_search`` answers it: the metadata
    strategy reads no vector, so it reads all the namespaces at once.

    The result notes ``namespaces of N profiles searched apart, merged by rank``; ``details["groups"]``
    has each group's profile, namespaces, strategy, hits, what scored them, withheld count and its own details
    (``generations`` of all of them at the top, as ``run_search`` puts them). The withheld count is
    of the hits each group withheld that rank above the merged page's last hit (``_counted``; the
    namespaces are disjoint, so the groups' add up). Traced as ``kbctl.search``, each group's steps
    as its children.
    """
    namespaces = [ns for nss, _ in groups for ns in nss]
    return _traced(
        query, namespaces, [prof.name for _, prof in groups], opts.k or groups[0][1].search.k, opts,
        lambda: _grouped(conn, groups, namespaces, query, opts, side, gate),
    )  # fmt: skip


def _grouped(conn, groups, namespaces, query: str, opts: SearchOptions, side, gate) -> SearchResult:
    """``run_grouped`` without its span."""
    if opts.mode not in MODES:
        raise UsageError(f"unknown mode {echo(opts.mode)}", hint=f"use one of: {', '.join(MODES)}")
    for nss, prof in groups:
        for ns in nss:
            check_pin(ns, prof, conn)
    k = opts.k or groups[0][1].search.k
    names = tuple(n.name for n in namespaces)
    routes = [
        route(query, bool(opts.filters), query_analyzer(prof.lexical.language, {ns.analyzer for ns in nss}))
        for nss, prof in groups
    ]
    strategy = routes[0]
    unranked = _unranked(query, names, strategy, opts)  # no query vector, no analyzer's ranking
    if unranked is not None:
        return unranked
    gate = gate or anonymous_gate([n.id for n in namespaces])
    if strategy == "metadata":  # filters only: one stable order over all the namespaces
        return _noted(_metadata(conn, namespaces, query, opts.filters, k, names, gate), gate, namespaces, True)
    notes = [f"namespaces of {len(groups)} profiles searched apart, merged by rank"]
    if len(set(routes)) > 1:
        notes.append(
            f"the query routes to {strategy} by the first namespace's profile ({groups[0][1].name}) and"
            f" otherwise by another's ({', '.join(sorted(set(routes) - {strategy}))}): every group took {strategy}"
        )
    places: list[dict[bytes, int]] = [{} for _ in groups]
    results = [
        _routed(conn, nss, prof, query, dataclasses.replace(opts, k=k), side, gate, routed=strategy, places=p)
        for (nss, prof), p in zip(groups, places)
    ]
    page = _merged_page(results, k, groups[0][1].search.dedupe_threshold)
    hits = tuple(
        dataclasses.replace(
            h,
            rank=i + 1,
            score=round(score, 6),
            relevance=clamp01(score / (1.0 / (GROUPS_RRF_K + 1))),
            lanes={**h.lanes, "group": {"rank": rank, "score": round(score, 6), "fused": h.score}},
        )
        for i, (g, pos, rank, score) in enumerate(page)
        for h in (results[g].hits[pos],)
    )
    counted = _counted(results, places, page, k)
    withheld = sum(len(c) for c in counted)
    for r in results:
        own = f"withheld {r.withheld} hit(s) this principal may not view"
        notes.extend(n for n in r.notes if n not in notes and n != own)
    if withheld:
        notes.append(f"withheld {withheld} hit(s) this principal may not view")
    details: dict[str, Any] = {
        "groups": [
            {
                "profile": prof.name,
                "fingerprint": prof.fingerprint,
                "model": prof.model,
                "dimension": prof.dimension,
                "namespaces": [ns.name for ns in nss],
                "mode": r.mode,
                "strategy": r.strategy,
                "hits": len(r.hits),
                "scored_by": _scored_by(r, prof, opts),
                "withheld": len(c),
                "details": {a: b for a, b in r.details.items() if a != "generations"},
            }
            for (nss, prof), r, c in zip(groups, results, counted)
        ],
        "merge": {"method": "rrf", "rrf_k": GROUPS_RRF_K, "over": "rank in each group"},
        "generations": {n.name: n.generation_id for n in namespaces},
    }
    modes = list(dict.fromkeys(r.mode for r in results))
    return SearchResult(
        query, names, modes[0] if len(modes) == 1 else "+".join(modes), results[0].strategy, hits,
        degraded=any(r.degraded for r in results), notes=tuple(notes), details=details, withheld=withheld,
        withheld_marks=frozenset[bytes]().union(*counted),
    )  # fmt: skip


def _merged_page(results: Sequence[SearchResult], k: int, dedupe: float) -> list[tuple[int, int, int, float]]:
    """The groups' hits merged by rank (``merge_by_rank``: (group, position, rank in documents,
    score)), the first ``k`` of them that are not near-duplicates of a better-ranked one: the rule a
    group's page applies to its own hits (``shape.Distinct``, the first group's ``dedupe_threshold``),
    so the same passage in namespaces of two profiles shows once."""
    merged = merge_by_rank([[(h.namespace, h.doc_id) for h in r.hits] for r in results], GROUPS_RRF_K)
    distinct = Distinct(dedupe)
    page: list[tuple[int, int, int, float]] = []
    for g, pos, rank, score in merged:
        if len(page) >= k:
            break
        if distinct.keep(results[g].hits[pos].text):
            page.append((g, pos, rank, score))
    return page


def _counted(
    results: Sequence[SearchResult], places: Sequence[Mapping[bytes, int]], page, k: int
) -> list[frozenset[bytes]]:
    """Each group's withheld hits that rank above the last hit of the merged page (all of them when
    the page is not full, as a search's page counts them). A group's own count is of those ahead of
    its own last hit, which the merge may cut away; so a withheld hit is placed in the merge where
    its group ranks it (``places``: below that many of its group's hits), and counted when it ranks
    above a hit of its group that the page shows, or when, as a document of its own at that place
    (``merge_by_rank``'s rank and score, ties by position, then group), it lands above the page's
    last hit. The marks of those counted; none for a filtered query (``_noted`` kept none)."""
    own = [{m: a for m, a in p.items() if m in r.withheld_marks} for r, p in zip(results, places)]
    if len(page) < k:
        return [frozenset(o) for o in own]
    last_g, last_pos, _, last_score = page[-1]
    shown: dict[int, int] = {}  # each group's last position on the page
    for g, pos, _, _ in page:
        shown[g] = max(shown.get(g, pos), pos)
    out = []
    for g, (r, marks) in enumerate(zip(results, own)):
        docs = [(h.namespace, h.doc_id) for h in r.hits]
        kept = set()
        for mark, above in marks.items():
            score = 1.0 / (GROUPS_RRF_K + len(set(docs[:above])) + 1)
            if above <= shown.get(g, -1) or (-score, above, g) < (-last_score, last_pos, last_g):
                kept.add(mark)
        out.append(frozenset(kept))
    return out


def _scored_by(r: SearchResult, profile: Profile, opts: SearchOptions) -> str:
    """What made a group's own scores (its hits' ``lanes["group"]["fused"]``): its fusion (``convex``:
    min-max normalised within the group, 1.0 and 0.0 at its ends; ``rrf``), its one lane
    (``dense``, ``lexical``) or ``rerank``. No group's is comparable with another's."""
    if r.details.get("reranked"):
        return "rerank"
    if r.mode == "hybrid" and not r.degraded:
        return opts.fusion or profile.search.fusion
    return "lexical" if r.degraded else r.mode


def _older_analyzer(namespaces) -> list[str]:
    """A note per namespace whose postings an older analyzer made, for a query with CJK characters:
    the lexical lane matches their Chinese, Japanese and Korean as whole runs only, until rebuilt."""
    return [
        f"namespace {ns.name!r} was indexed with lexical analyzer {ns.analyzer}: a word inside a Chinese,"
        f" Japanese or Korean sentence is not found by the lexical lane; to rebuild it, ingest its sources"
        f" into a new namespace (kbctl ingest PATH -n NEW: vectors come from the embed cache), then delete"
        f" this one (docs/lifecycle.md#lexical-analyzer-versions)"
        for ns in namespaces
        if ns.analyzer < ANALYZER_VERSION
    ]


def _as_asked(details: Mapping[str, Any], plan: SearchPlan) -> dict:
    """A deeper round's ``details`` with its depth-dependent figures (``ef_search``, the feedback
    round's ``candidates``) as the depth ``plan`` (the first round) asked the lanes for gives them.

    The deeper rounds run because withheld hits filled a lane: their depth would tell a filtered
    query that many withheld chunks match its filter (``title~Z`` against ``title~Zo``), the oracle
    the withheld count of a filtered query is kept at 0 for (``_noted``)."""
    depth = _lane_depth(plan)
    out = dict(details)
    if "ef_search" in out:
        out["ef_search"] = effective_ef_search(plan.profile, plan.opts.ef_search, depth)
    if isinstance(out.get("prf"), dict) and "candidates" in out["prf"]:
        out["prf"] = {**out["prf"], "candidates": min(out["prf"]["candidates"], depth)}
    return out


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


def _noted(result: SearchResult, gate: Gate, namespaces, filtered: bool) -> SearchResult:
    """``result`` with the access gate's notes: how many hits were withheld (a count only), and why
    documents without an ACL are hidden in a ``deny`` namespace.

    A ``filtered`` query reports no withheld count (0): a filter is on metadata (title, path,
    author, dates…), and a count that moved with it would let a principal read a withheld
    document's metadata one probe at a time (``title~A``, ``title~Ab``…). The count of a content
    query without filters only says that something they may not view matches their words.
    """
    notes = list(result.notes)
    why = gate.deny_note({n.id: n.name for n in namespaces})
    if why:
        notes.append(why)
    withheld = 0 if filtered else result.withheld
    if withheld:
        notes.append(f"withheld {withheld} hit(s) this principal may not view")
    details = {a: b for a, b in result.details.items() if a != "saturated"}
    marks = frozenset() if filtered else result.withheld_marks
    return dataclasses.replace(result, notes=tuple(notes), details=details, withheld=withheld, withheld_marks=marks)


@dataclass
class _Lanes:
    """What the lanes of one search found so far, and what it noted on the way (``_ranked``)."""

    depth: int
    lanes: dict[str, list[LaneHit]] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    details: dict = dataclasses.field(default_factory=dict)
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    terms: dict[str, float] = dataclasses.field(default_factory=dict)
    lexical_info: dict[str, Any] = dataclasses.field(default_factory=dict)
    qvec: Any = None
    degraded: bool = False
    raw: dict[str, list[LaneHit]] = dataclasses.field(default_factory=dict)  # the lanes before the gate
    hidden: set = dataclasses.field(default_factory=set)  # the keys the gate withheld from them


def _lane_depth(plan: SearchPlan) -> int:
    """How many candidates each lane of ``plan`` reads: a search with feedback reads deeper lanes in
    both rounds (prf_candidates; docs/retrieval-quality.md)."""
    s, opts = plan.profile.search, plan.opts
    deep = (opts.prf or s.prf) == "hybrid" and plan.mode == "hybrid"
    return max(opts.candidates or (s.prf_candidates if deep else s.candidates), plan.k)


def _ranked(conn, plan: SearchPlan, places: dict[bytes, int] | None = None) -> SearchResult:
    """Run the plan's lanes, fuse them (with a feedback round), then page, gate and cite the hits.
    ``places``, when given, gets each withheld hit's mark and place (``_page``): ``run_grouped``'s."""
    profile, opts, mode, s = plan.profile, plan.opts, plan.mode, plan.profile.search
    prf = opts.prf or s.prf
    if prf not in PRF_MODES:
        raise UsageError(f"unknown prf {echo(prf)}", hint=f"use one of: {', '.join(PRF_MODES)}")
    feedback = prf in ("hybrid", "rescore") and mode == "hybrid"
    run = _Lanes(depth=_lane_depth(plan))
    if opts.prf in ("hybrid", "rescore") and mode != "hybrid":  # asked for, not the profile's default
        run.notes.append(f"--prf {opts.prf} applies to hybrid searches only; this {mode} search took no feedback")
    if opts.fusion is not None and mode != "hybrid":  # one lane: nothing to fuse
        run.notes.append(f"--fusion {opts.fusion} applies to hybrid searches only; this {mode} search fused nothing")
    if opts.ef_search is not None and mode == "lexical":
        run.notes.append("--ef-search applies to the dense lane; this lexical search took none")
    # In hybrid mode the dense lane starts on a worker thread (the model releases the GIL; the
    # HNSW scan runs on the side connection) while the lexical lane runs here.
    pending = (
        submit(telemetry.bound(_dense_job), plan.side, plan.namespaces, profile, plan.query, run.depth, opts)
        if mode == "hybrid"
        else None
    )
    if mode in ("lexical", "hybrid"):
        _lexical(conn, plan, run)
    if mode in ("dense", "hybrid"):
        _dense(conn, plan, run, pending)
    fusion: dict[str, Any] = {
        "method": opts.fusion or s.fusion,
        "rrf_k": opts.rrf_k or s.rrf_k,
        "dense_weight": opts.dense_weight if opts.dense_weight is not None else s.dense_weight,
    }
    # The gate decides first: fusion, feedback, shaping, reranking and paging see viewable hits only.
    run.raw = run.lanes
    _gated(conn, plan, run)
    feedback = feedback and not run.degraded and run.qvec is not None and bool(run.terms)
    if feedback and prf == "rescore":
        agreement = lane_agreement(run.lanes)
        if not s.prf_min_agreement <= agreement <= s.prf_max_agreement:
            # The lanes disagree on the first round (feedback from it is likely to drift), or agree so
            # far that it is likely good already (feedback can only move it): the first round, fused
            # as without feedback, is the answer (the rule and its measurement:
            # docs/retrieval-quality.md). The decision shows in --explain's details.
            feedback = False
            run.details["prf"] = {
                "applied": False,
                "agreement": agreement,
                "min_agreement": s.prf_min_agreement,
                "max_agreement": s.prf_max_agreement,
            }
        elif opts.dense_weight is None:
            # Rescoring fuses with its own dense weight, the feedback documents' selection included.
            fusion = {**fusion, "dense_weight": s.prf_dense_weight}
    fused = _fused(run, fusion)
    if feedback and fused:
        t0 = time.perf_counter()
        with telemetry.span("kbctl.search.feedback", {"kbctl.candidates": run.depth}) as span:
            if prf == "rescore":
                # The rescored lanes hold only the gated first round's candidates: nothing to withhold
                # again. The raw first round and what the gate withheld from it stay, for the count
                # of withheld hits and the saturation check (``_page``). Their fusion is part of this
                # step (no span of its own).
                run.lanes, run.details["prf"] = rescore(
                    conn, plan.namespaces, profile, run.terms, run.qvec, run.lanes, fused[: run.depth],
                    run.lexical_info, plan.side,
                )  # fmt: skip
                run.details["prf"]["agreement"] = agreement
                fused = fuse(run.lanes, **fusion)
            else:
                depth, namespaces = run.depth, plan.namespaces
                run.raw, run.details["prf"] = second_round(
                    conn, namespaces, profile, run.terms, run.qvec, run.lanes, fused[: depth], depth, opts.filters,
                    lambda c, vec: _dense_scan(c, namespaces, vec, depth, opts, profile)[0], plan.side,
                )  # fmt: skip
            info = run.details["prf"]
            span.set_attributes({"kbctl.docs": info["docs"], "kbctl.terms.added": len(info["terms"])})
        if prf == "hybrid":
            _gated(conn, plan, run)
            fused = _fused(run, fusion)
        run.timings["prf_ms"] = (time.perf_counter() - t0) * 1000
    hits, withheld = _page(conn, plan, run, fused, fusion)
    details = run.details
    details["timings_ms"] = {a: round(b, 2) for a, b in run.timings.items()}
    # Which generation answered (each namespace's, read once when the search began): a swap while
    # the search ran does not change it (docs/lifecycle.md).
    details["generations"] = {n.name: n.generation_id for n in plan.namespaces}
    if places is not None:
        places.clear()
        places.update((mark, place) for key, place in withheld.items() for mark in withheld_marks([key]))
    return SearchResult(
        plan.query, plan.names, mode, plan.strategy, hits, degraded=run.degraded, notes=tuple(run.notes),
        details=details, withheld=len(withheld), withheld_marks=withheld_marks(withheld),
    )  # fmt: skip


def _gated(conn, plan: SearchPlan, run: _Lanes) -> None:
    """The access gate on the raw lanes (``gate_lanes``): ``run.lanes`` and ``run.hidden``."""
    attrs = {"kbctl.candidates": sum(len(v) for v in run.raw.values()), "kbctl.unrestricted": plan.gate.unrestricted}
    with telemetry.span("kbctl.search.gate", attrs) as span:
        run.lanes, run.hidden = gate_lanes(plan.gate, run.raw, lambda keys: store.chunk_acls(conn, keys))
        span.set_attribute("kbctl.withheld", len(run.hidden))


def _fused(run: _Lanes, fusion: dict[str, Any]) -> list:
    """``fuse`` of the gated lanes, traced."""
    attrs = {"kbctl.fusion": fusion["method"], "kbctl.candidates": sum(len(v) for v in run.lanes.values())}
    with telemetry.span("kbctl.search.fuse", attrs) as span:
        fused = fuse(run.lanes, **fusion)
        span.set_attribute("kbctl.fused", len(fused))
    return fused


def _lexical(conn, plan: SearchPlan, run: _Lanes) -> None:
    """The lexical lane (its query terms spell-corrected against the namespaces' vocabulary)."""
    with telemetry.span("kbctl.search.lane.lexical", {"kbctl.candidates": run.depth}) as span:
        _lexical_lane(conn, plan, run)
        info = run.lexical_info
        attrs = {
            "kbctl.hits": len(run.lanes["lexical"]),
            "kbctl.terms": len(run.terms),
            "kbctl.corrected": len(run.details.get("corrections", {})),
        }
        attrs["kbctl.postings"] = info.get("postings", 0)
        if "packed" in info:
            attrs["kbctl.postings_read"] = info["packed"].get("postings", 0)
            attrs["kbctl.postings_scored"] = info["packed"].get("scored", 0)
        span.set_attributes(attrs)


def _lexical_lane(conn, plan: SearchPlan, run: _Lanes) -> None:
    t0 = time.perf_counter()
    ns_ids = [n.id for n in plan.namespaces]
    run.terms, corrections = _query_terms(
        conn, ns_ids, plan.query, plan.analyzer, plan.profile, plan.opts.correct, plan.gate
    )
    if corrections:
        run.details["corrections"] = corrections
        run.notes.append(_corrected_note(corrections))
    side = plan.side
    helper = None if side is None else (lambda fn: submit(lambda: fn(side("lexical"))))
    run.lanes["lexical"] = lexical_lane(
        conn, plan.namespaces, run.terms, run.depth, plan.opts.filters, plan.profile, helper=helper,
        info=run.lexical_info,
    )  # fmt: skip
    run.timings["lexical_ms"] = (time.perf_counter() - t0) * 1000


#: How many corrections the note names (``details.corrections`` holds them all): a long query of
#: misspelled words would make a note of kilobytes.
_NOTED_CORRECTIONS = 10


def _corrected_note(corrections: dict[str, str]) -> str:
    shown = ", ".join(f"{a} → {b}" for a, b in list(corrections.items())[:_NOTED_CORRECTIONS])
    more = len(corrections) - _NOTED_CORRECTIONS
    return f"corrected: {shown}" + (f" and {more} more (details.corrections)" if more > 0 else "")


def _dense(conn, plan: SearchPlan, run: _Lanes, pending) -> None:
    """The dense lane (started on a worker thread when ``pending``); when the query cannot be
    embedded, a hybrid or auto search is answered by the lexical lane alone (``degraded``)."""
    t0 = time.perf_counter()
    # Traced where it runs: on the worker (``_dense_job``), or here when nothing is pending.
    lane = (
        telemetry.span("kbctl.search.lane.dense", {"kbctl.candidates": run.depth})
        if pending is None
        else contextlib.nullcontext(telemetry.OFF)
    )
    with lane as span:
        _dense_lane(conn, plan, run, pending, t0, span)


def _dense_lane(conn, plan: SearchPlan, run: _Lanes, pending, t0: float, span) -> None:
    dense = None
    opts, profile = plan.opts, plan.profile
    try:
        if pending is not None:
            run.qvec, dense, t0 = pending.result()
        else:
            run.qvec = _embed_query(profile, plan.query, span)
    except KbctlError as e:
        if plan.mode == "dense" and opts.mode == "dense":
            raise
        run.degraded = True
        run.notes.append(f"dense lane unavailable ({e.message}); answered from the lexical lane")
        run.qvec = None
        if "lexical" not in run.lanes:
            ns_ids = [n.id for n in plan.namespaces]
            run.terms, _ = _query_terms(conn, ns_ids, plan.query, plan.analyzer, profile, opts.correct, plan.gate)
            run.lanes["lexical"] = lexical_lane(conn, plan.namespaces, run.terms, run.depth, opts.filters, profile)
    if run.qvec is not None and dense is None:
        dense = _dense_scan(conn, plan.namespaces, run.qvec, run.depth, opts, profile)
        _dense_attributes(span, dense, profile, opts, run.depth)
    if dense is not None:
        run.lanes["dense"], run.details["dense_path"] = dense
        if run.details["dense_path"] != "exact":
            run.details["ef_search"] = effective_ef_search(profile, opts.ef_search, run.depth)
        run.timings["dense_ms"] = (time.perf_counter() - t0) * 1000


def _page(
    conn, plan: SearchPlan, run: _Lanes, fused, fusion: dict[str, Any]
) -> tuple[tuple[Hit, ...], dict[tuple[int, int], int]]:
    """The first ``k`` fused hits the principal may view (shaped, reranked), as cited ``Hit``s; and
    the keys of those withheld (counted and marked only, never shown: ``_ranked``), each with its
    place: how many of the hits shown rank above it."""
    profile, opts, k, s = plan.profile, plan.opts, plan.k, plan.profile.search
    per_doc = opts.per_doc if opts.per_doc is not None else s.per_doc
    rows = _fetch(conn, [key for key, _ in fused[: max(run.depth, k)]])
    use_rerank = opts.rerank if opts.rerank is not None else bool(profile.rerank.kind)
    limit = max(k, profile.rerank.top_n) if use_rerank else k
    ordered, reranked, withheld = gated_page(
        plan.gate,
        fused,
        rows,
        k,
        limit,
        shape=lambda window: shape(fused, rows, per_doc, s.dedupe_threshold, window),
        rerank=lambda page: _maybe_rerank(profile, plan.query, page, rows, opts, run.notes),
        fetch=lambda keys: _fetch(conn, keys),
    )
    if run.hidden and not opts.filters:  # a filtered query reports no count (_noted): not worth a read
        shown = [key for key, _ in ordered[:k]]
        withheld |= _withheld_ahead(conn, run.raw, run.hidden, fusion, shown, k, rows, per_doc, s.dedupe_threshold)
    run.details["saturated"] = bool(run.hidden or withheld) and any(len(v) >= run.depth for v in run.raw.values())
    if reranked:
        run.details["reranked"] = True
    scale = relevance_scale(run.lanes, fusion, profile.distance, run.lexical_info.get("bound"), reranked)
    by_key = {name: {(h.namespace_id, h.chunk_id): h for h in hs} for name, hs in run.lanes.items()}
    hits = tuple(cited_hit(i + 1, score, rows[key], by_key, key, scale) for i, (key, score) in enumerate(ordered[:k]))
    return hits, withheld


def _withheld_ahead(
    conn, raw, hidden: set, fusion: dict, shown: list, k: int, rows, per_doc: int, dedupe: float
) -> dict[tuple[int, int], int]:
    """The withheld hits the page would have held: in the fusion of the ungated ``raw`` lanes,
    shaped as a page is (per-document limit, near-duplicates), the withheld ones ranked above the
    last hit shown (all of them when the page is not full), each with how many hits shown rank
    above it there (its place, for the merge of several profiles' pages: ``_counted``). Counted
    and marked only, never shown."""
    order = fuse(raw, **fusion)
    if len(shown) >= k:  # shaping only drops hits: nothing after the last one shown can count
        pos = {key: i for i, (key, _) in enumerate(order)}
        order = order[: max((pos[key] for key in shown if key in pos), default=len(order) - 1) + 1]
    missing = [key for key, _ in order if key not in rows]
    every = {**rows, **_fetch(conn, missing)} if missing else rows
    keys = [key for key, _ in shape(order, every, per_doc, dedupe)]
    if len(shown) >= k:
        place = {key: i for i, key in enumerate(keys)}
        keys = keys[: max((place[key] for key in shown if key in place), default=len(keys))]
    out, above, on_page = {}, 0, set(shown)
    for key in keys:
        if key in hidden:
            out[key] = above
        above += key in on_page
    return out


def _query_terms(
    conn, ns_ids, query, analyzer, profile, correct: bool, gate: Gate
) -> tuple[dict[str, float], dict[str, str]]:
    """The query's terms (term → count), misspelled ones corrected to terms of documents ``gate``
    lets through (``lanes.viewable_term``), and the corrections made."""
    terms: dict[str, float] = {}
    for t in analyzer.terms(query):
        terms[t] = terms.get(t, 0.0) + 1.0
    if not correct or not terms:
        return terms, {}
    df = vocabulary_df(conn, ns_ids, list(terms))
    # Over namespaces of several analyzer versions a CJK run is one version's term and its bigrams
    # the other's: absent from one vocabulary, it is not a misspelling of its own bigram.
    mixed = len(analyzer.versions) > 1
    missing = [t for t in terms if t not in df and not (mixed and has_cjk(t))]
    fixes = correct_terms(conn, ns_ids, missing, profile.lexical.max_edit_distance, viewable_term(conn, ns_ids, gate))
    for bad, good in fixes.items():
        terms[good] = terms.get(good, 0.0) + terms.pop(bad)
    return terms, fixes


def _dense_job(side, namespaces, profile: Profile, query: str, depth: int, opts: SearchOptions):
    """The dense lane for a worker thread: (query vector, (hits, path) or None, start time).

    Without a side connection only the embedding runs here; the caller scans on its connection.
    """
    t0 = time.perf_counter()
    with telemetry.span("kbctl.search.lane.dense", {"kbctl.candidates": depth}) as span:
        qvec = _embed_query(profile, query, span)
        if side is None:
            return qvec, None, t0
        dense = _dense_scan(side("dense"), namespaces, qvec, depth, opts, profile)
        _dense_attributes(span, dense, profile, opts, depth)
    return qvec, dense, t0


def _dense_attributes(span, dense: tuple[list[LaneHit], str], profile: Profile, opts: SearchOptions, depth: int):
    hits, path = dense
    attrs: dict[str, Any] = {"kbctl.hits": len(hits), "kbctl.path": path}
    if path != "exact":
        attrs["kbctl.ef_search"] = effective_ef_search(profile, opts.ef_search, depth)
    span.set_attributes(attrs)


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


def _embed_query(profile: Profile, query: str, span=telemetry.OFF):
    """The query's vector; its time and model are attributes of the dense lane's ``span`` (not a
    span of its own: each span costs a search about 0.1 ms, docs/benchmarks.md#tracing-overhead)."""
    from ..embed import get_embedder

    t0 = time.perf_counter()
    # "query": the backend that loads fastest (ONNX, never torch when ONNX agrees), not the one
    # ingest uses for throughput; both agree with fp32 (kbctl.embed.precision).
    vec = get_embedder(profile, purpose="query").embed_query(query)
    if span.is_recording():
        span.set_attributes(
            {"kbctl.embed_ms": round((time.perf_counter() - t0) * 1000, 3), "kbctl.model": profile.model}
        )
    return vec


def _maybe_rerank(profile: Profile, query: str, ordered, rows, opts: SearchOptions, notes: list[str]):
    use = opts.rerank if opts.rerank is not None else bool(profile.rerank.kind)
    if not use or not ordered:
        return ordered, False
    from .rerank import rerank

    before = len(notes)
    texts = {key: rows[key][3] for key, _ in ordered}
    with telemetry.span("kbctl.search.rerank", {"kbctl.candidates": len(ordered)}) as span:
        out = rerank(profile, query, ordered, texts, notes)
        span.set_attribute("kbctl.reranked", len(notes) == before)
    return out, len(notes) == before


def _fetch(conn, keys: list[tuple[int, int]]) -> dict[tuple[int, int], tuple]:
    return store.hit_rows(conn, keys)


def _metadata(conn, namespaces, query, filters: tuple[Filter, ...], k: int, names, gate: Gate) -> SearchResult:
    """Filters only: matching chunks in a stable order, no score, no reranking; gated like the
    ranked strategies, reading four times more matches while withheld ones leave the page short.
    Traced as ``kbctl.search.lane.metadata`` (the matches and their rows) and ``kbctl.search.gate``,
    once per round."""
    want = k
    while True:
        with telemetry.span("kbctl.search.lane.metadata", {"kbctl.candidates": want}) as span:
            keys = store.metadata_keys(conn, [n.id for n in namespaces], filters, want)
            rows = _fetch(conn, keys)
            span.set_attribute("kbctl.hits", len(keys))
        attrs = {"kbctl.candidates": len(keys), "kbctl.unrestricted": gate.unrestricted}
        with telemetry.span("kbctl.search.gate", attrs) as span:
            acls = {key: r[ACL_COLUMN] for key, r in rows.items()}
            kept, withheld = viewable(gate, [(key, None) for key in keys], acls)
            span.set_attribute("kbctl.withheld", withheld)
        if len(kept) >= k or len(keys) < want:
            break
        want *= 4
    kept = kept[:k]
    if len(kept) == k:  # count only what was withheld ahead of the last hit shown
        last = keys.index(kept[-1][0])
        withheld = last + 1 - k
    hits = tuple(cited_hit(i + 1, None, rows[key], {}, key) for i, (key, _) in enumerate(kept))
    return SearchResult(query, names, "metadata", "metadata", hits, withheld=withheld)
