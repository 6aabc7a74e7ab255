"""Which extractor reads a ``Source``: from its media type, its uri's suffix and its bytes.

Order: a PDF signature wins; binary bytes (NUL bytes, or a known magic number such as PNG or ZIP)
are refused; a specific media type (``text/markdown``, ``message/rfc822``…) decides; else the
suffix; else generic types (``text/plain``, ``application/xml``, none) are settled by sniffing the
first bytes (HTML, feed, mbox, e-mail headers, Markdown front matter or heading), falling back to
plain text. A non-text media type that no extractor reads is refused.
"""

from __future__ import annotations

import mimetypes
import re

from ..errors import ExtractError
from ..mediatypes import (
    HTML_TYPES,
    MEDIA_TYPES,  # suffix → media type: one table, shared with fetch
    OFFICE_SUFFIXES,
    is_feed_xml,
)
from ..types import Source
from .base import item_name, sniff_encoding

__all__ = ["SUPPORTED_SUFFIXES", "MEDIA_TYPES", "guess_media_type", "detect_format", "is_feed_xml"]

#: File suffixes (lower case, with the dot) that ``extract`` can read.
SUPPORTED_SUFFIXES: frozenset[str] = frozenset(MEDIA_TYPES)

_BY_MEDIA_TYPE = {
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "text/html": "html",
    "application/xhtml+xml": "html",
    "application/pdf": "pdf",
    "message/rfc822": "email",
    "application/mbox": "mbox",
    "application/rss+xml": "feed",
    "application/x-rss+xml": "feed",
    "application/atom+xml": "feed",
    "application/rdf+xml": "feed",
    "application/feed+json": "feed",
    **{t: s[1:] for s, t in MEDIA_TYPES.items() if s in OFFICE_SUFFIXES},
}
_BY_SUFFIX = {
    ".txt": "text",
    ".text": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".pdf": "pdf",
    ".eml": "email",
    ".mbox": "mbox",
    ".rss": "feed",
    ".atom": "feed",
    ".rdf": "feed",
    ".xml": "xml",
    **{s: s[1:] for s in OFFICE_SUFFIXES},
}
_GENERIC = frozenset({"text/plain", "application/octet-stream", "binary/octet-stream", "application/xml", "text/xml"})
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"PK\x03\x04", "application/zip"),
    (b"PK\x05\x06", "application/zip"),
    (b"\x1f\x8b", "application/gzip"),
    (b"BZh", "application/x-bzip2"),
    (b"\xfd7zXZ\x00", "application/x-xz"),
    (b"7z\xbc\xaf\x27\x1c", "application/x-7z-compressed"),
    (b"\x28\xb5\x2f\xfd", "application/zstd"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "application/x-ole-storage"),
    (b"SQLite format 3\x00", "application/vnd.sqlite3"),
    (b"\x7fELF", "application/x-executable"),
    (b"\x00asm", "application/wasm"),
    (b"OggS", "audio/ogg"),
    (b"ID3", "audio/mpeg"),
    (b"fLaC", "audio/flac"),
    (b"%!PS", "application/postscript"),
    (b"wOFF", "font/woff"),
    (b"wOF2", "font/woff2"),
)
_OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
# names of the parts that make a zip an office document (the first entries' names are in its first bytes)
_OFFICE_PARTS = (
    (b"mimetypeapplication/vnd.oasis.opendocument.text", "odt"),  # ODF's first entry, stored uncompressed
    (b"word/", "docx"),
    (b"ppt/", "pptx"),
    (b"xl/", "xlsx"),
)
_HEADER_LINE = re.compile(rb"^[A-Za-z][A-Za-z0-9-]*:[ \t]")
_MAIL_HEADERS = (
    b"from:",
    b"to:",
    b"subject:",
    b"date:",
    b"message-id:",
    b"received:",
    b"return-path:",
    b"mime-version:",
    b"delivered-to:",
    b"reply-to:",
    b"in-reply-to:",
    b"references:",
    b"cc:",
)
_HTML_START = re.compile(r"^\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body)\b", re.S | re.I)
_MD_START = re.compile(r"^(?:---|\+\+\+)[ \t]*\n|^#{1,6}[ \t]+\S")


def guess_media_type(path_or_uri: str) -> str | None:
    """The media type of a file name, path or uri from its suffix (``None`` when unknown)."""
    suffix = _suffix(path_or_uri)
    if suffix in MEDIA_TYPES:
        return MEDIA_TYPES[suffix]
    return mimetypes.guess_type("x" + suffix, strict=False)[0] if suffix else None


