"""Word, PowerPoint and Excel files, made at test time with the libraries that read them."""

from __future__ import annotations

import io
import zipfile
from datetime import datetime

import pytest

from kbctl.errors import ExtractError
from kbctl.extract import detect_format, extract
from kbctl.extract.office import OLE_MAGIC
from kbctl.types import Source

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def make_docx() -> bytes:
    import docx

    d = docx.Document()
    d.core_properties.title = "Quarterly Report"
    d.core_properties.author = "Ada Lovelace"
    d.core_properties.keywords = "finance, q3"
    d.core_properties.created = datetime(2024, 3, 1, 9, 30)
    d.core_properties.modified = datetime(2024, 4, 2, 10, 0)
    d.add_heading("Quarterly Report", level=0)
    d.add_paragraph("An opening paragraph about the quarter.")
    d.add_heading("Revenue", level=1)
    d.add_paragraph("Revenue grew in every region.")
    d.add_heading("By region", level=2)
    d.add_paragraph("Table 1: Revenue by region")
    t = d.add_table(rows=3, cols=3)
    for r, row in enumerate([["Region", "Q2", "Q3"], ["North", "120", "135"], ["South", "80", "99"]]):
        for c, v in enumerate(row):
            t.cell(r, c).text = v
    d.add_heading("Costs", level=1)
    d.add_paragraph("Costs fell slightly.")
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def make_pptx() -> bytes:
    import pptx
    from pptx.util import Inches

    prs = pptx.Presentation()
    prs.core_properties.author = "Grace Hopper"
    s1 = prs.slides.add_slide(prs.slide_layouts[1])
    s1.shapes.title.text = "Roadmap 2025"
    s1.placeholders[1].text = "Ship the compiler\nTeach the navy"
    s1.notes_slide.notes_text_frame.text = "Remember the nanosecond wire."
    s2 = prs.slides.add_slide(prs.slide_layouts[5])
    s2.shapes.title.text = "Budget"
    tbl = s2.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(4), Inches(1)).table
    for r, row in enumerate([["Item", "Cost"], ["Vacuum tubes", "4000"]]):
        for c, v in enumerate(row):
            tbl.cell(r, c).text = v
    buf = io.BytesIO()
    prs.save(buf)
    return buf.getvalue()


def make_xlsx() -> bytes:
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Inventory"
    ws.append(["Part", "Count", "Price"])
    ws.append(["Bolt", 120, 0.25])
    ws.append(["Nut", 300, 0.1])
    ws2 = wb.create_sheet("Suppliers")
    ws2.append(["Name", "City"])
    ws2.append(["Acme", "Springfield"])
    wb.create_sheet("Empty")
    wb.properties.title = "Stock list"
    wb.properties.creator = "Alan Turing"
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def _src(name: str, data: bytes, media_type: str | None = None) -> Source:
    return Source(uri=f"file:///d/{name}", content=data, media_type=media_type)


def test_docx_headings_are_structure_tables_are_markdown_and_properties_metadata():
    (doc,) = extract(_src("report.docx", make_docx()))
    assert doc.source_type == "docx" and doc.title == "Quarterly Report"
    assert doc.metadata["author"] == "Ada Lovelace" and doc.metadata["tags"] == ["finance", "q3"]
    assert doc.metadata["date"] == "2024-03-01T09:30:00Z" and doc.metadata["modified"] == "2024-04-02T10:00:00Z"
    by_text = {b.text: b.heading_path for b in doc.blocks}
    assert by_text["Revenue grew in every region."] == ("Quarterly Report", "Revenue")
    assert by_text["Costs fell slightly."] == ("Quarterly Report", "Costs")
    table = next(b for b in doc.blocks if b.text.startswith("|"))
    assert table.text.splitlines() == [
        "| Region | Q2 | Q3 |",
        "| --- | --- | --- |",
        "| North | 120 | 135 |",
        "| South | 80 | 99 |",
    ]
    # the caption above the table joins its heading path (and is not lost as text)
    assert table.heading_path == ("Quarterly Report", "Revenue", "By region", "Table 1: Revenue by region")
    assert "Revenue" not in [b.text for b in doc.blocks]  # headings are structure, not paragraphs


