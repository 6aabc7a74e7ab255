"""RSS and Atom feeds (``source_type="feed"``), parsed with feedparser: one document per entry.

Each entry keeps its content (the longest ``content`` value, HTML turned into text), else its
summary, as paragraphs. Its uri is the entry's GUID / Atom ``id`` when that is an absolute URI
(``tag:…``, ``urn:…``, ``https://…``: unique by construction), a bare GUID qualified by the feed
(``<feed uri>#<guid>``, so two feeds in one namespace that both number their items 1, 2, 3 never
overwrite each other's entries), else the entry's link (else ``<feed uri>#entry-<n>``). Metadata: ``feed_title``, ``feed_url`` (the feed's uri), ``link``,
``guid``, ``published`` (ISO 8601, UTC; the updated time when there is no published one) also
given as ``date``, ``author``, ``tags``. Entries without any text are skipped.

Errors: a feed feedparser could not parse and that has no entries ("malformed feed"), and a feed
with no entry holding text ("empty feed").
"""

from __future__ import annotations

import calendar
import io
import logging
import re
from datetime import UTC, datetime
from typing import Any

from ..errors import ExtractError
from ..textutil.dates import iso_datetime
from ..types import Block, Document, Source
from .base import build_document, split_paragraphs
from .html import html_paragraphs

__all__ = ["extract_feed", "parse_feed_bytes"]

log = logging.getLogger(__name__)

_HTML_TYPES = ("text/html", "application/xhtml+xml")


def extract_feed(source: Source) -> list[Document]:
    """One document per feed entry that has text."""
    parsed = parse_feed_bytes(source.content, source.uri, source.media_type)
    entries = parsed.get("entries") or []
    if not entries:
        raise _no_entries(parsed)
    feed_title = (parsed.get("feed") or {}).get("title")
    docs: list[Document] = []
    for n, entry in enumerate(entries, 1):
        try:
            docs.append(_entry_document(entry, n, source, feed_title))
        except ExtractError as e:
            log.info("skipping entry %d of %s: %s", n, source.uri, e)
    if not docs:
        raise ExtractError(f"empty feed (none of its {len(entries)} entries has text)", hint="the feed carries titles only")
    return docs


def parse_feed_bytes(data: bytes, uri: str, media_type: str | None = None) -> Any:
    """feedparser's result for the bytes (given as a stream: bytes may be taken for a file name)."""
    import feedparser  # only for feeds

    headers = {"content-location": uri}
    if media_type:
        headers["content-type"] = media_type
    return feedparser.parse(io.BytesIO(data), response_headers=headers)


def _no_entries(parsed: Any) -> ExtractError:
    """The error for a feed without entries: malformed when feedparser flagged it, else empty."""
    if parsed.get("bozo"):
        reason = parsed.get("bozo_exception")
        return ExtractError(
            f"malformed feed: {str(reason).strip() or type(reason).__name__}",
            hint="check that the file is well-formed RSS or Atom XML",
        )
    return ExtractError("empty feed (no entries)", hint="the feed has no items yet")


def _entry_document(entry: Any, n: int, source: Source, feed_title: str | None) -> Document:
    """One entry as a document (``ExtractError`` when it holds no text)."""
    guid = entry.get("id") or None
    link = entry.get("link") or None
    uri = entry_uri(guid, link, source.uri, n)
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
    title = _plain(entry.get("title_detail") or {}, entry.get("title") or "")
    blocks = [Block(p) for p in _entry_paragraphs(entry)]
    return build_document(source, title=title or link or uri, blocks=blocks, source_type="feed", metadata=meta, uri=uri)


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def entry_uri(guid: str | None, link: str | None, feed_uri: str, n: int) -> str:
    """An entry's document uri: an absolute GUID, a bare GUID under the feed, the link, or its position."""
    if guid:
        return guid if _SCHEME.match(guid) else f"{feed_uri}#{guid}"
    return link or f"{feed_uri}#entry-{n}"


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
