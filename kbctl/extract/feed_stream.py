"""Large RSS 2.0 and Atom 1.0 feeds read entry by entry, with lxml's ``iterparse``.

feedparser builds the whole feed in memory and takes minutes on 100k entries; this reader keeps
one entry at a time and gives each as the same keys feedparser would (``id``, ``link``, ``title``,
``published_parsed``, ``content``, ``summary``…), so ``kbctl.extract.feed`` makes the same documents
from either. Anything it does not read exactly as feedparser does (RSS 0.9x/1.0, Atom 0.3, XHTML
content, relative links, ``<author>`` e-mail forms, dates it cannot parse, markup in titles, XML
errors) raises ``OddFeed`` and the caller parses the feed with feedparser instead.
"""

from __future__ import annotations

import io
import re
import time
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Iterator

__all__ = ["OddFeed", "STREAM_MIN_BYTES", "stream_feed"]

#: Feeds at least this large are streamed; smaller ones go to feedparser (the reference reader).
STREAM_MIN_BYTES = 1 << 20

_ATOM = "{http://www.w3.org/2005/Atom}"
_CONTENT = "{http://purl.org/rss/1.0/modules/content/}encoded"
_DC = "{http://purl.org/dc/elements/1.1/}"
_ABSOLUTE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_ATOM_TYPES = {"text": "text/plain", "html": "text/html", "": "text/plain"}
# RSS item children read here; any other un-namespaced child makes the feed odd.
_RSS_KNOWN = {"title", "link", "guid", "pubDate", "description", "category", "comments", "enclosure", "source"}


class OddFeed(Exception):
    """The feed uses something only feedparser reads as the extract stage expects."""


def stream_feed(data: bytes) -> Iterator[tuple[str | None, dict[str, Any]]]:
    """``(feed title, entry)`` for each entry, in feed order; a read element is freed at once.

    ``OddFeed`` may come at any entry (or at the end, for a feed without entries): consume the
    whole iterator before trusting what it gave.
    """
    from lxml import etree

    parser = etree.iterparse(io.BytesIO(data), events=("start", "end"), resolve_entities=False, no_network=True)
    kind, title, seen_entry = None, None, False
    try:
        for event, el in parser:
            if kind is None:
                kind = _kind(el)
            if event != "end":
                continue
            if el.tag in ("item", f"{_ATOM}entry"):
                seen_entry = True
                yield title, _rss_item(el) if kind == "rss" else _atom_entry(el)
                el.clear()
                while el.getprevious() is not None:
                    del el.getparent()[0]
            elif el.tag in ("title", f"{_ATOM}title") and _depth(el) == (2 if kind == "rss" else 1):
                if seen_entry:
                    raise OddFeed("feed title after its entries")
                title = _plain_title(el)
    except etree.XMLSyntaxError as e:
        raise OddFeed(str(e)) from None
    if not seen_entry:
        raise OddFeed("no entries")  # feedparser tells an empty feed from a malformed one


def _kind(root) -> str:
    if root.tag == "rss" and root.get("version", "").startswith("2."):
        return "rss"
    if root.tag == f"{_ATOM}feed":
        return "atom"
    raise OddFeed(f"not RSS 2.0 or Atom 1.0: <{root.tag}>")


def _depth(el) -> int:
    n = 0
    while (el := el.getparent()) is not None:
        n += 1
    return n


def _text(el) -> str:
    return (el.text or "").strip()


def _plain_title(el) -> str:
    if len(el) or "<" in (el.text or "") or el.get("type", "text") not in ("text", ""):
        raise OddFeed("markup in a title")
    return _text(el)


def _rss_item(item) -> dict[str, Any]:
    e: dict[str, Any] = {"tags": []}
    permalink = True
    for child in item:
        tag = child.tag
        if not isinstance(tag, str):
            continue
        if tag == "title":
            e["title"], e["title_detail"] = _plain_title(child), {"type": "text/plain"}
        elif tag == "link":
            e["link"] = _absolute(_text(child))
        elif tag == "guid":
            e["id"] = _text(child)
            permalink = child.get("isPermaLink", "true") == "true"
        elif tag == "pubDate":
            e["published_parsed"] = _rfc822(_text(child))
        elif tag == f"{_DC}date":
            e["updated_parsed"] = _iso(_text(child))
        elif tag in ("description", _CONTENT) and len(child):
            raise OddFeed(f"markup elements in <{tag}>")
        elif tag == "description":
            value = _text(child)
            e["summary"], e["summary_detail"] = value, {"type": _guess_type(value)}
        elif tag == _CONTENT:
            e["content"] = [{"type": "text/html", "value": _text(child)}]
        elif tag == f"{_DC}creator":
            e["author"] = _name(_text(child))
        elif tag == "category" and _text(child):
            e["tags"].append({"term": _text(child)})
        elif tag not in _RSS_KNOWN and not tag.startswith("{"):
            raise OddFeed(f"RSS element <{tag}>")
    if e.get("id") and permalink:
        _absolute(e["id"])
        e.setdefault("link", e["id"])
    return e


def _atom_entry(entry) -> dict[str, Any]:
    e: dict[str, Any] = {"tags": []}
    for child in entry:
        tag = child.tag if isinstance(child.tag, str) else ""
        name = tag[len(_ATOM) :] if tag.startswith(_ATOM) else None
        if name == "title":
            e["title"], e["title_detail"] = _plain_title(child), {"type": "text/plain"}
        elif name == "id":
            e["id"] = _text(child)
        elif name == "link" and child.get("rel", "alternate") == "alternate" and "link" not in e:
            if child.get("type", "text/html") in ("text/html", "application/xhtml+xml"):
                e["link"] = _absolute(child.get("href", "").strip())
        elif name == "published":
            e["published_parsed"] = _iso(_text(child))
        elif name == "updated":
            e["updated_parsed"] = _iso(_text(child))
        elif name == "author":
            names = [_text(n) for n in child if n.tag == f"{_ATOM}name"]
            e.setdefault("author", _name(names[0]) if names else None)
        elif name == "category" and child.get("term"):
            e["tags"].append({"term": child.get("term").strip()})
        elif name in ("content", "summary"):
            kind = _ATOM_TYPES.get(child.get("type", ""))
            if kind is None or len(child) or child.get("src"):
                raise OddFeed(f"Atom {name} of type {child.get('type')!r}")
            if name == "content":
                e["content"] = [{"type": kind, "value": _text(child)}]
            else:
                e["summary"], e["summary_detail"] = _text(child), {"type": kind}
    return e


def _absolute(url: str) -> str:
    if url and not _ABSOLUTE.match(url):
        raise OddFeed("relative link")
    return url


def _name(value: str) -> str:
    if "@" in value:
        raise OddFeed("author with an e-mail address")
    return value


def _guess_type(value: str) -> str:
    """RSS leaves HTML or text to the reader: feedparser's own guess, so both readers agree."""
    from feedparser.mixin import _FeedParserMixin

    return "text/html" if _FeedParserMixin.looks_like_html(value) else "text/plain"


def _rfc822(value: str) -> time.struct_time:
    try:
        dt = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        raise OddFeed(f"date {value!r}") from None
    return _utc(dt)


def _iso(value: str) -> time.struct_time:
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        raise OddFeed(f"date {value!r}") from None
    return _utc(dt)


def _utc(dt: datetime) -> time.struct_time:
    """A UTC ``struct_time`` as feedparser gives (a date without a zone is taken as UTC)."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC).timetuple()
