"""The extract stage: one test per format (text, metadata, structure) and one per error class.

Fixtures live in tests/fixtures/extract/ (the PDFs are made by make_pdfs.py there; fpdf2 is not
needed to run these tests).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kbctl.errors import ExtractError
from kbctl.extract import SUPPORTED_SUFFIXES, extract, guess_media_type
from kbctl.extract.frontmatter import UnsupportedYAML, parse_simple_yaml, split_front_matter
from kbctl.extract.pdf import drop_running_lines, pdf_date
from kbctl.extract.text import markdown_blocks
from kbctl.types import Document, Source

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "extract"


def fixture_source(name: str, **kw) -> Source:
    """A Source as fetch makes it for a file: file uri, guessed media type, file metadata."""
    p = FIX / name
    meta = {"path": f"extract/{name}", "size": p.stat().st_size, "mtime": "2024-01-02T03:04:05Z"}
    return Source(uri=f"file://{p}", content=p.read_bytes(), media_type=guess_media_type(name), metadata=meta, **kw)


def mem(uri: str, content: str | bytes, media_type: str | None = None, **meta) -> Source:
    data = content.encode("utf-8") if isinstance(content, str) else content
    return Source(uri=uri, content=data, media_type=media_type, metadata=meta)


def only(docs: list[Document]) -> Document:
    assert len(docs) == 1, [d.uri for d in docs]
    return docs[0]


def assert_consistent(doc: Document) -> None:
    """Blocks are exact spans of the text, and metadata is plain JSON."""
    for b in doc.blocks:
        assert doc.text[b.start : b.start + len(b.text)] == b.text
    json.dumps(dict(doc.metadata))  # no default=: dates etc. must already be strings


# --- plain text -----------------------------------------------------------------------------------


def test_plain_text_paragraphs_title_and_common_metadata():
    doc = only(extract(fixture_source("plain.txt")))
    assert doc.source_type == "text"
    assert doc.title == "Quarterly on-call review"
    assert [b.text for b in doc.blocks] == [
        "Quarterly on-call review",
        "The on-call rotation handled 42 pages this quarter.\nMost of them were during business hours.",
        "Action items are tracked in ticket OPS-1188.",
    ]
    assert doc.metadata["source_type"] == "text"
    assert doc.metadata["path"] == "extract/plain.txt"  # fetch's relative path wins over the uri's
    assert doc.metadata["mtime"] == "2024-01-02T03:04:05Z"
    assert doc.metadata["size"] == (FIX / "plain.txt").stat().st_size
    assert_consistent(doc)


def test_text_path_from_file_uri_and_long_first_line_gives_stem_title():
    doc = only(extract(mem("file:///srv/docs/long-notes.txt", "x" * 130 + "\n\nsecond")))
    assert doc.title == "long-notes"
    assert doc.metadata["path"] == "/srv/docs/long-notes.txt"


def test_utf16_and_utf8_bom_are_accepted():
    doc = only(extract(fixture_source("utf16.txt")))
    assert doc.title == "Notes in UTF-16"
    assert "Über große Dateien." in doc.text
    bom = only(extract(mem("file:///x/bom.txt", b"\xef\xbb\xbfHello\r\n\r\nWorld\r\n")))
    assert [b.text for b in bom.blocks] == ["Hello", "World"]


# --- markdown -------------------------------------------------------------------------------------


def test_markdown_yaml_front_matter_headings_and_code_fence():
    doc = only(extract(fixture_source("guide.md")))
    assert doc.source_type == "markdown"
    assert doc.title == "Refund policy: the complete guide"
    m = doc.metadata
    assert m["author"] == "Priya Raman"
    assert m["date"] == "2024-09-12"
    assert m["tags"] == ["billing", "refunds", "money, back"]
    assert m["reviewers"] == ["Tomas Varga", "Helena Brandt"]
    assert m["draft"] is False and m["version"] == 3 and m["weight"] == 1.5
    assert m["time"] == "12:30"  # not YAML 1.1's sexagesimal 750
    assert m["summary"] == "How refunds work, end to end."
    paths = {b.text.split("\n")[0]: b.heading_path for b in doc.blocks}
    assert paths["Refunds go back to the original payment method."] == ("Refunds",)
    assert paths["Card refunds take 5-10 business days."] == ("Refunds", "Timelines")
    assert paths["SEPA refunds take up to 3 days."] == ("Refunds", "Timelines", "Bank transfers")
    assert paths["Use the form below."] == ("Refunds", "Requesting one")  # H3 closed by the next H2
    code = [b.text for b in doc.blocks if b.text.startswith("```")]
    assert code == ["```bash\nkbctl refund --order 1234\n\n# the blank line above stays inside this code block\n```"]
    assert any(b.text.startswith("| Plan | Refundable |") for b in doc.blocks)
    assert "## Timelines" not in doc.text and "# Refunds" not in doc.text
    assert "title:" not in doc.text and not doc.text.startswith("---")
    assert_consistent(doc)


def test_markdown_toml_front_matter():
    doc = only(extract(fixture_source("notes-toml.md")))
    assert doc.title == "Release notes"
    assert doc.metadata["date"] == "2024-05-14"  # a TOML date, as an ISO string
    assert doc.metadata["tags"] == ["release", "notes"]
    assert doc.metadata["draft"] is True
    assert doc.metadata["params"] == {"audience": "engineers"}
    assert [(b.heading_path, b.text) for b in doc.blocks] == [
        ((), "Intro paragraph before any heading."),
        (("Version 2.1",), "Adds the **export** command."),
    ]
    assert_consistent(doc)


def test_markdown_title_falls_back_to_first_h1_then_stem():
    assert only(extract(mem("file:///d/a.md", "intro\n\n## Sub\n\ntext\n\n# Main\n\nmore"))).title == "Main"
    assert only(extract(mem("file:///d/my-notes.md", "## Only an H2\n\ntext"))).title == "my-notes"


def test_markdown_setext_headings_breaks_and_unclosed_front_matter():
    parts = markdown_blocks("Top\n===\n\nintro\n\nSection\n-------\nbody\n\n***\n\nafter")
    assert parts.first_h1 == "Top"
    assert [(b.heading_path, b.text) for b in parts.blocks] == [
        (("Top",), "intro"),
        (("Top", "Section"), "body"),
        (("Top", "Section"), "after"),
    ]
    meta, body, err = split_front_matter("---\nno closing rule\n\ntext")
    assert meta == {} and err is None and body.startswith("---")


def test_bad_front_matter_is_reported_not_fatal():
    doc = only(extract(mem("file:///d/x.md", "+++\ntitle = = broken\n+++\n\n# Hello\n\nbody")))
    assert doc.title == "Hello"
    assert "front_matter_error" in doc.metadata
    assert doc.text == "body"


def test_simple_yaml_subset():
    data = parse_simple_yaml(
        'a: "quoted: with \\"escapes\\""  # comment\n'
        "b: 'it''s'\n"
        'c: [1, 2.5, true, null, "x, y"]\n'
        "# a comment line\n"
        "d:\n- one\n- 'two'\n"
        "e: |\n  line 1\n  line 2\n"
        "f: ~\n"
        "g: 007\n"
        "url: https://example.com/a#b\n"
    )
    assert data == {
        "a": 'quoted: with "escapes"',
        "b": "it's",
        "c": [1, 2.5, True, None, "x, y"],
        "d": ["one", "two"],
        "e": "line 1\nline 2",
        "f": None,
        "g": "007",
        "url": "https://example.com/a#b",
    }
    with pytest.raises(UnsupportedYAML):
        parse_simple_yaml("outer:\n  inner: 1\n")
    assert parse_simple_yaml("outer:\n  inner: 1\nkept: yes\n", strict=False) == {"kept": "yes"}


def test_yaml_outside_the_subset_uses_pyyaml_when_installed():
    pytest.importorskip("yaml")
    meta, body, err = split_front_matter("---\nseo:\n  title: Deep\nlist:\n  - {a: 1}\n---\nbody\n")
    assert err is None and body == "body\n"
    assert meta == {"seo": {"title": "Deep"}, "list": [{"a": 1}]}


# --- html -----------------------------------------------------------------------------------------


def test_html_main_content_title_and_meta_without_boilerplate():
    doc = only(extract(fixture_source("page.html")))
    assert doc.source_type == "html"
    assert doc.title == "Webhook retries"
    for chrome in ("Billing", "Status page", "All rights reserved", "Privacy"):
        assert chrome not in doc.text
    assert "E_WEBHOOK_SIGNATURE_INVALID" in doc.text  # no Markdown escaping left (E\_WEBHOOK…)
    heads = {b.heading_path for b in doc.blocks}
    assert ("Webhook retries", "Signature failures") in heads
    m = doc.metadata
    assert m["description"] == "How Acme retries failed webhook deliveries."
    assert m["tags"] == ["webhooks", "retries", "api"]
    assert m["author"] == "Lea Fischer"
    assert m["date"] == "2024-06-03"
    assert_consistent(doc)


def test_html_falls_back_to_body_text_when_trafilatura_finds_nothing(monkeypatch):
    import kbctl.extract.html as html_mod

    monkeypatch.setattr(html_mod, "_main_markdown", lambda markup, url: None)
    page = (
        "<html><head><title>T</title><script>var x=1;</script></head><body><nav>Menu</nav>"
        "<h1>Heading</h1><p>First <b>bold</b> para.</p><div>Second<br>line</div><footer>foot</footer></body></html>"
    )
    doc = only(extract(mem("https://example.com/p", page, "text/html; charset=utf-8")))
    assert doc.title == "Heading"  # trafilatura's metadata prefers the <h1> to a shorter <title>
    assert [b.text for b in doc.blocks] == ["Heading", "First bold para.", "Second\nline"]


def test_html_declared_charset_is_honoured():
    page = "<html><head><meta charset='iso-8859-1'><title>Caf\xe9</title></head><body><p>cr\xe8me</p></body></html>"
    doc = only(extract(mem("file:///d/p.html", page.encode("latin-1"))))
    assert doc.title == "Café"


def test_html_that_declares_no_charset_falls_back_to_windows_1252_as_browsers_do():
    """A page with no charset anywhere (no header parameter, no <meta>, no BOM) whose bytes are not
    UTF-8 was refused ('not valid UTF-8 text', with a hint to iconv a file, no help for a URL); the
    HTML standard's fallback for such a page is windows-1252, what old pages and Windows tools
    wrote. A page mostly UTF-8 with a damaged byte is still refused (a guess would garble it)."""
    page = "<html><head><title>Caf\xe9 menu</title></head><body><p>\u201ccr\xe8me br\xfbl\xe9e\u201d \u2014 4 \u20ac</p></body></html>"
    for uri, ctype in (("https://example.com/old", "text/html"), ("file:///d/old.html", None)):
        doc = only(extract(mem(uri, page.encode("cp1252"), ctype)))
        assert doc.title == "Café menu" and "“crème brûlée” — 4 €" in doc.text, doc.text
    damaged = ("<html><head><title>Caf\xe9</title></head><body><p>cr\xe8me br\xfbl\xe9e</p></body></html>").encode()
    with pytest.raises(ExtractError, match="not valid UTF-8"):
        extract(mem("https://example.com/damaged", damaged.replace(b"cr\xc3\xa8me", b"cr\xe8me"), "text/html"))


def test_html_whose_header_charset_is_wrong_is_read_by_its_meta_charset():
    """The server says UTF-8 and the page's <meta> says windows-1252, which its bytes are: the
    transport's charset was the only one tried, and the page refused."""
    page = "<html><head><meta charset='windows-1252'><title>Caf\xe9</title></head><body><p>\u2018quoted\u2019</p></body></html>"
    doc = only(extract(mem("https://example.com/p", page.encode("cp1252"), "text/html", charset="utf-8")))
    assert doc.title == "Café" and "‘quoted’" in doc.text


