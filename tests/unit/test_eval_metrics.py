"""kbctl's metrics against the reference, pytrec_eval (trec_eval compiled in)."""

from __future__ import annotations

import random

import pytest

from kbctl.errors import UsageError
from kbctl.evals.metrics import (
    aggregate,
    average_precision,
    evaluate,
    mrr_at_k,
    ndcg_at_k,
    parse_metric,
    precision_at_k,
    rank_run,
    recall_at_k,
)

pytrec_eval = pytest.importorskip("pytrec_eval")

OURS = ["ndcg@10", "recall@10", "recall@100", "p@10", "mrr@10", "map"]
THEIRS = {"ndcg@10": "ndcg_cut_10", "recall@10": "recall_10", "recall@100": "recall_100", "p@10": "P_10", "map": "map"}


def _reference(run, qrels):
    """pytrec_eval's scores under our metric names; mrr@10 from runs cut to trec_eval's top 10."""
    ev = pytrec_eval.RelevanceEvaluator(qrels, set(THEIRS.values()))
    full = ev.evaluate(run)
    cut = {q: {d: docs[d] for d in rank_run(docs)[:10]} for q, docs in run.items()}
    rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut)
    return {q: {**{o: full[q][t] for o, t in THEIRS.items()}, "mrr@10": rr[q]["recip_rank"]} for q in full}


def _assert_agrees(run, qrels):
    ours = evaluate(run, qrels, OURS)
    ref = _reference(run, qrels)
    assert ref, "the reference scored no query: the case tests nothing"
    for qid, scores in ref.items():
        for metric, value in scores.items():
            assert ours[qid][metric] == pytest.approx(value, abs=1e-6), (qid, metric)
    return ours, ref


QRELS = {
    "graded": {"a": 1, "b": 0, "c": 2, "z": -1, "e": 3, "far": 1},
    "all_nonrel": {"x": 0, "y": -2},
    "missing_from_run": {"d": 1},
    "one": {"only": 1},
    "empty_run": {"a": 2},
}
RUN = {
    # z is judged -1 and ranked first; b, c, a tie at 1.0 (trec_eval: docid descending -> c, b, a)
    "graded": {
        "a": 1.0,
        "b": 1.0,
        "c": 1.0,
        "d": 0.5,
        "z": 3.0,
        "e": 0.1,
        **{f"n{i:02d}": -float(i) for i in range(20)},
        "far": -100.0,
    },
    "all_nonrel": {"x": 1.0, "y": 0.5},
    "one": {f"d{i}": 0.0 for i in range(15)} | {"only": 0.0},  # all tied: "only" sorts first
    "empty_run": {},
    "not_judged": {"a": 1.0},
}


def test_hand_made_runs_agree_with_trec_eval():
    _assert_agrees(RUN, QRELS)


def test_ties_are_broken_by_docid_descending():
    assert rank_run({"a": 1.0, "b": 1.0, "c": 1.0, "z": 3.0, "d": 0.5}) == ["z", "c", "b", "a", "d"]
    ours, _ = _assert_agrees({"q": {"a": 1.0, "b": 1.0}}, {"q": {"a": 1}})
    assert ours["q"]["mrr@10"] == 0.5  # b comes first, so the tie order matters


def test_graded_case_values_are_what_trec_eval_says():
    ours = evaluate(RUN, QRELS, OURS)
    g = ours["graded"]
    # ranking: z(-1) c(2) b(0) a(1) d e(3) n00..n19 far(1)
    assert g["mrr@10"] == pytest.approx(1 / 2)
    assert g["p@10"] == pytest.approx(3 / 10)
    assert g["recall@10"] == pytest.approx(3 / 4) and g["recall@100"] == 1.0
    assert g["map"] == pytest.approx((1 / 2 + 2 / 4 + 3 / 6 + 4 / 27) / 4)


def test_queries_without_results_score_zero_and_unjudged_queries_are_ignored():
    ours = evaluate(RUN, QRELS, OURS)
    assert set(ours) == set(QRELS)  # "not_judged" is only in the run
    assert all(v == 0.0 for v in ours["missing_from_run"].values())
    assert all(v == 0.0 for v in ours["empty_run"].values())
    assert all(v == 0.0 for v in ours["all_nonrel"].values())


def test_precision_divides_by_k_even_when_fewer_were_retrieved():
    assert precision_at_k(["a"], {"a": 1}, 10) == pytest.approx(0.1)


def test_single_functions_on_a_known_case():
    ranked, qrels = ["x", "a", "y", "b"], {"a": 2, "b": 1, "c": 1}
    assert mrr_at_k(ranked, qrels, 1) == 0.0 and mrr_at_k(ranked, qrels, 2) == 0.5
    assert recall_at_k(ranked, qrels, 4) == pytest.approx(2 / 3)
    assert average_precision(ranked, qrels) == pytest.approx((1 / 2 + 2 / 4) / 3)
    dcg = 2 / 1.5849625007211562 + 1 / 2.321928094887362
    idcg = 2 + 1 / 1.5849625007211562 + 1 / 2
    assert ndcg_at_k(ranked, qrels, 10) == pytest.approx(dcg / idcg)


def _random_case(rng: random.Random, n_queries: int):
    run, qrels = {}, {}
    for q in range(n_queries):
        qid = f"q{q}"
        pool = [f"d{rng.randrange(300)}" for _ in range(rng.randrange(1, 160))]
        judged = rng.sample(pool, k=min(len(pool), rng.randrange(1, 30)))
        judged += [f"unretrieved{i}" for i in range(rng.randrange(0, 5))]
        qrels[qid] = {d: rng.choice([-1, 0, 0, 1, 1, 2, 3]) for d in judged}
        # coarse scores so that ties are common
        run[qid] = {d: round(rng.random() * 4) / 4 for d in pool if rng.random() < 0.9}
        if rng.random() < 0.05:
            run[qid] = {}
    return run, qrels


def test_two_hundred_random_runs_agree_with_trec_eval():
    rng = random.Random(20240601)
    run, qrels = _random_case(rng, 200)
    ours, ref = _assert_agrees(run, qrels)
    assert len(ref) >= 150
    means = aggregate({q: ours[q] for q in ref})
    for metric in OURS:
        assert means[metric] == pytest.approx(sum(r[metric] for r in ref.values()) / len(ref), abs=1e-9)


def test_a_wrong_tie_break_would_be_caught():
    """Guard that the comparison can fail: ascending docids disagree with trec_eval."""
    run, qrels = {"q": {"a": 1.0, "b": 1.0}}, {"q": {"a": 1}}
    wrong = [d for d, _ in sorted(run["q"].items(), key=lambda kv: (-kv[1], kv[0]))]
    assert mrr_at_k(wrong, qrels["q"], 10) != _reference(run, qrels)["q"]["mrr@10"]


def test_aggregate_means_and_empty():
    assert aggregate({"a": {"m": 1.0}, "b": {"m": 0.0}}) == {"m": 0.5}
    assert aggregate({}) == {}


@pytest.mark.parametrize("name", ["ndcg", "foo@10", "p@0", "map@10", ""])
def test_unknown_metrics_are_usage_errors(name):
    with pytest.raises(UsageError):
        parse_metric(name)


def test_metric_names_are_case_insensitive():
    assert parse_metric("NDCG@3")(["a"], {"a": 1}) == 1.0
    assert parse_metric("Precision@2")(["a"], {"a": 1}) == 0.5
