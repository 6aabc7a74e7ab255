"""What an agent gets back from Word and OpenDocument files: footnotes, endnotes and list numbers kept.

The DOCX fixtures start from python-docx's own template and have their ``document.xml`` (and
notes or numbering parts) written by hand, as Word writes them; the ODT ones are written whole.
"""

from __future__ import annotations

import io
import re
import zipfile

from kbctl.extract import extract
from kbctl.types import Source

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_CT = "application/vnd.openxmlformats-officedocument.wordprocessingml"


def _p(text: str, *, style: str = "", num: tuple[int, int] | None = None) -> str:
    """A ``w:p``: ``{fn:N}``/``{en:N}`` in ``text`` become a footnote or endnote reference run."""
    ppr = f'<w:pStyle w:val="{style}"/>' if style else ""
    if num:
        ppr += f'<w:numPr><w:ilvl w:val="{num[1]}"/><w:numId w:val="{num[0]}"/></w:numPr>'
    runs = []
    for piece in re.split(r"(\{(?:fn|en):\d+\})", text):
        if m := re.fullmatch(r"\{(fn|en):(\d+)\}", piece):
            kind = "footnote" if m.group(1) == "fn" else "endnote"
            runs.append(
                f'<w:r><w:rPr><w:rStyle w:val="FootnoteReference"/></w:rPr><w:{kind}Reference w:id="{m.group(2)}"/></w:r>'
            )
        elif piece:
            runs.append(f'<w:r><w:t xml:space="preserve">{piece}</w:t></w:r>')
    return f"<w:p>{f'<w:pPr>{ppr}</w:pPr>' if ppr else ''}{''.join(runs)}</w:p>"


def _notes(kind: str, notes: dict[int, str]) -> str:
    """A ``footnotes.xml``/``endnotes.xml`` with Word's two separator notes first."""
    seps = (
        f'<w:{kind} w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:{kind}>'
        f'<w:{kind} w:type="continuationSeparator" w:id="0"><w:p><w:r><w:continuationSeparator/></w:r></w:p></w:{kind}>'
    )
    body = "".join(
        f'<w:{kind} w:id="{i}"><w:p><w:r><w:{kind}Ref/></w:r><w:r><w:t xml:space="preserve"> {text}</w:t></w:r></w:p></w:{kind}>'
        for i, text in notes.items()
    )
    return f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:{kind}s xmlns:w="{_W}">{seps}{body}</w:{kind}s>'


def _docx(
    body: str,
    *,
    footnotes: dict[int, str] | None = None,
    endnotes: dict[int, str] | None = None,
    numbering: str = "",
    style_numbering: dict[str, str] | None = None,
    more_styles: str = "",
) -> bytes:
    """python-docx's template with ``body`` as its document, and the notes or numbering given
    (``style_numbering``: a style's id → the ``w:numPr`` put in its ``w:pPr``, as Word numbers headings;
    ``more_styles``: ``w:style`` elements added to ``styles.xml``)."""
    import docx

    buf = io.BytesIO()
    docx.Document().save(buf)
    parts = {}
    with zipfile.ZipFile(buf) as z:
        for name in z.namelist():
            parts[name] = z.read(name)
    parts["word/document.xml"] = (
        f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="{_W}" xmlns:r="{_REL}">'
        f"<w:body>{body}<w:sectPr/></w:body></w:document>"
    ).encode()
    rels, types = parts["word/_rels/document.xml.rels"].decode(), parts["[Content_Types].xml"].decode()
    styles = parts["word/styles.xml"].decode()
    for style_id, num_pr in (style_numbering or {}).items():
        at = styles.index("<w:pPr>", styles.index(f'w:styleId="{style_id}"')) + len("<w:pPr>")
        styles = styles[:at] + num_pr + styles[at:]
    parts["word/styles.xml"] = styles.replace("</w:styles>", more_styles + "</w:styles>").encode()
    for kind, notes in (("footnote", footnotes), ("endnote", endnotes)):
        if notes is None:
            continue
        parts[f"word/{kind}s.xml"] = _notes(kind, notes).encode()
        rels = rels.replace(
            "</Relationships>",
            f'<Relationship Id="rId9{kind[0]}" Type="{_REL}/{kind}s" Target="{kind}s.xml"/></Relationships>',
        )
        types = types.replace(
            "</Types>", f'<Override PartName="/word/{kind}s.xml" ContentType="{_CT}.{kind}s+xml"/></Types>'
        )
    if numbering:
        parts["word/numbering.xml"] = (
            f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:numbering xmlns:w="{_W}">{numbering}</w:numbering>'
        ).encode()
    parts["word/_rels/document.xml.rels"], parts["[Content_Types].xml"] = rels.encode(), types.encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in parts.items():
            z.writestr(name, data)
    return out.getvalue()


