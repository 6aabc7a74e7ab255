"""Tables as tables: Markdown rendering, and a table cut between rows with its header on every piece."""

from __future__ import annotations

from kbctl.chunk import chunk_document, iter_chunks
from kbctl.config import load_settings
from kbctl.embed import get_tokenizer
from kbctl.extract.tables import is_caption, markdown_table, table_header
from kbctl.types import Block, Document, LargeDocument

COLUMNS = ["City", "Country", "Population", "Founded"]


def _rows(n: int) -> list[list[str]]:
    return [COLUMNS] + [[f"City{i:03d}", f"Land{i % 7}", str(10_000 + i * 37), f"{1100 + i}"] for i in range(n)]


def _profile(name="minilm"):
    return load_settings(env={}).profile(name)


def _cells(markdown: str) -> list[list[str]]:
    """The cells of a Markdown table's rows, the separator line left out."""
    rows = []
    for line in markdown.splitlines():
        if set(line.replace("|", "").strip()) <= {"-", " "}:
            continue
        rows.append([c.strip() for c in line.strip().strip("|").split(" | ")])
    return rows


def test_markdown_table_keeps_every_cell_on_one_line_per_row():
    md = markdown_table([["Name", "Note"], ["a|b", "line one\nline two"], [None, ""], ["x", 3]])
    assert md.splitlines() == ["| Name | Note |", "| --- | --- |", "| a\\|b | line one line two |", "| x | 3 |"]
    assert table_header(md) == "| Name | Note |\n| --- | --- |"
    assert table_header("| not a table |\nplain") is None and table_header("text") is None


def test_a_table_without_header_gets_column_names_and_empty_columns_go():
    md = markdown_table([["1", "", "2"], ["3", None, "4"]], header=False)
    assert md.splitlines()[0] == "| Column 1 | Column 2 |" and "| 3 | 4 |" in md


def test_captions_are_recognised():
    assert is_caption("Table 3: Population by city") and is_caption("Table IV. Results")
    assert not is_caption("The table below lists the cities.") and not is_caption("Table of contents\nmore")


def test_a_long_table_repeats_its_header_on_every_piece_and_keeps_every_cell():
    prof = _profile()
    tok = get_tokenizer(prof)
    rows = _rows(150)
    table = markdown_table(rows)
    doc = Document.from_blocks(
        "mem://t", "Cities", [Block("Intro text."), Block(table, heading_path=("Population table",))], "markdown"
    )
    chunks = [c for c in chunk_document(doc, prof) if c.heading_path == ("Population table",)]
    assert len(chunks) > 3
    head = table_header(table)
    seen: list[list[str]] = []
    for c in chunks:
        assert c.text.startswith(head + "\n")  # every piece reads alone
        assert doc.text[c.char_start : c.char_end] in c.text  # the span it cites is in it
        assert tok.count(c.embed_text) + tok.special_tokens <= prof.max_tokens  # nothing truncated
        got = _cells(c.text)
        assert got[0] == COLUMNS
        seen += got[1:]
    assert seen == rows[1:]  # every row once, in order, every cell kept
    assert "City149" in chunks[-1].text and "Population" in chunks[-1].text


def test_a_table_is_its_own_section_and_a_small_one_stays_whole():
    prof = _profile("hash-384")
    table = markdown_table(_rows(3))
    doc = Document.from_blocks("mem://s", "S", [Block("Before."), Block(table), Block("After.")], "markdown")
    texts = [c.text for c in chunk_document(doc, prof)]
    assert texts == ["Before.", table, "After."]


def test_a_streamed_document_cuts_its_tables_the_same_way():
    prof = _profile()
    blocks = [Block("Intro text."), Block(markdown_table(_rows(120)))]
    doc = Document.from_blocks("mem://w", "W", blocks, "text")
    large = LargeDocument(head=doc, chars=len(doc.text), blocks=lambda: iter(doc.blocks))
    assert [c.text for c in iter_chunks(large, prof)] == [c.text for c in chunk_document(doc, prof)]


