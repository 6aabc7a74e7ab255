"""Citations that point at the place: PDF chunks keep their lines' boxes; web hits a text-fragment link."""

from __future__ import annotations

from kbctl.chunk import chunk_document
from kbctl.config import load_settings
from kbctl.extract import extract
from kbctl.search.cite import _with_link
from kbctl.search.context import format_context
from kbctl.textutil.fragment import text_fragment_link
from kbctl.types import Hit, SearchResult, Source
from tests.pdfmake import table_items, text_pdf

ROWS = [["Cluster", "Terabytes"], ["ORION-7", "412"], ["VEGA-2", "1,208"]]


def _pdf() -> bytes:
    one = [("text", 50, 60, 14, "Storage report"), ("text", 50, 90, 10, "Cluster growth was steady all year.")]
    two = [
        ("text", 50, 60, 11, "Cold tier"),
        ("text", 50, 80, 10, "Archive bucket ARC-2291 moved to the cold tier on 14 February."),
        ("text", 50, 93, 10, "The migration saved about 38 percent of the monthly bill."),
        *table_items(ROWS, y=150),
    ]
    return text_pdf([one, two])


def test_every_pdf_chunk_has_the_boxes_of_its_lines_on_its_page():
    (doc,) = extract(Source("file:///d/r.pdf", _pdf(), "application/pdf"))
    chunks = chunk_document(doc, load_settings(env={}).profile("hash-384"))
    arc = next(c for c in chunks if "ARC-2291" in c.text)
    assert arc.page == 2 and arc.boxes and {b[0] for b in arc.boxes} == {2}
    assert len(arc.boxes) == arc.text.count("\n") + 1 - arc.text.count("\n\n")  # one box per line
    line = next(b for b in arc.boxes if 75 < b[2] < 90)  # the ARC-2291 line: 80 points down (baseline)
    x0, top, x1, bottom = line[1:]
    assert x0 == 50.0 and 300 < x1 < 400 and bottom - top < 14
    table = next(c for c in chunks if c.text.startswith("| Cluster"))
    assert table.boxes == ((2, 50.0, 150.0, 270.0, 198.0),)  # the table's grid
    assert all(c.boxes for c in chunks)


def test_a_text_fragment_link_names_the_passage_first_and_last_words():
    text = "Archive bucket ARC-2291 moved to the cold tier on 14 February, saving 38% & more."
    link = text_fragment_link("https://example.org/news#top", text)
    assert link == "https://example.org/news#:~:text=Archive%20bucket%20ARC%2D2291%20moved,saving%2038%25%20%26%20more."
    assert text_fragment_link("https://e.org/", "Short passage here") == "https://e.org/#:~:text=Short%20passage%20here"
    table = "| City | Pop |\n| --- | --- |\n| Oslo | 700 |"
    assert text_fragment_link("https://e.org/t", table) == "https://e.org/t#:~:text=City%20Pop%20Oslo%20700"
    assert text_fragment_link("https://e.org/", "| --- |") is None


def test_web_hits_carry_the_link_and_the_context_format_shows_it():
    meta = _with_link({"source_type": "html"}, "https://example.org/a", "Refunds take five days.")
    assert meta["link"] == "https://example.org/a#:~:text=Refunds%20take%20five%20days."
    assert "link" not in _with_link(
        {"source_type": "pdf", "path": "/x.pdf"}, "file:///x.pdf", "Refunds take five days."
    )
    hit = Hit(
        1, 1.0, 1, 1, "https://example.org/a", "A", "Refunds take five days.", "ns", meta, "A (https://example.org/a)"
    )
    ctx = format_context(SearchResult("refunds", ("ns",), "hybrid", "default", (hit,)), 500)
    assert ctx.startswith(
        "[1] A (https://example.org/a) <https://example.org/a#:~:text=Refunds%20take%20five%20days.>\n"
    )


def test_the_agent_tools_cite_with_the_place():
    from kbctl.ids import Ids
    from kbctl.server.answers import cite

    ids = Ids(b"k" * 32)
    doc, chunk = ids.seal("d", 7), ids.seal("c", 9)  # an agent sees opaque ids (kbctl.ids)
    meta = {"source_type": "pdf", "page": 2, "boxes": [[2, 50.0, 72.1, 336.8, 82.1]], "author": "x"}
    hit = Hit(1, 1.0, 7, 9, "r.pdf", "R", "text", "ns", meta, "R (r.pdf) p. 2")
    assert cite(hit, ids) == {
        "rank": 1, "citation": "R (r.pdf) p. 2", "doc_id": doc, "chunk_id": chunk, "namespace": "ns",
        "resource": f"kbctl://ns/{doc}#{chunk}", "page": 2, "boxes": [[2, 50.0, 72.1, 336.8, 82.1]],
    }  # fmt: skip
    web = Hit(1, 1.0, 7, 9, "https://e.org/a", "A", "t", "ns", {"link": "https://e.org/a#:~:text=t"}, "A")
    assert cite(web, ids)["link"] == "https://e.org/a#:~:text=t" and "page" not in cite(web, ids)
