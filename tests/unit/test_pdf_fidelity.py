"""PDF tables as Markdown tables and scanned pages read by OCR, on PDFs made at test time."""

from __future__ import annotations

import pytest

from kbctl.errors import ExtractError
from kbctl.extract import ExtractOptions, extract
from kbctl.extract.tables import table_header
from kbctl.types import Source
from tests.pdfmake import scanned_pdf, table_items, text_pdf

ROWS = [
    ["Cluster", "Region", "Terabytes"],
    ["ORION-7", "eu-west", "412"],
    ["VEGA-2", "us-east", "1,208"],
    ["LYRA-9", "ap-south", "77"],
]


def _src(data: bytes, name: str = "x.pdf") -> Source:
    return Source(uri=f"file:///d/{name}", content=data, media_type="application/pdf")


def _table_pdf() -> bytes:
    page = [
        ("text", 50, 60, 11, "Storage by cluster"),
        ("text", 50, 80, 10, "The clusters grew in every region this quarter."),
        ("text", 50, 108, 10, "Table 2: Capacity per cluster"),
        *table_items(ROWS, y=115),
        ("text", 50, 220, 10, "Numbers are end-of-quarter values."),
    ]
    return text_pdf([page])


def test_a_ruled_pdf_table_is_a_markdown_table_with_every_cell_and_its_caption():
    (doc,) = extract(_src(_table_pdf()))
    tables = [b for b in doc.blocks if table_header(b.text)]
    assert len(tables) == 1
    (t,) = tables
    assert t.text.splitlines() == [
        "| Cluster | Region | Terabytes |",
        "| --- | --- | --- |",
        "| ORION-7 | eu-west | 412 |",
        "| VEGA-2 | us-east | 1,208 |",
        "| LYRA-9 | ap-south | 77 |",
    ]
    assert t.heading_path == ("Table 2: Capacity per cluster",) and t.page == 1
    texts = [b.text for b in doc.blocks]
    # the text around it is kept, in order, and the cells are not repeated as loose lines
    caption = next(i for i, x in enumerate(texts) if x.endswith("Table 2: Capacity per cluster"))
    assert caption < texts.index(t.text) < texts.index("Numbers are end-of-quarter values.")
    assert sum("ORION-7" in x for x in texts) == 1


def test_tables_off_reads_the_cells_as_lines():
    (doc,) = extract(_src(_table_pdf()), ExtractOptions(tables=False))
    assert not any(table_header(b.text) for b in doc.blocks) and "ORION-7" in doc.text


def test_a_page_of_text_without_lines_does_not_look_for_tables():
    (doc,) = extract(_src(text_pdf([[("text", 50, 60, 11, "Plain text only, no rules drawn.")]])))
    assert doc.text == "Plain text only, no rules drawn."


SCAN = [
    "Quarterly maintenance log",
    "The pump station Kestrel was inspected on Monday.",
    "Replacement valve serial QX4471 was fitted.",
    "Next inspection is due in October.",
]


def test_a_scanned_pdf_without_the_ocr_extra_is_an_error_with_a_hint(monkeypatch):
    import kbctl.extract.ocr as ocr

    monkeypatch.setattr(ocr, "ocr_available", lambda: False)
    with pytest.raises(ExtractError, match=r"scanned images\? OCR is not installed") as e:
        extract(_src(scanned_pdf([SCAN])))
    assert "kbctl[ocr]" in e.value.hint


def test_ocr_off_leaves_a_scan_unread():
    with pytest.raises(ExtractError, match=r"OCR is off"):
        extract(_src(scanned_pdf([SCAN])), ExtractOptions(ocr="off"))


def test_a_scanned_page_is_read_by_ocr_with_its_confidence():
    pytest.importorskip("rapidocr_onnxruntime")
    (doc,) = extract(_src(scanned_pdf([SCAN])))
    assert doc.metadata["ocr_pages"] == [1] and doc.metadata["ocr_confidence"] > 0.9
    assert "qx4471" in doc.text.lower() and "Kestrel" in doc.text  # search folds case: X or x both find it
    assert all(b.page == 1 for b in doc.blocks)
    assert not doc.notes  # a clean page is not a warning


