"""Result shaping: near-duplicate removal, chunks per document, and the early stop at the page."""

from __future__ import annotations

from kbctl.search.shape import near_duplicate as _near_duplicate
from kbctl.search.shape import shape as _shape
from kbctl.search.shape import shingles as _shingles

BASE = (
    "Refunds are issued to the original payment method within five business days after the "
    "billing team approves the request; store credit is available on request instead."
)


def _rows(texts: dict[int, tuple[int, str]]):
    """(namespace, chunk) → a row tuple as ``_fetch`` returns it, from chunk → (document, text)."""
    return {
        (1, cid): (1, cid, doc, text, {}, None, None, 0, f"file:///{doc}", f"doc {doc}", "ns")
        for cid, (doc, text) in texts.items()
    }


def test_near_duplicates_are_dropped_and_distinct_texts_kept():
    rows = _rows(
        {
            1: (10, BASE),
            2: (11, BASE.upper().replace(";", ",")),  # same words, other case and punctuation: Jaccard 1
            3: (12, "Two-factor authentication can be reset by an administrator from the security page."),
            4: (13, BASE + " Contact billing."),  # 25 of 27 shingles shared: 0.93
            5: (14, BASE.replace("five", "5")),  # one word in the middle: 22 of 28 shingles, 0.79, kept
        }
    )
    fused = [((1, c), 1.0 / c) for c in (1, 2, 3, 4, 5)]
    kept = [key for key, _ in _shape(fused, rows, per_doc=0, dedupe=0.9)]
    assert kept == [(1, 1), (1, 3), (1, 5)]
    assert [key for key, _ in _shape(fused, rows, per_doc=0, dedupe=0.75)] == [(1, 1), (1, 3)]
    # a threshold of 1.0 turns the check off
    assert [key for key, _ in _shape(fused, rows, per_doc=0, dedupe=1.0)] == [(1, c) for c in (1, 2, 3, 4, 5)]


def test_per_doc_and_limit():
    texts = {
        c: (c // 10, f"chunk {c} talks about topic {c} with words {' '.join(str(c * i) for i in range(12))}")
        for c in (10, 11, 12, 20, 21, 30)
    }
    rows = _rows(texts)
    fused = [((1, c), 1.0) for c in (10, 11, 12, 20, 21, 30)]
    assert [k[1] for k, _ in _shape(fused, rows, per_doc=1, dedupe=0.9)] == [10, 20, 30]
    assert [k[1] for k, _ in _shape(fused, rows, per_doc=2, dedupe=0.9)] == [10, 11, 20, 21, 30]
    # the walk stops at the limit, keeping the same head as an unlimited walk
    assert [k[1] for k, _ in _shape(fused, rows, per_doc=2, dedupe=0.9, limit=3)] == [10, 11, 20]
    # keys without a row (deleted since the lanes ran) are skipped, not counted
    assert [k[1] for k, _ in _shape([((1, 99), 2.0), *fused], rows, per_doc=0, dedupe=0.9, limit=2)] == [10, 11]


def test_near_duplicate_is_jaccard_of_word_shingles():
    a, b = _shingles("a b c d e f g h i j"), _shingles("a b c d e f g h i x")
    # 8 shingles each, 7 shared: Jaccard 7 / 9
    assert len(a) == len(b) == 8 and len(a & b) == 7
    assert _near_duplicate(a, b, 0.77) and not _near_duplicate(a, b, 0.78)
    assert not _near_duplicate(a, frozenset(), 0.1)
    # short texts fall back to single words
    assert _shingles("Hello world") == _shingles("hello, WORLD!")


ZH = "退款将在审核通过后的五个工作日内退回原支付方式，账单团队会在收到申请后尽快处理，如需改为店铺积分请在申请时说明。"


def test_near_duplicates_among_chinese_hits_are_dropped_and_distinct_ones_kept():
    # Chinese has no spaces: each clause was one "word", so a passage with one clause more shared
    # too few word shingles to be a near-duplicate, and one with a character changed shared none of
    # that clause's. A CJK run is compared by its character bigrams, as the lexical lane cuts it.
    rows = _rows(
        {
            1: (10, ZH),
            2: (11, ZH + "谢谢。"),  # a word more at the end
            3: (12, ZH.replace("，", "；")),  # other punctuation: the same words
            4: (13, "双重身份验证可以由管理员在安全设置页面重置，重置后用户需要重新绑定手机。"),
            5: (14, ZH.replace("五个工作日", "十个工作日").replace("尽快", "立即")),  # two words changed: kept
        }
    )
    fused = [((1, c), 1.0 / c) for c in (1, 2, 3, 4, 5)]
    assert [key for key, _ in _shape(fused, rows, per_doc=0, dedupe=0.9)] == [(1, 1), (1, 4), (1, 5)]
    assert [key for key, _ in _shape(fused, rows, per_doc=0, dedupe=1.0)] == [(1, c) for c in (1, 2, 3, 4, 5)]


def test_chinese_shingles_are_of_character_bigrams_and_english_ones_unchanged():
    a, b = _shingles("图书馆今天开放"), _shingles("图书馆今天关闭")
    # bigrams 图书 书馆 馆今 今天 天开 开放 / … 天关 关闭: 4 shingles of three bigrams each, 2 shared
    assert len(a) == len(b) == 4 and len(a & b) == 2
    assert _shingles("Refunds 图书馆") == _shingles("refunds图书馆")
    assert _shingles("a b c d") == frozenset(map(hash, [("a", "b", "c"), ("b", "c", "d")]))
