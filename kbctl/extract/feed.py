"""RSS and Atom feeds (``source_type="feed"``), parsed with feedparser: one document per entry.

Each entry keeps its content (the longest ``content`` value, HTML turned into text), else its
summary, as paragraphs. Its uri is the feed's uri plus the entry's GUID / Atom ``id`` as written
(``<feed uri>#<guid>``), else its link (``<feed uri>#<link>``), else a hash of its title and text
(``<feed uri>#sha256:<16 hex>``). So entries belong to their feed by construction: two feeds that
both number their items 1, 2, 3 never overwrite each other's entries, and an entry whose GUID is a
page's URL (RSS's default, and what ``--follow-links`` fetches) never replaces that page. A GUID
repeated within a feed keeps the first entry as is and the later ones as ``…~2``, ``…~3``, each
with a ``DuplicateIdWarning`` note. Metadata: ``feed_title``, ``feed_url`` (the feed's uri),
``link`` (absolute), ``guid`` (as written), ``published`` (ISO 8601, UTC; the updated time when
there is no published one) also given as ``date``, ``author``, ``tags``. Entries without any text
are skipped.

Errors: a feed feedparser could not parse and that has no entries ("malformed feed"), a feed
with no entry holding text ("empty feed"), and a feed whose DTD declares entities that expand (a
"billion laughs" feed: expat expands up to its amplification limit, minutes of feedparser's time)
or name files or parameters; short literal entities (``<!ENTITY nbsp "&#160;">``) are still read.

A feed feedparser recovers from (``bozo`` with entries: a declared encoding that turns out wrong,
an undeclared namespace prefix, a stray ``&``) is stored, with a ``MalformedFeedWarning`` note on
its first entry. One whose declared encoding is wrong and that gives no entries for it (UTF-8
bytes declared UTF-16) is read again as the UTF-8 it is, with that note. UTF-16 and UTF-32 feeds
are read by their BOM or, without one, by how their XML declaration begins (``detect``).
"""

from __future__ import annotations

import calendar
import io
import logging
import re
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Iterable, Iterator
from urllib.parse import urljoin

from ..errors import ExtractError
from ..textutil.dates import iso_datetime
from ..types import Block, Document, Source, content_hash
from .base import build_document, sniff_encoding, split_paragraphs
from .feed_stream import STREAM_MIN_BYTES, OddFeed, stream_feed
from .html import html_paragraphs

__all__ = ["extract_feed", "parse_feed_bytes", "iter_feed"]

log = logging.getLogger(__name__)

_HTML_TYPES = ("text/html", "application/xhtml+xml")
#: The warning class of the note on an entry whose id an earlier entry of its feed already took.
DUPLICATE_ID = "DuplicateIdWarning"
#: The warning class of the note on a feed read although it is not well-formed (feedparser's "bozo").
MALFORMED = "MalformedFeedWarning"
# An entity declaration that cannot amplify: a short literal or one character reference.
_SAFE_ENTITY = re.compile(r"""<!ENTITY\s+[\w.:-]+\s+(?:"(?:&#\w+;|[^&%"<]{0,16})"|'(?:&#\w+;|[^&%'<]{0,16})')\s*>""")
_ENTITY = re.compile(r"<!ENTITY\b[^>]*>?")
_DECLARED = re.compile(rb"""\A(\s*<\?xml\b[^>]*?\bencoding\s*=\s*)(["'])([A-Za-z0-9._-]+)\2""")


def extract_feed(source: Source) -> list[Document]:
    """One document per feed entry that has text.

    A feed of ``STREAM_MIN_BYTES`` or more is read entry by entry (``feed_stream``), so a 100k-entry
    feed never sits in memory as feedparser's tree; one that reader finds odd goes to feedparser.
    """
    refuse_entities(source.content)
    if len(source.content) >= STREAM_MIN_BYTES:
        try:
            return _documents(stream_feed(source.content), source)
        except OddFeed as e:
            log.info("reading %s with feedparser: %s", source.uri, e)
    parsed = _parse_recovering(source.content, source.media_type)
    entries = parsed.get("entries") or []
    if not entries:
        raise _no_entries(parsed)
    feed_title = (parsed.get("feed") or {}).get("title")
    docs = _documents(((feed_title, e) for e in entries), source)
    if parsed.get("bozo"):  # recovered: stored, and the run says what was wrong once, on the first entry
        note = (MALFORMED, f"feed is not well-formed, read leniently: {_reason(parsed)}")
        docs[0] = replace(docs[0], notes=(*docs[0].notes, note))
    return docs


