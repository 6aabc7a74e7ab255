"""Run an evaluation: every query of a dataset through a search callable, in each mode.

The runner knows nothing about the database. It is given ``search(query, mode)`` that returns
document ids, best first, each at the rank of its best chunk, and it:

1. times each call with ``time.perf_counter`` (or takes the result's ``latency_ms``, when the
   search function times the user-facing search itself and then searches deeper for the metrics);
2. keeps the first occurrence of each document id and the top ``depth`` of them;
3. scores the list with ``kbctl.evals.metrics`` (trec_eval semantics). The order the search
   returned is authoritative: scores are replaced by ``-rank`` so trec_eval's re-sorting by score
   (ties broken by document id) cannot reorder results whose scores tie.

``report_to_json`` / ``report_from_json`` give the saved form (used as a baseline). Gates, baseline
comparison and JUnit output are in ``kbctl.evals.gates`` (which imports this module).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from kbctl.errors import ConfigError, UsageError

from .datasets import EvalDataset, EvalQuery
from .metrics import aggregate, evaluate, format_p, p_clause, paired_randomization, percentile

log = logging.getLogger(__name__)

__all__ = [
    "SearchFn",
    "ProgressFn",
    "ModeResult",
    "EvalReport",
    "Versus",
    "CURVE_KS",
    "run_eval",
    "metric_names",
    "rank_to_run",
    "report_to_json",
    "report_from_json",
    "SCHEMA",
]

SearchFn = Callable[[EvalQuery, str], Sequence[tuple[str, float]]]
ProgressFn = Callable[[str, int, int], None]  # (mode, queries done, queries in total)

CURVE_KS = (1, 3, 5, 10, 20, 50, 100)
# Passage-level metrics (over chunks, each judged section counted once at its best chunk's rank),
# computed when the dataset judges passages and the search function reports them.
PASSAGE_METRICS = ("ndcg@10", "mrr@10")
PASSAGE_PREFIX = "passage_"
SCHEMA = "kbctl.eval/1"


@dataclass(frozen=True)
class ModeResult:
    """The scores of one search mode over a dataset.

    ``metrics`` holds the means (and ``latency_ms_p50`` / ``latency_ms_p95``); ``per_query`` the
    per-query scores; ``latencies_ms`` is in the dataset's query order; ``recall_curve`` is the
    mean recall at each cut-off of ``CURVE_KS`` up to the search depth.
    """

    mode: str
    metrics: dict[str, float]
    per_query: dict[str, dict[str, float]]
    latencies_ms: list[float]
    num_queries: int
    recall_curve: dict[int, float] = field(default_factory=dict)
    passage_per_query: dict[str, dict[str, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class EvalReport:
    """An evaluation of one dataset in one or more modes; ``queries`` maps query id to its text."""

    dataset: str
    k: int
    modes: tuple[ModeResult, ...]
    settings: dict[str, Any]
    queries: dict[str, str] = field(default_factory=dict)

    def mode(self, name: str) -> ModeResult:
        """The result of mode ``name``."""
        for result in self.modes:
            if result.mode == name:
                return result
        raise UsageError(f"mode {name!r} is not in this report", hint=f"modes: {', '.join(m.mode for m in self.modes)}")

    @property
    def mode_names(self) -> tuple[str, ...]:
        return tuple(m.mode for m in self.modes)

    def versus(self, a: str, b: str, metric: str = "ndcg@10") -> Versus:
        """Mode ``b`` against mode ``a`` on the queries both scored: mean difference of ``metric``,
        the paired randomisation test's p-value, and how many queries each side wins."""
        pa, pb = self.mode(a).per_query, self.mode(b).per_query
        shared = [q for q in pa if q in pb and metric in pa[q] and metric in pb[q]]
        va, vb = [pa[q][metric] for q in shared], [pb[q][metric] for q in shared]
        return Versus(
            a,
            b,
            metric,
            (sum(vb) - sum(va)) / len(shared) if shared else 0.0,
            paired_randomization(va, vb),
            sum(y > x + 1e-9 for x, y in zip(va, vb)),
            sum(y < x - 1e-9 for x, y in zip(va, vb)),
            len(shared),
        )


