"""``bench/prf_predictors.py``'s thirteenth lever: feedback reorders only the first round's top N
documents (docs/retrieval-quality.md). Its figures rest on ``head_reordered``; these pin its rule."""

from __future__ import annotations

import sys

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))

from prf_predictors import _ndcg10, head_reordered

FIRST = ["a", "b", "c", "d", "e", "f"]
FEEDBACK = ["f", "c", "x", "a", "e", "b", "d"]  # promotes f and x, which the first round ranked low or not at all


def test_the_head_takes_the_feedback_order_and_the_rest_keeps_the_first_rounds():
    assert head_reordered(FIRST, FEEDBACK, 3) == ["c", "a", "b", "d", "e", "f"]
    assert head_reordered(FIRST, FEEDBACK, 5) == ["c", "a", "e", "b", "d", "f"]


def test_nothing_below_n_is_promoted_and_nothing_is_lost():
    for n in range(1, len(FIRST) + 1):
        got = head_reordered(FIRST, FEEDBACK, n)
        assert sorted(got) == sorted(FIRST)
        assert set(got[:n]) == set(FIRST[:n])
        assert got[n:] == FIRST[n:]


def test_n_all_is_the_feedback_ranking_unchanged():
    assert head_reordered(FIRST, FEEDBACK, None) == FEEDBACK


def test_a_head_document_feedback_did_not_return_follows_the_ones_it_did_in_first_round_order():
    assert head_reordered(FIRST, ["d", "a"], 4) == ["d", "a", "b", "c", "e", "f"]


def test_the_rankings_are_scored_as_the_eval_scores_a_search():
    qrels = {"q1": {"c": 1}, "q2": {"a": 1}}
    got = _ndcg10({"q1": head_reordered(FIRST, FEEDBACK, 3), "q2": FIRST}, qrels)
    assert got == {"q1": 1.0, "q2": 1.0}
    assert _ndcg10({"q1": FIRST}, qrels)["q1"] < 1.0