def test_an_html_table_keeps_its_column_names_as_header_and_its_caption_in_the_heading_path():
    from kbctl.extract import extract
    from kbctl.types import Source

    body = "".join(f"<tr><td>City{i:03d}</td><td>{10_000 + i}</td></tr>" for i in range(150))
    html = (
        "<html><head><title>Cities</title></head><body><article><h1>Cities</h1>"
        "<p>Some text about the cities of the world and their populations, long enough to be content.</p>"
        "<h2>Population</h2><table><caption>Table 1: Largest cities</caption>"
        f"<thead><tr><th>City</th><th>Population</th></tr></thead><tbody>{body}</tbody></table>"
        "<p>More text after the table to keep it in the main content.</p></article></body></html>"
    ).encode()
    (doc,) = extract(Source("https://example.org/cities", html, "text/html"))
    (table,) = [b for b in doc.blocks if table_header(b.text)]
    assert table.text.startswith("| City | Population |\n|---|---|\n| City000 | 10000 |")
    assert table.heading_path == ("Cities", "Population", "Table 1: Largest cities")
    chunks = [c for c in chunk_document(doc, _profile()) if c.heading_path == table.heading_path]
    assert len(chunks) > 2 and all(c.text.startswith("| City | Population |\n|---|---|\n") for c in chunks)
    assert sum(c.text.count("| City") for c in chunks) - len(chunks) == 150  # every row once


def test_a_long_markdown_table_under_a_caption_line_or_without_outer_bars_repeats_its_header():
    """A table in a Markdown file was cut as a table (between rows, its header repeated) only when
    its block began with ``|``: under a caption line with no blank line between (``Table 1:
    cities``), or written without the outer bars as GitHub allows (``City | Land``), it was cut as
    prose, mid-row, and the pieces after the first had no header. Both are tables now."""
    from kbctl.extract import extract
    from kbctl.types import Source

    rows = _rows(150)
    barred = markdown_table(rows).split("\n")
    bare = [line.strip("| ") for line in barred]
    prof = _profile()
    for lines, lead in ((barred, "Table 1: cities\n"), (bare, ""), (bare, "Table 2: cities\n")):
        md = f"# Cities\n\nIntro text.\n\n{lead}" + "\n".join(lines) + "\n\nAfter the table.\n"
        (doc,) = extract(Source("file:///c/cities.md", md.encode(), "text/markdown"))
        chunks = [c for c in chunk_document(doc, prof) if "City" in c.text]
        assert len(chunks) > 3
        head = "\n".join(lines[:2])
        seen: list[list[str]] = []
        continued = f"{lead[:-1]} (continued)\n" if lead else ""  # the caption repeated (session 46)
        for i, c in enumerate(chunks):
            above = lead if i == 0 else continued
            assert c.text.startswith(above + head + "\n"), c.text[:80]
            assert doc.text[c.char_start : c.char_end] in c.text
            got = _cells(c.text[len(above) :])
            assert got[0] == COLUMNS
            seen += got[1:]
        assert seen == rows[1:], lead  # every row whole, once, in order


def test_a_long_table_under_a_caption_line_repeats_its_caption_marked_continued_on_every_piece():
    """A table under a caption line (``Table 3: …``, or a bold line) was cut with its header on
    every piece but its caption on the first only. Every later piece opens with the caption and
    ``(continued)``, then the header lines; within the chunk size and the model's limit."""
    from kbctl.extract import extract
    from kbctl.types import Source

    rows = _rows(150)
    table = markdown_table(rows)
    head = "\n".join(table.split("\n")[:2])
    for name in ("minilm", "hash-384"):
        prof = _profile(name)
        tok = get_tokenizer(prof)
        for caption in ("Table 3: Prices by region", "**Prices by region**", "Prices by region,\nin euros:"):
            md = f"# Prices\n\nIntro text.\n\n{caption}\n{table}\n\nAfter the table.\n"
            (doc,) = extract(Source("file:///c/prices.md", md.encode(), "text/markdown"))
            chunks = [c for c in chunk_document(doc, prof) if "City" in c.text]
            assert len(chunks) > 3, name
            assert chunks[0].text.startswith(f"{caption}\n{head}\n")
            seen: list[list[str]] = []
            for c in chunks[1:]:
                assert c.text.startswith(f"{caption} (continued)\n{head}\n"), (name, c.text[:80])
                assert doc.text[c.char_start : c.char_end] in c.text
                assert c.token_count <= prof.chunk.size
                assert tok.count(c.embed_text) + tok.special_tokens <= prof.max_tokens
                seen += _cells(c.text.split("\n", caption.count("\n") + 1)[-1])[1:]
            first = _cells(chunks[0].text.split("\n", caption.count("\n") + 1)[-1])[1:]
            assert first + seen == rows[1:], (name, caption)  # every row whole, once, in order