def _blocks(name: str, data: bytes) -> list[tuple[tuple[str, ...], str]]:
    (doc,) = extract(Source(uri=f"file:///d/{name}", content=data))
    for b in doc.blocks:
        assert doc.text[b.start : b.start + len(b.text)] == b.text
    return [(b.heading_path, b.text) for b in doc.blocks]


def test_docx_footnotes_and_endnotes_follow_the_paragraph_that_cites_them_and_separators_are_skipped():
    body = (
        _p("Limits", style="Heading1")
        + _p("The burst limit was raised{fn:1} after the incident.")
        + _p("Nothing to note here.")
        + _p("History", style="Heading1")
        + _p("It was first set in 2019{en:1} and reviewed{fn:2} twice.")
    )
    data = _docx(
        body,
        footnotes={1: "The limit was raised to 40 in 2024.", 2: "By the platform team."},
        endnotes={1: "See the 2019 capacity plan."},
    )
    assert _blocks("limits.docx", data) == [
        (("Limits",), "The burst limit was raised[^1] after the incident.\n[^1]: The limit was raised to 40 in 2024."),
        (("Limits",), "Nothing to note here."),
        (
            ("History",),
            "It was first set in 2019[^i] and reviewed[^2] twice.\n"
            "[^i]: See the 2019 capacity plan.\n[^2]: By the platform team.",
        ),
    ]


def test_a_docx_footnote_cited_in_a_table_cell_follows_the_table():
    table = (
        "<w:tbl><w:tr><w:tc>" + _p("Setting") + "</w:tc><w:tc>" + _p("Value") + "</w:tc></w:tr>"
        "<w:tr><w:tc>" + _p("burst{fn:1}") + "</w:tc><w:tc>" + _p("40") + "</w:tc></w:tr></w:tbl>"
    )
    data = _docx(_p("Settings", style="Heading1") + table, footnotes={1: "Raised from 20 in 2024."})
    got = _blocks("settings.docx", data)
    assert got[0][1].splitlines()[-1] == "| burst[^1] | 40 |"
    assert got[1:] == [(("Settings",), "[^1]: Raised from 20 in 2024.")]


_NUMBERING = (
    # 1: decimal, then lower letters, then lower roman; 2: bullets
    '<w:abstractNum w:abstractNumId="1">'
    '<w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:lvlText w:val="%1."/></w:lvl>'
    '<w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="lowerLetter"/><w:lvlText w:val="%2)"/></w:lvl>'
    '<w:lvl w:ilvl="2"><w:start w:val="1"/><w:numFmt w:val="lowerRoman"/><w:lvlText w:val="%3."/></w:lvl>'
    "</w:abstractNum>"
    '<w:abstractNum w:abstractNumId="2">'
    '<w:lvl w:ilvl="0"><w:numFmt w:val="bullet"/><w:lvlText w:val="\uf0b7"/></w:lvl>'
    '<w:lvl w:ilvl="1"><w:numFmt w:val="bullet"/><w:lvlText w:val="o"/></w:lvl>'
    "</w:abstractNum>"
    '<w:abstractNum w:abstractNumId="3">'
    '<w:lvl w:ilvl="0"><w:start w:val="4"/><w:numFmt w:val="upperRoman"/><w:lvlText w:val="%1."/></w:lvl>'
    "</w:abstractNum>"
    '<w:num w:numId="1"><w:abstractNumId w:val="1"/></w:num>'
    '<w:num w:numId="2"><w:abstractNumId w:val="2"/></w:num>'
    # Word's "restart numbering": a new w:num over the same list, its first level started again
    '<w:num w:numId="3"><w:abstractNumId w:val="1"/>'
    '<w:lvlOverride w:ilvl="0"><w:startOverride w:val="1"/></w:lvlOverride></w:num>'
    '<w:num w:numId="4"><w:abstractNumId w:val="3"/></w:num>'
)


