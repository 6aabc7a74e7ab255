"""Options of the fetch stage and the guessing of media types from file names."""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Collection

__all__ = ["FetchOptions", "DEFAULT_SUFFIXES", "normalise_suffixes", "guess_media_type", "default_user_agent", "iso_utc"]

MB = 1024 * 1024

#: Suffixes the extract stage can read; files with other suffixes are skipped when walking a folder.
DEFAULT_SUFFIXES: frozenset[str] = frozenset(
    {".md", ".markdown", ".txt", ".text", ".html", ".htm", ".pdf", ".eml", ".mbox", ".rss", ".atom", ".xml"}
)

# Our own map wins over ``mimetypes``, whose answers depend on the host's /etc/mime.types.
_MEDIA_TYPES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".txt": "text/plain",
    ".text": "text/plain",
    ".html": "text/html",
    ".htm": "text/html",
    ".pdf": "application/pdf",
    ".eml": "message/rfc822",
    ".mbox": "application/mbox",
    ".rss": "application/rss+xml",
    ".atom": "application/atom+xml",
    ".xml": "application/xml",
}


def default_user_agent() -> str:
    """``kbctl/<version> (+https://github.com/kbctl/kbctl)``, the version read from the installed package."""
    try:
        from importlib.metadata import PackageNotFoundError, version

        v = version("kbctl")
    except (ImportError, PackageNotFoundError):
        v = "0.1.0"
    return f"kbctl/{v} (+https://github.com/kbctl/kbctl)"


@dataclass(frozen=True)
class FetchOptions:
    """How to fetch. Every field has a default, so ``FetchOptions()`` is the normal case.

    Files: ``max_file_bytes`` caps one file (or stdin); ``suffixes`` are the extractable suffixes
    taken when walking folders (``None`` = ``DEFAULT_SUFFIXES``); hidden names (``.x``) are skipped
    unless ``include_hidden``. ``stdin_name`` names what comes on stdin (its uri becomes
    ``stdin:<name>`` and its media type is guessed from the name).

    URLs: ``timeout`` per request in seconds, ``max_bytes`` caps one response body. A request that
    fails with a connection error, a timeout, 429 or 5xx is retried ``retries`` times (so at most
    ``retries + 1`` tries), waiting ``backoff_base * backoff_factor ** n`` seconds plus up to
    ``backoff_jitter`` of that at random, or the server's ``Retry-After`` capped at
    ``retry_after_cap``. Feeds: entries whose content is shorter than ``summary_chars`` count as
    summary-only for ``follow_links``.
    """

    timeout: float = 20.0
    max_bytes: int = 20 * MB
    max_file_bytes: int = 50 * MB
    retries: int = 3
    backoff_base: float = 0.5
    backoff_factor: float = 2.0
    backoff_jitter: float = 0.25
    retry_after_cap: float = 60.0
    user_agent: str = field(default_factory=default_user_agent)
    suffixes: Collection[str] | None = None
    include_hidden: bool = False
    stdin_name: str | None = None
    summary_chars: int = 500

    @property
    def extractable(self) -> frozenset[str]:
        """The suffixes to take when walking folders, lower-cased with their leading dot."""
        return normalise_suffixes(self.suffixes)


def normalise_suffixes(suffixes: Collection[str] | None) -> frozenset[str]:
    """Suffixes lower-cased with a leading dot (``"MD"`` → ``".md"``); ``None`` → ``DEFAULT_SUFFIXES``."""
    if suffixes is None:
        return DEFAULT_SUFFIXES
    return frozenset(s.lower() if s.startswith(".") else "." + s.lower() for s in suffixes)


def guess_media_type(name: str) -> str | None:
    """The media type of a file name, from its suffix (``None`` when unknown)."""
    dot = name.rfind(".")
    suffix = name[dot:].lower() if dot > name.rfind("/") else ""
    if suffix in _MEDIA_TYPES:
        return _MEDIA_TYPES[suffix]
    return mimetypes.guess_type(name, strict=False)[0]


def iso_utc(ts: float | None = None) -> str:
    """A POSIX timestamp (now by default) as ISO 8601 in UTC, to the second: ``2024-05-01T12:00:00Z``."""
    dt = datetime.now(timezone.utc) if ts is None else datetime.fromtimestamp(ts, timezone.utc)
    return dt.isoformat(timespec="seconds").replace("+00:00", "Z")