def test_a_low_confidence_page_is_a_warning(monkeypatch):
    pytest.importorskip("rapidocr_onnxruntime")
    (doc,) = extract(_src(scanned_pdf([SCAN])), ExtractOptions(ocr_min_confidence=0.999))
    assert doc.notes and doc.notes[0][0] == "OcrWarning" and "page 1 read by OCR with low confidence" in doc.notes[0][1]


def test_text_pages_never_reach_ocr(monkeypatch):
    import kbctl.extract.ocr as ocr

    def boom(*a, **k):
        raise AssertionError("OCR ran on a page with text")

    monkeypatch.setattr(ocr, "read_image", boom)
    (doc,) = extract(_src(_table_pdf()))
    assert "ocr_pages" not in doc.metadata


def _joined(*pdfs: bytes) -> bytes:
    """One PDF of the pages of ``pdfs`` (pypdfium2, which pdfplumber brings)."""
    import io

    import pypdfium2 as pdfium

    out = pdfium.PdfDocument.new()
    for data in pdfs:
        out.import_pages(pdfium.PdfDocument(data))
    buf = io.BytesIO()
    out.save(buf)
    return buf.getvalue()


def test_a_scanned_page_in_a_pdf_with_text_is_a_warning_when_ocr_is_off_and_read_when_on():
    data = _joined(text_pdf([[("text", 50, 60, 11, "A typed cover page.")]]), scanned_pdf([SCAN]))
    (doc,) = extract(_src(data), ExtractOptions(ocr="off"))
    assert doc.text == "A typed cover page." and "ocr_pages" not in doc.metadata
    assert doc.notes == (("OcrWarning", "page(s) 2 hold images without text: OCR is off ([extract] ocr)"),)
    pytest.importorskip("rapidocr_onnxruntime")
    (doc,) = extract(_src(data))
    assert doc.metadata["ocr_pages"] == [2] and "Kestrel" in doc.text and not doc.notes
    assert doc.blocks[0].page == 1 and {b.page for b in doc.blocks} == {1, 2}


def _report_pages(n_pages: int, header: list[str], footer) -> bytes:
    """Pages of three paragraphs under a running header (its lines) and over a footer (``footer(n)``)."""
    pages = []
    for n in range(1, n_pages + 1):
        items = [("text", 50, 40 + 14 * i, 9, line) for i, line in enumerate(header)]
        y = 110
        for p in range(3):
            for ln in range(4):
                items.append(("text", 50, y, 11, f"Page {n} paragraph {p} line {ln} of the quarterly narrative."))
                y += 14
            y += 14
        items.append(("text", 290, 800, 9, footer(n)))
        pages.append(items)
    return text_pdf(pages)


def test_a_two_line_running_header_and_a_footer_numbered_from_another_page_are_dropped_from_every_page():
    data = _report_pages(5, ["Annual Report 2024", "Chapter Two: Operations"], lambda n: f"- {n + 10} -")
    doc = extract(_src(data))[0]
    assert "Chapter Two" not in doc.text
    assert "Annual Report" not in doc.title + doc.text
    assert not any(f"- {n} -" in doc.text for n in range(11, 16))
    assert {b.page for b in doc.blocks} == {1, 2, 3, 4, 5}
    assert all(b.text.startswith("Page ") for b in doc.blocks)


