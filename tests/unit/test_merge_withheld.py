"""The withheld count of a search over namespaces of several profiles (``kbctl.search.engine``,
``_counted``): each group's withheld hits that rank above the merged page's last hit, a withheld
hit placed in the merge where its group ranks it (docs/hardening.md, session 48)."""

from __future__ import annotations

from kbctl.search.engine import _counted, _merged_page
from kbctl.types import Hit, SearchResult


def _group(ns: str, n: int, withheld: dict[bytes, int]) -> tuple[SearchResult, dict[bytes, int]]:
    """A group's result of ``n`` hits (one document each) and its withheld hits' marks and places."""
    hits = tuple(Hit(i + 1, 1.0, i, i, f"{ns}/{i}", f"{ns} {i}", f"{ns} text {i}", ns, {}, "") for i in range(n))
    return SearchResult(
        "q", (ns,), "lexical", "content", hits, withheld=len(withheld), withheld_marks=frozenset(withheld)
    ), withheld


def _count(groups, k: int) -> list[int]:
    results, places = zip(*groups)
    return [len(c) for c in _counted(results, places, _merged_page(results, k, 0.9), k)]


def test_a_withheld_hit_counts_when_it_would_rank_above_the_merged_pages_last_hit():
    a = _group("a", 3, {b"a-below-2": 2})  # below a's second hit
    b = _group("b", 3, {b"b-top": 0, b"b-below-1": 1})
    # k 2: a1, b1 shown; b's top one ranks above b1, the rest below the last hit (b1)
    assert _count([a, b], 2) == [0, 1]
    # k 4: a1 b1 a2 b2: b's second one ranks above b2, a's below a2 (ranked 3rd in a)
    assert _count([a, b], 4) == [0, 2]
    # a page not full: every one, as a search's page counts them
    assert _count([a, b], 10) == [1, 2]


def test_a_withheld_hit_of_a_group_with_nothing_on_the_page_still_counts_above_the_cut():
    """A group whose viewable hits the page does not show at all: its withheld rank-1 hit would
    have ranked above the page's last hit (a's second, 1/62), so it counts; one ranked under the
    group's first viewable hit (1/62, after a's by the group order) does not."""
    a = _group("a", 3, {})
    b = _group("b", 0, {b"b-only": 0})
    assert _count([a, b], 2) == [0, 1]
    c = _group("c", 1, {b"c-under": 1})
    assert _count([a, b, c], 3) == [0, 1, 0]  # a1, c1, a2 shown (b has none): c's withheld is under c1
