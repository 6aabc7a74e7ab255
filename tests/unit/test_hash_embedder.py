"""The ``hash`` embedder (the test and bench model): feature hashing of words and word pairs, a CJK
run's words being its character bigrams from revision "2" (what ``hash-384`` pins), and every
other text hashed bit for bit as before, so stored English vectors keep meaning what they meant."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbctl.config import load_settings
from kbctl.embed.hashing import HashEmbedder

ENGLISH = [
    "Refunds are processed within 5 business days; see LMN-4012.",
    "Die Rückerstattung dauert fünf Werktage — naïve café",
    "",
]


def _profile(revision: str = "2"):
    return dataclasses.replace(load_settings(None, env={}).profile("hash-384"), revision=revision)


def _before(text: str, dimension: int) -> np.ndarray:
    """The embedder as it was before CJK bigrams (kbctl ≤ session 39), kept here as the reference."""
    v = np.zeros(dimension, dtype=np.float32)
    words = re.findall(r"\w+", text.lower())
    for feat in words + [a + " " + b for a, b in pairwise(words)]:
        h = hashlib.blake2b(feat.encode(), digest_size=8).digest()
        v[int.from_bytes(h[:4], "little") % dimension] += 1.0 if h[4] & 1 else -1.0
    n = float(np.linalg.norm(v))
    if n == 0.0:
        v[0] = 1.0
        return v
    return v / n


def _digest(v: np.ndarray) -> str:
    return hashlib.sha256(np.asarray(v, dtype=np.float32).tobytes()).hexdigest()[:16]


@pytest.mark.parametrize("revision", ["", "2", "bench:anything"])
def test_english_vectors_are_pinned_bit_for_bit(revision):
    e = HashEmbedder(_profile(revision))
    # digests of the vectors stored before the change: a differing one would mean every stored
    # hash-384 vector no longer matches its own text's query
    assert [_digest(v) for v in e.embed_documents(ENGLISH)] == [
        "fbebef1cd64a031c",
        "8d8866aab37a520d",
        "373421642a44f741",
    ]
    assert _digest(e.embed_query("failed payments")) == "e554b85795448a02"


# below the CJK blocks but Hangul jamo (U+1100 to U+11FF); full-width Latin is no CJK either
_no_cjk = st.text(st.one_of(st.characters(max_codepoint=0x2FFF), st.sampled_from("ＡＢｃ１，ｶﾞ"))).filter(
    lambda s: not re.search("[\u1100-\u11ff]", s)
)


@settings(max_examples=200, deadline=None)
@given(text=_no_cjk)
def test_property_text_without_cjk_embeds_as_before(text):
    e = HashEmbedder(_profile("2"))
    assert np.array_equal(e.embed_query(text), _before(text, 384))


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


A = "北京大学的图书馆很大，藏书丰富，学生每天在那里学习。"
B = "北京大学的图书馆很大，藏书丰富，学生每天在那里看书。"  # one word changed
C = "东京的天气今天很好，我们去公园散步吧。"


def test_chinese_texts_that_share_most_words_get_close_vectors():
    e = HashEmbedder(_profile("2"))
    a, b, c = e.embed_documents([A, B, C])
    assert _cos(a, b) > 0.8 > 0.2 > _cos(a, c)
    # a word inside a sentence is near the sentence: the query 图书馆 shares its bigrams
    q = e.embed_query("图书馆")
    assert _cos(q, a) > 0.25 and _cos(q, a) > _cos(q, c)
    assert abs(_cos(HashEmbedder(_profile("")).embed_query("图书馆"), a)) < 0.1  # it was no feature of A's


def test_revision_1_keeps_a_cjk_run_whole():
    """A namespace embedded before (its pin's revision is "") is searched with its own features."""
    e = HashEmbedder(_profile(""))
    assert np.array_equal(e.embed_query(A), _before(A, 384))
    a, b = e.embed_documents([A, B])
    assert _cos(a, b) < 0.8  # the last clause, one "word", differs: the old behaviour


def test_the_hash_384_profile_pins_cjk_bigrams_in_its_fingerprint():
    prof = load_settings(None, env={}).profile("hash-384")
    assert prof.revision == "2"
    # the fingerprint before the change: vectors of CJK text differ, so the pin does too
    assert dataclasses.replace(prof, revision="").fingerprint == "798bc49e435f463c" != prof.fingerprint