def test_a_word_hyphenated_across_a_line_end_is_joined_and_a_compound_keeps_its_hyphen():
    page = [
        ("text", 50, 100, 11, "The replication proto-"),
        ("text", 50, 114, 11, "col recovers after a parti-"),
        ("text", 50, 128, 11, "tion; it is state-"),
        ("text", 50, 142, 11, "of-the-art and Anglo-"),
        ("text", 50, 156, 11, "Saxon in style."),
    ]
    (block,) = extract(_src(text_pdf([page])))[0].blocks
    words = block.text.split()
    assert {"protocol", "partition;", "state-of-the-art", "Anglo-"} <= set(words)
    assert "proto-" not in words and "col" not in words
    for offset, length, *_ in block.boxes:  # every line still has its box over its own text
        assert block.text[offset : offset + length].strip()
    assert len(block.boxes) == 5


_LEFT = [
    "Queues hold the writes that the primary has not",
    "yet applied, and under a sustained burst their",
    "backlog grows until the flow control engages and",
    "the clients are told to slow down for a while.",
]
_RIGHT = [
    "Caches keep the hot keys of every tenant in the",
    "memory of the edge nodes, and their eviction policy",
    "prefers the keys read least recently when a node",
    "runs short of memory during the nightly batch.",
]


def test_a_two_column_page_is_read_column_by_column_under_its_full_width_title():
    page = [("text", 50, 50, 14, "Replication and caching in the storage layer: a field report from ops")]
    for i, (left, right) in enumerate(zip(_LEFT, _RIGHT)):
        page += [("text", 50, 100 + 13 * i, 10, left), ("text", 310, 100 + 13 * i, 10, right)]
    doc = extract(_src(text_pdf([page])))[0]
    text = " ".join(doc.text.split())
    assert text.startswith("Replication and caching")
    assert " ".join(_LEFT) in text
    assert " ".join(_RIGHT) in text
    lines = {b.text[o : o + n]: x0 for b in doc.blocks for o, n, x0, *_ in b.boxes}
    assert lines[_RIGHT[0]] == 310 and lines[_LEFT[-1]] == 50  # each line keeps its own box


def test_a_glossary_of_short_terms_beside_their_definitions_stays_row_by_row():
    terms = ["Primary", "Replica", "Backlog", "Eviction", "Tenant", "Burst"]
    page = []
    for i, term in enumerate(terms):
        page += [
            ("text", 50, 100 + 13 * i, 10, term),
            ("text", 310, 100 + 13 * i, 10, f"what {term.lower()} means here"),
        ]
    doc = extract(_src(text_pdf([page])))[0]
    assert "Primary what primary means here" in " ".join(doc.text.split())


_LOWER_LEFT = [
    "Snapshots are taken of every volume each night and",
    "kept for a week, then thinned to one a week for the",
    "rest of the quarter, so that a restore can reach back",
    "far enough to undo a mistake nobody noticed at once.",
]
_LOWER_RIGHT = [
    "Restores are rehearsed on the first Monday of every",
    "month on a spare cluster, and the time each one takes",
    "is written to the runbook next to the volume's size",
    "so that the next outage starts from a known estimate.",
]
_FULL = [
    "Figure 3: the write path from the client through the queues and caches to the volumes and back,",
    "drawn across the whole width of the page between the two halves of the report's second section.",
]


def _columns(y: float, left: list[str], right: list[str]) -> list:
    items = []
    for i, (a, b) in enumerate(zip(left, right)):
        items += [("text", 50, y + 13 * i, 10, a), ("text", 310, y + 13 * i, 10, b)]
    return items


