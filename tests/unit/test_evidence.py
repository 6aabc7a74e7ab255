"""Research's feedback terms and claim key terms over search hits (``kbctl.search.evidence``)."""

from __future__ import annotations

from kbctl.search.evidence import feedback_terms
from kbctl.textutil.analyze import get_analyzer
from kbctl.types import Hit


def _hits(*texts: str) -> list[Hit]:
    return [Hit(i + 1, 1.0, i, i, f"file:///{i}", f"doc {i}", t, "ns", {}, f"[{i}]") for i, t in enumerate(texts)]


def test_feedback_terms_of_english_passages_are_words_longer_than_three_letters():
    hits = _hits(
        "Refunds go to the card on file after the billing team approves.",
        "The billing team approves refunds to a card within five days.",
        "Ask the billing team: a card refund is not instant.",
    )
    terms = feedback_terms("refunds", hits, get_analyzer("english", 2))
    # in all three passages, ties in the order they first appear (not a set's, which varies by process)
    assert terms == ["card", "billing", "team", "approves"]


def test_feedback_terms_of_chinese_passages_are_bigrams():
    # Research of a Chinese topic: the passages share 图书 / 书馆 (library) and 借阅 (borrowing);
    # every CJK word is a two-character bigram, which the Latin length rule (> 3) refused.
    hits = _hits(
        "北京大学的图书馆很大，学生可以借阅图书。",
        "图书馆每天开放，借阅需要学生证。",
        "学生在图书馆借阅了很多书。",
    )
    terms = feedback_terms("大学", hits, get_analyzer("english", 2))
    assert {"图书", "书馆", "借阅", "学生"} <= set(terms), terms
    assert "大学" not in terms  # the topic's own terms are not feedback


def test_a_lone_cjk_character_is_not_a_feedback_term():
    hits = _hits("书 书 书 图书馆", "书 图书馆", "书 图书馆")
    terms = feedback_terms("library", hits, get_analyzer("english", 2))
    assert "书" not in terms and "图书" in terms


def test_a_snippet_of_japanese_ends_at_a_full_stop_within_its_tokens():
    """Sentences ended by 。 (no space after it) are sentences: a snippet is the first of them that
    fit, cut at a full stop, not in the middle of one."""
    from kbctl.search.context import estimate_tokens
    from kbctl.search.evidence import snip

    text = "東京大学で機械学習を研究しています。" * 12
    s = snip(text)
    assert s == "東京大学で機械学習を研究しています。" * (len(s) // 18) and len(s) >= 18
    assert estimate_tokens(s) <= 60 < estimate_tokens(s + "東京大学で機械学習を研究しています。")


def test_a_snippet_of_unspaced_text_without_a_sentence_end_is_a_bounded_prefix():
    from kbctl.search.context import estimate_tokens
    from kbctl.search.evidence import snip

    for text in ("北京大学的图书馆很大藏书丰富学生每天在那里学习" * 40, "ภาษาไทยเขียนติดกันโดยไม่มีช่องว่าง" * 40):
        s = snip(text)
        assert s.endswith(" …") and text.startswith(s[:-2])
        assert len(s) - 2 >= 20 and estimate_tokens(s) <= 62  # the marker's two estimated tokens on top


def test_a_snippet_of_english_is_its_first_sentences():
    from kbctl.search.evidence import snip

    text = "Refunds take five days.\nThey go back to the card. " + "A longer sentence about billing and invoices. " * 10
    s = snip(text)
    assert s.startswith("Refunds take five days. They go back to the card. A longer sentence")
    assert s.endswith("invoices.") and len(s.split()) <= 45
    assert snip("Short. Text.") == "Short. Text."


def test_research_counts_the_hits_its_searches_withheld_once_each():
    """A hit withheld from the topic's search and a sub-query's is one hit: the union of the
    searches' marks (3 distinct here), neither their sum (5) nor the largest count (2); the marks
    are opaque (a chunk id is not in them) and equal for a chunk within the process."""
    from kbctl.search.access import withheld_marks
    from kbctl.search.evidence import Research
    from kbctl.types import SearchResult

    def searched(*keys):
        return SearchResult(
            "q", ("ns",), "hybrid", "hybrid", (), withheld=len(keys), withheld_marks=withheld_marks(keys)
        )

    first, sub_a, sub_b = searched((1, 10), (1, 11)), searched((1, 11), (1, 12)), searched((1, 10))
    assert Research("t", first, ["a", "b"], [sub_a, sub_b], []).withheld == 3
    assert Research("t", searched(), [], [], []).withheld == 0
    assert withheld_marks([(1, 10)]) == withheld_marks([(1, 10)]) != withheld_marks([(1, 11)])
    assert all(b"10" not in m and len(m) == 16 for m in withheld_marks([(1, 10)]))
    assert "withheld_marks" not in repr(first) and "withheld_marks" not in first.to_json()


def test_mmr_compares_passages_only_within_one_profile():
    """research_topic over namespaces of two profiles pooled 384-d and 768-d vectors and multiplied
    them (a ValueError, a 500): passages of different profiles are never compared (session 47)."""
    import dataclasses

    import numpy as np
    import pytest

    from kbctl.search.evidence import mmr

    a, b, c = _hits("one", "two", "three")
    c = dataclasses.replace(c, namespace="wide")
    vectors = {("ns", 0): np.ones(384), ("ns", 1): np.ones(384), ("wide", 2): np.ones(768)}
    with pytest.raises(ValueError):
        mmr([a, b, c], vectors, lambda_=0.7, n=3)
    picked = mmr([a, b, c], vectors, lambda_=0.7, n=3, spaces={"ns": "fp384", "wide": "fp768"})
    # b is a's duplicate (similarity 1), c is like neither: c comes before b
    assert [h.text for h in picked] == ["one", "three", "two"]
