"""Compressed data read within a size limit: a web body's Content-Encoding, and gzip, bzip2 and xz
data by its magic bytes (a ``.gz``, ``.bz2`` or ``.xz`` URL, file or stdin).

``inflate`` and ``decompress`` never let their output grow past ``limit + 1`` bytes (the
decompressors' ``max_length``), so a bomb costs no more memory than the limit; the caller tells a
result past the limit, and words the refusal for what it read (a URL's ``max_bytes``, a file's
``max_file_bytes``). zstd is told by its magic bytes too (``is_zstd``), to be refused: reading it
takes a package kbctl does not depend on.
"""

from __future__ import annotations

import bz2
import lzma
import zlib
from dataclasses import dataclass
from typing import Callable, Protocol

__all__ = [
    "BZIP2",
    "GZIP",
    "GZIP_MAGIC",
    "GZIP_WBITS",
    "XZ",
    "Compression",
    "CorruptData",
    "decompress",
    "inflate",
    "is_tar",
    "is_zstd",
    "sniff",
]

#: The first two bytes of gzip data.
GZIP_MAGIC = b"\x1f\x8b"
#: ``zlib``'s window bits for gzip data (its header and trailer).
GZIP_WBITS = 16 + zlib.MAX_WBITS
#: The first four bytes of a zstd frame.
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


class CorruptData(Exception):
    """Compressed data that does not decompress; its text is the decompressor's reason."""


@dataclass(frozen=True)
class Compression:
    """A compressed format kbctl reads: the word messages use, the suffix its files take, the command
    that tests such a file, tar's flag for a stream of it and the names of a tar compressed so."""

    name: str
    suffix: str
    test: str
    tar_flag: str
    tar_suffixes: tuple[str, ...]


GZIP = Compression("gzip", ".gz", "gzip -t", "-xz", (".tgz", ".tar.gz"))
BZIP2 = Compression("bz2", ".bz2", "bzip2 -t", "-xj", (".tbz", ".tbz2", ".tar.bz2"))
XZ = Compression("xz", ".xz", "xz -t", "-xJ", (".txz", ".tar.xz"))

# a bzip2 stream: "BZh", the block size (1-9), then a block's magic (pi) or the end's (sqrt(pi))
_BZIP2_BLOCKS = (b"1AY&SY", b"\x17rE8P\x90")
_XZ_MAGIC = b"\xfd7zXZ\x00"


def sniff(data: bytes) -> Compression | None:
    """The format of compressed ``data`` by its magic bytes, or ``None``."""
    if data.startswith(GZIP_MAGIC):
        return GZIP
    if data.startswith(_XZ_MAGIC):
        return XZ
    if data.startswith(b"BZh") and data[3:4] in b"123456789" and data[4:10] in _BZIP2_BLOCKS:
        return BZIP2
    return None


def is_zstd(data: bytes) -> bool:
    """Whether ``data`` begins with a zstd frame (which kbctl does not read)."""
    return data.startswith(ZSTD_MAGIC)


class _Decompressor(Protocol):
    @property
    def eof(self) -> bool: ...

    @property
    def unused_data(self) -> bytes: ...

    def decompress(self, data: bytes, /, max_length: int = ...) -> bytes: ...


def _streams(
    data: bytes, make_decompressor: Callable[[], _Decompressor], same_kind: Callable[[bytes], bool], limit: int
) -> bytes | None:
    """The data of ``data``'s streams one after another, a decompressor each, for as long as what
    follows a stream is ``same_kind`` (a next stream's magic bytes; anything else after the streams
    is left unread), stopping once past ``limit``: the output never grows past ``limit + 1`` bytes.
    ``None`` when a stream is cut short; a decompressor's own error when one is corrupt."""
    out = bytearray()
    rest = data
    while True:
        d = make_decompressor()
        out += d.decompress(rest, limit + 1 - len(out))
        if len(out) > limit:
            return bytes(out)
        if not d.eof:
            return None
        rest = d.unused_data
        if not same_kind(rest):
            return bytes(out)


def inflate(data: bytes, wbits: int, limit: int) -> bytes | None:
    """The data of ``data``'s compressed stream, and for gzip of each member after it (a gzip file
    may hold several, one after another: ``cat a.gz b.gz``), stopping once past ``limit``;
    ``None`` when the data is cut short (``zlib.error`` when it is corrupt)."""
    gzip = wbits == GZIP_WBITS
    return _streams(data, lambda: zlib.decompressobj(wbits), lambda rest: gzip and rest.startswith(GZIP_MAGIC), limit)


_DECOMPRESSORS: dict[str, Callable[[], _Decompressor]] = {
    "bz2": bz2.BZ2Decompressor,
    "xz": lambda: lzma.LZMADecompressor(lzma.FORMAT_XZ),
}


def decompress(data: bytes, kind: Compression, limit: int) -> bytes | None:
    """What compressed ``data`` of format ``kind`` holds, every stream of it (``cat a.xz b.xz``, a
    parallel bzip2's blocks), stopping once past ``limit``; ``None`` when the data is cut short,
    ``CorruptData`` when it does not decompress."""
    try:
        if kind is GZIP:
            return inflate(data, GZIP_WBITS, limit)
        return _streams(data, _DECOMPRESSORS[kind.name], lambda rest: sniff(rest) is kind, limit)
    except (zlib.error, OSError, lzma.LZMAError, EOFError) as e:
        raise CorruptData(str(e) or type(e).__name__) from None


def is_tar(data: bytes) -> bool:
    """Whether ``data`` is a tar archive (POSIX or GNU: ``ustar`` at offset 257, and the first
    header's checksum holds, so a text with the word there is not one)."""
    if len(data) < 512 or data[257:262] != b"ustar":
        return False
    try:
        kept = int(data[148:156].replace(b"\x00", b" ").strip() or b"-1", 8)
    except ValueError:
        return False
    # the sum of the header's bytes with its checksum field read as spaces (unsigned, as tar writes it)
    return kept == sum(data[:148]) + 8 * 32 + sum(data[156:512])
