from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kbctl.chunk import chunk_document, split_sentences
from kbctl.config import load_settings
from kbctl.embed import get_tokenizer
from kbctl.types import Block, Document
from tests.conftest import set_in_chunker

LONG = " ".join(f"Sentence number {i} talks about refunds and invoices in some detail." for i in range(200))


def _profile(name="minilm"):
    return load_settings(env={}).profile(name)


def test_chunks_are_exact_spans_within_the_model_limit():
    prof = _profile()
    tok = get_tokenizer(prof)
    doc = Document.from_blocks(
        "mem://d", "A title", [Block("Intro paragraph."), Block(LONG, heading_path=("Refunds", "Timing"))], "markdown"
    )
    chunks = chunk_document(doc, prof)
    assert len(chunks) > 5
    for c in chunks:
        assert doc.text[c.char_start : c.char_end] == c.text
        assert c.token_count <= prof.chunk.size
        assert tok.count(c.embed_text) + tok.special_tokens <= prof.max_tokens  # nothing truncated
    assert chunks[0].heading_path == () and chunks[1].heading_path == ("Refunds", "Timing")
    assert chunks[1].header == "A title > Refunds > Timing"
    assert [c.position for c in chunks] == list(range(len(chunks)))


def test_overlap_repeats_whole_sentences():
    prof = _profile()
    doc = Document.from_blocks("mem://d", "", [Block(LONG)], "text")
    a, b = chunk_document(doc, prof)[:2]
    assert b.char_start < a.char_end  # they overlap
    shared = doc.text[b.char_start : a.char_end]
    assert shared.startswith("Sentence number") and shared.endswith(".")


def test_sections_and_pages_are_never_mixed():
    prof = _profile("hash-384")
    blocks = [Block("Page one text.", page=1), Block("More on page one.", page=1), Block("Page two text.", page=2)]
    chunks = chunk_document(Document.from_blocks("mem://p", "P", blocks, "pdf"), prof)
    assert [(c.page, c.text) for c in chunks] == [(1, "Page one text.\n\nMore on page one."), (2, "Page two text.")]


def test_a_giant_word_is_split_by_tokens():
    prof = _profile()
    blob = "ab-" * 2000  # no spaces, no sentence ends: only token windows can split it
    doc = Document.from_blocks("mem://g", "", [Block(blob)], "text")
    chunks = chunk_document(doc, prof)
    assert len(chunks) > 1 and all(c.token_count <= prof.chunk.size for c in chunks)
    joined = "".join(c.text.removeprefix("…") for c in chunks)  # a piece going on the line is marked
    assert joined == blob.rstrip("-") or joined == blob


def test_content_hash_changes_with_header():
    prof = _profile("hash-384")
    a = chunk_document(Document.from_blocks("mem://a", "T1", [Block("same text")], "text"), prof)[0]
    b = chunk_document(Document.from_blocks("mem://b", "T2", [Block("same text")], "text"), prof)[0]
    assert a.text == b.text and a.content_hash != b.content_hash


def test_split_sentences():
    t = "Refunds take 5 days. Really? Yes! e.g. this stays. Next one"
    spans = [t[s:e] for s, e in split_sentences(t)]
    assert spans[0] == "Refunds take 5 days." and spans[-1] == "Next one"


def test_semantic_strategy_splits_where_the_topic_changes(tmp_path):
    from kbctl.config import load_settings as _ls

    cfg = tmp_path / "kbctl.toml"
    cfg.write_text(
        '[profiles.sem]\nembedder = "hash"\nmodel = "hash"\n[profiles.sem.chunk]\nstrategy = "semantic"\nsemantic_threshold = 0.05\n'
    )
    prof = _ls(cfg, env={}).profile("sem")
    refunds = "Refunds go back to the card. Refunds take five days. Refunds need approval."
    sso = "SAML login uses the identity provider. SAML login needs a certificate. SAML login maps groups."
    doc = Document.from_blocks("mem://mail", "", [Block(refunds + " " + sso)], "email")
    chunks = chunk_document(doc, prof)
    assert [c.text for c in chunks] == [refunds, sso]
    for c in chunks:
        assert doc.text[c.char_start : c.char_end] == c.text


