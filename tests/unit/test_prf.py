"""Hybrid pseudo-relevance feedback: RM3 term weights, the postings cap, Rocchio, the feedback set."""

from __future__ import annotations

import numpy as np
import pytest

from kbctl.search.prf import cap_postings, feedback_keys, rm3_terms, rocchio


def test_feedback_is_the_best_chunk_of_each_of_the_first_documents():
    fused = [((1, 10), 0.9), ((1, 11), 0.8), ((1, 20), 0.7), ((1, 30), 0.6)]
    doc_of = {(1, 10): "a", (1, 11): "a", (1, 20): "b", (1, 30): "c"}
    assert feedback_keys(fused, doc_of, 2) == [((1, 10), 0.9), ((1, 20), 0.7)]


def test_rm3_mixes_the_query_with_the_feedback_model():
    feedback = [((1, 1), 0.75), ((1, 2), 0.25)]
    postings = [
        (1, 1, "refund", 2.0, 4.0),
        (1, 1, "days", 2.0, 4.0),
        (1, 2, "refund", 1.0, 2.0),
        (1, 2, "card", 1.0, 2.0),
    ]
    out = rm3_terms({"refund": 1.0}, feedback, postings, n_terms=2, query_weight=0.7)
    # P(t|R): refund 0.75·0.5 + 0.25·0.5 = 0.5, days 0.375, card 0.125 → top 2 renormalised
    assert out["refund"] == pytest.approx(0.7 + 0.3 * 0.5 / 0.875)
    assert out["days"] == pytest.approx(0.3 * 0.375 / 0.875)
    assert "card" not in out
    assert sum(out.values()) == pytest.approx(1.0)


def test_rm3_without_feedback_is_the_query():
    assert rm3_terms({"a": 1.0, "b": 1.0}, [], [], 10, 0.7) == {"a": 0.5, "b": 0.5}


def test_cap_keeps_the_query_and_the_likeliest_terms_that_fit():
    weights = {"q": 0.7, "x": 0.2, "y": 0.06, "z": 0.04, "gone": 0.01}
    df = {"q": 10**6, "x": 900, "y": 200, "z": 50}
    assert cap_postings(weights, ["q"], df, 1000) == {"q": 0.7, "x": 0.2, "z": 0.04}


def test_rocchio_moves_towards_the_feedback_and_stays_unit():
    q = np.array([1.0, 0.0], dtype=np.float32)
    out = rocchio(q, [np.array([0.0, 1.0], dtype=np.float32)], 0.5)
    assert np.linalg.norm(out) == pytest.approx(1.0)
    assert out[1] == pytest.approx(0.5 * out[0])
    assert rocchio(q, [], 0.5) is q and rocchio(q, [q], 0.0) is q