def refuse_entities(data: bytes) -> None:
    """``ExtractError`` for a feed whose DTD declares an entity that could expand or read a file.

    Declarations come before the root element, so before any CDATA section (where the text of an
    entry may quote one); only that part is looked at.
    """
    wide = sniff_encoding(data[:4])
    if not wide or wide == "utf-8-sig":
        if b"<!ENTITY" not in data:
            return
        text = data.decode("latin-1")  # the markup is ASCII in every encoding but UTF-16/32
    else:
        text = data.decode(wide, errors="replace")
    head = text.split("<![CDATA[", 1)[0]
    bad = next((m.group() for m in _ENTITY.finditer(head) if not _SAFE_ENTITY.fullmatch(m.group())), None)
    if bad is not None:
        raise ExtractError(
            f"feed declares XML entities that could expand or read files ({bad[:60]}): not read",
            hint="kbctl reads feeds without entity declarations of their own; remove the <!DOCTYPE …[ ]> block",
        )


def _parse_recovering(data: bytes, media_type: str | None) -> Any:
    """feedparser's result; a feed that gives no entries under a wrong declared encoding is read
    again as the UTF-8 it is (flagged ``bozo``, so it is stored with a warning)."""
    parsed = parse_feed_bytes(data, "", media_type)
    if parsed.get("entries") or not parsed.get("bozo"):
        return parsed
    m = _DECLARED.match(data)
    if m is None or m.group(3).lower() in (b"utf-8", b"utf8") or sniff_encoding(data[:4]):
        return parsed
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return parsed
    again = parse_feed_bytes(m.group(1) + b'"utf-8"' + data[m.end() :], "", media_type)
    if not again.get("entries"):
        return parsed
    again["bozo"] = True
    again["bozo_exception"] = f"declared as {m.group(3).decode()}, but it is UTF-8"
    return again


def _reason(parsed: Any) -> str:
    reason = parsed.get("bozo_exception")
    return " ".join(str(reason).split()) or type(reason).__name__


def iter_feed(source: Source) -> Iterator[Document] | None:
    """A large feed's documents one entry at a time, or ``None`` when it is not read that way.

    A feed of ``STREAM_MIN_BYTES`` or more that the streaming reader reads whole (a first pass
    keeps nothing, and settles that no ``OddFeed`` comes halfway) gives its entries as it parses
    them, the very documents ``extract_feed`` gives, in order, so the pipeline never holds the
    feed's documents at once. ``ExtractError`` ("empty feed") comes at the end when no entry has text.
    Smaller and odd feeds: ``None`` (``extract_feed`` reads them).
    """
    if len(source.content) < STREAM_MIN_BYTES:
        return None
    refuse_entities(source.content)
    try:
        for _ in stream_feed(source.content):
            pass
    except OddFeed as e:
        log.info("reading %s with feedparser: %s", source.uri, e)
        return None
    return _iter_documents(stream_feed(source.content), source)


def _documents(entries: Iterable[tuple[str | None, Any]], source: Source) -> list[Document]:
    """The documents of ``(feed title, entry)`` pairs; entries without text are skipped."""
    return list(_iter_documents(entries, source))


def _iter_documents(entries: Iterable[tuple[str | None, Any]], source: Source) -> Iterator[Document]:
    """``_documents`` one at a time; "empty feed" is raised at the end when none had text."""
    taken: set[str] = set()
    n = 0
    for n, (feed_title, entry) in enumerate(entries, 1):
        try:
            doc = _unique(_entry_document(entry, n, source, feed_title), n, taken)
        except ExtractError as e:
            log.info("skipping entry %d of %s: %s", n, source.uri, e)
            continue
        yield doc
    if not taken:
        raise ExtractError(f"empty feed (none of its {n} entries has text)", hint="the feed carries titles only")