def test_embed_text_rebuilds_what_the_model_read_from_a_stored_chunk():
    """``chunk.embed_text`` gives, from what the store keeps of a chunk (text, the document's title,
    the heading path, the content hash), the text the model read: with its header, or without it
    where the chunker dropped it for a title too long to leave room."""
    from kbctl.chunk import embed_text

    prof = _profile()
    doc = Document.from_blocks(
        "mem://d", "A title", [Block("Intro paragraph."), Block(LONG, heading_path=("Refunds", "Timing"))], "markdown"
    )
    huge = Document.from_blocks("mem://h", "word " * 2000, [Block("Short text under a huge title.")], "text")
    chunks = chunk_document(doc, prof) + chunk_document(huge, prof)
    assert chunks[-1].header == ""  # dropped: the title alone would not fit
    for c, title in [(c, doc.title) for c in chunks[:-1]] + [(chunks[-1], huge.title)]:
        assert embed_text(c.text, title, c.heading_path, c.content_hash) == c.embed_text
    assert embed_text("text", "T", ("H",)) == "T > H\n\ntext"


def test_the_model_tokenizer_counts_the_tokens_the_model_reads():
    tok = get_tokenizer(_profile())
    for text in ("", "refunds", LONG[:600], "naïve café — 東京 🙂 E_RATE_LIMITED v3.14.2"):
        assert tok.count(text) == len(tok._tok.encode(text, add_special_tokens=False).ids)  # type: ignore[attr-defined]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_the_fast_count_is_the_encodings_length_for_any_text(text):
    """``count`` takes the offset-free batch path (``encode_batch_fast``); it must agree with a full
    encoding on any text: accents, scripts, emoji, control characters, stray whitespace."""
    tok = get_tokenizer(_profile())
    assert tok._fast is not None  # type: ignore[attr-defined]  # the path under test is the one taken
    assert tok.count(text) == len(tok._tok.encode(text, add_special_tokens=False).ids)  # type: ignore[attr-defined]


# The sentence end before session 42: a full stop ended a sentence only where whitespace followed.
_SPACED_END = r"(?<=[.!?…])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|\n(?=\s*[-*•]\s)|\n{2,}"
# Chinese sentences of 20 to 60 characters (varied characters, so no two are alike), no space anywhere.
_ZH_SENTENCES = [
    "".join(chr(0x4E00 + (i * 131 + j * 7919) % 20000) for j in range(20 + (i * 17) % 41)) + "。" for i in range(60)
]


def test_a_chinese_paragraph_longer_than_the_chunk_size_is_cut_at_its_full_stops():
    prof = _profile("hash-384")
    para = "".join(_ZH_SENTENCES)
    assert len(para) > 5 * prof.chunk.size  # one paragraph, a character a token
    doc = Document.from_blocks("mem://zh", "", [Block(para)], "text")
    chunks = chunk_document(doc, prof)
    assert len(chunks) > 5
    starts = {0}
    for s in _ZH_SENTENCES:
        starts.add(max(starts) + len(s))
    for c in chunks:
        assert c.token_count <= prof.chunk.size
        assert c.text.endswith("。"), c.text[-10:]
        assert c.char_start in starts and c.char_end in starts  # whole sentences, never cut inside one
    assert chunks[-1].char_end == len(para)


def test_japanese_sentences_end_at_fullwidth_marks_with_no_space_after_them():
    t = "東京は晴れ。「本当？」と聞いた！大阪は雨．京都は曇り｡まあ……。。そうですね"
    assert [t[s:e] for s, e in split_sentences(t)] == [
        "東京は晴れ。",
        "「本当？」と聞いた！",  # a mark inside quotes does not end the sentence around them
        "大阪は雨．",
        "京都は曇り｡",
        "まあ……。。",
        "そうですね",
    ]
    v = "版本３．５を使う。次"
    assert [v[s:e] for s, e in split_sentences(v)] == ["版本３．５を使う。", "次"]