def test_text_from_a_url_that_declares_no_charset_falls_back_to_windows_1252():
    """Plain text fetched from a URL, not UTF-8 and with no charset in its Content-Type, was
    refused with a hint to iconv a file, no help for a URL (the user has no file). It is read as
    HTML is: windows-1252 (what HTTP/1.1 long said text/* without a charset is, as browsers read it),
    unless its non-ASCII bytes stand mostly in UTF-8 sequences (damaged UTF-8: refused, with a hint
    for a URL); a charset in the header is honoured."""
    from kbctl.extract import stream
    from kbctl.extract.text import extract_text

    text = "Caf\xe9 menu\n\n\u201ccr\xe8me br\xfbl\xe9e\u201d \u2014 4 \u20ac\n"
    for uri, ctype in (("https://example.com/menu.txt", "text/plain"), ("http://example.com/menu", None)):
        doc = only(extract(mem(uri, text.encode("cp1252"), ctype)))
        assert doc.source_type == "text" and doc.title == "Café menu" and "“crème brûlée” — 4 €" in doc.text, doc.text
    md = only(extract(mem("https://example.com/notes.md", ("# Caf\xe9\n\n" + text).encode("cp1252"), "text/markdown")))
    assert md.title == "Café" and "“crème brûlée”" in md.text
    # a charset in the header wins over the fallback (0xa4 is € in ISO-8859-15, ¤ in windows-1252)
    declared = only(extract(mem("https://example.com/p.txt", b"Price\n\n5 \xa4", "text/plain", charset="iso-8859-15")))
    assert declared.text.endswith("5 €")
    # large text (read in windows) reads the same
    big = ("\n\n".join(f"Paragraph {n}: cr\xe8me \u2014 {n} \u20ac" for n in range(40_000))).encode("cp1252")
    assert len(big) > stream.STREAM_MIN_BYTES
    src = mem("https://example.com/big.txt", big, "text/plain")
    (whole,) = extract_text(src)
    large = stream.read_large(src, "text")
    assert tuple(large.blocks()) == whole.blocks and whole.blocks[1].text == "Paragraph 1: crème — 1 €"
    # damaged UTF-8 from a URL is refused, its hint for a URL (no file to iconv)
    damaged = "Caf\xe9 cr\xe8me br\xfbl\xe9e d\xe9j\xe0 vu".encode().replace(b"cr\xc3\xa8me", b"cr\xe8me")
    big_damaged = mem("https://example.com/damaged.txt", damaged * 60_000, "text/plain")  # read in windows too
    for read in (extract, lambda s: stream.read_large(s, "text")):
        with pytest.raises(ExtractError, match="not valid UTF-8") as e:
            read(big_damaged)
        assert "iconv" not in e.value.hint and "charset" in e.value.hint, e.value.hint
    with pytest.raises(ExtractError, match="not valid UTF-8") as e:
        extract(mem("https://example.com/damaged.txt", damaged, "text/plain"))
    assert "iconv" not in e.value.hint
    with pytest.raises(ExtractError, match="not valid UTF-8") as e:  # an HTML page's refusal too
        extract(mem("https://example.com/damaged", b"<html><body><p>" + damaged + b"</p></body></html>", "text/html"))
    assert "iconv" not in e.value.hint


