"""Local sources: walking folders, reading one file, reading stdin.

Identity: a file's uri is ``file://`` + its absolute, normalised path *as walked* (symlinks are
not resolved), so a file reached through ``docs/current -> v2`` is ``file:///…/docs/current/x.md``
and keeps its identity when the link is pointed at ``v3``. Only ``%`` and ``#`` are
percent-encoded (``%25``, ``%23``), so a file named ``feed.rss#1`` or ``a.eml#attachment/x`` is
never taken for a feed's entry or a message's attachment, whose uris are ``<file uri>#…``;
``file_path`` turns a uri back into the path.

File names are data: a name that is not valid UTF-8 (Linux allows any bytes but ``/`` and NUL)
keeps its exact bytes in its uri, each byte that is not UTF-8 percent-encoded (``bad\xff.md`` →
``file:///…/bad%FF.md``, which ``file_path`` turns back into the same bytes), so it is stored,
found unchanged on the next run and removed by ``--sync`` like any other. Where the name is shown
as text (``path``, ``abs_path``, titles, messages) such bytes are written ``\xff``, and the
document's metadata says ``name_not_utf8: true``.

A walk stays inside its folder: a symlink whose target (resolved) lies outside the folder given is
skipped and recorded as an ``ItemError`` (``passwd.txt -> /etc/passwd`` must not become searchable)
unless ``follow_symlinks``. FIFOs, sockets and devices are recorded and never opened, so a walk
cannot block on them; ``.kbctlignore`` files are opened without blocking too.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Collection, Iterator, Sequence
from urllib.parse import unquote_to_bytes

from ..errors import SourceError
from ..mediatypes import COMPRESSED_SUFFIXES, inner_name
from ..textutil.clean import escape_undecodable
from ..textutil.dates import iso_utc
from ..types import ItemError, Source, content_hash
from .compressed import Compression, CorruptData, decompress, is_tar, is_zstd, sniff
from .globs import Pattern, any_match, compile_glob, ignored, load_ignore
from .options import FetchOptions, guess_media_type, normalise_suffixes

__all__ = [
    "iter_files",
    "file_uri",
    "file_path",
    "display_path",
    "read_file",
    "read_stdin",
    "human_bytes",
    "MAX_FILE_BYTES_HINT",
]

log = logging.getLogger(__name__)

#: How to let kbctl read a larger file (or stdin).
MAX_FILE_BYTES_HINT = "raise max_file_bytes (in bytes) in the [fetch] table of kbctl.toml"
#: What to do about a compressed file that does not decompress (``{test}``: ``gzip -t``, ``xz -t``…).
CORRUPT_HINT = "test it with `{test} FILE`: a file cut short by a copy or a download is read once it is whole"

RuleSets = list[tuple[str, tuple[Pattern, ...]]]


_UNDECODED = re.compile("[\udc80-\udcff]")  # what surrogateescape makes of a byte that is not UTF-8


def file_uri(path: str | os.PathLike[str]) -> str:
    """The identity of a local file: ``file://`` + its absolute, normalised path (links kept).

    Only ``%``, ``#`` and the bytes of a name that are not UTF-8 are percent-encoded."""
    text = os.path.abspath(path).replace("%", "%25").replace("#", "%23")
    return "file://" + _UNDECODED.sub(lambda m: f"%{ord(m.group()) - 0xDC00:02X}", text)


def file_path(uri: str) -> str:
    """The path a ``file://`` uri (without fragment) names: the inverse of ``file_uri``, byte for byte."""
    return unquote_to_bytes(uri[len("file://") :] if uri.startswith("file://") else uri).decode(
        "utf-8", "surrogateescape"
    )


def display_path(path: str | os.PathLike[str]) -> str:
    """A path as text to show or store: bytes of its name that are not UTF-8 written ``\\xff``."""
    return escape_undecodable(os.fspath(path))