def test_a_caption_too_long_to_repeat_leaves_the_header_alone_on_later_pieces():
    """A caption that would take more than half a piece is not repeated: the header alone, as before."""
    from kbctl.extract import extract
    from kbctl.types import Source

    table = markdown_table(_rows(150))
    head = "\n".join(table.split("\n")[:2])
    caption = "Table 9: " + " ".join(f"word{i}" for i in range(55))
    (doc,) = extract(Source("file:///c/p.md", f"{caption}\n{table}\n".encode(), "text/markdown"))
    chunks = chunk_document(doc, _profile())
    assert len(chunks) > 3 and chunks[0].text.startswith(caption)
    assert all(c.text.startswith(f"{head}\n") for c in chunks[1:])


# A table of twelve columns whose header fits in half a chunk, with two rows longer than a chunk: one
# of twelve cells of 30 words each, one whose last cell is a text of 400 words (no cell edge in it).
_WIDE = [f"C{j}" for j in range(12)]
_WORD = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]


def _cell_text(j: int, n: int, sep: str = "x") -> str:
    return " ".join(f"{_WORD[(i + j) % 10]}{j}{sep}{i % 4}" for i in range(n))


def _long_row_table(bare: bool = False) -> tuple[str, list[str]]:
    rows = [
        _WIDE,
        [f"short{j}" for j in range(12)],
        [" ".join(_WORD[(i + j) % 10] for i in range(30)) for j in range(12)],
    ]
    rows += [[f"tiny{j}" for j in range(11)] + [_cell_text(3, 400, "z")], [f"last{j}" for j in range(12)]]
    table = markdown_table(rows)
    if bare:
        table = "\n".join(line.strip("| ") for line in table.split("\n"))
    return table, table.split("\n")


def test_a_table_row_longer_than_a_chunk_is_cut_between_cells_else_words_under_its_header_marked_continued(tmp_path):
    """A row longer than a chunk, in a table cut as a table, was cut into token windows: inside a
    word and inside a cell, and the piece going on the row opened with the header and the rest of
    the row with no mark. It is cut between cells (at an unescaped ``|``, the next piece going on
    from that bar), else between words, never inside one; every piece going on the row opens with
    the header lines and then ``…`` (``kbctl.chunk.CUT_MARK``), as a long line of prose does."""
    from kbctl.chunk import CUT_MARK

    from .test_chunk import _semantic_profile

    words = {w for line in _long_row_table()[1] for w in line.replace("|", " ").split()}
    for bare in (False, True):
        table, lines = _long_row_table(bare)
        head = "\n".join(lines[:2])
        doc = Document.from_blocks("mem://w", "W", [Block("Intro."), Block(table), Block("After.")], "markdown")
        for prof in (_profile(), _profile("hash-384"), _semantic_profile(tmp_path)):
            tok = get_tokenizer(prof)
            chunks = chunk_document(doc, prof, tok, embed=lambda texts: [[1.0, 0.0] for _ in texts])
            pieces = [c for c in chunks if "C11" in c.text or "x0" in c.text or "last" in c.text]
            assert len(pieces) > 5, prof.name
            assert pieces[0].text.startswith(head + "\n")
            spans = []
            for c in pieces:
                assert c.text.startswith(head + "\n"), (prof.name, c.text[:60])  # every piece under the header
                body = c.text[len(head) + 1 :]
                span = doc.text[c.char_start : c.char_end]
                if c is not pieces[0]:
                    assert body.removeprefix(CUT_MARK) == span, (prof.name, body[:60])
                assert c.token_count <= prof.chunk.size
                assert tok.count(c.embed_text) + tok.special_tokens <= prof.max_tokens
                assert set(body.removeprefix(CUT_MARK).replace("|", " ").split()) <= words, (prof.name, body[:60])
                spans.append(span)
            going_on = [c for c in pieces[1:] if doc.text[c.char_start - 1] != "\n"]  # not at a row's start
            assert not any(c.text[len(head) + 1 :].startswith(CUT_MARK) for c in pieces[1:] if c not in going_on)
            assert len(going_on) >= 3 and all(c.text[len(head) + 1 :].startswith(CUT_MARK) for c in going_on)
            # the row of twelve cells is cut between cells: its pieces going on open at a bar
            cells = [c for c in going_on if "z0" not in c.text]
            assert len(cells) > 1 and all(c.text[len(head) + 1 :].startswith(CUT_MARK + "| ") for c in cells)
            # the long cell between words: its pieces going on open with a word
            words_on = [c for c in going_on if "z0" in c.text]
            assert len(words_on) >= 3 and all(c.text[len(head) + 1 :][1:3] != "| " for c in words_on)
            joined = "".join(s for s in spans).replace(" ", "").replace("\n", "")
            assert joined == table.replace(" ", "").replace("\n", ""), prof.name  # every character once
        large = LargeDocument(head=doc, chars=len(doc.text), blocks=lambda d=doc: iter(d.blocks))
        assert [c.text for c in iter_chunks(large, _profile())] == [c.text for c in chunk_document(doc, _profile())]