def test_a_local_text_file_that_is_not_utf8_is_still_refused_with_the_iconv_hint():
    """Files keep the refusal: nothing sent them with a charset to fall back from, the user can
    re-encode them (the hint says how), and a guess would index a latin-2 or Shift-JIS file as
    mojibake without a word. A local HTML file keeps the HTML standard's fallback."""
    text = "Caf\xe9 menu\n\n\u201ccr\xe8me\u201d".encode("cp1252")
    for uri in ("file:///d/menu.txt", "stdin:menu"):
        with pytest.raises(ExtractError, match="not valid UTF-8") as e:
            extract(mem(uri, text, "text/plain"))
        assert "iconv -f windows-1252" in e.value.hint


# --- pdf ------------------------------------------------------------------------------------------


def test_pdf_pages_metadata_and_running_footer():
    doc = only(extract(fixture_source("report.pdf")))
    assert doc.source_type == "pdf"
    assert doc.title == "Quarterly Storage Report"
    assert {b.page for b in doc.blocks} == {1, 2}
    page_of = {b.page: b.text for b in doc.blocks}
    assert "ORION-7" in page_of[1] and "ARC-2291" in page_of[2] and "ARC-2291" not in page_of[1]
    assert "internal - page" not in doc.text  # the running footer is dropped
    m = doc.metadata
    assert m["page_count"] == 2 and m["author"] == "Dana Ortiz" and m["date"] == "2024-03-05T10:30:00Z"
    assert_consistent(doc)


