"""The fetch stage: turn targets (folders, files, ``-``, URLs, feeds) into ``Source``s.

``fetch`` is a generator: it reads one file or one response at a time and yields it, so memory
does not grow with the corpus. A problem with one item (a missing target, an unreadable or too
large file, an unreachable URL) is yielded as an ``ItemError`` with ``stage="fetch"`` and the walk
goes on; the pipeline decides what to do with it. ::

    target                      yields
    folder                      one Source (kind "file") per extractable file, in path order
    file                        one Source (kind "file"), whatever its suffix
    -                           one Source (kind "stdin") read from ``stdin``
    http(s) URL                 one Source (kind "url"), uri = final URL without fragment
    http(s) URL of a feed       one Source (kind "feed") with the whole feed; nothing on a 304;
                                with ``follow_links``, one more Source (kind "url") per entry
                                that carries only a summary: the page it links to

Source metadata — files: ``path`` (relative to the walked folder; the file name for a file named
directly), ``abs_path``, ``size``, ``mtime`` (ISO 8601 UTC). URLs and feeds: ``url`` (as
requested), ``status``, ``content_type`` (the full header), ``charset``, ``etag``,
``last_modified``, ``fetched_at``; feeds add ``feed_title`` and ``entries`` (their count); linked
pages add ``feed_url`` and ``entry_id``. Stdin: ``size``, ``sha256``, ``fetched_at`` and
``name`` when ``FetchOptions.stdin_name`` is set.

Safety, by default: a folder walk does not follow symlinks out of the folder, nor open FIFOs,
sockets or devices (each is recorded as an ``ItemError``); a URL may reach public addresses only
(checked on the address connected to, at every redirect hop and for every feed link), within a
deadline and a minimum rate; a ``file:`` source is read only when given as a target, never from a
redirect or a feed link. ``FetchOptions`` (from the ``[fetch]`` table) opts in to more.

This module only tells targets apart: ``sources.folder`` walks and reads files, ``sources.url``
owns HTTP (pages, feeds and their links). This stage never imports the store or the CLI.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator, Sequence

from ..errors import SourceError
from ..sources.folder import file_path, file_uri, iter_files, read_file, read_stdin
from ..sources.options import DEFAULT_SUFFIXES, FetchOptions
from ..sources.state import FeedState, FileFeedState, MemoryFeedState
from ..sources.url import fetch_url, is_http_url, item_error
from ..types import ItemError, Source

__all__ = [
    "fetch",
    "list_uris",
    "list_items",
    "fetch_items",
    "iter_files",
    "FetchOptions",
    "FeedState",
    "MemoryFeedState",
    "FileFeedState",
    "DEFAULT_SUFFIXES",
]

log = logging.getLogger(__name__)

Fetched = Source | ItemError


def fetch(
    targets: Iterable[str],
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    follow_links: bool = False,
    options: FetchOptions | None = None,
    state: FeedState | None = None,
    stdin: BinaryIO | None = None,
) -> Iterator[Source | ItemError]:
    """Yield a ``Source`` per item found in ``targets`` (or an ``ItemError`` per item that failed).

    ``include``/``exclude`` are globs relative to each walked folder (see ``kbctl.sources.globs``);
    ``state`` makes feed requests conditional (If-None-Match / If-Modified-Since); ``stdin`` is read
    for a ``-`` target (default ``sys.stdin.buffer``), once.
    """
    opts = options or FetchOptions()
    stdin_read = False
    for target in targets:
        if target == "-":
            yield _fetch_stdin(stdin if stdin is not None else sys.stdin.buffer, opts, stdin_read)
            stdin_read = True
        elif is_http_url(target):
            yield from _guarded(target, fetch_url(target, opts, state, follow_links))
        elif "://" in target and not target.startswith("file://"):
            yield _unsupported(target)
        else:
            yield from _guarded(target, _fetch_path(_local_path(target), include, exclude, opts))


def list_uris(
    targets: Iterable[str],
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    options: FetchOptions | None = None,
) -> set[str]:
    """The uris ``fetch`` would give the local files in ``targets``, without reading any of them.

    For ``--sync``: a stored ``file://`` source not in this set is gone. Files too large to fetch
    are listed (they exist); URLs and stdin are not (their identity is known only once fetched).
    """
    opts = options or FetchOptions()
    uris: set[str] = set()
    for target in targets:
        if target == "-" or ("://" in target and not target.startswith("file://")):
            continue
        path = _local_path(target)
        if path.is_dir():
            uris.update(file_uri(p) for p in _walk(path, include, exclude, opts) if isinstance(p, Path))
        elif os.path.exists(path):
            uris.add(file_uri(path))
    return uris


def list_items(
    targets: Iterable[str],
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    options: FetchOptions | None = None,
) -> Iterator[tuple[str, str | None] | ItemError]:
    """The items of a run shared by workers, without reading them: (target, path in its folder) per
    file a folder walk finds (the path its ``Source`` metadata will carry), (target, None) per file
    named directly and per URL; what the walk refuses, as ``fetch`` does, is an ``ItemError``.
    ``fetch_items`` turns them into the ``Source``s ``fetch`` would have given. Stdin cannot be
    shared (``-`` is refused before).
    """
    opts = options or FetchOptions()
    for target in targets:
        if is_http_url(target):
            yield (target, None)
        elif "://" in target and not target.startswith("file://"):
            yield _unsupported(target)
        else:
            path = _local_path(target)
            if not os.path.lexists(path):
                yield ItemError("fetch", file_uri(path), "SourceError", f"no such file or directory: {path}")
                continue
            if not path.is_dir():
                yield (os.path.abspath(path), None)
                continue
            root = os.path.abspath(path)
            for item in _walk(path, include, exclude, opts):
                if isinstance(item, ItemError):
                    yield item
                    continue
                full = os.path.abspath(item)
                try:
                    full.encode("utf-8")
                except UnicodeEncodeError:
                    yield ItemError(
                        "fetch", file_uri(full), "SourceError", "a file name that is not UTF-8 cannot be queued"
                    )
                    continue
                yield (full, os.path.relpath(full, root).replace(os.sep, "/"))


def fetch_items(
    items: Iterable[tuple[str, str | None]], *, follow_links: bool = False, options: FetchOptions | None = None
) -> Iterator[Source | ItemError]:
    """The ``Source``s of items ``list_items`` gave: a walked file read as the walk reads it, a file
    named directly or a URL fetched as ``fetch`` does (a feed in full: no conditional request)."""
    opts = options or FetchOptions()
    for target, rel in items:
        if rel is None:
            yield from fetch([target], follow_links=follow_links, options=opts)
        else:
            yield _read(Path(target), rel, opts)


def _guarded(target: str, items: Iterator[Fetched]) -> Iterator[Fetched]:
    """``items``, ending in an ``ItemError`` if something unforeseen breaks them: one target's
    bug (say, a feed that crashes the parser) must not end the other targets' fetch."""
    try:
        yield from items
    except Exception as e:
        log.exception("fetch failed on %s", target)
        yield ItemError("fetch", target, type(e).__name__, str(e) or type(e).__name__)