# The sentence ends of session 42 ("sentences-2"): those and the unspaced stops, with no space needed.
_SENTENCES_2 = _SPACED_END + r"|(?<=[。｡！？．])(?![。｡！？．」』）〕】〉》”’\"')\]0-9０-９])\s*"
# An ASCII ? or ! before a CJK character, a space between or not: where sentences-3 may cut otherwise.
_MARK_BEFORE_CJK = r"[!?]\s*[\u3041-\u30ff\u4e00-\u9fff\uac00-\ud7a3]"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters="。！？．｡", max_codepoint=0x3100), max_size=300))
def test_text_without_a_cjk_sentence_end_is_split_as_before(text):
    import re

    assume(not re.search(_MARK_BEFORE_CJK, text))
    new = split_sentences(text)
    with pytest.MonkeyPatch.context() as m:
        set_in_chunker(m, "_SENTENCE_END", re.compile(_SPACED_END))
        assert split_sentences(text) == new


def test_latin_script_chunks_are_byte_identical_to_the_spaced_rule(monkeypatch):
    """The sample corpus under a model's profile and a ``hash`` one: the same chunks (text, spans,
    hashes) with the sentence ends before session 42 and now."""
    import re
    from pathlib import Path

    from kbctl.extract import extract
    from kbctl.types import Source

    corpus = Path(__file__).resolve().parents[2] / "sample_corpus"
    docs = [
        d
        for p in sorted(corpus.rglob("*.md"))
        for d in extract(Source(f"file:///c/{p.name}", p.read_bytes(), "text/markdown"))
    ]

    def chunks(name: str) -> list:
        return [
            (c.text, c.char_start, c.char_end, c.content_hash) for d in docs for c in chunk_document(d, _profile(name))
        ]

    now = {name: chunks(name) for name in ("minilm", "hash-384")}
    set_in_chunker(monkeypatch, "_SENTENCE_END", re.compile(_SPACED_END))
    assert {name: chunks(name) for name in now} == now
    assert all(len(v) > 20 for v in now.values())


def test_ascii_question_and_exclamation_marks_end_a_sentence_between_cjk_characters():
    """``本当?次の文``: an ASCII ``?`` or ``!`` written in Chinese, Japanese or Korean text with no
    space after it ended no sentence (ASCII marks wanted a space and a capital or digit after them).
    It ends one where a CJK character follows (a space between or not) and one precedes it, so
    English, URLs and a name such as ``Yahoo!ニュース`` are read as before."""
    cases = {
        "本当?次の文": ["本当?", "次の文"],
        "すごい!明日も来る?はい": ["すごい!", "明日も来る?", "はい"],
        "本当?!次の文": ["本当?!", "次の文"],
        "本当? 次の文": ["本当?", "次の文"],
        "정말?다음 문장": ["정말?", "다음 문장"],
        "真的吗?是的!": ["真的吗?", "是的!"],
    }
    for text, want in cases.items():
        assert [text[s:e] for s, e in split_sentences(text)] == want, text
    for text in (
        "Use e.g.?x or http://example.com/a?b=1&c!d here",
        "Is it?ok, wow!great",
        "Yahoo!ニュースを見た",
        "What?東京",
        "本当?」と聞いた",
        '本当?"次',
    ):
        assert [text[s:e] for s, e in split_sentences(text)] == [text], text


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from('本当次の文あア한? !.。？」"Ab1 \n'), max_size=80))
def test_text_without_an_ascii_mark_before_cjk_is_split_as_sentences_2_split_it(text):
    """What session 43 added ends a sentence only at an ASCII ``?``/``!`` before a CJK character:
    text without one is split as session 42's splitter split it (so its stored chunks are kept)."""
    import re

    assume(not re.search(_MARK_BEFORE_CJK, text))
    new = split_sentences(text)
    with pytest.MonkeyPatch.context() as m:
        set_in_chunker(m, "_SENTENCE_END", re.compile(_SENTENCES_2))
        assert split_sentences(text) == new


# A code block of 120 lines, each one statement: far longer than a chunk of any profile.
_CODE_LINES = [f"result_{i} = compute_checksum(data[{i}], seed={i * 7})" for i in range(120)]


def _markdown_chunks(markdown: str, name: str = "minilm"):
    from kbctl.extract import extract
    from kbctl.types import Source

    (doc,) = extract(Source("file:///c/code.md", markdown.encode(), "text/markdown"))
    return doc, chunk_document(doc, _profile(name))