def test_pdf_helpers():
    assert pdf_date("D:20240115093000+01'00'") == "2024-01-15T08:30:00Z"
    assert pdf_date("D:2024") == "2024-01-01T00:00:00"
    assert pdf_date("garbage") is None
    pages = [["Chapter 3", "body a", "Page 1 of 3"], ["Chapter 4", "body b", "Page 2 of 3"], ["Other", "body c"]]
    assert drop_running_lines(pages) == [["Chapter 3", "body a"], ["Chapter 4", "body b"], ["Other", "body c"]]
    same = [["ACME manual", "x"], ["ACME manual", "y"]]
    assert drop_running_lines(same) == [["x"], ["y"]]


def test_corrupt_pdf():
    with pytest.raises(ExtractError, match=r"^corrupt or unreadable PDF: ") as e:
        extract(fixture_source("corrupt.pdf"))
    assert e.value.hint


def test_pdf_without_text_mentions_ocr():
    with pytest.raises(ExtractError, match=r"no extractable text in PDF \(1 page; no text layer and no images\)") as e:
        extract(fixture_source("scanned.pdf"))
    assert "OCR" in e.value.hint


# --- e-mail ---------------------------------------------------------------------------------------


def test_eml_headers_body_and_attachments_as_children():
    src = fixture_source("message.eml")
    docs = extract(src)
    msg, *children = docs
    assert msg.source_type == "email" and msg.uri == src.uri and msg.parent_uri is None
    assert msg.title == "Wire transfer details for invoice INV-2024-00817"
    m = msg.metadata
    assert m["from"] == "Helena Brandt <billing@acme.example>"
    assert m["to"] == "Accounts Payable <ap@northwind.example>, Ravi Menon <ravi@northwind.example>"
    assert m["date"] == "2024-10-16T14:05:00Z"
    assert m["message_id"] == "inv-817.wire@acme.example"
    assert m["in_reply_to"] == "po-5521.request@northwind.example"
    assert m["thread_id"] == "po-5521.thread-start@northwind.example"
    assert m["has_attachments"] is True
    assert m["attachments"] == ["wire-instructions.txt", "logo.png", "statement.pdf"]
    assert len(m["attachment_errors"]) == 1 and m["attachment_errors"][0].startswith("statement.pdf: corrupt")
    assert "Invoice INV-2024-00817 is due" in msg.text and "HTML version" not in msg.text  # text/plain preferred
    (att,) = children  # the PNG has no extractor, the corrupt PDF failed
    assert att.uri == f"{src.uri}#attachment/wire-instructions.txt"
    assert att.parent_uri == src.uri
    assert att.source_type == "text" and att.title == "WIRE INSTRUCTIONS"
    assert "Acme Société Générale" in att.text  # latin-1 part decoded with its charset
    assert att.metadata["attachment_filename"] == "wire-instructions.txt"
    assert att.metadata["parent_subject"] == msg.title
    assert att.metadata["path"] == "extract/message.eml"
    for d in docs:
        assert_consistent(d)