def test_pptx_slides_are_sections_with_titles_tables_and_notes():
    (doc,) = extract(_src("deck.pptx", make_pptx()))
    assert doc.source_type == "pptx" and doc.title == "Roadmap 2025"
    assert doc.metadata["author"] == "Grace Hopper" and doc.metadata["slide_count"] == 2
    got = [(b.heading_path, b.page, b.text) for b in doc.blocks]
    assert (("Roadmap 2025",), 1, "Ship the compiler\nTeach the navy") in got
    assert (("Roadmap 2025", "Notes"), 1, "Remember the nanosecond wire.") in got
    assert (("Budget",), 2, "| Item | Cost |\n| --- | --- |\n| Vacuum tubes | 4000 |") in got
    assert not any(t == "Roadmap 2025" for _, _, t in got)  # the title is the heading, not a paragraph


def test_xlsx_sheets_are_tables_under_their_names():
    (doc,) = extract(_src("stock.xlsx", make_xlsx()))
    assert doc.source_type == "xlsx" and doc.title == "Stock list"
    assert doc.metadata["author"] == "Alan Turing" and doc.metadata["sheets"] == ["Inventory", "Suppliers", "Empty"]
    assert [(b.heading_path, b.text.splitlines()) for b in doc.blocks] == [
        (
            ("Inventory",),
            ["| Part | Count | Price |", "| --- | --- | --- |", "| Bolt | 120 | 0.25 |", "| Nut | 300 | 0.1 |"],
        ),
        (("Suppliers",), ["| Name | City |", "| --- | --- |", "| Acme | Springfield |"]),
    ]


@pytest.mark.parametrize(
    ("name", "maker", "fmt"),
    [("a.docx", make_docx, "docx"), ("b.pptx", make_pptx, "pptx"), ("c.xlsx", make_xlsx, "xlsx")],
)
def test_office_files_are_recognised_by_name_type_or_content_not_called_binary(name, maker, fmt):
    data = maker()
    assert detect_format(_src(name, data)) == fmt
    assert (
        detect_format(Source(uri="https://example.org/download?id=7", content=data)) == fmt
    )  # no suffix: by its parts
    if fmt == "docx":
        assert detect_format(Source(uri="https://example.org/x", content=data, media_type=DOCX)) == "docx"


def test_a_plain_zip_is_still_refused_as_binary():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("notes/readme.txt", "hello")
    with pytest.raises(ExtractError, match="binary file"):
        extract(_src("archive.zip", buf.getvalue()))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"PK\x03\x04" + b"\x00" * 40, "corrupt or unreadable Word document"),
        (make_docx()[:3000], "corrupt or unreadable Word document"),
        (OLE_MAGIC + b"\x00" * 600, "encrypted Word document"),
    ],
)
def test_corrupt_and_encrypted_files_are_clear_errors(data, message):
    with pytest.raises(ExtractError, match=message) as e:
        extract(_src("bad.docx", data))
    assert e.value.hint


def test_a_truncated_workbook_and_deck_are_errors_too():
    with pytest.raises(ExtractError, match="corrupt or unreadable Excel document"):
        extract(_src("bad.xlsx", make_xlsx()[:2000]))
    with pytest.raises(ExtractError, match="corrupt or unreadable PowerPoint document"):
        extract(_src("bad.pptx", make_pptx()[:2000]))


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("bad.docx", "corrupt or unreadable Word document"),
        ("bad.xlsx", "corrupt or unreadable Excel document"),
        ("bad.pptx", "corrupt or unreadable PowerPoint document"),
        ("bad.odt", "corrupt or unreadable OpenDocument file"),
        ("bad.pdf", "corrupt or unreadable PDF"),
    ],
)
def test_a_file_named_as_a_format_kbctl_reads_but_holding_other_bytes_is_called_corrupt(name, message):
    """Bytes that are no zip (or PDF) under an office or PDF name were "binary file (no text
    extractor for <that very format>)", with the hint to exclude such files: kbctl reads them."""
    data = bytes(range(256)) * 4  # NUL bytes and no container signature
    with pytest.raises(ExtractError, match=message) as e:
        extract(_src(name, data))
    assert "no text extractor" not in str(e.value) and "exclude" not in (e.value.hint or "")


