"""Compressed data read within a size limit: a web body's Content-Encoding, and gzip data by its
magic bytes (a ``.gz`` URL or file).

``inflate`` never lets its output grow past ``limit + 1`` bytes (``zlib``'s ``max_length``), so a
bomb costs no more memory than the limit; the caller tells a result past the limit, and words the
refusal for what it read (a URL's ``max_bytes``, a file's ``max_file_bytes``).
"""

from __future__ import annotations

import zlib

__all__ = ["GZIP_MAGIC", "GZIP_WBITS", "inflate", "is_tar"]

#: The first two bytes of gzip data.
GZIP_MAGIC = b"\x1f\x8b"
#: ``zlib``'s window bits for gzip data (its header and trailer).
GZIP_WBITS = 16 + zlib.MAX_WBITS


def inflate(data: bytes, wbits: int, limit: int) -> bytes | None:
    """The data of ``data``'s compressed stream, and for gzip of each member after it (a gzip file
    may hold several, one after another: ``cat a.gz b.gz``), stopping once past ``limit``;
    ``None`` when the data is cut short (``zlib.error`` when it is corrupt)."""
    out = bytearray()
    rest = data
    while True:
        d = zlib.decompressobj(wbits)
        out += d.decompress(rest, limit + 1 - len(out))
        if len(out) > limit:
            return bytes(out)
        if not d.eof:
            return None
        rest = d.unused_data
        if wbits != GZIP_WBITS or not rest.startswith(GZIP_MAGIC):
            return bytes(out)


def is_tar(data: bytes) -> bool:
    """Whether ``data`` is a tar archive (POSIX or GNU: ``ustar`` at offset 257)."""
    return data[257:262] == b"ustar"