def test_docx_numbered_and_bulleted_lists_keep_their_numbers_bullets_and_nesting():
    body = (
        _p("Failover", style="Heading1")
        + _p("Follow these steps.")
        + _p("Drain the primary", num=(1, 0))
        + _p("Promote the replica", num=(1, 0))
        + _p("check the lag", num=(1, 1))
        + _p("check the slots", num=(1, 1))
        + _p("on every host", num=(1, 2))
        + _p("Repoint the clients", num=(1, 0))
        + _p("Keep in mind:")
        + _p("the old primary stays fenced", num=(2, 0))
        + _p("until it is rebuilt", num=(2, 1))
        + _p("Rollback", style="Heading1")
        + _p("Stop the writers", num=(3, 0))
        + _p("check the backups", num=(3, 1))
        + _p("Continued", num=(4, 0))
    )
    assert _blocks("failover.docx", _docx(body, numbering=_NUMBERING)) == [
        (("Failover",), "Follow these steps."),
        (
            ("Failover",),
            "1. Drain the primary\n2. Promote the replica\n   a) check the lag\n   b) check the slots\n"
            "      i. on every host\n3. Repoint the clients",
        ),
        (("Failover",), "Keep in mind:"),
        (("Failover",), "- the old primary stays fenced\n  - until it is rebuilt"),
        # a restarted list counts from 1 again, and its second level from a
        (("Rollback",), "1. Stop the writers\n   a) check the backups\nIV. Continued"),
    ]


def test_docx_list_styles_made_with_python_docx_are_numbered_and_bulleted():
    import docx

    d = docx.Document()
    d.add_heading("Checklist", level=1)
    d.add_paragraph("Back up the database", style="List Number")
    d.add_paragraph("Upgrade the packages", style="List Number")
    d.add_paragraph("a remark", style="List Bullet")
    buf = io.BytesIO()
    d.save(buf)
    assert _blocks("checklist.docx", buf.getvalue()) == [
        (("Checklist",), "1. Back up the database\n2. Upgrade the packages\n- a remark"),
    ]


_ODF_NS = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0"'
)


