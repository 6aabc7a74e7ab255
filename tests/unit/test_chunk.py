from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kbctl.chunk import chunk_document, split_sentences
from kbctl.config import load_settings
from kbctl.embed import get_tokenizer
from kbctl.types import Block, Document

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
    assert "".join(c.text for c in chunks) == blob.rstrip("-") or "".join(c.text for c in chunks) == blob


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
