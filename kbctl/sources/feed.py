"""Feeds (RSS, Atom, RDF, JSON Feed): telling a feed from a page, and summary-only entries.

A feed is fetched as one ``Source`` (``kind="feed"``) holding the whole body; the extract stage
makes one document per entry. ``feedparser`` is imported only when a response may be a feed.
"""

from __future__ import annotations

import io
import logging
from typing import Any, Callable, Iterator
from urllib.parse import urldefrag, urljoin, urlsplit

from ..mediatypes import HTML_TYPES, is_feed_xml

__all__ = ["FEED_MEDIA_TYPES", "may_be_feed", "parse_feed", "summary_only_links", "written_ids"]

log = logging.getLogger(__name__)

FEED_MEDIA_TYPES = frozenset(
    {
        "application/rss+xml",
        "application/x-rss+xml",
        "application/atom+xml",
        "application/rdf+xml",
        "application/xml",
        "text/xml",
        "application/feed+json",
    }
)
_FEED_SUFFIXES = (".rss", ".atom", ".xml", ".rdf")


def may_be_feed(media_type: str | None, url: str, body: bytes = b"") -> bool:
    """Whether a response is worth parsing as a feed: a feed or XML Content-Type; none at all, a
    generic one (``application/octet-stream``, ``text/plain``) on a URL ending in
    ``.rss``/``.atom``/``.xml``; or an HTML or generic one on a body whose root element is a
    feed's (servers label feeds ``text/html`` often enough: it was stored as one page)."""
    if media_type in FEED_MEDIA_TYPES:
        return True
    generic = media_type in (None, "application/octet-stream", "text/plain")
    path = urldefrag(url)[0].split("?", 1)[0].lower()
    if generic and path.endswith(_FEED_SUFFIXES):
        return True
    return (generic or media_type in HTML_TYPES) and is_feed_xml(body[:4096].decode("utf-8", "replace"))


def parse_feed(body: bytes, url: str, content_type: str | None) -> Any | None:
    """The parsed feed when ``body`` is one (a recognised format or at least one entry), else ``None``.

    A recognised feed with no entries is still a feed, so that an emptied feed is not taken for an
    XML page. The body is handed over as a stream: given bytes, feedparser may treat them as a
    file name and open it.
    """
    import feedparser  # heavy-ish, and only needed when a response may be a feed

    headers = {"content-location": url}
    if content_type:
        headers["content-type"] = content_type
    parsed = feedparser.parse(io.BytesIO(body), response_headers=headers)
    if parsed.get("version") or parsed.get("entries"):
        return parsed
    return None


def written_ids(body: bytes, content_type: str | None) -> list[str | None]:
    """Each entry's id as the feed writes it: ``parse_feed`` resolves ids against the feed's URL
    (``12345`` → ``http://host/12345``), which makes an RSS GUID that is no URL look like a link."""
    import feedparser

    headers = {"content-type": content_type} if content_type else {}
    parsed = feedparser.parse(io.BytesIO(body), response_headers=headers)
    return [e.get("id") for e in parsed.get("entries", ())]


def summary_only_links(
    parsed: Any, base_url: str, min_chars: int, written: Callable[[], list[str | None]] | None = None
) -> Iterator[tuple[str, str]]:
    """``(entry_id, absolute link)`` of entries with no content, or content under ``min_chars``.

    Each link is given once, in feed order, whatever its scheme: the follower refuses (and
    records) any that is not http(s). ``entry_id`` is the entry's id (GUID), else its link. An entry
    without a link of its own gets its id as ``link`` from feedparser (``guidislink``): such an id
    that is no http(s) URL (``urn:uuid:…``, ``tag:…``) is no link to follow, and was once recorded
    as a refused one for every such entry. One that is no URL at all as written (``12345``:
    feeds leave out isPermaLink="false"), resolved against the feed's URL by feedparser, was
    fetched as a page of its host, a 404 on every poll; ``written`` gives the ids as written
    (``written_ids``), asked for only when such an entry is met.
    """
    seen: set[str] = set()
    as_written: list[str | None] | None = None
    for n, entry in enumerate(parsed.get("entries", ())):
        link = entry.get("link")
        if not link or _content_chars(entry) >= min_chars:
            continue
        link = urldefrag(urljoin(base_url, link))[0]
        made_of_id = entry.get("guidislink") and not entry.get("links")
        if made_of_id and urlsplit(link).scheme.lower() not in ("http", "https"):
            continue
        if made_of_id and written is not None:
            as_written = written() if as_written is None else as_written
            raw = as_written[n] if n < len(as_written) else None
            if urlsplit((raw or "").strip()).scheme.lower() not in ("http", "https"):
                continue  # a permalink GUID is a URL as written
        if link in seen:
            continue
        seen.add(link)
        yield str(entry.get("id") or link), link


def _content_chars(entry: Any) -> int:
    """Length of the entry's longest ``content`` (0 when it has only a summary)."""
    return max((len(c.get("value") or "") for c in entry.get("content") or ()), default=0)