@pytest.mark.parametrize(
    "top, full",
    [(100, 180), (300, 410), (400, 470)],
    ids=["the block above the page's middle", "the block across the middle", "the block below the middle"],
)
def test_two_column_bands_around_a_full_width_block_are_each_read_column_by_column(top, full):
    page = [("text", 50, 50, 14, "Replication and caching in the storage layer: a field report from ops")]
    page += _columns(top, _LEFT, _RIGHT)
    # the caption's label is set larger than its line: it reaches below the line's words that cross the gutter
    page += [
        ("text", 50, full, 14, "Figure 3:"),
        ("text", 125, full, 10, _FULL[0].removeprefix("Figure 3: ")),
        ("text", 50, full + 13, 10, _FULL[1]),
    ]
    page += _columns(full + 60, _LOWER_LEFT, _LOWER_RIGHT)
    doc = extract(_src(text_pdf([page])))[0]
    text = " ".join(doc.text.split())
    parts = [
        "Replication and caching",
        " ".join(_LEFT),
        " ".join(_RIGHT),
        " ".join(_FULL),
        " ".join(_LOWER_LEFT),
        " ".join(_LOWER_RIGHT),
    ]
    at = [text.find(p) for p in parts]
    assert -1 not in at, [p for p, i in zip(parts, at) if i == -1]
    assert at == sorted(at)  # each full-width band in its place, each two-column band left then right
    lines = {b.text[o : o + n]: x0 for b in doc.blocks for o, n, x0, *_ in b.boxes}
    assert lines[_LOWER_RIGHT[0]] == 310 and lines[_LEFT[-1]] == 50 and lines[_FULL[1]] == 50


def test_a_listing_under_notes_set_to_its_right_stays_line_by_line():
    """A record layout as the real fixture's page 12 sets one: a note to the right of the lines above
    it, the listing below it, the page number at the foot; no two columns side by side."""
    page = [
        ("text", 50, 80 + 13 * i, 10, f"Paragraph line {i} runs across the whole width of this page, as prose does.")
        for i in range(6)
    ]
    page += [("text", 120, 160 + 13 * i, 10, f"4 CARD32 FIELD_{i}_OFFSET") for i in range(3)]
    page += [
        ("text", 335, 210, 10, "FLAGS in the rest of it:"),
        ("text", 335, 223, 10, "0x100 = a case-sensitive match"),
    ]
    page += [("text", 120, 250 + 13 * i, 10, f"4 CARD32 MATCH_{i}_OFFSET") for i in range(6)]
    page += [("text", 530, 800, 10, "12")]
    doc = extract(_src(text_pdf([page])))[0]
    text = " ".join(doc.text.split())
    assert "FIELD_2_OFFSET FLAGS in the rest of it: 0x100 = a case-sensitive match 4 CARD32 MATCH_0" in text


def test_a_url_an_address_or_a_path_broken_at_its_own_hyphen_keeps_it_and_words_are_still_joined():
    page = [
        ("text", 50, 100, 11, "The notes are at https://my-"),
        ("text", 50, 114, 11, "site.org/a and www.kb-"),
        ("text", 50, 128, 11, "tools.example, mail ops@my-"),
        ("text", 50, 142, 11, "company.example or read /etc/kb-"),
        ("text", 50, 156, 11, "ctl/config.toml; the proto-"),
        ("text", 50, 170, 11, "col of the input/out-"),
        ("text", 50, 184, 11, "put stage is described there."),
    ]
    (block,) = extract(_src(text_pdf([page])))[0].blocks
    words = block.text.split()
    assert {"https://my-site.org/a", "www.kb-tools.example,", "ops@my-company.example"} <= set(words)
    assert "/etc/kb-ctl/config.toml;" in words
    assert {"protocol", "input/output"} <= set(words)  # ordinary words (a pair of them too) as before
    assert "https://mysite.org/a" not in words and "ops@mycompany.example" not in words
    for offset, length, *_ in block.boxes:
        assert block.text[offset : offset + length].strip()