def _fenced_pieces(chunks, opening: str, closing: str) -> list[list[str]]:
    """The code lines of every chunk that holds code, each checked to be a whole fenced block."""
    pieces = []
    for c in chunks:
        if "compute_checksum" not in c.text:
            continue
        lines = c.text.split("\n")
        assert lines[0] == opening and lines[-1] == closing, (c.position, c.text[:60], c.text[-60:])
        pieces.append(lines[1:-1])
    return pieces


def test_a_long_code_block_is_cut_between_lines_and_every_piece_is_a_fenced_block():
    """A fenced code block longer than a chunk was cut like prose: mid-line, even mid-name
    (``result_110 = compute`` | ``_checksum(…)``), and the pieces after the first had no fence, so
    they read as prose. It is cut only at line ends; every piece opens with the block's fence line
    (its info string too) and closes it, and holds the block's lines once, in order."""
    for opening, closing in (("```python", "```"), ("~~~~ js", "~~~~")):
        md = f"# Code\n\nIntro paragraph.\n\n{opening}\n" + "\n".join(_CODE_LINES) + f"\n{closing}\n\nAfter the code.\n"
        for name in ("minilm", "hash-384"):
            prof = _profile(name)
            tok = get_tokenizer(prof)
            doc, chunks = _markdown_chunks(md, name)
            pieces = _fenced_pieces(chunks, opening, closing)
            assert len(pieces) > 3, name
            assert [line for piece in pieces for line in piece] == _CODE_LINES, name
            for c in chunks:
                assert doc.text[c.char_start : c.char_end] in c.text  # the span it cites is in it
                assert c.token_count <= prof.chunk.size
                assert tok.count(c.embed_text) + tok.special_tokens <= prof.max_tokens  # nothing truncated
            assert chunks[0].text == "Intro paragraph." and chunks[-1].text == "After the code."


def test_a_short_code_block_is_packed_with_its_paragraphs_as_before():
    md = "# Code\n\nIntro paragraph.\n\n```sh\nkbctl ingest docs/\n```\n\nAfter the code.\n"
    _, chunks = _markdown_chunks(md)
    assert [c.text for c in chunks] == ["Intro paragraph.\n\n```sh\nkbctl ingest docs/\n```\n\nAfter the code."]


def test_an_unclosed_code_block_is_closed_on_every_piece():
    md = "```python\n" + "\n".join(_CODE_LINES) + "\n"
    _, chunks = _markdown_chunks(md)
    pieces = _fenced_pieces(chunks, "```python", "```")
    assert len(pieces) == len(chunks) > 3
    assert [line for piece in pieces for line in piece] == _CODE_LINES


def test_a_code_line_longer_than_a_chunk_is_cut_between_names_not_inside_one():
    """One line over the budget is cut where a name ends: at a space, else between a name's
    character and another (``.``, ``(``, ``,``), never inside a name; only a line with no such place
    (one giant name) is cut at the tokenizer's token boundaries."""
    call = "x = f(" + ", ".join(f"argument_number_{i}=value_{i}" for i in range(300)) + ")"
    chain_ = "y=" + ".".join(f"attribute_{i}" for i in range(400))
    md = "```python\n" + call + "\n" + chain_ + "\n```\n"
    prof = _profile()
    _, chunks = _markdown_chunks(md)
    bodies = []
    for c in chunks:
        lines = c.text.split("\n")
        assert lines[0] == "```python" and lines[-1] == "```", c.text[:80]
        assert c.token_count <= prof.chunk.size
        bodies.append("\n".join(lines[1:-1]))
    import re

    names = set(re.findall(r"\w+", call + " " + chain_))
    for body in bodies:
        assert set(re.findall(r"\w+", body)) <= names, body[:80]  # every name whole
    assert len(bodies) > 4
    # one name of 99 characters, about 40 word pieces (at 100 the model reads one unknown token),
    # in chunks of 16 tokens: no place to cut between names, so cut between word pieces
    import dataclasses

    blob = ("qwertyuiopasdfghjklzxcvbnm" * 4)[:99]
    small = dataclasses.replace(prof, chunk=dataclasses.replace(prof.chunk, size=16, overlap=0))
    doc = Document.from_blocks("mem://n", "", [Block("```\n" + blob + "\n```")], "markdown")
    chunks = chunk_document(doc, small)
    assert len(chunks) > 1 and "".join(c.text.split("\n")[1] for c in chunks) == blob
    assert all(c.token_count <= 16 for c in chunks)