def human_bytes(n: int) -> str:
    """``1536`` → ``"1.5 KB"`` (binary units, for messages)."""
    if n < 1024:
        return f"{n} bytes"
    size = float(n)
    for unit in ("KB", "MB", "GB"):
        size /= 1024
        if size < 1024 or unit == "GB":
            return f"{size:.3g} {unit}" if size < 100 else f"{size:.0f} {unit}"
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class _Filter:
    """What a folder walk keeps: globs relative to the walk root, suffixes, hidden names."""

    include: tuple[Pattern, ...]
    exclude: tuple[Pattern, ...]
    suffixes: frozenset[str]
    include_hidden: bool
    root: str | None  # the real path the walk stays in; None: symlinks are followed anywhere

    def prune(self, rel: str, is_dir: bool) -> bool:
        """Whether an exclude glob names this entry (a folder is then not walked at all)."""
        return any_match(self.exclude, rel, is_dir)

    def wanted(self, rel: str) -> bool:
        """Whether a file that survived the excludes is taken: its suffix, then the include globs."""
        if _inner_suffix(rel, self.suffixes) not in self.suffixes:
            return False
        if not self.include:
            return True
        # a file is included when a glob names it or one of the folders above it ("docs/", "docs/**")
        parts = rel.split("/")
        candidates = [(rel, False)] + [("/".join(parts[:k]), True) for k in range(1, len(parts))]
        return any(any_match(self.include, r, d) for r, d in candidates)


def _inner_suffix(name: str, suffixes: frozenset[str]) -> str:
    """The suffix that says ``name``'s format: ``.md`` for ``notes.md.gz`` (``.bz2``, ``.xz``: a
    compressed file is read as the file it holds), unless its suffix itself is one of ``suffixes``."""
    suffix = os.path.splitext(name)[1].lower()
    if suffix in COMPRESSED_SUFFIXES and suffix not in suffixes:
        return os.path.splitext(name[: -len(suffix)])[1].lower()
    return suffix


def iter_files(
    root: Path,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    suffixes: Collection[str] | None = None,
    *,
    include_hidden: bool = False,
    follow_symlinks: bool = False,
) -> Iterator[Path | ItemError]:
    """The files to take under ``root``, depth first in name order, without reading them.

    Applies (in order) hidden names, ``.kbctlignore`` files, ``exclude`` globs, the extractable
    ``suffixes`` (default ``options.DEFAULT_SUFFIXES``) and ``include`` globs. Symlinked files and
    folders inside ``root`` are followed; those leading out of it are ``ItemError`` records unless
    ``follow_symlinks``. A folder reached twice (a symlink loop, or two links to one folder) is
    walked once and the repeat is logged as a warning. A folder that cannot be listed, and a FIFO,
    socket or device, is an ``ItemError``.
    """
    globs = tuple(map(compile_glob, include)), tuple(map(compile_glob, exclude))
    inside = None if follow_symlinks else os.path.realpath(root)
    flt = _Filter(*globs, normalise_suffixes(suffixes), include_hidden, inside)
    root = Path(root)
    try:
        st = os.stat(root)
    except OSError as e:
        yield _os_error(root, e)
        return
    yield from _walk(root, "", flt, [], {(st.st_dev, st.st_ino)})


def _walk(
    folder: Path, rel: str, flt: _Filter, rule_sets: RuleSets, visited: set[tuple[int, int]]
) -> Iterator[Path | ItemError]:
    try:
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as e:
        yield _os_error(folder, e)
        return
    rules = load_ignore(folder)
    if rules:
        rule_sets = rule_sets + [(rel, rules)]
    for entry in entries:
        if entry.name.startswith(".") and not flt.include_hidden:
            continue
        child = f"{rel}/{entry.name}" if rel else entry.name
        is_dir = _is_dir(entry)
        if ignored(rule_sets, child, is_dir) or flt.prune(child, is_dir):
            continue
        path = folder / entry.name
        if flt.root is not None and entry.is_symlink() and (is_dir or flt.wanted(child)):
            target = os.path.realpath(path)
            if os.path.commonpath([flt.root, target]) != flt.root:
                yield _skipped(path, f"a symlink to {target}, outside {flt.root} (--follow-symlinks to take it)")
                continue
        if not is_dir:
            if flt.wanted(child):
                special = _special_kind(entry)
                yield _skipped(path, f"{special}, not a regular file") if special else path
            continue
        try:
            st = entry.stat()  # follows symlinks: the identity of the folder itself
        except OSError as e:
            yield _os_error(path, e)
            continue
        if (st.st_dev, st.st_ino) in visited:
            log.warning("skipping %s: that folder was already walked (symlink loop or second link to it)", path)
            continue
        visited.add((st.st_dev, st.st_ino))
        yield from _walk(path, child, flt, rule_sets, visited)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()  # follows symlinks; a broken link is not a folder
    except OSError:
        return False


