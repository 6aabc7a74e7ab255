"""Fidelity on real documents (tests/fixtures/real/README.md: what they are and their licences)."""

from __future__ import annotations

from pathlib import Path

from kbctl.chunk import chunk_document
from kbctl.config import load_settings
from kbctl.extract import extract
from kbctl.types import Source

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"


def _spec():
    path = REAL / "shared-mime-info-spec.pdf"
    (doc,) = extract(Source(path.as_uri(), path.read_bytes(), "application/pdf"))
    return doc


def test_a_pdftex_document_keeps_the_spaces_between_its_words():
    doc = _spec()
    assert doc.title == "Shared MIME-info Database" and doc.metadata["page_count"] == 17
    for expected in (
        "This is version 0.21 of the Shared MIME-info Database specification, last updated 2 October 2018.",
        "Many programs and desktops use the MIME system",
        "interpreted as described in RFC 2119",
        "glob-deleteall or\nmagic-deleteall is used to overwrite parts of a mimetype definition.",
    ):
        assert expected in doc.text
    glued = [w for w in doc.text.split() if len(w) > 30 and "/" not in w and ":" not in w]
    assert glued == []  # before: "Thisisversion0.21oftheSharedMIME-infoDatabasespecification,…"
    assert {b.page for b in doc.blocks} == set(range(1, 18))


def test_every_chunk_of_a_real_pdf_is_placed_on_its_page():
    doc = _spec()
    chunks = chunk_document(doc, load_settings(env={}).profile("hash-384"))
    assert len(chunks) > 30
    for c in chunks:
        assert c.boxes and {b[0] for b in c.boxes} == {c.page}
        # on the page (610 x 789 points; one overfull TeX line of a URL runs a few points past its edge)
        assert all(0 <= b[1] < b[3] <= 620 and 0 <= b[2] < b[4] <= 789 for b in c.boxes)