def _unique(doc: Document, n: int, taken: set[str]) -> Document:
    """``doc``, or ``doc`` at ``<uri>~2``, ``~3``… with a note when an earlier entry took its uri."""
    uri, k = doc.uri, 1
    while uri in taken:
        k += 1
        uri = f"{doc.uri}~{k}"
    taken.add(uri)
    if uri == doc.uri:
        return doc
    note = (DUPLICATE_ID, f"entry {n} repeats the id of an earlier entry of the feed; stored as {uri}")
    return replace(doc, uri=uri, notes=(*doc.notes, note))


def parse_feed_bytes(data: bytes, uri: str, media_type: str | None = None) -> Any:
    """feedparser's result for the bytes (given as a stream: bytes may be taken for a file name).

    No base URI is given (``uri`` is unused), so ids stay as the feed writes them: feedparser would
    resolve a relative GUID against it (``1`` → ``file:///dir/1``) and make it collide with a page.
    """
    import feedparser  # only for feeds

    headers = {"content-type": media_type} if media_type else {}
    return feedparser.parse(io.BytesIO(data), response_headers=headers)


def _no_entries(parsed: Any) -> ExtractError:
    """The error for a feed without entries: malformed when feedparser flagged it, else empty."""
    if parsed.get("bozo"):
        return ExtractError(
            f"malformed feed: {_reason(parsed)}",
            hint="check that the file is well-formed RSS or Atom XML",
        )
    return ExtractError("empty feed (no entries)", hint="the feed has no items yet")


def _entry_document(entry: Any, n: int, source: Source, feed_title: str | None) -> Document:
    """One entry as a document (``ExtractError`` when it holds no text)."""
    guid = (entry.get("id") or "").strip() or None
    link = urljoin(source.uri, entry.get("link").strip()) if (entry.get("link") or "").strip() else None
    title = _plain(entry.get("title_detail") or {}, entry.get("title") or "")
    paragraphs = _entry_paragraphs(entry)
    uri = entry_uri(guid, link, source.uri, "sha256:" + content_hash("\n\n".join([title, *paragraphs]))[:16])
    published = _time(entry.get("published_parsed") or entry.get("updated_parsed"))
    meta = {
        "feed_title": feed_title,
        "feed_url": source.uri,
        "link": link,
        "guid": guid,
        "published": published,
        "date": published,
        "author": entry.get("author"),
        "tags": [t.get("term") for t in entry.get("tags") or () if t.get("term")],
    }
    blocks = [Block(p) for p in paragraphs]
    return build_document(source, title=title or link or uri, blocks=blocks, source_type="feed", metadata=meta, uri=uri)


def entry_uri(guid: str | None, link: str | None, feed_uri: str, fallback: str) -> str:
    """An entry's document uri: ``<feed uri>#`` + its GUID, else its link, else ``fallback`` (a hash)."""
    return f"{feed_uri}#{guid or link or fallback}"


def _entry_paragraphs(entry: Any) -> list[str]:
    """The longest ``content`` value, else the summary, as paragraphs."""
    contents = [c for c in entry.get("content") or () if (c.get("value") or "").strip()]
    if contents:
        best = max(contents, key=lambda c: len(c.get("value") or ""))
        return _paragraphs(best.get("type"), best["value"])
    detail = entry.get("summary_detail") or {}
    return _paragraphs(detail.get("type", "text/html"), entry.get("summary") or "")


def _paragraphs(kind: str | None, value: str) -> list[str]:
    """Paragraphs of an HTML (the default) or plain-text value."""
    return html_paragraphs(value) if (kind or "text/html") in _HTML_TYPES else split_paragraphs(value)


def _plain(detail: Any, value: str) -> str:
    """An entry title as plain text (feedparser keeps markup in HTML-typed titles)."""
    if detail.get("type") in _HTML_TYPES and "<" in value:
        return " ".join(html_paragraphs(value))
    return " ".join(value.split())


def _time(struct: Any) -> str | None:
    """feedparser's UTC ``time.struct_time`` as ISO 8601."""
    if not struct:
        return None
    return iso_datetime(datetime.fromtimestamp(calendar.timegm(struct), UTC))