def test_mbox_messages_are_threaded_documents():
    src = fixture_source("thread.mbox")
    docs = extract(src)
    assert [d.uri for d in docs] == [
        f"{src.uri}#lost-01@brightpath.example",
        f"{src.uri}#T-58213.1@acme.example",
        f"{src.uri}#lost-02@brightpath.example",
    ]
    assert {d.metadata["thread_id"] for d in docs} == {"lost-01@brightpath.example"}
    assert [d.metadata.get("in_reply_to") for d in docs] == [
        None,
        "lost-01@brightpath.example",
        "T-58213.1@acme.example",
    ]
    assert docs[1].metadata["date"] == "2024-10-21T09:15:00Z"  # +0200 converted to UTC
    assert "\nFrom the security page" in docs[1].text  # mbox ">From" unescaped
    assert [b.text for b in docs[2].blocks] == ["Thanks, the recovery code worked.", "I enrolled my new phone."]
    assert all(d.source_type == "email" and d.parent_uri is None for d in docs)


def test_a_failed_attachment_a_repeated_message_id_and_a_skipped_message_are_noted_for_the_run():
    """A corrupt PDF attached to a message was only a metadata key: the run said nothing (the rule:
    a corrupt PDF is recorded with its reason). A Message-ID repeated in one mbox was stored as
    ``~2`` without a word (a feed's repeated id is a warning), and a message that could not be read
    was only logged. Each is now a note of the document, which the run records as a warning."""
    eml = fixture_source("message.eml")
    msg = extract(eml)[0]
    assert [c for c, _ in msg.notes] == ["AttachmentWarning"]
    assert "statement.pdf: corrupt" in msg.notes[0][1]
    head = "From a@x Mon Oct 21 08:00:00 2024\nSubject: {s}\nMessage-ID: <dup@x>\n\n{s} body\n\n"
    huge = "From c@x Mon Oct 21 08:02:00 2024\nSubject: big\n" + "X-Long: " + "y" * (140 * 1024) + "\n\nbody\n\n"
    mbox = head.format(s="one") + head.format(s="two") + huge
    docs = extract(mem("file:///d/box.mbox", mbox))
    assert [d.uri for d in docs] == ["file:///d/box.mbox#dup@x", "file:///d/box.mbox#dup@x~2"]
    assert [c for c, _ in docs[1].notes] == ["DuplicateIdWarning"] and "message 2" in docs[1].notes[0][1]
    assert [c for c, _ in docs[0].notes] == ["SkippedMessageWarning"] and "message 3" in docs[0].notes[0][1]


def test_email_with_empty_body_keeps_subject_when_it_has_attachments():
    raw = (
        "From: a@example.com\nTo: b@example.com\nSubject: See attached\nMessage-ID: <m1@example.com>\n"
        'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="B"\n\n'
        "--B\nContent-Type: text/plain\n\n\n--B\nContent-Type: text/markdown\n"
        'Content-Disposition: attachment; filename="notes.md"\n\n# Notes\n\nAttached text.\n--B--\n'
    )
    msg, att = extract(mem("stdin:mail", raw))  # sniffed as e-mail from its headers
    assert msg.text == "See attached"
    assert att.source_type == "markdown" and att.title == "Notes" and att.parent_uri == "stdin:mail"


def test_split_mbox_needs_a_blank_line_or_a_postmark():
    from kbctl.extract.mail import split_mbox

    raw = (
        b"\nFrom a@x Mon Oct 21 08:02:00 2024\nSubject: one\n\nbody\nFrom here on, still body\n"
        b"From b@x Tue Oct 22 09:00:00 2024\nSubject: two\n\nsecond\n"
    )
    assert split_mbox(raw) == [b"Subject: one\n\nbody\nFrom here on, still body\n", b"Subject: two\n\nsecond\n"]


def test_empty_mbox_is_an_error():
    with pytest.raises(ExtractError, match="empty mbox"):
        extract(mem("file:///d/empty.mbox", "just some text without From lines\n"))


# --- feeds ----------------------------------------------------------------------------------------


def test_rss_entries_with_guid_uris():
    src = fixture_source("feed.rss")
    first, second = extract(src)
    assert first.source_type == "feed"
    assert first.uri == f"{src.uri}#acme-changelog-sdk-3.14.2"  # a bare guid is qualified by its feed
    assert second.uri == f"{src.uri}#https://acme.example/changelog/web-2024-10-1"  # no guid: the link, under the feed
    assert first.title == "SDK v3.14.2: proxy fix"
    assert [b.text for b in first.blocks] == [
        "Fixes certificate verification behind TLS-intercepting proxies.",
        "Upgrade with pip.",
    ]
    m = first.metadata
    assert m["feed_title"] == "Acme Changelog" and m["feed_url"] == src.uri
    assert m["link"] == "https://acme.example/changelog/sdk-3-14-2" and m["guid"] == "acme-changelog-sdk-3.14.2"
    assert m["published"] == "2024-10-01T09:00:00Z" and m["author"] == "Mei Lin"
    assert m["tags"] == ["SDK", "Python"]
    assert "guid" not in second.metadata
    assert_consistent(first)