@dataclass(frozen=True)
class Versus:
    """``EvalReport.versus``: mode ``b`` against mode ``a`` query by query."""

    a: str
    b: str
    metric: str
    delta: float  # mean of b - a
    p_value: float  # paired randomisation test, two-sided
    better: int  # queries where b scores higher
    worse: int
    queries: int

    @property
    def p_text(self) -> str:
        """The p-value as reports print it ("0.47", "< 0.001")."""
        return format_p(self.p_value)

    def __str__(self) -> str:
        return f"{self.delta:+z.4f} ({p_clause(self.p_value)}; {self.better} better, {self.worse} worse)"


def metric_names(k: int = 10) -> list[str]:
    """The metrics every mode gets: nDCG/recall/MRR at 10, recall@100, P@k, MAP (and @k if k≠10)."""
    names = ["ndcg@10", "recall@10", "recall@100", f"p@{k}", "mrr@10", "map"]
    if k != 10:
        names += [f"ndcg@{k}", f"recall@{k}", f"mrr@{k}"]
    return list(dict.fromkeys(names))


def rank_to_run(hits: Sequence[tuple[str, float]], depth: int) -> dict[str, float]:
    """First occurrence of each id, top ``depth``, scored ``-rank`` so the given order is kept."""
    run: dict[str, float] = {}
    for docid, _score in hits:
        docid = str(docid)
        if docid not in run:
            run[docid] = -float(len(run))
            if len(run) >= depth:
                break
    return run


def _search_all(
    dataset: EvalDataset, search: SearchFn, mode: str, depth: int, progress: ProgressFn | None
) -> tuple[dict[str, dict[str, float]], list[float], dict[str, dict[str, float]]]:
    """The document run, the latencies and the passage run (from the hits' ``passages`` attribute:
    passage ids best first, when the search function gives them)."""
    run: dict[str, dict[str, float]] = {}
    passages: dict[str, dict[str, float]] = {}
    latencies: list[float] = []
    total = len(dataset.queries)
    for i, query in enumerate(dataset.queries, start=1):
        start = time.perf_counter()
        hits = search(query, mode)
        elapsed = (time.perf_counter() - start) * 1000.0
        # a search function may time the user-facing search itself (kbctl.api.evals.search_fn)
        timed = getattr(hits, "latency_ms", None)
        latencies.append(float(timed) if timed is not None else elapsed)
        run[query.id] = rank_to_run(hits, depth)
        chunks = getattr(hits, "passages", None)
        if chunks is not None:
            passages[query.id] = rank_to_run([(p, 0.0) for p in chunks], depth)
        if progress is not None:
            progress(mode, i, total)
    return run, latencies, passages


def _score_mode(
    mode: str,
    run,
    latencies: list[float],
    dataset: EvalDataset,
    k: int,
    depth: int,
    passages: Mapping[str, Mapping[str, float]] | None = None,
) -> ModeResult:
    names = metric_names(k)
    per_query = evaluate(run, dataset.qrels, names)
    metrics = aggregate(per_query) if per_query else dict.fromkeys(names, 0.0)
    passage_per_query: dict[str, dict[str, float]] = {}
    if dataset.passage_qrels and passages is not None:
        passage_per_query = evaluate(passages, dataset.passage_qrels, list(PASSAGE_METRICS))
        for name, value in aggregate(passage_per_query).items():
            metrics[PASSAGE_PREFIX + name] = value
    metrics["latency_ms_p50"] = percentile(latencies, 50)
    metrics["latency_ms_p95"] = percentile(latencies, 95)
    ks = sorted({c for c in CURVE_KS if c <= depth} | {k})
    curve_scores = aggregate(evaluate(run, dataset.qrels, [f"recall@{c}" for c in ks]))
    curve = {c: curve_scores.get(f"recall@{c}", 0.0) for c in ks}
    return ModeResult(mode, metrics, per_query, latencies, len(per_query), curve, passage_per_query)


