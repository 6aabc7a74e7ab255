"""Retrieval metrics with trec_eval's semantics, in pure Python.

Every function takes one query's ranked list of document ids (best first) and its judgements
(``docid -> grade``). A grade above 0 means relevant; 0 or negative means judged not relevant.
The numbers agree with ``trec_eval`` / ``pytrec_eval`` to floating-point precision (the unit tests
check this on hand-made and random runs):

* ``ndcg_at_k``  is trec_eval's ``ndcg_cut.k``: gain = grade, discount ``log2(rank + 1)``, the ideal
  ranking built from every judged relevant document, negative grades give no gain.
* ``precision_at_k`` is ``P.k``: relevant in the top k divided by k, even if fewer were retrieved.
* ``recall_at_k`` is ``recall.k``; ``average_precision`` is ``map`` over the whole ranked list.
* ``mrr_at_k`` is ``recip_rank`` computed on the list cut at k.

``evaluate`` works on a *run* (``qid -> {docid: score}``) and orders each query's documents the
way trec_eval does: score descending, then document id descending (plain string comparison).

Which queries count follows BEIR: the queries of the qrels are the evaluated set. A query of the
qrels that has no results gets 0 for every metric (trec_eval's ``-c``); a query whose judgements
are all non-relevant is kept and scores 0 (as trec_eval and pytrec_eval do); a query that is only
in the run is ignored.
"""

from __future__ import annotations

import math
import re
from typing import Callable, Mapping, Sequence

from kbctl.errors import UsageError

__all__ = [
    "ndcg_at_k",
    "recall_at_k",
    "precision_at_k",
    "mrr_at_k",
    "average_precision",
    "rank_run",
    "parse_metric",
    "evaluate",
    "aggregate",
    "is_lower_better",
    "percentile",
    "paired_randomization",
    "format_p",
    "p_clause",
    "sign_block",
]

Judgements = Mapping[str, int]

_METRIC_RE = re.compile(r"^(ndcg|recall|p|precision|mrr)@(\d+)$|^(map)$")


def rank_run(scores: Mapping[str, float]) -> list[str]:
    """Order one query's ``docid -> score`` as trec_eval does: score desc, then docid desc."""
    return [d for d, _ in sorted(scores.items(), key=lambda item: (item[1], item[0]), reverse=True)]


def _num_relevant(qrels: Judgements) -> int:
    return sum(1 for grade in qrels.values() if grade > 0)