def test_entries_belong_to_their_feed():
    from kbctl.extract.feed import entry_uri

    assert entry_uri("1", None, "https://a.example/feed", "h") != entry_uri("1", None, "https://b.example/feed", "h")
    assert (
        entry_uri("urn:uuid:1225c695", "https://x/1", "https://a.example/feed", "h")
        == "https://a.example/feed#urn:uuid:1225c695"
    )
    assert entry_uri(None, "https://x/1", "https://a.example/feed", "h") == "https://a.example/feed#https://x/1"
    assert entry_uri(None, None, "https://a.example/feed", "sha256:0a1b") == "https://a.example/feed#sha256:0a1b"


def test_feed_guids_as_written_and_repeats_suffixed():
    rss = (
        '<?xml version="1.0"?><rss version="2.0"><channel><title>F</title>'
        "<item><guid>1</guid><link>p/1.html</link><description>one</description></item>"
        "<item><guid>1</guid><description>again</description></item>"
        "<item><description>no id at all</description></item></channel></rss>"
    )
    src = mem("https://a.example/feeds/f.rss", rss, "application/rss+xml")
    first, again, anon = extract(src)
    assert first.uri == f"{src.uri}#1" and first.metadata["guid"] == "1" and not first.notes  # not resolved to /feeds/1
    assert first.metadata["link"] == "https://a.example/feeds/p/1.html"
    assert again.uri == f"{src.uri}#1~2" and again.notes[0][0] == "DuplicateIdWarning"
    assert anon.uri.startswith(f"{src.uri}#sha256:") and extract(src)[2].uri == anon.uri  # stable


def test_atom_entries_content_over_summary():
    first, second = extract(fixture_source("feed.atom"))
    assert first.uri.endswith("feed.atom#tag:acme.example,2024:agent-1.9.1")
    assert (
        first.text
        == "The status page on port 8089 now listens on 127.0.0.1 only.\n\nAll customers on 1.9.0 should upgrade."
    )
    assert first.metadata["published"] == "2024-10-29T11:00:00Z"
    assert first.metadata["author"] == "Lea Fischer" and first.metadata["tags"] == ["security"]
    assert second.text == "Oracle connector and disk buffering."
    assert second.metadata["published"] == "2024-09-24T11:00:00Z"  # updated when not published


def test_malformed_feed():
    with pytest.raises(ExtractError, match=r"^malformed feed: ") as e:
        extract(fixture_source("malformed.rss"))
    assert e.value.hint


def test_feed_without_entries():
    rss = '<?xml version="1.0"?><rss version="2.0"><channel><title>Quiet</title></channel></rss>'
    with pytest.raises(ExtractError, match="empty feed"):
        extract(mem("https://example.com/feed", rss, "application/rss+xml"))


# --- errors: binary, encoding, empty, unknown -----------------------------------------------------


@pytest.mark.parametrize(
    "source, shown",
    [
        (lambda: fixture_source("image.png"), "image/png"),
        (lambda: fixture_source("data.bin"), "application/octet-stream"),
        (lambda: mem("file:///d/report.txt", b"PK\x03\x04zipped"), "application/zip"),
        (lambda: mem("file:///d/notes.txt", b"text\x00with NUL"), "application/octet-stream"),
    ],
)
def test_binary_files_are_refused(source, shown):
    with pytest.raises(ExtractError) as e:
        extract(source())
    assert str(e.value) == f"binary file (no text extractor for {shown})"
    assert e.value.hint


def test_latin1_text_is_not_valid_utf8():
    with pytest.raises(ExtractError, match=r"^not valid UTF-8 text \(byte 0xe9 at offset 3\)$") as e:
        extract(fixture_source("latin1.txt"))
    # Windows-1252, not latin1: latin1 maps its curly quotes and dashes (0x80-0x9F) to C1 controls
    assert "iconv -f windows-1252 -t utf-8" in e.value.hint and "latin1" not in e.value.hint
    # a charset declared by the transport (HTTP Content-Type) is honoured
    src = fixture_source("latin1.txt")
    declared = Source(src.uri, src.content, src.media_type, metadata={"charset": "iso-8859-1"})
    assert only(extract(declared)).title == "Café crème brûlée"


@pytest.mark.parametrize(
    "uri, content",
    [
        ("file:///d/empty.txt", ""),
        ("file:///d/blank.md", "---\ntitle: Only front matter\n---\n\n  \n"),
        ("file:///d/e.html", "<html><body> </body></html>"),
    ],
)
def test_empty_documents(uri, content):
    with pytest.raises(ExtractError, match=r"^empty document \(no text\)$"):
        extract(mem(uri, content))


