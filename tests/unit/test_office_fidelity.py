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
    body: str, *, footnotes: dict[int, str] | None = None, endnotes: dict[int, str] | None = None, numbering: str = ""
) -> bytes:
    """python-docx's template with ``body`` as its document, and the notes or numbering given."""
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
