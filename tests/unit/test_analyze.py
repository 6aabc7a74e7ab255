"""The BM25 lane's analyzer: Chinese, Japanese and Korean runs become overlapping character bigrams
(analyzer version 2), other scripts are analyzed exactly as before, and version 1 (what a namespace
indexed before it records) keeps the old tokenization."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbctl.textutil.analyze import (
    ANALYZER_VERSION,
    MAX_TERM_CHARS,
    Analyzer,
    get_analyzer,
    plain_words,
    query_analyzer,
)

# Han (with 々〆〇〻), Hiragana, Katakana, Hangul, and the full- and half-width forms
CJK = re.compile(
    "[\u1100-\u11ff\u3005-\u3007\u303b\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff01-\uff9f\U00020000-\U000323af]"
)


def v2() -> Analyzer:
    return get_analyzer("english", 2)


def v1() -> Analyzer:
    return get_analyzer("english", 1)


def test_new_namespaces_get_the_cjk_analyzer():
    assert ANALYZER_VERSION == 2
    assert get_analyzer("english").version == 2


def test_a_chinese_run_becomes_overlapping_bigrams():
    assert v2().terms("北京大学的图书馆") == ["北京", "京大", "大学", "学的", "的图", "图书", "书馆"]


def test_a_chinese_word_inside_a_sentence_is_found_by_its_own_terms():
    doc = set(v2().terms("北京大学的图书馆很大，藏书丰富。"))
    query = v2().terms("图书馆")
    assert query == ["图书", "书馆"] and set(query) <= doc
    assert set(v2().terms("藏书")) <= doc
    # before: the run up to the comma was one term, so the word inside it matched nothing
    assert not set(v1().terms("图书馆")) & set(v1().terms("北京大学的图书馆很大，藏书丰富。"))


def test_a_lone_cjk_character_is_a_unigram():
    assert v2().terms("我") == ["我"]
    assert v2().terms("猫 と 犬") == ["猫", "と", "犬"]
    assert v2().terms("书，") == ["书"]


def test_mixed_scripts_split_where_the_script_changes():
    assert v2().terms("使用PostgreSQL数据库") == ["使用", "postgresql", "数据", "据库"]
    # English words next to CJK are still stemmed, and stopwords dropped; CJK bigrams are not stemmed
    assert v2().terms("the databases的备份") == ["databas", "的备", "备份"]


def test_an_identifier_next_to_cjk_is_kept_whole():
    terms = v2().terms("错误LMN-4012出现在v3.14.2版本")
    assert {"lmn-4012", "lmn", "4012", "v3.14.2", "错误", "出现", "现在", "版本"} <= set(terms)
    assert not any(CJK.search(t) and re.search(r"[a-z0-9]", t) for t in terms), terms


def test_japanese_kanji_and_kana():
    doc = v2().terms("東京大学で機械学習を研究しています。")
    assert {"東京", "大学", "機械", "学習", "研究"} <= set(doc)
    assert set(v2().terms("機械学習")) <= set(doc)
    assert set(v2().terms("データベース")) <= set(v2().terms("新しいデータベースを作りました"))


def test_korean_eojeol_split_by_spaces():
    doc = v2().terms("서울은 한국의 수도입니다")
    assert doc == ["서울", "울은", "한국", "국의", "수도", "도입", "입니", "니다"]
    assert v2().terms("한국") == ["한국"] and v2().terms("수도") == ["수도"]


def test_full_and_half_width_forms_are_folded():
    assert "lmn-4012" in v2().terms("エラーＬＭＮ－４０１２")
    assert v2().terms("ﾃﾞｰﾀﾍﾞｰｽ") == v2().terms("データベース")


def test_terms_stay_within_max_term_chars():
    terms = v2().terms("q" * 1000 + " " + "字" * 5000)
    assert all(len(t) <= MAX_TERM_CHARS for t in terms)
    assert terms[0] == "q" * MAX_TERM_CHARS and set(terms[1:]) == {"字字"} and len(terms) == 5000


def test_version_1_keeps_the_old_tokenization():
    assert v1().terms("北京大学的图书馆") == ["北京大学的图书馆"]
    assert v1().terms("使用PostgreSQL数据库") == ["使用postgresql数据库"]
    assert v1().terms("我") == []


def test_a_query_over_namespaces_of_both_versions_has_the_terms_of_each():
    both = query_analyzer("english", {1, 2})
    assert set(both.terms("图书馆")) == {"图书馆", "图书", "书馆"}
    assert both.terms("refund policy") == ["refund", "polici"]  # other scripts: the same terms, not twice
    assert query_analyzer("english", {2}) is v2() and query_analyzer("english", {1}) is v1()


@pytest.mark.parametrize("language", ["english", "german", "none"])
@pytest.mark.parametrize(
    "text",
    [
        "Refunds are processed within 5 business days; see LMN-4012 and E_RATE_LIMITED in v3.14.2.",
        "Die Rückerstattung dauert fünf Werktage — SKU-TEAM-ANNUAL-2024, a/b/c.",
        "Возврат средств занимает пять дней. Ошибка E-1042.",
        "x y 1 2 3 __init__ foo.bar/baz naïve café",
    ],
)
def test_other_scripts_are_analyzed_as_before(language, text):
    old, new = get_analyzer(language, 1), get_analyzer(language, 2)
    assert new.terms(text) == old.terms(text)
    assert new.words(text) == old.words(text)


_no_cjk = st.text(st.characters(max_codepoint=0x2FFF)).filter(lambda s: not CJK.search(s))
_mixed = st.text(st.sampled_from(list("图书馆東京のデータ서울은 abcLMN-4012_./，。ＡＢ１ｶﾞ")), max_size=60)


@settings(max_examples=200, deadline=None)
@given(text=_no_cjk)
def test_property_text_without_cjk_gives_the_same_terms_as_version_1(text):
    assert v2().terms(text) == v1().terms(text)


@settings(max_examples=200, deadline=None)
@given(text=_no_cjk)
def test_property_the_other_scripts_of_a_mixed_text_give_the_terms_of_version_1(text):
    assert Counter(v2().terms(text + " 。图")) == Counter(v1().terms(text)) + Counter(["图"])


@settings(max_examples=200, deadline=None)
@given(text=st.one_of(_mixed, st.text()))
def test_property_a_cjk_term_is_at_most_a_bigram_and_never_mixes_scripts(text):
    for t in v2().terms(text):
        assert 0 < len(t) <= MAX_TERM_CHARS
        if CJK.search(t):
            assert len(t) <= 2 and all(CJK.match(c) for c in t), (text, t)


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(_no_cjk, st.text(st.characters(max_codepoint=0x2FFF)), st.text()))
def test_property_plain_words_of_text_without_cjk_are_its_lowercased_word_runs(text):
    """What near-duplicate shingles and the ``hash`` embedder read: exactly the words they read
    before CJK bigrams, unless the text holds a Han, Kana or Hangul character."""
    if not re.search(
        "[\u1100-\u11ff\u3005-\u3007\u303b\u3041-\u30ff\u3131-\u318e\u31f0-\u31ff"
        "\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97c\uac00-\ud7fb\uf900-\ufaff\U00020000-\U000323af]",
        text,
    ):
        assert plain_words(text) == re.findall(r"\w+", text.lower())


def test_plain_words_cut_a_cjk_run_into_bigrams_and_keep_stopwords():
    assert plain_words("The 图书馆 is open") == ["the", "图书", "书馆", "is", "open"]
    assert plain_words("ＬＭＮ图书") == ["lmn", "图书"]  # folded, split where the script changes
    assert plain_words("书") == ["书"]


def test_decomposed_cjk_and_variation_selectors_give_the_terms_of_the_composed_text():
    """Hangul decomposed into jamo (NFD: a macOS file name, the title of a document without a
    heading) gave bigrams of jamo, kana with combining voiced marks (テ+゛ from some PDFs) split the
    run at the mark, and a variation selector (葛 + U+E0100) split it too: a query typed as usual
    found none of them."""
    import unicodedata

    for text in ("서울은 한국의 수도입니다", "新しいデータベースを作りました", "東京大学で機械学習"):
        assert v2().terms(unicodedata.normalize("NFD", text)) == v2().terms(text), text
    assert v2().terms("葛\U000e0100城市") == v2().terms("葛城市") == ["葛城", "城市"]
    assert v2().terms("北京\ufe00大学") == ["北京", "京大", "大学"]
    # Latin beside them is left as version 1 reads it
    assert v2().terms("cafe\u0301 한국") == [*v1().terms("cafe\u0301"), "한국"]