def test_unknown_media_type_and_generic_xml_are_refused():
    with pytest.raises(ExtractError, match=r"^no text extractor for application/json$"):
        extract(mem("https://example.com/api", '{"a": 1}', "application/json"))
    with pytest.raises(ExtractError, match="not an RSS or Atom feed"):
        extract(mem("file:///d/pom.xml", '<?xml version="1.0"?><project><name>x</name></project>'))


# --- dispatch -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, source_type",
    [
        ("<!DOCTYPE html><html><body><p>Some page text that is long enough.</p></body></html>", "html"),
        (
            '<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title>F</title>'
            "<entry><id>urn:1</id><title>E</title><summary>Hello</summary></entry></feed>",
            "feed",
        ),
        ("From a@example.com Mon Oct 21 08:02:00 2024\nFrom: a@example.com\nSubject: Hi\n\nbody\n", "email"),
        ("---\ntitle: T\n---\n\n# T\n\nbody", "markdown"),
        ("just words\n\nmore words", "text"),
    ],
)
def test_unnamed_input_is_sniffed(content, source_type):
    docs = extract(mem("stdin:", content))
    assert docs[0].source_type == source_type


def test_media_type_beats_suffix_and_xml_suffix_is_sniffed():
    doc = only(extract(mem("https://example.com/page.php", "<p>Hello there</p>", "text/html")))
    assert doc.source_type == "html"
    rss = (FIX / "feed.rss").read_text()
    assert len(extract(mem("file:///d/changelog.xml", rss, "application/xml"))) == 2
    md = only(extract(mem("https://raw.example.com/README.md", "# Readme\n\nbody", "text/plain")))
    assert md.source_type == "markdown"  # generic text/plain does not override a .md suffix


def test_guess_media_type_and_supported_suffixes():
    assert guess_media_type("notes.MD") == "text/markdown"
    assert guess_media_type("file:///a/b/feed.atom") == "application/atom+xml"
    assert guess_media_type("https://x.example/doc.pdf?dl=1#page=2") == "application/pdf"
    assert guess_media_type("file:///m.eml#attachment/a.txt") == "text/plain"
    assert guess_media_type("Makefile") is None
    assert {
        ".txt",
        ".md",
        ".markdown",
        ".html",
        ".htm",
        ".pdf",
        ".eml",
        ".mbox",
        ".rss",
        ".atom",
        ".xml",
    } <= SUPPORTED_SUFFIXES
    from kbctl.sources.options import DEFAULT_SUFFIXES

    assert DEFAULT_SUFFIXES <= SUPPORTED_SUFFIXES  # fetch never hands over a suffix extract cannot read