def _special_kind(entry: os.DirEntry[str]) -> str | None:
    """``"a FIFO"``, ``"a socket"``, ``"a character device"``… for what is not a regular file (links
    followed); ``None`` for a regular file or one that cannot be stat'ed (its read will say why)."""
    try:
        mode = entry.stat().st_mode
    except OSError:
        return None
    for test, kind in _SPECIAL:
        if test(mode):
            return kind
    return None


_SPECIAL = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _skipped(path: Path, why: str) -> ItemError:
    return ItemError("fetch", file_uri(path), "SourceError", f"skipped {display_path(os.path.abspath(path))}: {why}")


def _os_error(path: Path | str, e: OSError) -> ItemError:
    return ItemError("fetch", file_uri(path), "SourceError", _os_message(path, e))


def _os_message(path: Path | str, e: OSError) -> str:
    shown = display_path(os.path.abspath(path))
    if isinstance(e, PermissionError):
        return f"cannot read {shown}: permission denied"
    if isinstance(e, FileNotFoundError):
        return f"no such file or directory: {shown}"
    return f"cannot read {shown}: {e.strerror or e}"


def read_file(path: Path, rel: str, options: FetchOptions, *, regular_only: bool = True) -> Source:
    """Read one file into a ``Source`` (raises ``SourceError``).

    Files larger than ``options.max_file_bytes`` are refused before being read. ``regular_only``
    refuses pipes and devices (a FIFO met in a folder walk would block forever), checked before
    the open and again on what was opened (without blocking); a file named explicitly may be one
    (``kbctl fetch <(curl …)``), and is then read up to the same limit.
    """
    abs_path = os.path.abspath(path)
    shown = display_path(abs_path)
    limit = options.max_file_bytes
    try:
        st = os.stat(abs_path)
        if stat.S_ISDIR(st.st_mode) or (regular_only and not stat.S_ISREG(st.st_mode)):
            raise SourceError(f"cannot read {shown}: not a regular file")
        if st.st_size > limit:
            raise _too_large(shown, st.st_size, limit)
        with open(abs_path, "rb", opener=_nonblocking if regular_only else None) as f:
            if regular_only and not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # swapped since the stat
                raise SourceError(f"cannot read {shown}: not a regular file")
            data = f.read(limit + 1)
    except OSError as e:
        raise SourceError(_os_message(abs_path, e)) from None
    if len(data) > limit:
        raise _too_large(shown, len(data), limit)
    meta = {"path": display_path(rel), "abs_path": shown, "size": len(data), "mtime": iso_utc(st.st_mtime)}
    if shown != abs_path:
        meta["name_not_utf8"] = True
    name = abs_path
    kind = _compressed(data, shown)
    if kind is not None:  # notes.md.gz, notes.md.xz: read as the Markdown file it holds
        data = _decompressed(data, kind, shown, limit)
        name = inner_name(abs_path)
    elif is_tar(data):  # extract called it a "binary file", hint "exclude other files"
        raise _archive(shown, None)
    return Source(uri=file_uri(abs_path), content=data, media_type=guess_media_type(name), kind="file", metadata=meta)


