"""The word tokenizer that measures chunks of profiles without a model tokenizer (the ``hash``
profiles): words and punctuation marks, a character of a script written without spaces (Han, Kana,
Hangul, Thai…) one token, as the lexical analyzer's bigrams and real tokenizers count them. Text
without such a character is counted, and chunked, exactly as before."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kbctl.chunk import chunk_document
from kbctl.config import load_settings
from kbctl.embed import get_tokenizer
from kbctl.embed.tokens import WordTokenizer
from kbctl.types import Block, Document

_BEFORE = re.compile(r"\w+|[^\w\s]", re.UNICODE)  # the pattern before unspaced scripts were counted (session 40)
_CORPUS = Path(__file__).resolve().parents[2] / "sample_corpus"

# About 3,600 Chinese characters, a full stop every ~300 of them and no space anywhere (a run of
# varied characters, so no two chunks are the same text).
_HAN = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(3600))
CHINESE = "。".join(_HAN[i : i + 300] for i in range(0, len(_HAN), 300)) + "。"


def _hash_profile(size: int | None = None, overlap: int | None = None):
    p = load_settings(env={}).profile("hash-384")
    if size is None:
        return p
    return dataclasses.replace(p, chunk=dataclasses.replace(p.chunk, size=size, overlap=overlap or 0))


def _han(text: str) -> int:
    return sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff")


def test_a_character_of_an_unspaced_script_is_a_token():
    tok = WordTokenizer()
    assert tok.count("北京大学的图书馆很大。") == 11  # ten characters and the full stop
    assert tok.count("東京で機械学習を研究しています") == 15  # Han and Hiragana alike
    assert tok.count("서울은 한국의 수도입니다") == 11  # Hangul syllables
    assert tok.count("ภาษาไทย") == 7  # Thai letters
    assert tok.count("กี่") == 1  # a Thai letter with its vowel and tone marks is one
    assert tok.count("使用PostgreSQL数据库") == 6  # a Latin word among them is still one
    assert tok.count("テ\u3099ータ") == 3  # a kana written with a combining mark (NFD) is one
    spans = tok.spans("图书馆 ok")
    assert spans == [(0, 1), (1, 2), (2, 3), (4, 6)]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x0DFF), max_size=300))
def test_text_without_an_unspaced_script_is_counted_as_before(text):
    """Latin, Cyrillic, Greek, Arabic, Devanagari…: every span as the old pattern gave it."""
    tok = WordTokenizer()
    assert tok.spans(text) == [m.span() for m in _BEFORE.finditer(text)]
    assert tok.count(text) == len(_BEFORE.findall(text))


def test_a_long_chinese_text_is_chunked_to_the_hash_profiles_size():
    """A few thousand characters without spaces, a full stop now and then: chunks of at most
    ``chunk.size`` characters (a character a token), not one chunk per paragraph."""
    prof = _hash_profile()
    assert get_tokenizer(prof).count("图书馆") == 3
    doc = Document.from_blocks("mem://zh", "", [Block(CHINESE)], "text")
    chunks = chunk_document(doc, prof)
    assert len(chunks) >= len(CHINESE) // prof.chunk.size
    for c in chunks:  # a piece going on a sentence cut mid-line opens with … (session 46)
        assert doc.text[c.char_start : c.char_end] == c.text.removeprefix("…")
        assert c.token_count <= prof.chunk.size
        assert _han(c.text) <= c.token_count
    covered = set().union(*(range(c.char_start, c.char_end) for c in chunks))
    assert covered == set(range(len(doc.text)))  # nothing left out


def test_chinese_paragraphs_are_packed_and_a_long_one_cut_to_the_size():
    prof = _hash_profile(size=64, overlap=8)
    blocks = [Block("北京大学的图书馆很大。"), Block("学生每天在那里学习。"), Block(_HAN[:500])]
    doc = Document.from_blocks("mem://zh", "", blocks, "text")
    chunks = chunk_document(doc, prof)
    assert chunks[0].text == "北京大学的图书馆很大。\n\n学生每天在那里学习。"  # two short paragraphs packed
    assert all(c.token_count <= 64 and len(c.text.replace("\n", "")) <= 64 for c in chunks)
    assert len(chunks) >= 500 // 64


def _pinned_markdown() -> list[Path]:
    """The sample corpus's Markdown files whose chunk boundaries are pinned: its documents, not its
    README (a description of the corpus, edited by hand: an edit of its text is no chunker's change)."""
    return sorted(p for p in _CORPUS.rglob("*.md") if p != _CORPUS / "README.md")


def test_the_pinned_markdown_is_the_sample_corpus_but_its_readme():
    """The pins guard the chunker: sample_corpus/README.md describes the corpus and is edited by hand
    (its table was in session 43), and each edit broke them. The others are documents of the corpus."""
    pinned = _pinned_markdown()
    assert _CORPUS / "README.md" not in pinned
    assert pinned == sorted(p for p in _CORPUS.rglob("*.md") if p != _CORPUS / "README.md")
    assert len(pinned) == 31 and all(p.parent != _CORPUS for p in pinned)


def test_english_chunk_boundaries_are_unchanged():
    """Every chunk of the sample corpus's Markdown documents (``_pinned_markdown``: not its README)
    under ``hash-384``, at its size and at a small one (more cuts: sentences, windows, overlaps), has
    the spans and counts it had before. Taken again in session 43 without the README (the same
    chunker: the pins over every file held at that commit). The small size's taken again in session
    45: five files of support/technical hold a code block longer than 40 tokens, now cut between
    lines, every piece fenced (``test_chunk.py``); every other file's chunks are as they were
    (compared file by file, under this profile and ``minilm``, with the chunker before). Taken
    again in session 46 ("cuts-6"): files at size 40 that hold a sentence, or a table whose header is
    too long to repeat at that size, longer than a chunk, now cut at a line end or between words
    (never inside one), the piece going on a cut line opened with ``…``; the size-200 pin holds.
    Taken again in session 48 ("cuts-7"): 17 files at size 40 hold a table whose header is too long
    to repeat at that size (cut as prose before, now as a table under the header cut at a cell
    edge) or a row longer than a chunk (now cut between cells or words, marked); no chunk outside
    a table moved (compared file by file with the chunker before); the size-200 pin holds."""
    from kbctl.extract import extract
    from kbctl.types import Source

    pins = {
        (200, 32): (236, "1b71fbf2ddf56e99f596e092f34a7c487054582a59b7afc487153ed270bcda58"),
        (40, 8): (695, "47836ca40c01cacf844bcd0afe990bde1f958102d7aedaad0d780043e246938b"),
    }
    for (size, overlap), (n, digest) in pins.items():
        prof = _hash_profile(size, overlap)
        rows = []
        for p in _pinned_markdown():
            source = Source(f"file:///corpus/{p.relative_to(_CORPUS)}", p.read_bytes(), "text/markdown")
            for d in extract(source):
                rows += [[d.uri, c.position, c.char_start, c.char_end, c.token_count] for c in chunk_document(d, prof)]
        assert (len(rows), hashlib.sha256(json.dumps(rows).encode()).hexdigest()) == (n, digest)