def detect_format(source: Source) -> str:
    """One of ``text markdown html pdf docx pptx xlsx odt email mbox feed``; ``ExtractError`` for what none reads."""
    head = source.content[:8192]
    media_type = _base_type(source.media_type)
    fmt = _BY_MEDIA_TYPE.get(media_type or "") or _BY_SUFFIX.get(_suffix(source.uri))
    if head.startswith(b"%PDF-") or (fmt == "pdf" and b"%PDF-" in head[:1024]):
        return "pdf"  # the spec allows junk before the header; elsewhere it may be quoted text
    if office := _office(head, fmt):
        return office  # zip containers (or, encrypted, OLE ones) that the office extractor reads
    try:
        _refuse_binary(head, media_type)
    except ExtractError:
        if fmt in ("pdf", "docx", "pptx", "xlsx", "odt"):
            return fmt  # its reader calls it corrupt: "no text extractor" for a format kbctl reads misled
        raise
    if fmt is None and media_type in ("application/xml", "text/xml"):
        fmt = "xml"
    if fmt == "html" and media_type in HTML_TYPES and is_feed_xml(_head_text(head)):
        fmt = "feed"  # a feed sent as text/html (a server's mislabel; feed validators warn of it)
    if fmt is None and media_type and media_type not in _GENERIC and not media_type.startswith("text/"):
        raise ExtractError(f"no text extractor for {media_type}", hint=_HINT)
    if fmt is None:
        fmt = _sniff(_head_text(head))
    if fmt == "xml":
        fmt = _xml_kind(_head_text(head))
    return fmt


_HINT = (
    "kbctl reads text, Markdown, HTML, PDF, Word/PowerPoint/Excel (.docx .pptx .xlsx), OpenDocument text (.odt), e-mail (.eml, .mbox)"
    " and RSS/Atom feeds; exclude other files"
)


def _office(head: bytes, fmt: str | None) -> str | None:
    """``docx``/``pptx``/``xlsx``/``odt`` for a zip (or an encrypted OLE file) named or typed so, or a zip
    whose first entries are an office document's parts; else ``None``."""
    if fmt in ("docx", "pptx", "xlsx", "odt") and head.startswith((b"PK\x03\x04", _OLE)):
        return fmt
    if head.startswith(b"PK\x03\x04"):
        return next((kind for part, kind in _OFFICE_PARTS if part in head), None)
    return None


def _base_type(media_type: str | None) -> str | None:
    """``"Text/HTML; charset=utf-8"`` → ``"text/html"``."""
    if not media_type:
        return None
    return media_type.split(";", 1)[0].strip().lower() or None


def _suffix(uri: str) -> str:
    """``".md"`` for ``file:///a/b.MD``, ``"mail.eml#attachment/c.txt"`` → ``".txt"``; ``""`` if none."""
    name = item_name(uri)
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


def _refuse_binary(head: bytes, media_type: str | None) -> None:
    """Raise for bytes that are not text: a known magic number, or NUL bytes that are not UTF-16/32
    (named by a BOM, or by how an XML declaration begins in them)."""
    magic = next((mt for sig, mt in _MAGIC if head.startswith(sig)), None)
    wide = (sniff_encoding(head) or "").startswith(("utf-16", "utf-32"))
    if magic is None and (wide or b"\x00" not in head):
        return
    shown = magic or (media_type if media_type and media_type not in _GENERIC else None) or "application/octet-stream"
    raise ExtractError(f"binary file (no text extractor for {shown})", hint=_HINT)


def _head_text(head: bytes) -> str:
    """The first bytes as text, for sniffing only (lenient): UTF-8, or what a BOM or an XML declaration's start says."""
    return head.decode(sniff_encoding(head) or "utf-8", errors="replace").lstrip("\ufeff")


def _xml_kind(text: str) -> str:
    """``feed`` or ``html`` (XHTML) for an XML document; ``ExtractError`` for any other XML."""
    if is_feed_xml(text):
        return "feed"
    if re.search(r"<html\b", text[:2048], re.I):
        return "html"
    raise ExtractError("XML file is not an RSS or Atom feed (no text extractor for generic XML)", hint=_HINT)


def _sniff(text: str) -> str:
    """Tell a generic or unnamed text apart by its start."""
    if _HTML_START.match(text):
        return "html"
    if text.lstrip().startswith("<"):
        if is_feed_xml(text) or text.lstrip().startswith("<?xml"):
            return "xml"
        return "html" if re.search(r"<(?:html|body|p|div)\b", text[:2048], re.I) else "text"
    raw = text.encode("utf-8", errors="replace")
    if raw.startswith(b"From ") and _looks_like_headers(raw.split(b"\n", 1)[-1]):
        return "mbox"
    if _looks_like_headers(raw):
        return "email"
    if _MD_START.match(text):
        return "markdown"
    return "text"


def _looks_like_headers(raw: bytes) -> bool:
    """At least two RFC 5322 header lines before the first blank line, one a known mail header."""
    lines = raw.replace(b"\r\n", b"\n").split(b"\n\n", 1)[0].split(b"\n")[:40]
    headers = [ln for ln in lines if _HEADER_LINE.match(ln)]
    known = any(ln.lower().startswith(_MAIL_HEADERS) for ln in headers)
    starts = bool(lines) and bool(_HEADER_LINE.match(lines[0]))
    return starts and known and len(headers) >= 2 and "\n\n" in raw.decode("utf-8", "replace")