def _odt(body: str, *, automatic_styles: str = "", styles: str = "") -> bytes:
    """An OpenDocument text with ``body``, its list styles in ``content.xml`` or ``styles.xml``."""
    content = (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {_ODF_NS}>'
        f"<office:automatic-styles>{automatic_styles}</office:automatic-styles>"
        f"<office:body><office:text>{body}</office:text></office:body></office:document-content>"
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/vnd.oasis.opendocument.text")
        z.writestr("content.xml", content, compress_type=zipfile.ZIP_DEFLATED)
        if styles:
            z.writestr(
                "styles.xml",
                f'<?xml version="1.0" encoding="UTF-8"?><office:document-styles {_ODF_NS}>'
                f"<office:styles>{styles}</office:styles></office:document-styles>",
                compress_type=zipfile.ZIP_DEFLATED,
            )
    return buf.getvalue()


def _note(kind: str, citation: str, text: str) -> str:
    return (
        f'<text:note text:id="n{citation}" text:note-class="{kind}"><text:note-citation>{citation}</text:note-citation>'
        f"<text:note-body><text:p>{text}</text:p></text:note-body></text:note>"
    )


def test_odt_footnotes_and_endnotes_follow_the_paragraph_that_cites_them():
    body = (
        '<text:h text:outline-level="1">Limits</text:h>'
        f"<text:p>The burst limit was raised{_note('footnote', '1', 'The limit was raised to 40 in 2024.')} after the incident.</text:p>"
        "<text:p>Nothing to note here.</text:p>"
        '<text:h text:outline-level="1">History</text:h>'
        f"<text:p>It was first set in 2019{_note('endnote', 'i', 'See the 2019 capacity plan.')} and reviewed.</text:p>"
        "<table:table><table:table-row><table:table-cell><text:p>Setting</text:p></table:table-cell>"
        "<table:table-cell><text:p>Value</text:p></table:table-cell></table:table-row>"
        f"<table:table-row><table:table-cell><text:p>burst{_note('footnote', '2', 'Raised from 20.')}</text:p></table:table-cell>"
        "<table:table-cell><text:p>40</text:p></table:table-cell></table:table-row></table:table>"
    )
    got = _blocks("limits.odt", _odt(body))
    assert got[:3] == [
        (("Limits",), "The burst limit was raised[^1] after the incident.\n[^1]: The limit was raised to 40 in 2024."),
        (("Limits",), "Nothing to note here."),
        (("History",), "It was first set in 2019[^i] and reviewed.\n[^i]: See the 2019 capacity plan."),
    ]
    assert got[3][1].splitlines()[-1] == "| burst[^2] | 40 |"
    assert got[4:] == [(("History",), "[^2]: Raised from 20.")]


_LIST_STYLES = (
    '<text:list-style style:name="L1">'
    '<text:list-level-style-number text:level="1" style:num-suffix="." style:num-format="1"/>'
    '<text:list-level-style-number text:level="2" style:num-suffix=")" style:num-format="a"/>'
    "</text:list-style>"
    '<text:list-style style:name="L2">'
    '<text:list-level-style-bullet text:level="1" text:bullet-char="•"/>'
    '<text:list-level-style-bullet text:level="2" text:bullet-char="◦"/>'
    "</text:list-style>"
)


def test_odt_numbered_and_bulleted_lists_keep_their_numbers_bullets_and_nesting():
    def items(*texts: str) -> str:
        return "".join(f"<text:list-item>{t}</text:list-item>" for t in texts)

    body = (
        '<text:h text:outline-level="1">Failover</text:h>'
        '<text:list xml:id="list1" text:style-name="L1">'
        + items(
            "<text:p>Drain the primary</text:p>",
            "<text:p>Promote the replica</text:p><text:list>"
            + items("<text:p>check the lag</text:p>", "<text:p>check the slots</text:p>")
            + "</text:list>",
            "<text:p>Repoint the clients</text:p><text:p>(the DNS name first)</text:p>",
        )
        + "</text:list>"
        "<text:p>Keep in mind:</text:p>"
        '<text:list text:style-name="L2">'
        + items(
            "<text:p>the old primary stays fenced</text:p><text:list>"
            + items("<text:p>until rebuilt</text:p>")
            + "</text:list>"
        )
        + "</text:list>"
        '<text:list text:style-name="L1" text:continue-numbering="true">'
        + items("<text:p>Rebuild it</text:p>")
        + "</text:list>"
        '<text:list text:style-name="Numbering_20_i">' + items("<text:p>Audit</text:p>") + "</text:list>"
    )
    styles = (
        '<text:list-style style:name="Numbering_20_i">'
        '<text:list-level-style-number text:level="1" style:num-suffix="." style:num-format="i" text:start-value="2"/>'
        "</text:list-style>"
    )
    assert _blocks("failover.odt", _odt(body, automatic_styles=_LIST_STYLES, styles=styles)) == [
        (
            ("Failover",),
            "1. Drain the primary\n2. Promote the replica\n   a) check the lag\n   b) check the slots\n"
            "3. Repoint the clients\n   (the DNS name first)",
        ),
        (("Failover",), "Keep in mind:"),
        (("Failover",), "- the old primary stays fenced\n  - until rebuilt"),
        (("Failover",), "4. Rebuild it"),
        (("Failover",), "ii. Audit"),
    ]


_HEADING_NUMBERING = (
    # Word's outline numbering of headings: each level tied to its heading style (w:pStyle)
    '<w:abstractNum w:abstractNumId="10">'
    '<w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:pStyle w:val="Heading1"/>'
    '<w:lvlText w:val="%1"/><w:suff w:val="tab"/></w:lvl>'
    '<w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:pStyle w:val="Heading2"/>'
    '<w:lvlText w:val="%1.%2"/></w:lvl>'
    '<w:lvl w:ilvl="2"><w:start w:val="1"/><w:numFmt w:val="lowerLetter"/><w:lvlText w:val="%1.%2.%3"/></w:lvl>'
    "</w:abstractNum>"
    '<w:num w:numId="10"><w:abstractNumId w:val="10"/></w:num>'
)


def test_docx_headings_numbered_by_a_list_keep_their_numbers():
    body = (
        _p("Introduction", style="Heading1")
        + _p("Scope", style="Heading2")
        + _p("What this covers.")
        + _p("Terms", style="Heading2")
        + _p("Design", style="Heading1")
        + _p("Storage", style="Heading2")
        + _p("Tables", style="Heading3", num=(10, 2))  # numbered on the paragraph itself
        + _p("Rows are kept.")
        + _p("Unnumbered", style="Heading1", num=(0, 0))  # numId 0: the style's numbering taken off
        + _p("Not counted.")
        + _p("Security", style="Heading1")
        + _p("Keys rotate.")
    )
    data = _docx(
        body,
        numbering=_HEADING_NUMBERING,
        style_numbering={
            "Heading1": '<w:numPr><w:numId w:val="10"/></w:numPr>',
            "Heading2": '<w:numPr><w:numId w:val="10"/></w:numPr>',
        },
    )
    assert _blocks("design.docx", data) == [
        (("1 Introduction", "1.1 Scope"), "What this covers."),
        (("2 Design", "2.1 Storage", "2.1.a Tables"), "Rows are kept."),
        (("Unnumbered",), "Not counted."),
        (("3 Security",), "Keys rotate."),
    ]
    (doc,) = extract(Source(uri="file:///d/design.docx", content=data))
    assert doc.title == "1 Introduction"


def test_docx_multi_level_labels_show_every_level_they_name_in_its_format():
    numbering = (
        '<w:abstractNum w:abstractNumId="20">'
        '<w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="upperRoman"/><w:lvlText w:val="%1."/></w:lvl>'
        '<w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:lvlText w:val="%1.%2."/></w:lvl>'
        '<w:lvl w:ilvl="2"><w:start w:val="1"/><w:numFmt w:val="lowerLetter"/><w:lvlText w:val="%1.%2.%3)"/></w:lvl>'
        "</w:abstractNum>"
        '<w:abstractNum w:abstractNumId="21">'
        '<w:lvl w:ilvl="0"><w:start w:val="3"/><w:numFmt w:val="upperRoman"/><w:lvlText w:val="%1."/></w:lvl>'
        # "legal" numbering: every level named is written in decimal
        '<w:lvl w:ilvl="1"><w:start w:val="1"/><w:isLgl/><w:numFmt w:val="decimal"/><w:lvlText w:val="%1.%2"/></w:lvl>'
        "</w:abstractNum>"
        '<w:num w:numId="20"><w:abstractNumId w:val="20"/></w:num>'
        '<w:num w:numId="21"><w:abstractNumId w:val="21"/></w:num>'
    )
    body = (
        _p("Plan", style="Heading1")
        + _p("Scope", num=(20, 0))
        + _p("Goals", num=(20, 1))
        + _p("speed", num=(20, 2))
        + _p("cost", num=(20, 2))
        + _p("Design", num=(20, 0))
        + _p("Storage", num=(20, 1))
        + _p("Legal")
        + _p("Articles", num=(21, 0))
        + _p("the first", num=(21, 1))
    )
    assert _blocks("plan.docx", _docx(body, numbering=numbering)) == [
        (
            ("Plan",),
            # a label naming several levels is not a Markdown marker: it follows one ("- ")
            "I. Scope\n   - I.1. Goals\n     - I.1.a) speed\n     - I.1.b) cost\nII. Design\n    - II.1. Storage",
        ),
        (("Plan",), "Legal"),
        (("Plan",), "III. Articles\n     - 3.1 the first"),
    ]


def test_a_docx_list_linked_to_a_numbering_style_takes_that_styles_levels():
    numbering = (
        # the list style "StepList" is defined by abstractNum 30 (w:styleLink); a list made with it
        # (abstractNum 31) only links to it (w:numStyleLink) and has no levels of its own
        '<w:abstractNum w:abstractNumId="30"><w:styleLink w:val="StepList"/>'
        '<w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:lvlText w:val="%1."/></w:lvl>'
        '<w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="lowerLetter"/><w:lvlText w:val="%2)"/></w:lvl>'
        "</w:abstractNum>"
        '<w:abstractNum w:abstractNumId="31"><w:numStyleLink w:val="StepList"/></w:abstractNum>'
        '<w:num w:numId="30"><w:abstractNumId w:val="30"/></w:num>'
        '<w:num w:numId="31"><w:abstractNumId w:val="31"/></w:num>'
    )
    body = _p("Stop the writers", num=(31, 0)) + _p("check the backups", num=(31, 1)) + _p("Restore", num=(31, 0))
    assert _blocks("steps.docx", _docx(body, numbering=numbering)) == [
        ((), "1. Stop the writers\n   a) check the backups\n2. Restore"),
    ]


def test_numbered_and_bulleted_paragraphs_in_a_docx_table_cell_keep_their_labels_in_the_row():
    table = (
        "<w:tbl><w:tr><w:tc>" + _p("Task") + "</w:tc><w:tc>" + _p("Steps") + "</w:tc></w:tr>"
        "<w:tr><w:tc>"
        + _p("failover")
        + "</w:tc><w:tc>"
        + _p("drain", num=(1, 0))
        + _p("promote", num=(1, 0))
        + _p("check the lag", num=(1, 1))
        + _p("fenced", num=(2, 0))
        + "</w:tc></w:tr></w:tbl>"
    )
    body = _p("Runbook", style="Heading1") + table + _p("Then", num=(1, 0))
    got = _blocks("runbook.docx", _docx(body, numbering=_NUMBERING))
    assert got == [
        # a nested level is marked by one U+203A a level below the cell's first (the row stays one line)
        (
            ("Runbook",),
            "| Task | Steps |\n| --- | --- |\n| failover | 1. drain 2. promote › a) check the lag - fenced |",
        ),
        (("Runbook",), "3. Then"),  # the cell's items counted with their list
    ]


def test_odt_headings_held_in_list_items_keep_their_numbers():
    styles = (
        '<text:list-style style:name="Outline">'
        '<text:list-level-style-number text:level="1" style:num-suffix="." style:num-format="1"/>'
        '<text:list-level-style-number text:level="2" style:num-suffix="." style:num-format="1" text:display-levels="2"/>'
        "</text:list-style>"
    )
    body = (
        '<text:list text:style-name="Outline">'
        '<text:list-item><text:h text:outline-level="1">Introduction</text:h>'
        "<text:p>Why this exists.</text:p>"
        '<text:list><text:list-item><text:h text:outline-level="2">Scope</text:h><text:p>In scope.</text:p></text:list-item>'
        '<text:list-item><text:h text:outline-level="2">Terms</text:h><text:p>Terms used.</text:p></text:list-item>'
        "</text:list>"
        "</text:list-item>"
        '<text:list-item><text:h text:outline-level="1">Design</text:h>'
        "<text:list><text:list-item><text:p>storage</text:p></text:list-item>"
        "<text:list-item><text:p>indexes</text:p></text:list-item></text:list>"
        "</text:list-item>"
        "<text:list-item><text:p>A closing remark</text:p></text:list-item>"
        "</text:list>"
    )
    assert _blocks("design.odt", _odt(body, automatic_styles=styles)) == [
        (("1. Introduction",), "Why this exists."),
        (("1. Introduction", "1.1. Scope"), "In scope."),
        (("1. Introduction", "1.2. Terms"), "Terms used."),
        (("2. Design",), "- 2.1. storage\n- 2.2. indexes"),  # labels of two levels follow a marker, as in Word
        (("2. Design",), "3. A closing remark"),
    ]


def test_a_docx_levels_suffix_nothing_joins_its_label_to_the_text_where_the_label_is_text():
    numbering = (
        '<w:abstractNum w:abstractNumId="50">'
        '<w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:pStyle w:val="Heading1"/>'
        '<w:lvlText w:val="%1."/><w:suff w:val="nothing"/></w:lvl>'
        '<w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:pStyle w:val="Heading2"/>'
        '<w:lvlText w:val="%1.%2"/><w:suff w:val="space"/></w:lvl>'
        "</w:abstractNum>"
        '<w:abstractNum w:abstractNumId="51">'
        '<w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:lvlText w:val="§%1"/>'
        '<w:suff w:val="nothing"/></w:lvl>'
        '<w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="lowerLetter"/><w:lvlText w:val="(%2)"/>'
        '<w:suff w:val="tab"/></w:lvl>'
        # a plain number stays a Markdown list marker, its space Markdown's own
        '<w:lvl w:ilvl="2"><w:start w:val="1"/><w:numFmt w:val="lowerRoman"/><w:lvlText w:val="%3."/>'
        '<w:suff w:val="nothing"/></w:lvl>'
        "</w:abstractNum>"
        '<w:num w:numId="50"><w:abstractNumId w:val="50"/></w:num>'
        '<w:num w:numId="51"><w:abstractNumId w:val="51"/></w:num>'
    )
    body = (
        _p("Introduction", style="Heading1")
        + _p("Scope", style="Heading2")
        + _p("12 applies", num=(51, 0))
        + _p("to tenants", num=(51, 1))
        + _p("on every host", num=(51, 2))
    )
    data = _docx(
        body,
        numbering=numbering,
        style_numbering={
            "Heading1": '<w:numPr><w:numId w:val="50"/></w:numPr>',
            "Heading2": '<w:numPr><w:numId w:val="50"/></w:numPr>',
        },
    )
    assert _blocks("rules.docx", data) == [
        (("1.Introduction", "1.1 Scope"), "- §112 applies\n  - (a) to tenants\n    i. on every host"),
    ]


def test_a_docx_levels_restart_follows_lvlrestart_and_zero_never_restarts():
    numbering = (
        '<w:abstractNum w:abstractNumId="52">'
        '<w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:lvlText w:val="%1."/></w:lvl>'
        # never restarted: counts on across the items of level 1
        '<w:lvl w:ilvl="1"><w:start w:val="1"/><w:lvlRestart w:val="0"/><w:numFmt w:val="lowerLetter"/>'
        '<w:lvlText w:val="%2)"/></w:lvl>'
        # restarted after level 1 only, not after an item of level 2
        '<w:lvl w:ilvl="2"><w:start w:val="1"/><w:lvlRestart w:val="1"/><w:numFmt w:val="lowerRoman"/>'
        '<w:lvlText w:val="%3."/></w:lvl>'
        "</w:abstractNum>"
        '<w:num w:numId="52"><w:abstractNumId w:val="52"/></w:num>'
    )
    body = (
        _p("Drain", num=(52, 0))
        + _p("check the lag", num=(52, 1))
        + _p("on the primary", num=(52, 2))
        + _p("check the slots", num=(52, 1))
        + _p("on the replica", num=(52, 2))
        + _p("Promote", num=(52, 0))
        + _p("check the clients", num=(52, 1))
        + _p("on every host", num=(52, 2))
    )
    assert _blocks("restart.docx", _docx(body, numbering=numbering)) == [
        (
            (),
            "1. Drain\n   a) check the lag\n      i. on the primary\n   b) check the slots\n      ii. on the replica\n"
            "2. Promote\n   c) check the clients\n      i. on every host",
        ),
    ]


def test_a_docx_label_with_words_around_its_number_is_written_as_word_shows_it_after_a_bullet():
    numbering = (
        '<w:abstractNum w:abstractNumId="53">'
        '<w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:lvlText w:val="Step %1:"/></w:lvl>'
        '<w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="lowerLetter"/><w:lvlText w:val="%2)"/></w:lvl>'
        "</w:abstractNum>"
        '<w:num w:numId="53"><w:abstractNumId w:val="53"/></w:num>'
    )
    body = (
        _p("Failover", style="Heading1")
        + _p("Drain the primary", num=(53, 0))
        + _p("check the lag", num=(53, 1))
        + _p("Promote the replica", num=(53, 0))
    )
    assert _blocks("steps.docx", _docx(body, numbering=numbering)) == [
        (("Failover",), "- Step 1: Drain the primary\n  a) check the lag\n- Step 2: Promote the replica"),
    ]


def test_a_docx_numbering_style_defined_only_in_styles_xml_is_followed():
    numbering = (
        # abstractNum 40 links to the numbering style "StepList"; no abstractNum names it (w:styleLink):
        # the style itself, in styles.xml, gives the list (its w:numPr)
        '<w:abstractNum w:abstractNumId="40"><w:numStyleLink w:val="StepList"/></w:abstractNum>'
        '<w:abstractNum w:abstractNumId="41">'
        '<w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="upperLetter"/><w:lvlText w:val="%1."/></w:lvl>'
        '<w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:lvlText w:val="%2)"/></w:lvl>'
        "</w:abstractNum>"
        '<w:num w:numId="40"><w:abstractNumId w:val="40"/></w:num>'
        '<w:num w:numId="41"><w:abstractNumId w:val="41"/></w:num>'
    )
    style = (
        '<w:style w:type="numbering" w:customStyle="1" w:styleId="StepList"><w:name w:val="StepList"/>'
        '<w:pPr><w:numPr><w:numId w:val="41"/></w:numPr></w:pPr></w:style>'
    )
    body = _p("Stop the writers", num=(40, 0)) + _p("check the backups", num=(40, 1)) + _p("Restore", num=(40, 0))
    assert _blocks("steps.docx", _docx(body, numbering=numbering, more_styles=style)) == [
        ((), "A. Stop the writers\n   1) check the backups\nB. Restore"),
    ]


def test_nested_levels_in_a_docx_table_cell_are_marked_by_their_depth():
    table = (
        "<w:tbl><w:tr><w:tc>" + _p("Task") + "</w:tc><w:tc>" + _p("Steps") + "</w:tc></w:tr>"
        "<w:tr><w:tc>"
        + _p("failover")
        + "</w:tc><w:tc>"
        + _p("drain", num=(1, 0))
        + _p("check the lag", num=(1, 1))
        + _p("on every host", num=(1, 2))
        + _p("check the slots", num=(1, 1))
        + _p("promote", num=(1, 0))
        + "</w:tc></w:tr></w:tbl>"
    )
    got = _blocks("runbook.docx", _docx(table, numbering=_NUMBERING))
    assert got[0][1].splitlines()[-1] == (
        "| failover | 1. drain › a) check the lag ›› i. on every host › b) check the slots 2. promote |"
    )


_OUTLINE = (
    '<text:outline-style style:name="Outline">'
    '<text:outline-level-style text:level="1" style:num-format="1"/>'
    '<text:outline-level-style text:level="2" style:num-format="1" text:display-levels="2"/>'
    '<text:outline-level-style text:level="3" style:num-format="a" text:display-levels="3"/>'
    "</text:outline-style>"
)


def test_odt_headings_numbered_by_the_outline_style_keep_their_numbers_as_word_headings_do():
    body = (
        '<text:h text:outline-level="1">Introduction</text:h>'
        '<text:h text:outline-level="2">Scope</text:h>'
        "<text:p>What this covers.</text:p>"
        '<text:h text:outline-level="2">Terms</text:h>'
        '<text:h text:outline-level="1">Design</text:h>'
        '<text:h text:outline-level="2">Storage</text:h>'
        '<text:h text:outline-level="3">Tables</text:h>'
        "<text:p>Rows are kept.</text:p>"
        '<text:h text:outline-level="1" text:is-list-header="true">Unnumbered</text:h>'
        "<text:p>Not counted.</text:p>"
        # a label the writer saved in the heading is kept, not doubled
        '<text:h text:outline-level="1"><text:number>3</text:number> Security</text:h>'
        "<text:p>Keys rotate.</text:p>"
        '<text:h text:outline-level="1">Operations</text:h>'
        "<text:p>Run it.</text:p>"
    )
    assert _blocks("design.odt", _odt(body, styles=_OUTLINE)) == [
        (("1 Introduction", "1.1 Scope"), "What this covers."),
        (("2 Design", "2.1 Storage", "2.1.a Tables"), "Rows are kept."),
        (("Unnumbered",), "Not counted."),
        (("3 Security",), "Keys rotate."),
        (("4 Operations",), "Run it."),
    ]


def test_odt_headings_of_an_outline_style_without_numbers_stay_unnumbered():
    outline = (  # LibreOffice's default: every level without a number format
        '<text:outline-style style:name="Outline">'
        '<text:outline-level-style text:level="1" style:num-format=""/>'
        '<text:outline-level-style text:level="2" style:num-format=""/>'
        "</text:outline-style>"
    )
    body = '<text:h text:outline-level="1">Introduction</text:h><text:p>Why.</text:p>'
    assert _blocks("plain.odt", _odt(body, styles=outline)) == [(("Introduction",), "Why.")]


def test_an_odt_label_with_words_around_its_number_is_written_as_shown_after_a_bullet():
    styles = (
        '<text:list-style style:name="Steps">'
        '<text:list-level-style-number text:level="1" style:num-prefix="Step " style:num-suffix=":" style:num-format="1"/>'
        '<text:list-level-style-number text:level="2" style:num-suffix=")" style:num-format="a"/>'
        "</text:list-style>"
    )
    body = (
        '<text:list text:style-name="Steps"><text:list-item><text:p>Drain the primary</text:p>'
        "<text:list><text:list-item><text:p>check the lag</text:p></text:list-item></text:list></text:list-item>"
        "<text:list-item><text:p>Promote the replica</text:p></text:list-item></text:list>"
    )
    assert _blocks("steps.odt", _odt(body, automatic_styles=styles)) == [
        ((), "- Step 1: Drain the primary\n  a) check the lag\n- Step 2: Promote the replica"),
    ]