def test_a_streamed_document_cuts_its_code_blocks_the_same_way():
    from kbctl.chunk import iter_chunks
    from kbctl.types import LargeDocument

    code = "```python\n" + "\n".join(_CODE_LINES) + "\n```"
    blocks = [Block("Intro text."), Block(code), Block("Between."), Block("~~~\n" + "\n".join(_CODE_LINES))]
    doc = Document.from_blocks("mem://w", "W", blocks, "markdown")
    large = LargeDocument(head=doc, chars=len(doc.text), blocks=lambda: iter(doc.blocks))
    prof = _profile()
    whole = chunk_document(doc, prof)
    assert [(c.text, c.char_start, c.char_end) for c in iter_chunks(large, prof)] == [
        (c.text, c.char_start, c.char_end) for c in whole
    ]
    assert sum(c.text.startswith("~~~\n") and c.text.endswith("\n~~~") for c in whole) > 3


def test_a_long_indented_code_block_is_cut_between_lines_and_every_piece_is_fenced():
    """Indented code (four spaces, CommonMark's indented code block) was a paragraph: cut as prose,
    mid-line, its pieces unfenced. The extractor fences it, so it is cut as a fenced block is."""
    md = "# Code\n\nIntro paragraph.\n\n" + "\n".join("    " + line for line in _CODE_LINES) + "\n\nAfter the code.\n"
    for name in ("minilm", "hash-384"):
        _, chunks = _markdown_chunks(md, name)
        pieces = _fenced_pieces(chunks, "```", "```")
        assert len(pieces) > 3, name
        assert [line for piece in pieces for line in piece] == _CODE_LINES, name
        assert chunks[0].text == "Intro paragraph." and chunks[-1].text == "After the code."


def _semantic_profile(tmp_path, size: int = 200):
    cfg = tmp_path / "kbctl.toml"
    cfg.write_text(
        '[profiles.sem]\nembedder = "hash"\nmodel = "hash"\n[profiles.sem.chunk]\nstrategy = "semantic"\n'
        f"semantic_threshold = 0.05\nsize = {size}\noverlap = 0\n"
    )
    return load_settings(cfg, env={}).profile("sem")


def test_the_semantic_strategy_keeps_a_code_block_or_a_table_whole_or_cuts_it_as_the_default_does(tmp_path):
    """``strategy = "semantic"`` split a code block into "sentences" (at blank lines, at ``. `` and
    token windows) and kept apart or joined them by similarity, so a piece began mid-block without
    its fence; a table was cut mid-row. A code block or table that fits is one unit (never split);
    a longer one is cut as the default strategy cuts it: between lines, every piece fenced; between
    rows, every piece under the header."""
    from kbctl.extract import extract
    from kbctl.types import Source

    prof = _semantic_profile(tmp_path)
    short = "```python\nx = load(path). strip()\n\ny = x. split()\n```"
    long_code = "```python\n" + "\n".join(_CODE_LINES) + "\n```"
    rows = "\n".join(f"| City{i:03d} | {1000 + i} |" for i in range(150))
    table = f"| City | Population |\n| --- | --- |\n{rows}"
    md = f"# Code\n\nIntro paragraph.\n\n{short}\n\n{long_code}\n\nBetween.\n\n{table}\n\nAfter the table.\n"
    (doc,) = extract(Source("file:///c/code.md", md.encode(), "text/markdown"))
    chunks = chunk_document(doc, prof)
    texts = [c.text for c in chunks]
    assert any(short in t for t in texts)  # whole, in one chunk
    pieces = _fenced_pieces(chunks, "```python", "```")
    assert len(pieces) > 3 and [line for p in pieces for line in p] == _CODE_LINES
    table_chunks = [t for t in texts if "City0" in t]
    assert len(table_chunks) > 1
    for t in table_chunks:
        assert t.startswith("| City | Population |\n| --- | --- |\n| City")
        assert all(line.startswith("| ") and line.endswith(" |") for line in t.split("\n"))
    for c in chunks:
        assert c.token_count <= prof.chunk.size
        assert doc.text[c.char_start : c.char_end] in c.text
    assert texts[0].startswith("Intro paragraph.") and texts[-1].endswith("After the table.")