def make_odt(*, encrypted: bool = False) -> bytes:
    """A minimal OpenDocument text, written by hand (no ODF library is needed to read one)."""
    ns = (
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
        'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
        'xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0" '
        'xmlns:dc="http://purl.org/dc/elements/1.1/"'
    )
    content = (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {ns}><office:body><office:text>'
        '<text:h text:outline-level="1">Field Guide</text:h>'
        "<text:p>Birds of the<text:s/>marsh, <text:span>as seen</text:span> in spring.</text:p>"
        '<text:h text:outline-level="2">Counts</text:h>'
        "<text:p>Table 1: Birds counted</text:p>"
        "<table:table><table:table-row><table:table-cell><text:p>Bird</text:p></table:table-cell>"
        "<table:table-cell><text:p>Count</text:p></table:table-cell></table:table-row>"
        "<table:table-row><table:table-cell><text:p>Bittern</text:p></table:table-cell>"
        "<table:table-cell><text:p>3</text:p></table:table-cell></table:table-row></table:table>"
        "<text:list><text:list-item><text:p>Bring boots.</text:p></text:list-item></text:list>"
        "</office:text></office:body></office:document-content>"
    )
    meta = (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document-meta {ns}><office:meta>'
        "<dc:title>Marsh Field Guide</dc:title><meta:initial-creator>Rachel Carson</meta:initial-creator>"
        "<meta:creation-date>2024-05-01T08:00:00</meta:creation-date><meta:keyword>birds</meta:keyword>"
        "</office:meta></office:document-meta>"
    )
    manifest = '<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0">'
    manifest += "<manifest:encryption-data/>" if encrypted else ""
    manifest += "</manifest:manifest>"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/vnd.oasis.opendocument.text")  # stored, first
        z.writestr("content.xml", content, compress_type=zipfile.ZIP_DEFLATED)
        z.writestr("meta.xml", meta, compress_type=zipfile.ZIP_DEFLATED)
        z.writestr("META-INF/manifest.xml", manifest, compress_type=zipfile.ZIP_DEFLATED)
    return buf.getvalue()


def test_odt_headings_tables_and_metadata():
    data = make_odt()
    assert detect_format(Source(uri="https://example.org/get?id=1", content=data)) == "odt"  # by its mimetype entry
    (doc,) = extract(_src("guide.odt", data))
    assert doc.source_type == "odt" and doc.title == "Marsh Field Guide"
    assert doc.metadata["author"] == "Rachel Carson" and doc.metadata["date"] == "2024-05-01T08:00:00"
    assert doc.metadata["tags"] == ["birds"]
    assert [(b.heading_path, b.text) for b in doc.blocks] == [
        (("Field Guide",), "Birds of the marsh, as seen in spring."),
        (("Field Guide", "Counts", "Table 1: Birds counted"), "| Bird | Count |\n| --- | --- |\n| Bittern | 3 |"),
        (("Field Guide", "Counts"), "- Bring boots."),  # a list without a style: bullets
    ]


def test_an_encrypted_or_broken_odt_is_a_clear_error():
    with pytest.raises(ExtractError, match="encrypted OpenDocument file"):
        extract(_src("secret.odt", make_odt(encrypted=True)))
    with pytest.raises(ExtractError, match="corrupt or unreadable OpenDocument file"):
        extract(_src("broken.odt", make_odt()[:300]))