def run_eval(
    dataset: EvalDataset,
    search: SearchFn,
    modes: Sequence[str],
    k: int = 10,
    depth: int = 100,
    limit: int | None = None,
    progress: ProgressFn | None = None,
    settings: Mapping[str, Any] | None = None,
) -> EvalReport:
    """Search every query of ``dataset`` in each of ``modes`` and score the results.

    ``search(query, mode)`` returns ``(docid, score)`` pairs best first; the runner asks for nothing
    else, so the caller decides ``depth`` and namespaces. ``limit`` keeps the first N queries.
    ``settings`` (profile, namespace, model…) are recorded in the report next to k/depth/limit.
    """
    if not modes:
        raise UsageError("no search mode to evaluate")
    if k < 1 or depth < 1:
        raise UsageError("k and depth must be at least 1")
    data = dataset.limited(limit)
    results = []
    for mode in dict.fromkeys(modes):
        run, latencies, passages = _search_all(data, search, mode, depth, progress)
        results.append(_score_mode(mode, run, latencies, data, k, depth, passages))
        log.info("eval %s %s: ndcg@10=%.4f", data.name, mode, results[-1].metrics["ndcg@10"])
    recorded = {
        "dataset": data.name,
        "kind": data.kind,
        "k": k,
        "depth": depth,
        "limit": limit,
        "num_queries": len(data.queries),
        "modes": list(dict.fromkeys(modes)),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **dict(settings or {}),
    }
    return EvalReport(data.name, k, tuple(results), recorded, {q.id: q.text for q in data.queries})


def report_to_json(report: EvalReport) -> dict[str, Any]:
    """The JSON form: settings, query texts, then per mode its metrics, recall curve and per-query scores."""
    modes = {}
    for m in report.modes:
        per_query = {
            qid: {**scores, "latency_ms": round(lat, 3)}
            for (qid, scores), lat in zip(m.per_query.items(), m.latencies_ms)
        }
        modes[m.mode] = {
            "num_queries": m.num_queries,
            "metrics": dict(m.metrics),
            "recall_curve": {str(c): v for c, v in m.recall_curve.items()},
            "per_query": per_query,
        }
        if m.passage_per_query:
            modes[m.mode]["passage_per_query"] = m.passage_per_query
    return {
        "schema": SCHEMA,
        "dataset": report.dataset,
        "k": report.k,
        "settings": dict(report.settings),
        "queries": dict(report.queries),
        "modes": modes,
    }


def report_from_json(data: Mapping[str, Any]) -> EvalReport:
    """Rebuild a report from ``report_to_json`` output (e.g. to render a saved run as HTML)."""
    if not isinstance(data, Mapping) or not isinstance(data.get("modes"), Mapping):
        raise ConfigError("not a kbctl eval report (no 'modes' object)")
    try:
        return _report_from_json(data)
    except (TypeError, ValueError, AttributeError) as e:  # a field of the wrong shape: not one line of ours
        raise ConfigError(f"not a kbctl eval report ({type(e).__name__}: {e})") from None


def _report_from_json(data: Mapping[str, Any]) -> EvalReport:
    results = []
    for name, m in data["modes"].items():
        per_query, latencies = {}, []
        for qid, scores in (m.get("per_query") or {}).items():
            scores = dict(scores)
            latencies.append(float(scores.pop("latency_ms", 0.0)))
            per_query[str(qid)] = {str(metric): float(v) for metric, v in scores.items()}
        curve = {int(c): float(v) for c, v in (m.get("recall_curve") or {}).items()}
        results.append(
            ModeResult(
                name,
                {str(key): float(v) for key, v in dict(m.get("metrics") or {}).items()},
                per_query,
                latencies,
                int(m.get("num_queries", len(per_query))),
                curve,
                {q: dict(v) for q, v in (m.get("passage_per_query") or {}).items()},
            )
        )
    return EvalReport(
        str(data.get("dataset", "")),
        int(data.get("k", 10)),
        tuple(results),
        dict(data.get("settings") or {}),
        dict(data.get("queries") or {}),
    )