def test_since_cuts_4_only_the_semantic_strategy_reads_code_and_tables_again(tmp_path):
    """What a stored chunk of a "cuts-4" source holds when "cuts-5" may cut it otherwise: a code
    fence or a ``|`` under the semantic strategy, nothing under the fixed one (its cuts did not move);
    since "cuts-6", under both, what that moved (a caption over a table, a long line), and since
    "cuts-7" what that moved (a table's long row, a header too long to repeat)."""
    from kbctl.chunk import _CAPTIONED_TABLE, _LONG_LINE, _TABLE_CUT, MOVED_SINCE, moved_since

    semantic = moved_since(_semantic_profile(tmp_path))
    fixed = moved_since(_profile())
    assert semantic["cuts-4"] == "(^|\n)(```|~~~)|\\|" + "|" + _LONG_LINE
    assert (
        fixed["cuts-4"] == fixed["cuts-5"] == MOVED_SINCE["cuts-5"] == f"{_CAPTIONED_TABLE}|{_LONG_LINE}|{_TABLE_CUT}"
    )
    assert MOVED_SINCE["cuts-6"] == _TABLE_CUT
    assert {k: v for k, v in fixed.items() if k != "cuts-4"} == {k: v for k, v in MOVED_SINCE.items() if k != "cuts-4"}


class _CountingTokenizer:
    """The profile's tokenizer, recording every text it is asked to count."""

    def __init__(self, tok) -> None:
        self.tok, self.counted = tok, []
        self.special_tokens = tok.special_tokens

    def count(self, text: str) -> int:
        self.counted.append(text)
        return self.tok.count(text)

    def spans(self, text: str):
        return self.tok.spans(text)


def test_a_short_code_block_is_counted_once(tmp_path):
    """A fenced code block that fits in a chunk was counted twice: once to see it is not long
    (cut on its own), once more as the unit it is packed as. Once, under either strategy."""
    blocks = [f"```sh\nkbctl ingest docs/part_{i}/ --namespace handbook_{i}\n```" for i in range(40)]
    md = "# Code\n\n" + "\n\n".join(f"Step {i} runs this.\n\n{b}" for i, b in enumerate(blocks)) + "\n"
    for prof in (_profile(), _profile("hash-384"), _semantic_profile(tmp_path)):
        doc, _ = _markdown_chunks(md)
        tok = _CountingTokenizer(get_tokenizer(prof))
        chunk_document(doc, prof, tok, embed=lambda texts: [[1.0, float(len(t))] for t in texts])
        assert {b: tok.counted.count(b) for b in blocks} == {b: 1 for b in blocks}, prof.name


_FIRST = ["Alice", "Bob", "Carol", "Dmitri", "Eleanor", "Fyodor", "Gwendolyn", "Hiroshi"]
_LAST = ["Smith", "Jones", "Okonkwo", "Van der Berg", "Nakamura", "Zhou", "Fitzgerald"]
NAMES = [f"{_FIRST[i * 5 % 8]} {_LAST[i * 3 % 7]}" for i in range(400)]
WORDS = {w for n in NAMES for w in n.split()}