def missing_paths(targets: Iterable[str]) -> list[str]:
    """The targets that name a local path (a path or a ``file://`` URI; not ``-``, not another URL)
    where nothing is: ``fetch`` would make each an ``ItemError`` "no such file or directory"."""
    out = []
    for target in targets:
        if target == "-" or is_http_url(target) or ("://" in target and not target.startswith("file://")):
            continue
        if not os.path.lexists(_local_path(target)):
            out.append(target)
    return out


def _local_path(target: str) -> Path:
    # kbctl's file uris are "file://" + the absolute path with only "%" and "#" percent-encoded
    return Path(file_path(target) if target.startswith("file://") else target)


def _fetch_stdin(stream: BinaryIO, opts: FetchOptions, already_read: bool) -> Fetched:
    if already_read:
        return ItemError("fetch", "stdin:", "SourceError", "stdin was already read (- given more than once)")
    try:
        return read_stdin(stream, opts)
    except SourceError as e:
        return item_error("stdin:", e)
    except OSError as e:
        return ItemError("fetch", "stdin:", "SourceError", f"cannot read stdin: {e.strerror or e}")


def _fetch_path(path: Path, include: Sequence[str], exclude: Sequence[str], opts: FetchOptions) -> Iterator[Fetched]:
    """A folder is walked; a file named directly is always read, whatever its suffix or name."""
    if not os.path.lexists(path):
        yield ItemError("fetch", file_uri(path), "SourceError", f"no such file or directory: {path}")
        return
    if not path.is_dir():
        yield _read(path, path.name, opts, regular_only=False)
        return
    root = os.path.abspath(path)
    for item in _walk(path, include, exclude, opts):
        if isinstance(item, ItemError):
            yield item
        else:
            yield _read(item, os.path.relpath(os.path.abspath(item), root).replace(os.sep, "/"), opts)


def _unsupported(target: str) -> ItemError:
    """A target with a scheme neither ``fetch`` nor ``list_items`` reads (not http(s), not file)."""
    scheme = target.split("://", 1)[0]
    return ItemError("fetch", target, "SourceError", f"cannot fetch {target}: unsupported scheme {scheme!r}")


def _walk(path: Path, include: Sequence[str], exclude: Sequence[str], opts: FetchOptions) -> Iterator[Path | ItemError]:
    """The folder ``path``'s files as ``fetch``, ``list_uris`` and ``list_items`` all walk it (the
    suffixes, hidden names and symlinks of ``opts``), with what the walk refuses."""
    return iter_files(
        path, include, exclude, opts.suffixes, include_hidden=opts.include_hidden, follow_symlinks=opts.follow_symlinks
    )


def _read(path: Path, rel: str, opts: FetchOptions, *, regular_only: bool = True) -> Fetched:
    try:
        return read_file(path, rel, opts, regular_only=regular_only)
    except SourceError as e:
        return item_error(file_uri(path), e)