def ndcg_at_k(ranked: Sequence[str], qrels: Judgements, k: int) -> float:
    """Normalised discounted cumulative gain of the top ``k`` (trec_eval ``ndcg_cut``)."""
    dcg = sum(_gain(qrels, d) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted((g for g in qrels.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def _gain(qrels: Judgements, docid: str) -> float:
    grade = qrels.get(docid, 0)
    return float(grade) if grade > 0 else 0.0


def recall_at_k(ranked: Sequence[str], qrels: Judgements, k: int) -> float:
    """Share of the relevant documents found in the top ``k`` (0 when none is relevant)."""
    num_rel = _num_relevant(qrels)
    if num_rel == 0:
        return 0.0
    return sum(1 for d in ranked[:k] if qrels.get(d, 0) > 0) / num_rel


def precision_at_k(ranked: Sequence[str], qrels: Judgements, k: int) -> float:
    """Relevant documents in the top ``k`` divided by ``k`` (trec_eval ``P.k``)."""
    return sum(1 for d in ranked[:k] if qrels.get(d, 0) > 0) / k


def mrr_at_k(ranked: Sequence[str], qrels: Judgements, k: int) -> float:
    """Reciprocal rank of the first relevant document within the top ``k``, else 0."""
    for i, d in enumerate(ranked[:k]):
        if qrels.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def average_precision(ranked: Sequence[str], qrels: Judgements) -> float:
    """Average precision over the whole ranked list, divided by all relevant (trec_eval ``map``)."""
    num_rel = _num_relevant(qrels)
    if num_rel == 0:
        return 0.0
    hits, total = 0, 0.0
    for i, d in enumerate(ranked):
        if qrels.get(d, 0) > 0:
            hits += 1
            total += hits / (i + 1)
    return total / num_rel


def parse_metric(name: str) -> Callable[[Sequence[str], Judgements], float]:
    """Turn a metric name (``ndcg@10``, ``recall@100``, ``p@10``, ``mrr@10``, ``map``) into a function."""
    m = _METRIC_RE.match(name.strip().lower())
    if not m:
        raise UsageError(
            f"unknown metric {name!r}",
            hint="use ndcg@K, recall@K, p@K, mrr@K or map",
        )
    if m.group(3):
        return average_precision
    kind, k = m.group(1), int(m.group(2))
    if k < 1:
        raise UsageError(f"metric {name!r}: the cut-off must be at least 1")
    fn = {"ndcg": ndcg_at_k, "recall": recall_at_k, "p": precision_at_k, "precision": precision_at_k, "mrr": mrr_at_k}[
        kind
    ]
    return lambda ranked, qrels: fn(ranked, qrels, k)


def is_lower_better(metric: str) -> bool:
    """True for metrics where smaller is better (latencies)."""
    return metric.startswith("latency")


def evaluate(
    run: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Judgements],
    metrics: Sequence[str],
) -> dict[str, dict[str, float]]:
    """Score every query of ``qrels`` on ``metrics``; returns ``qid -> {metric: value}``.

    Metric names are kept as given in the result. See the module docstring for which queries count.
    """
    fns = [(name, parse_metric(name)) for name in metrics]
    out: dict[str, dict[str, float]] = {}
    for qid, judged in qrels.items():
        ranked = rank_run(run.get(qid) or {})
        out[qid] = {name: fn(ranked, judged) for name, fn in fns}
    return out


def aggregate(per_query: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Mean of each metric over the queries (the trec_eval ``all`` line). Empty input gives ``{}``."""
    sums: dict[str, float] = {}
    for scores in per_query.values():
        for name, value in scores.items():
            sums[name] = sums.get(name, 0.0) + value
    n = len(per_query)
    return {name: total / n for name, total in sums.items()} if n else {}


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0–100) with linear interpolation, as numpy's default; 0 if empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


EXACT_QUERIES = 16  # up to this many differing queries the test enumerates every sign pattern


def paired_randomization(a: Sequence[float], b: Sequence[float], *, rounds: int = 20_000, seed: int = 0) -> float:
    """Two-sided p-value of the paired randomisation (sign-flip) test of mean(b − a) = 0.

    ``a`` and ``b`` are one metric's per-query values of two runs on the same queries, in the same
    order. Under the null hypothesis each query's difference is as likely negative as positive, so
    the test counts the sign patterns whose mean difference lies at least as far from 0 as the
    observed one: every pattern when at most ``EXACT_QUERIES`` queries differ, else ``rounds``
    random ones (seeded, so a report is reproducible), counted as (hits + 1) / (rounds + 1).
    Equal runs give 1.0. This is the test IR evaluations use for "is this gain more than noise"
    (Smucker, Allan and Carterette, CIKM 2007).
    """
    import numpy as np

    if len(a) != len(b):
        raise UsageError(f"paired test: {len(a)} against {len(b)} values", hint="pass the same queries in both runs")
    d = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    d = d[np.abs(d) > 1e-12]  # ties carry no sign: flipping them changes nothing
    if d.size == 0:
        return 1.0
    observed = abs(float(d.sum())) - 1e-9 * d.size  # float slack: a pattern equal to it counts
    if d.size <= EXACT_QUERIES:
        patterns = ((np.arange(1 << d.size)[:, None] >> np.arange(d.size)) & 1) * 2 - 1
        return float(np.mean(np.abs(patterns @ d) >= observed))
    rng = np.random.default_rng(seed)
    hits, block = 0, sign_block(d.size)
    for start in range(0, rounds, block):
        signs = rng.choice((-1.0, 1.0), size=(min(block, rounds - start), d.size))
        hits += int(np.count_nonzero(np.abs(signs @ d) >= observed))
    return (hits + 1) / (rounds + 1)


SIGN_CELLS = 4_000_000  # sign patterns drawn at once hold at most this many cells (32 MB of float64)


def sign_block(queries: int) -> int:
    """How many sign patterns ``paired_randomization`` draws at once for ``queries`` differing
    queries: 4,096, fewer for a large set so that a block stays within ``SIGN_CELLS``."""
    return max(1, min(4096, SIGN_CELLS // max(queries, 1)))


def format_p(p: float) -> str:
    """A p-value as reports print it: two significant digits, and "< 0.001" below that."""
    return "< 0.001" if p < 0.001 else f"{p:.2g}"


def p_clause(p: float) -> str:
    """``p = 0.47`` or ``p < 0.001``, for a line of text."""
    text = format_p(p)
    return f"p {text}" if text.startswith("<") else f"p = {text}"