def test_a_url_or_path_broken_after_a_slash_or_a_dot_is_joined_when_the_next_line_goes_on_with_it():
    page = [
        ("text", 50, 100, 11, "The guide is at https://docs.example.org/"),
        ("text", 50, 114, 11, "guides/getting-started.html and the mirror at https://www.example."),
        ("text", 50, 128, 11, "org/mirror/ while the schema lives in /usr/share/mime/"),
        ("text", 50, 142, 11, "packages/freedesktop.org.xml for now. Read https://example.org."),
        ("text", 50, 156, 11, "then write to https://example.org/"),
        ("text", 50, 170, 11, "and wait. The file /etc/hosts."),
        ("text", 50, 184, 11, "lists them; see www.example.org/"),
        ("text", 50, 198, 11, "e.g. the index."),
    ]
    (block,) = extract(_src(text_pdf([page])))[0].blocks
    words = block.text.split()
    assert "https://docs.example.org/guides/getting-started.html" in words
    assert "https://www.example.org/mirror/" in words
    assert "/usr/share/mime/packages/freedesktop.org.xml" in words
    # ordinary sentences after an address that ends a line are not joined to it
    assert {"https://example.org.", "then", "https://example.org/", "and", "/etc/hosts.", "lists"} <= set(words)
    assert {"www.example.org/", "e.g."} <= set(words)
    for offset, length, *_ in block.boxes:
        assert block.text[offset : offset + length].strip()


def test_a_hyphen_after_an_upper_case_token_at_a_line_end_is_kept():
    page = [
        ("text", 50, 100, 11, "The service speaks TCP/IP-"),
        ("text", 50, 114, 11, "based protocols and an API-"),
        ("text", 50, 128, 11, "driven schema; its proto-"),
        ("text", 50, 142, 11, "col wraps an X-"),
        ("text", 50, 156, 11, "ray of Hyper-"),
        ("text", 50, 170, 11, "text and input/out-"),
        ("text", 50, 184, 11, "put."),
    ]
    (block,) = extract(_src(text_pdf([page])))[0].blocks
    words = block.text.split()
    # a word in capitals is not hyphenated by the typesetter: its hyphen is the text's
    assert {"TCP/IP-based", "API-driven", "X-ray"} <= set(words)
    assert {"protocol", "Hypertext", "input/output."} <= set(words)  # words broken by the typesetter as before


# Three articles of a newsletter, each wrapped to a column of about 150 points at 9 points, and two
# more wrapped to the columns of a two-column band (about 220 points): each band a quarter of the page.
_ARTICLES = [
    "Volunteers from the harbour association repainted the old lighthouse over three weekends in May, "
    "and the council has promised to light its lamp again for the summer festival if the wiring passes "
    "its inspection in June. The paint was donated by the chandlery on Quay Street, whose owner climbed "
    "the tower herself to check the colour against the photographs of the keepers' cottage from before "
    "the war, and the scaffolding came on loan from the builders who are restoring the old customs house.",
    "The ferry timetable changes on the first of July: the early boat leaves twenty minutes sooner, the "
    "last one an hour later on Fridays, and bicycles travel free of charge on every crossing until the "
    "end of September. Season tickets bought before the change remain valid, and the booking office on "
    "the pier now opens at half past six, so that commuters can buy a return without queueing behind "
    "the coaches of tourists who arrive for the morning sailing to the island and its bird reserve.",
    "Our quiz night raised enough money for a new roof on the scout hut, and the winning team, four "
    "retired teachers calling themselves the Late Arrivals, has already challenged the fire brigade to "
    "a rematch in autumn. The questions were set by the vicar, whose round on local history defeated "
    "almost everyone, and the raffle prizes, from a hamper of cheese to a flight over the bay in a small "
    "aircraft, were given by shops and farms from every corner of the parish and the next valley.",
]
_TWO = [
    "The spring market moves from the car park to the village green this year, with stalls for local "
    "cheese, honey and plants, and a covered corner for the brass band when it rains as it did last time. "
    "Traders who booked a pitch last year keep it if they confirm by the end of March; new traders are "
    "asked to write to the market committee with a short description of what they sell and how much "
    "room they need, and the committee will answer every letter before the first market day in April.",
    "Roadworks on the coast road start after Easter and last six weeks; the bus to town takes the hill "
    "route meanwhile, so allow ten minutes more, and the stop by the church moves to the school gate. "
    "The works replace the drains under the road, which flooded twice last winter, and widen the "
    "pavement by the bakery, where parents with prams have had to step into the traffic; the contractor "
    "promises to keep one lane open at all times and to finish before the summer visitors arrive.",
]


