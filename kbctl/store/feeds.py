"""Feed state: the ETag and Last-Modified of each remote feed, kept per namespace in ``kbctl.feed_state``."""

from __future__ import annotations

from .connection import Conn
from .namespaces import Namespace
from .queries import query

__all__ = ["feed_state", "save_feed_state"]


def feed_state(conn: Conn, ns: Namespace, url: str) -> tuple[str | None, str | None] | None:
    """(ETag, Last-Modified) saved for a feed, None if none was."""
    row = conn.execute(query("feeds/get_state"), (ns.id, url)).fetchone()
    return (row[0], row[1]) if row else None


def save_feed_state(conn: Conn, ns: Namespace, url: str, etag: str | None, last_modified: str | None) -> None:
    """Record a feed's ETag and Last-Modified (replacing the previous ones)."""
    conn.execute(query("feeds/save_state"), (ns.id, url, etag, last_modified))
