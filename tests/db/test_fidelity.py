"""Document fidelity end to end: office files, tables and scans ingested and searched (issue 24)."""

from __future__ import annotations

import pytest

from kbctl.extract.tables import markdown_table
from tests.pdfmake import scanned_pdf
from tests.unit.test_office import make_docx, make_pptx, make_xlsx

COLUMNS = ["Station", "Sensor", "Reading", "Unit"]


def _long_table_docx() -> bytes:
    import io

    import docx

    d = docx.Document()
    d.add_heading("Sensor readings", level=1)
    d.add_paragraph("Table 4: Readings of every station")
    rows = [COLUMNS] + [[f"ST-{i:04d}", f"probe{i % 5}", str(1000 + 7 * i), "kPa"] for i in range(300)]
    rows[-1] = ["ST-LAST", "probe9", "zephyrine", "kPa"]  # a value only in the last row
    t = d.add_table(rows=len(rows), cols=len(COLUMNS))
    for cells, row in zip(t.rows, rows):  # row by row: ``t.cell(r, c)`` walks the whole grid (20 s here)
        for cell, v in zip(cells.cells, row):
            cell.text = v
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


@pytest.fixture
def folder(tmp_path):
    f = tmp_path / "shared"
    f.mkdir()
    (f / "report.docx").write_bytes(make_docx())
    (f / "deck.pptx").write_bytes(make_pptx())
    (f / "stock.xlsx").write_bytes(make_xlsx())
    (f / "readings.docx").write_bytes(_long_table_docx())
    (f / "broken.docx").write_bytes(make_docx()[:2500])
    (f / "locked.xlsx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 2000)
    return f


def test_office_files_ingest_with_structure_and_metadata_and_bad_ones_are_recorded(kb, folder):
    report = kb.ingest([str(folder)], "office", verify=False)
    assert report.documents["new"] == 4 and report.documents["failed"] == 2
    failed = {e.source.rsplit("/", 1)[-1]: e for e in report.errors}
    assert set(failed) == {"broken.docx", "locked.xlsx"}
    assert (
        failed["broken.docx"].stage == "extract"
        and "corrupt or unreadable Word document" in failed["broken.docx"].message
    )
    assert "encrypted Excel document" in failed["locked.xlsx"].message

    hit = kb.search("nanosecond wire", "office", mode="lexical").hits[0]
    assert hit.source == "deck.pptx" and hit.metadata["heading_path"] == ["Roadmap 2025", "Notes"]
    assert hit.metadata["page"] == 1 and hit.metadata["author"] == "Grace Hopper"
    hit = kb.search("Springfield", "office", mode="lexical").hits[0]
    assert hit.source == "stock.xlsx" and hit.metadata["heading_path"] == ["Suppliers"]
    assert "| Name | City |" in hit.text
    hit = kb.search("Revenue grew", "office", mode="lexical").hits[0]
    assert hit.source == "report.docx" and hit.metadata["date"] == "2024-03-01T09:30:00Z"


def test_a_value_in_the_last_row_of_a_long_table_finds_a_chunk_with_the_column_names(kb, folder):
    kb.ingest([str(folder / "readings.docx")], "tables", verify=False)
    hit = kb.search("zephyrine", "tables", mode="lexical").hits[0]
    assert hit.source == "readings.docx"
    assert hit.text.startswith("| Station | Sensor | Reading | Unit |\n| --- | --- | --- | --- |\n")
    assert "| ST-LAST | probe9 | zephyrine | kPa |" in hit.text
    assert hit.metadata["heading_path"] == ["Sensor readings", "Table 4: Readings of every station"]
    # every piece of the table shows the column names, and every row is in exactly one piece
    chunks = kb.document(hit.doc_id, ["tables"])["chunks"]
    pieces = [c["text"] for c in chunks if c["text"].startswith("| Station")]
    assert len(pieces) > 3 and len(pieces) == len(chunks)
    data_rows = [ln for p in pieces for ln in p.splitlines()[2:]]
    assert len(data_rows) == 300 and data_rows[-1] == "| ST-LAST | probe9 | zephyrine | kPa |"
    assert all(p.splitlines()[0] == markdown_table([COLUMNS]).splitlines()[0] for p in pieces)


def test_a_scanned_pdf_becomes_searchable_by_a_word_only_in_its_image(kb, tmp_path):
    pytest.importorskip("rapidocr_onnxruntime")
    pdf = tmp_path / "scan.pdf"
    pdf.write_bytes(
        scanned_pdf(
            [["Field inspection notes", "The culvert near Thornbury was cleared of silt.", "Inspector: M. Okafor"]]
        )
    )
    report = kb.ingest([str(pdf)], "scans", verify=False)
    assert report.documents["new"] == 1 and not report.errors
    hit = kb.search("Thornbury", "scans", mode="lexical").hits[0]
    assert hit.source == "scan.pdf" and "Thornbury" in hit.text and hit.metadata["page"] == 1
    assert hit.metadata["ocr_pages"] == [1] and hit.metadata["ocr_confidence"] >= 0.8


def test_show_highlight_writes_the_page_with_the_passage_boxed(cli, tmp_path):
    import json

    from PIL import Image

    from tests.unit.test_citations import _pdf

    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(_pdf())
    cli("-p", "hash-384", "ingest", str(pdf), "-n", "cite", check=True)
    found = json.loads(cli("search", "ARC-2291", "-n", "cite", "--mode", "lexical", "--json", check=True).stdout)
    hit = found["hits"][0]
    assert hit["metadata"]["page"] == 2 and hit["metadata"]["boxes"]  # the JSON output carries the place
    out = tmp_path / "hit.png"
    p = cli("show", str(hit["chunk_id"]), "-n", "cite", "--highlight", str(out), check=True)
    assert b"ARC-2291" in p.stdout and b"page 2" in p.stderr
    img = Image.open(out).convert("RGB")
    scale = img.width / 595  # A4 in points → the image's pixels
    boxes = [b for b in hit["metadata"]["boxes"] if b[0] == 2]
    x0 = min(b[1] for b in boxes) * scale
    top, bottom = min(b[2] for b in boxes) * scale, max(b[4] for b in boxes) * scale
    red = [(x, y) for x in range(img.width) for y in range(0, img.height, 2) if img.getpixel((x, y)) == (220, 0, 0)]
    assert red and min(x for x, _ in red) < x0 and top - 10 < min(y for _, y in red) < top
    assert bottom < max(y for _, y in red) < bottom + 10  # a frame just around the passage
    # a chunk that is not in the namespace is the usual one-line error
    p = cli("show", "999999", "-n", "cite")
    assert p.returncode == 2 and b"is not available" in p.stderr


def test_show_writes_a_section_path_as_the_citation_does(cli, tmp_path):
    import json

    (tmp_path / "guide.md").write_text(
        "# Guide\n\nIntro.\n\n## Setup\n\n### Keys\n\nRotate the ZX-7781 signing key every quarter.\n", encoding="utf-8"
    )
    cli("-p", "hash-384", "ingest", str(tmp_path / "guide.md"), "-n", "sect", check=True)
    found = json.loads(cli("search", "ZX-7781", "-n", "sect", "--mode", "lexical", "--json", check=True).stdout)
    hit = found["hits"][0]
    path = hit["metadata"]["heading_path"]
    assert len(path) > 1 and " › ".join(path) in hit["citation"]
    shown = cli("show", str(hit["chunk_id"]), "-n", "sect", check=True).stdout.decode().splitlines()[0]
    assert "§ " + " › ".join(path) in shown and " > " not in shown
    # the JSON carries the path as a list, never as one joined string
    as_json = json.loads(cli("show", str(hit["chunk_id"]), "-n", "sect", "--json", check=True).stdout)
    assert as_json["heading_path"] == path


def test_show_highlight_to_a_path_it_cannot_write_is_one_line_not_a_traceback(cli, tmp_path):
    """``kbctl show CHUNK --highlight /no/such/dir/x.png`` (or a folder, or a file it may not write)
    ended in PIL's ``FileNotFoundError`` traceback, after the page was rendered."""
    import json

    from tests.unit.test_citations import _pdf

    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(_pdf())
    cli("-p", "hash-384", "ingest", str(pdf), "-n", "cite", check=True)
    found = json.loads(cli("search", "ARC-2291", "-n", "cite", "--mode", "lexical", "--json", check=True).stdout)
    chunk = str(found["hits"][0]["chunk_id"])
    for out in (tmp_path / "no" / "such" / "hit.png", tmp_path):
        p = cli("show", chunk, "-n", "cite", "--highlight", str(out))
        err = p.stderr.decode()
        assert p.returncode == 2 and "Traceback" not in err, err
        lines = err.splitlines()
        assert len(lines) == 2 and lines[0].startswith("error: --highlight ") and str(out) in lines[0], err
        assert "cannot write" in lines[0] and lines[1].startswith("hint: "), err
        assert p.stdout == b""