def test_import_is_light():
    """``import kbctl.extract`` must not pull in trafilatura, pdfplumber or feedparser."""
    code = (
        "import sys, kbctl.extract, kbctl.extract.text, kbctl.extract.html, kbctl.extract.pdf, "
        "kbctl.extract.mail, kbctl.extract.feed;"
        "print(sorted(m for m in ('trafilatura', 'pdfplumber', 'feedparser', 'lxml', 'yaml') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert out.stdout.strip() == "[]"


def test_front_matter_datetimes_with_an_offset_are_stored_in_utc():
    meta, _, err = split_front_matter(
        "---\ndate: 2024-05-01 12:00+02:00\nupdated: 2024-05-01T23:30:00-01:00\nday: 2024-05-01\n"
        "note: not 2024-05-01 12:00+02:00\nbad: 2024-13-01T10:00Z\n---\nbody\n"
    )
    assert err is None
    assert meta["date"] == "2024-05-01T10:00:00Z" and meta["updated"] == "2024-05-02T00:30:00Z"
    assert (meta["day"], meta["note"], meta["bad"]) == ("2024-05-01", "not 2024-05-01 12:00+02:00", "2024-13-01T10:00Z")


def test_the_extractor_revision_of_a_source_is_its_formats_and_those_it_hands_text_to(monkeypatch):
    """``kbctl.extract.source_revision``, part of a source's hash: "" for a format whose extractor
    never moved (plain text: its stored sources are skipped as before; Markdown moved in session 45,
    indented code fenced); a mail moves with the HTML of its body and the extractors of its
    attachments, a feed with the HTML of its entries."""
    import kbctl.extract as ex

    assert ex.source_revision(fixture_source("plain.txt")) == ""
    assert ex.source_revision(fixture_source("guide.md")) == ex.REVISIONS["markdown"] == "markdown-1"
    assert ex.source_revision(fixture_source("report.pdf")) == ex.REVISIONS["pdf"] != ""
    assert ex.source_revision(fixture_source("page.html")) == ex.REVISIONS["html"] != ""
    for name in ("message.eml", "thread.mbox"):
        assert set(ex.source_revision(fixture_source(name)).split()) == set(ex.REVISIONS.values())
    assert ex.source_revision(fixture_source("feed.atom")) == ex.REVISIONS["html"]
    assert ex.source_revision(fixture_source("image.png")) == ""  # read by none: its extraction fails
    monkeypatch.setattr(ex, "REVISIONS", {"docx": "docx-2"})  # an attachment's extractor moves a mail's text
    assert ex.source_revision(fixture_source("message.eml")) == "docx-2"
    assert ex.source_revision(fixture_source("report.pdf")) == ex.extractor_revision("text") == ""


def test_the_extract_settings_that_change_a_pdfs_text_are_part_of_the_revision_of_the_formats_reading_pdfs():
    """``[extract]`` ``tables`` and OCR change what the PDF extractor gives: a setting off its default
    is a word of the revision of PDF and of the formats that read PDFs (a mail's attachments), none
    else's (HTML and office tables are Markdown whatever ``tables`` says). At the defaults the
    revision is what it was before settings counted: nobody on the defaults reads a source again."""
    import kbctl.extract as ex
    from kbctl.extract import ExtractOptions

    names = ("plain.txt", "guide.md", "report.pdf", "page.html", "message.eml", "thread.mbox", "feed.atom")
    pinned = {n: ex.source_revision(fixture_source(n)) for n in names}
    assert pinned["report.pdf"] == "pdf-5" and pinned["message.eml"] == "docx-4 html-2 markdown-1 odt-4 pdf-5"
    defaults = ExtractOptions.from_config({"ocr": "auto", "ocr_min_confidence": 0.8, "ocr_dpi": 200, "tables": True})
    for opts in (ExtractOptions(), defaults, ExtractOptions(ocr_min_confidence=0.95)):  # a warning's threshold
        assert {n: ex.source_revision(fixture_source(n), opts) for n in names} == pinned, opts

    for opts in (ExtractOptions(tables=False), ExtractOptions(ocr="off"), ExtractOptions(ocr_dpi=300)):
        moved = {n for n in names if ex.source_revision(fixture_source(n), opts) != pinned[n]}
        assert moved == {"report.pdf", "message.eml", "thread.mbox"}, (opts, moved)
        assert ex.source_revision(fixture_source("report.pdf"), opts).startswith("pdf-5 pdf-")
    revision = ex.source_revision(fixture_source("report.pdf"), ExtractOptions(tables=False, ocr_dpi=300))
    assert revision == "pdf-5 pdf-ocr-dpi-300 pdf-tables-off"
    # with OCR off, its resolution changes nothing: no OCR runs
    off = ex.source_revision(fixture_source("report.pdf"), ExtractOptions(ocr="off"))
    assert ex.source_revision(fixture_source("report.pdf"), ExtractOptions(ocr="off", ocr_dpi=300)) == off
    assert len({off, revision, ex.source_revision(fixture_source("report.pdf"), ExtractOptions(tables=False))}) == 3


def test_an_indented_code_block_is_a_fenced_block_where_commonmark_reads_code():
    """Indented code (four spaces or a tab, after a blank line, a heading or a fence; not a list
    item's text, not a paragraph's lazy continuation) was a paragraph: chunked as prose, its lines
    joined. It is a fenced block (no info string), its lines without their four columns of indent,
    the blank lines inside it kept and those after it not; a fence longer than any in it."""
    md = (
        "# Setup\n\nRun this:\n\n    pip install kbctl\n    kbctl init\n\n      # indented more\n\n\n"
        "After.\n    not code: a paragraph goes on\n\n## Tab\n\tfor x in y:\n\t    print(x)\n\n"
        "- an item\n\n    the item's own paragraph\n\n1. step\n\n       still the step\n\n"
        "Text again.\n\n    ```\n    a fence shown in code\n    ```\n"
    )
    parts = markdown_blocks(md)
    texts = [(b.heading_path, b.text) for b in parts.blocks]
    assert texts == [
        (("Setup",), "Run this:"),
        (("Setup",), "```\npip install kbctl\nkbctl init\n\n  # indented more\n```"),
        (("Setup",), "After.\n    not code: a paragraph goes on"),
        (("Setup", "Tab"), "```\nfor x in y:\n    print(x)\n```"),
        (("Setup", "Tab"), "- an item"),
        (("Setup", "Tab"), "    the item's own paragraph"),
        (("Setup", "Tab"), "1. step"),
        (("Setup", "Tab"), "       still the step"),
        (("Setup", "Tab"), "Text again."),
        (("Setup", "Tab"), "````\n```\na fence shown in code\n```\n````"),
    ]
    # an HTML page's Markdown (trafilatura's) is read as before: its code comes fenced
    from kbctl.extract.text import markdown_blocks as blocks_of

    assert [b.text for b in blocks_of("Intro.\n\n    kept as it was", indented_code=False).blocks] == [
        "Intro.",
        "    kept as it was",
    ]