def _compressed(data: bytes, shown: str) -> Compression | None:
    """The compressed format ``data`` is in (gzip, bzip2, xz), ``None`` for data that is not
    compressed; ``SourceError`` for zstd, which kbctl does not read."""
    if is_zstd(data):
        decompress_it = "zstd -dc FILE | kbctl ingest -" if shown == "stdin" else f"zstd -d {shown}"
        raise SourceError(
            f"cannot read {shown}: zstd data, which kbctl does not read",
            hint=f"decompress it ({decompress_it}) and ingest the file it holds",
        )
    return sniff(data)


def _decompressed(data: bytes, kind: Compression, shown: str, limit: int) -> bytes:
    """A compressed file's data, at most ``limit`` bytes of it (a bomb stops there); ``SourceError``
    for one that is corrupt or cut short, or that holds a tar archive (kbctl reads no archive)."""
    if shown.lower().endswith(kind.tar_suffixes):
        raise _archive(shown, kind)
    hint = CORRUPT_HINT.format(test=kind.test)
    try:
        out = decompress(data, kind, limit)
    except CorruptData as e:
        raise SourceError(f"cannot read {shown}: corrupt {kind.name} file ({e})", hint=hint) from None
    if out is None:
        raise SourceError(f"cannot read {shown}: corrupt {kind.name} file (cut short)", hint=hint)
    if len(out) > limit:
        message = f"{shown} is larger than the {human_bytes(limit)} limit (max_file_bytes) once decompressed"
        raise SourceError(message, hint=MAX_FILE_BYTES_HINT)
    if is_tar(out):
        raise _archive(shown, kind)
    return out


def _archive(shown: str, kind: Compression | None) -> SourceError:
    """A tar archive's refusal (``kind``: how it was compressed, ``None`` for a plain one)."""
    unpack = f"… | tar {kind.tar_flag if kind else '-x'} -C DIR" if shown == "stdin" else f"tar -xf {shown} -C DIR"
    return SourceError(
        f"cannot read {shown}: a tar archive, which kbctl does not read",
        hint=f"unpack it ({unpack}) and ingest the folder",
    )


def _nonblocking(path: str, flags: int) -> int:
    """``open``'s opener for a file that must be regular: a FIFO put in its place does not block."""
    return os.open(path, flags | os.O_NONBLOCK)


def _too_large(what: str, size: int, limit: int) -> SourceError:
    more = "more than " if size == limit + 1 else ""
    message = f"{what} is {more}{human_bytes(size)}, larger than the {human_bytes(limit)} limit (max_file_bytes)"
    return SourceError(message, hint=MAX_FILE_BYTES_HINT)


def read_stdin(stream: BinaryIO, options: FetchOptions) -> Source:
    """Read stdin into a ``Source`` (raises ``SourceError`` beyond ``options.max_file_bytes``).

    The uri is ``stdin:<stdin_name>`` when the options name it, else ``stdin:`` + the first 16 hex
    digits of the content's sha256, so the same text piped twice is the same source. Gzip, bzip2 and
    xz data is read as the data it holds, as a file's is (``read_file``): within the same limit
    decompressed, an archive refused, zstd refused, its type from the name without ``.gz`` (``.bz2``,
    ``.xz``); piped compressed or not, one text is one source (``size`` is what was read).
    """
    limit = options.max_file_bytes
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise _too_large("stdin", len(data), limit)
    size = len(data)
    name = options.stdin_name
    typed = name
    kind = _compressed(data, "stdin")
    if kind is not None:
        data = _decompressed(data, kind, "stdin", limit)
        typed = inner_name(name) if name else name
    elif is_tar(data):
        raise _archive("stdin", None)
    digest = content_hash(data)
    meta = {"size": size, "sha256": digest, "fetched_at": iso_utc()}
    if name:
        meta["name"] = name
    uri = f"stdin:{name}" if name else f"stdin:{digest[:16]}"
    return Source(
        uri=uri, content=data, media_type=guess_media_type(typed) if typed else None, kind="stdin", metadata=meta
    )
