"""Where the fetch stage remembers each feed's validators (ETag, Last-Modified) between runs.

Any object with ``get`` and ``set`` will do (the store keeps one per namespace). ``fetch`` calls
``set`` only after it has yielded the feed's ``Source``, so a consumer that stops early never
records a feed it did not receive; an implementation may also hold the values until the run has
stored the entries (the pipeline's does), so a crashed run fetches the feed in full next time.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Callable, Protocol, runtime_checkable

__all__ = ["FeedState", "MemoryFeedState", "FileFeedState", "SyncFeedState"]

log = logging.getLogger(__name__)


@runtime_checkable
class FeedState(Protocol):
    """ETag and Last-Modified of feeds, by the URL they were requested with."""

    def get(self, url: str) -> tuple[str | None, str | None] | None:
        """``(etag, last_modified)`` from the last fetch of ``url``, or ``None``."""
        ...

    def set(self, url: str, etag: str | None, last_modified: str | None) -> None:
        """Remember the validators the server sent with ``url``'s feed."""
        ...


class MemoryFeedState:
    """A ``FeedState`` in a dict (for one process: tests, notebooks, a long-running watcher)."""

    def __init__(self) -> None:
        self._data: dict[str, tuple[str | None, str | None]] = {}

    def get(self, url: str) -> tuple[str | None, str | None] | None:
        return self._data.get(url)

    def set(self, url: str, etag: str | None, last_modified: str | None) -> None:
        self._data[url] = (etag, last_modified)


class SyncFeedState:
    """The ``FeedState`` a ``kbctl ingest --sync`` run fetches feeds through: it hides the validators
    of the feeds ``full(url)`` names, so those are asked for in full (all of them without ``full``),
    asks the others conditionally as ``inner`` would, and records the new validators in ``inner``
    (``commit`` passed on). A 304 carries no entries, so an entry that left a feed while runs without
    ``--sync`` kept it was never seen to be gone; ``full`` names the feeds whose stored entries are
    not all of one fetch (one statement a feed, by the documents' (namespace, source URI) index)."""

    def __init__(self, inner: FeedState, full: Callable[[str], bool] | None = None) -> None:
        self.inner, self.full = inner, full

    def get(self, url: str) -> tuple[str | None, str | None] | None:
        if self.full is None or self.full(url):
            return None
        return self.inner.get(url)

    def set(self, url: str, etag: str | None, last_modified: str | None) -> None:
        self.inner.set(url, etag, last_modified)

    def commit(self) -> None:
        commit = getattr(self.inner, "commit", None)
        if commit is not None:
            commit()


class FileFeedState:
    """A ``FeedState`` in a JSON file ``{url: {"etag": …, "last_modified": …}}``.

    The file is read on first use and rewritten atomically on every ``set``. A missing file is an
    empty state; an unreadable or corrupt one is logged and treated as empty (the cost is one full
    fetch of each feed).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._data: dict[str, dict[str, str | None]] | None = None

    def get(self, url: str) -> tuple[str | None, str | None] | None:
        entry = self._load().get(url)
        return (entry.get("etag"), entry.get("last_modified")) if entry else None

    def set(self, url: str, etag: str | None, last_modified: str | None) -> None:
        data = self._load()
        data[url] = {"etag": etag, "last_modified": last_modified}
        self._save(data)

    def _load(self) -> dict[str, dict[str, str | None]]:
        if self._data is None:
            self._data = _read_json(self.path)
        return self._data

    def _save(self, data: dict[str, dict[str, str | None]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=self.path.name + ".", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=2, sort_keys=True)
            os.replace(tmp, self.path)
        except BaseException:
            os.unlink(tmp)
            raise


def _read_json(path: Path) -> dict[str, dict[str, str | None]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        log.warning("ignoring feed state %s (%s); feeds will be fetched in full", path, e)
        return {}
    if not isinstance(data, dict):
        log.warning("ignoring feed state %s (not a JSON object)", path)
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)}