def _wrap(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width)


def _band(y: float, xs: list[float], texts: list[str], width: int) -> tuple[list, list[list[str]], float]:
    """Columns of ``texts`` wrapped to ``width`` characters, set at ``xs`` from ``y`` down: the items,
    each column's lines and the band's bottom."""
    cols = [_wrap(t, width) for t in texts]
    items = [("text", x, y + 12 * i, 9, line) for x, lines in zip(xs, cols) for i, line in enumerate(lines)]
    return items, cols, y + 12 * max(map(len, cols))


def _in_order(text: str, parts: list[str]) -> None:
    flat = " ".join(text.split())
    at = [flat.find(" ".join(p.split())) for p in parts]
    assert -1 not in at, [p for p, i in zip(parts, at) if i == -1]
    assert at == sorted(at), at


def test_a_three_column_page_is_read_column_by_column_under_its_full_width_title():
    title = ("text", 50, 50, 16, "Harbour News: the village newsletter for the summer months of this year")
    items, cols, _ = _band(100, [50, 215, 380], _ARTICLES, 34)
    doc = extract(_src(text_pdf([[title, *items]])))[0]
    _in_order(doc.text, ["Harbour News", *(" ".join(c) for c in cols)])
    lines = {b.text[o : o + n]: x0 for b in doc.blocks for o, n, x0, *_ in b.boxes}
    assert lines[cols[2][0]] == 380 and lines[cols[0][-1]] == 50


@pytest.mark.parametrize("heading", [True, False], ids=["a heading between the bands", "nothing between them"])
@pytest.mark.parametrize("two_first", [True, False], ids=["two columns above three", "three columns above two"])
def test_a_two_column_band_and_a_three_column_band_are_each_read_column_by_column(heading, two_first):
    bands = [("two", [50, 280], _TWO, 52), ("three", [50, 215, 380], _ARTICLES, 34)]
    if not two_first:
        bands.reverse()
    page, parts, y = [("text", 50, 50, 16, "Harbour News: the village newsletter, summer edition")], [], 100.0
    for n, (_, xs, texts, width) in enumerate(bands):
        if n and heading:
            page.append(("text", 50, y + 14, 12, "Around the village: notes from the parish council meeting"))
            parts.append("Around the village")
            y += 40
        items, cols, y = _band(y + 10, xs, texts, width)
        page += items
        parts += [" ".join(c) for c in cols]
    doc = extract(_src(text_pdf([page])))[0]
    _in_order(doc.text, ["Harbour News", *parts])


def test_two_column_bands_whose_gutters_lie_apart_are_each_read_column_by_column():
    """A two-column band split at the middle above one split at a third (a narrow column beside a wide one)."""
    page = [("text", 50, 50, 16, "Harbour News: the village newsletter, summer edition")]
    upper, up_cols, y = _band(100, [50, 280], _TWO, 52)
    narrow = _wrap(_ARTICLES[0], 22)
    wide = _wrap(_ARTICLES[1] + " " + _ARTICLES[2], 58)
    lower = [("text", 50, y + 30 + 12 * i, 9, line) for i, line in enumerate(narrow)]
    lower += [("text", 200, y + 30 + 12 * i, 9, line) for i, line in enumerate(wide)]
    doc = extract(_src(text_pdf([page + upper + lower])))[0]
    _in_order(doc.text, ["Harbour News", *(" ".join(c) for c in up_cols), " ".join(narrow), " ".join(wide)])


def test_an_unruled_table_of_short_cells_stays_row_by_row():
    rows = [(f"NODE-{i:02d}", ["eu-west", "us-east", "ap-south"][i % 3], f"{100 + 37 * i}") for i in range(30)]
    page = [("text", 50, 50, 14, "Capacity per node at the end of the quarter")]
    for i, (node, region, tb) in enumerate(rows):
        page += [("text", x, 90 + 13 * i, 10, cell) for x, cell in zip((50, 230, 410), (node, region, tb))]
    doc = extract(_src(text_pdf([page])), ExtractOptions(tables=False))[0]
    flat = " ".join(doc.text.split())
    assert all(" ".join(r) in flat for r in rows), flat[:300]