def test_a_table_whose_header_is_too_long_to_repeat_carries_what_fits_or_a_line_naming_it(tmp_path):
    """A table whose header lines took more than half a chunk was cut as prose: at row ends, its
    pieces after the first an orphan run of cells with no header. It is cut between rows as any
    table, and every later piece opens with the header cut at a cell edge, its first columns and a
    last column ``…`` (row and rule alike, as the table writes them: with or without outer bars),
    under the caption marked continued when that fits too; when not even the first column fits,
    with a line naming the table: its caption marked continued, else ``Table (continued)``."""
    import re

    from kbctl.extract import extract
    from kbctl.types import Source

    from .test_chunk import _semantic_profile

    wide = [f"Measured quantity {j}" for j in range(14)]
    rows = [wide] + [[f"r{i}" for j in range(14)] for i in range(40)]
    table = markdown_table(rows)
    for bare in (False, True):
        lines = table.split("\n")
        if bare:
            lines = [line.strip("| ") for line in lines]
        for caption in ("", "Table 4: Measurements\n"):
            md = f"# M\n\nIntro text.\n\n{caption}" + "\n".join(lines) + "\n\nAfter the table.\n"
            (doc,) = extract(Source("file:///c/m.md", md.encode(), "text/markdown"))
            for prof in (_profile(), _profile("hash-384"), _semantic_profile(tmp_path)):
                tok = get_tokenizer(prof)
                chunks = chunk_document(doc, prof, tok, embed=lambda texts: [[1.0, 0.0] for _ in texts])
                pieces = [c for c in chunks if re.search(r"r\d+ |Measured", c.text)]
                assert len(pieces) > 3, prof.name
                assert pieces[0].text.startswith(caption + lines[0])
                got: list[str] = []
                for c in pieces[1:]:
                    top = c.text.split("\n")
                    if caption:
                        assert top[0] == "Table 4: Measurements (continued)", (prof.name, c.text[:80])
                        top = top[1:]
                    row, rule = top[0], top[1]
                    cut = " | …" + ("" if bare else " |")
                    assert row.endswith(cut) and lines[0].startswith(row.removesuffix(cut) + " |"), (prof.name, row)
                    assert rule.count("|") == row.count("|") and set(rule) <= set("|- "), rule
                    assert row.count("|") >= 2 + (0 if bare else 2)  # at least one column named
                    body = top[2:]
                    assert all(line.startswith(lines[2][:1]) for line in body), (prof.name, body[0][:20])
                    assert doc.text[c.char_start : c.char_end] == "\n".join(body)
                    assert c.token_count <= prof.chunk.size
                    assert tok.count(c.embed_text) + tok.special_tokens <= prof.max_tokens
                    got += body
                first = pieces[0].text.split("\n")[2 + caption.count("\n") :]
                assert first + got == lines[2:], prof.name  # every row whole, once, in order
    # not even one column's name fits: a line naming the table
    giant = [" ".join(f"word{k}" for k in range(150)), "B"]
    rows = [giant] + [[f"v{i}", f"w{i}"] for i in range(200)]
    for caption, name in (("", "Table (continued)"), ("Table 5: Giant\n", "Table 5: Giant (continued)")):
        text = caption + markdown_table(rows)
        doc = Document.from_blocks("mem://g", "G", [Block(text)], "markdown")
        chunks = chunk_document(doc, _profile())
        assert len(chunks) > 3
        for c in chunks[1:]:
            assert c.text.startswith(name + "\n"), c.text[:60]  # the header's rest or rows under it
            assert c.token_count <= _profile().chunk.size
