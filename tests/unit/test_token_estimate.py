"""The token estimate every budget and output cap counts with (``kbctl.search.context``): a run of
CJK text, or any long unbroken run, was one "word", so 57 Chinese characters were 11 tokens and a
20,000-character run 2; contexts, research passages and resources then went far past their budget,
and neither a context nor a snippet could cut such text."""

from __future__ import annotations

import math

from kbctl.search.context import estimate_tokens, format_context
from kbctl.search.evidence import snip
from kbctl.types import Hit, SearchResult

CHINESE = "知识库检索系统把文档切分成段落并为每个段落计算向量以便语义搜索。" * 40
LONG_RUN = "a" * 20000


def _result(text: str) -> SearchResult:
    hit = Hit(1, 1.0, 1, 1, "d.md", "D", text, "kb", {}, "d.md")
    return SearchResult("q", ("kb",), "hybrid", "hybrid", (hit,))


def test_english_is_counted_as_before():
    assert estimate_tokens("The quick brown fox jumps over the lazy dog.") == math.ceil(10 * 4 / 3)


def test_cjk_counts_each_character():
    assert estimate_tokens("知识库检索") >= 5
    assert estimate_tokens(CHINESE) >= len(CHINESE)


def test_a_long_unbroken_run_counts_by_its_length():
    assert estimate_tokens(LONG_RUN) >= len(LONG_RUN) // 8


def test_a_context_of_such_text_keeps_its_budget_and_is_not_empty():
    for text in (CHINESE, LONG_RUN):
        block = format_context(_result(text), 300)
        assert 0 < estimate_tokens(block) <= 300, (text[:10], estimate_tokens(block))
        assert len(block) < len(text)


def test_a_snippet_of_such_text_is_short():
    for text in (CHINESE, LONG_RUN):
        assert estimate_tokens(snip(text)) <= 70
