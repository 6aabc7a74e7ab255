"""The one table of file suffixes kbctl reads and their media types.

The fetch stage uses it to pick the files of a folder walk and to label what it fetched; the
extract stage uses it to tell formats apart. Keeping one table means fetch never takes a suffix
that extract cannot read, and both name a file's type the same way. Our own table wins over
``mimetypes``, whose answers depend on the host's ``/etc/mime.types``.
"""

from __future__ import annotations

import mimetypes
import re

__all__ = [
    "MEDIA_TYPES",
    "SUFFIXES",
    "OFFICE_SUFFIXES",
    "COMPRESSED_SUFFIXES",
    "guess_media_type",
    "inner_name",
    "is_feed_xml",
    "HTML_TYPES",
]

#: Suffix (lower case, with the dot) → media type, for every suffix an extractor reads.
MEDIA_TYPES: dict[str, str] = {
    ".txt": "text/plain",
    ".text": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".html": "text/html",
    ".htm": "text/html",
    ".xhtml": "application/xhtml+xml",
    ".pdf": "application/pdf",
    ".eml": "message/rfc822",
    ".mbox": "application/mbox",
    ".rss": "application/rss+xml",
    ".atom": "application/atom+xml",
    ".rdf": "application/rdf+xml",
    ".xml": "application/xml",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".odt": "application/vnd.oasis.opendocument.text",
}

#: The office formats (zip containers, read by ``kbctl.extract.office``).
OFFICE_SUFFIXES: frozenset[str] = frozenset({".docx", ".pptx", ".xlsx", ".odt"})

#: The suffixes of ``MEDIA_TYPES``.
SUFFIXES: frozenset[str] = frozenset(MEDIA_TYPES)


#: The suffixes of compressed files kbctl reads as the file they hold (gzip, bzip2, xz:
#: ``kbctl.sources.compressed``): ``notes.md.bz2`` is Markdown.
COMPRESSED_SUFFIXES: tuple[str, ...] = (".gz", ".bz2", ".xz")


def inner_name(name: str) -> str:
    """``name`` without a compressed file's suffix when a suffix is left under it (``notes.md.xz`` is
    ``notes.md``; ``notes.gz`` and ``.gz`` stay as they are)."""
    lowered = name.lower()
    for suffix in COMPRESSED_SUFFIXES:
        if lowered.endswith(suffix):
            stem = name[: -len(suffix)]
            base = stem.rsplit("/", 1)[-1]
            return stem if "." in base.lstrip(".") else name
    return name


def guess_media_type(name: str) -> str | None:
    """The media type of a file name or path from its suffix (``None`` when unknown)."""
    dot = name.rfind(".")
    suffix = name[dot:].lower() if dot > name.rfind("/") else ""
    if suffix in MEDIA_TYPES:
        return MEDIA_TYPES[suffix]
    return mimetypes.guess_type("x" + suffix, strict=False)[0] if suffix else None


#: The media types of HTML pages (servers send feeds under them too: ``is_feed_xml`` tells).
HTML_TYPES: frozenset[str] = frozenset({"text/html", "application/xhtml+xml"})

_XML_PROLOG = re.compile(r"^\s*(?:<\?.*?\?>|<!--.*?-->|<!DOCTYPE[^>]*>|\s+)*", re.S | re.I)
_ROOT = re.compile(r"<([A-Za-z_][\w.:-]*)")


def is_feed_xml(text: str) -> bool:
    """Whether the XML's root element is ``rss``, ``feed`` (Atom) or ``rdf:RDF`` (RSS 1.0)."""
    rest = _XML_PROLOG.sub("", text.lstrip("\ufeff"), count=1)  # anchored, matches at least ""
    m = _ROOT.match(rest)
    return m is not None and m.group(1).rsplit(":", 1)[-1] in ("rss", "feed", "RDF")