def test_a_line_longer_than_a_chunk_is_cut_between_words_and_the_next_piece_is_marked(tmp_path):
    """A sentence longer than a chunk with no sentence end (a list of names) was cut into token
    windows: inside a word (``Okonk`` | ``wo``, ``F`` | ``yodor``), and the next piece began
    mid-line with no mark. It is cut between words (a window that ends inside one goes back to its
    start), and every piece that goes on a cut line opens with ``…`` (``kbctl.chunk.CUT_MARK``).
    Not back to the list's last ``,``: measured, that shortened Cranfield's chunks (nDCG@10 down
    0.006; docs/hardening.md, "Chunker leftovers")."""
    from kbctl.chunk import CUT_MARK, iter_chunks
    from kbctl.types import LargeDocument

    for sep in (", ", "; "):
        line = "Contributors: " + sep.join(NAMES)
        doc = Document.from_blocks("mem://n", "N", [Block("Intro."), Block(line), Block("After.")], "text")
        for prof in (_profile(), _profile("hash-384"), _semantic_profile(tmp_path)):
            tok = get_tokenizer(prof)
            chunks = chunk_document(doc, prof, tok, embed=lambda texts: [[1.0, 0.0] for _ in texts])
            pieces = [c for c in chunks if "Smith" in c.text]
            assert len(pieces) > 3, prof.name
            assert not pieces[0].text.startswith(CUT_MARK)
            for c in pieces[1:]:
                assert c.text.startswith(CUT_MARK), (prof.name, c.text[:40])
            for c in pieces:
                body = c.text.removeprefix(CUT_MARK)
                assert doc.text[c.char_start : c.char_end] == body
                assert c.token_count <= prof.chunk.size
                assert tok.count(c.embed_text) + tok.special_tokens <= prof.max_tokens
                body = body.removeprefix("Intro.\n\n").removesuffix("\n\nAfter.")
                words = {w.strip(",;") for w in body.removeprefix("Contributors: ").split()} - {""}
                assert words <= WORDS, (prof.name, body[:40], body[-40:])  # every word whole
            spans = "".join(doc.text[c.char_start : c.char_end] for c in pieces)  # the line, cut at spaces
            spans = spans.removeprefix("Intro.\n\n").removesuffix("\n\nAfter.")
            assert "".join(spans.split()) == "".join(line.split())  # every character once, in order
        large = LargeDocument(head=doc, chars=len(doc.text), blocks=lambda d=doc: iter(d.blocks))
        assert [c.text for c in iter_chunks(large, _profile())] == [c.text for c in chunk_document(doc, _profile())]


def test_a_sentence_that_fits_and_code_lines_carry_no_mark():
    """Only a piece that goes on a line cut mid-line is marked: not one that starts a sentence, and
    not a piece of a code block (its fence says it goes on; a ``…`` would be read as code)."""
    from kbctl.chunk import CUT_MARK

    chunks = chunk_document(Document.from_blocks("mem://l", "", [Block(LONG)], "text"), _profile())
    assert len(chunks) > 5 and not any(CUT_MARK in c.text for c in chunks)
    call = "x = f(" + ", ".join(f"argument_number_{i}=value_{i}" for i in range(300)) + ")"
    _, chunks = _markdown_chunks("```python\n" + call + "\n```\n")
    assert len(chunks) > 3 and all(c.text.startswith("```python\n") for c in chunks)


def test_a_name_set_in_the_chunker_reaches_every_module_that_reads_it(tmp_path):
    """``set_in_chunker``, with which the tests emulate an earlier revision, sets a name wherever the
    modules of ``kbctl.chunk`` read it: ``_line_windows`` in the structure strategy's cut and the
    semantic one's, ``_fence`` in the strategy and the code cut. Set on ``kbctl.chunk`` alone (a
    package), it would reach neither, and the emulation would test nothing."""
    import re

    def refused(*args):
        raise LookupError("the emulated cut")

    line = "Contributors: " + ", ".join(f"Person{i} Surname{i * 7 % 13}" for i in range(300))
    doc = Document.from_blocks("mem://d", "A title", [Block(line)], "markdown")
    for prof in (_profile("hash-384"), _semantic_profile(tmp_path)):
        with pytest.MonkeyPatch.context() as m:
            set_in_chunker(m, "_line_windows", refused)
            with pytest.raises(LookupError):
                chunk_document(doc, prof)
        assert len(chunk_document(doc, prof)) > 1  # undone
    with pytest.MonkeyPatch.context() as m:
        set_in_chunker(m, "_SENTENCE_END", re.compile("(?!)"))
        assert split_sentences("One here. Two there.") == [(0, 20)]
    long_code = "# Code\n\n```python\n" + "\n".join(_CODE_LINES) + "\n```\n"
    with pytest.MonkeyPatch.context() as m:
        set_in_chunker(m, "_fence", lambda text: None)
        _, chunks = _markdown_chunks(long_code, "hash-384")
    assert len(chunks) > 3 and not all(c.text.startswith("```python\n") for c in chunks)
    with pytest.raises(AssertionError, match="binds"):
        set_in_chunker(pytest.MonkeyPatch(), "_no_such_name", None)