def test_a_table_of_contents_stays_line_by_line_with_or_without_dot_leaders():
    entries = [
        f"{c}.{s} {t}"
        for c in range(1, 6)
        for s, t in enumerate(
            ("Scope of the work", "How the pieces fit", "What is left to do", "Notes for operators", "Further reading"),
            1,
        )
    ]
    for leaders in (True, False):
        page = [("text", 50, 50, 14, "Contents")]
        for i, entry in enumerate(entries):
            y = 90 + 14 * i
            page.append(("text", 50 + 15 * (i % 5 != 0), y, 10, entry))
            if leaders:
                page.append(("text", 250, y, 10, "." * 60))
            page.append(("text", 530, y, 10, str(3 + 2 * i)))
        doc = extract(_src(text_pdf([page])))[0]
        flat = " ".join(doc.text.split())
        for i, entry in enumerate(entries):
            assert f"{entry} {'.' * 60 + ' ' if leaders else ''}{3 + 2 * i}" in flat, (leaders, entry)


_CONFIG = [
    ("max_connections = 200", "# the pool's upper bound on every node"),
    ("shared_buffers = 4GB", "# a quarter of the machine's memory here"),
    ("work_mem = 64MB", "# per sort, so mind the parallel workers"),
    ("wal_level = replica", "# enough for the standby and the backups"),
    ("checkpoint_timeout = 15min", "# fewer checkpoints, a longer recovery"),
    ("max_wal_size = 8GB", "# the disk has room for a full day of it"),
    ("effective_cache_size = 12GB", "# what the planner may count on cached"),
    ("random_page_cost = 1.1", "# the volumes are solid-state disks now"),
]


@pytest.mark.parametrize("x_comment", [300, 230], ids=["comments at the middle", "comments at a third"])
def test_a_listing_with_comments_aligned_beside_its_lines_stays_line_by_line(x_comment):
    """A configuration listing in a monospaced font, its comments in a column of their own: without
    a look at the font, it passes for two columns of text (each setting read away from its comment)."""
    page = [("text", 50, 50, 14, "Settings of the primary after the migration, as deployed in production")]
    for i in range(4):
        for j, (setting, comment) in enumerate(_CONFIG):
            y = 90 + 13 * (8 * i + j)
            page += [("text", 50, y, 9, setting, "Courier"), ("text", x_comment, y, 9, comment, "Courier")]
    doc = extract(_src(text_pdf([page])))[0]
    flat = " ".join(doc.text.split())
    assert all(f"{s} {c}" in flat for s, c in _CONFIG), flat[:400]


def test_a_single_column_page_of_prose_is_read_whole():
    text = " ".join(_ARTICLES * 6)
    page = [("text", 50, 80 + 12 * i, 9, line) for i, line in enumerate(_wrap(text, 95))]
    doc = extract(_src(text_pdf([page])))[0]
    assert " ".join(doc.text.split()) == " ".join(text.split())


def test_the_subheadings_heading_two_columns_stay_in_their_columns():
    """A gap under each column's first line is the columns' own, not the end of a band above."""
    page = [("text", 50, 50, 16, "Harbour News: the village newsletter, summer edition")]
    cols = [_wrap(t, 52) for t in _TWO]
    for x, head, lines in ((50, "Market news", cols[0]), (280, "Road news", cols[1])):
        page.append(("text", x, 100, 11, head))
        page += [("text", x, 122 + 12 * i, 9, line) for i, line in enumerate(lines * 2)]
    doc = extract(_src(text_pdf([page])))[0]
    _in_order(doc.text, ["Harbour News", "Market news", " ".join(cols[0] * 2), "Road news", " ".join(cols[1] * 2)])
