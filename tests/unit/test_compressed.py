"""``kbctl.sources.compressed``: gzip, bzip2 and xz data of one to three streams one after another
(``cat a.gz b.gz``) reads as the concatenation of what they hold; a limit below it stops the output
at ``limit + 1`` bytes (the caller's "larger than the limit"), data cut short is ``None``."""

from __future__ import annotations

import bz2
import gzip
import itertools
import lzma
import zlib
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from kbctl.sources.compressed import BZIP2, GZIP, GZIP_WBITS, XZ, Compression, decompress, inflate

_COMPRESS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": lambda b: gzip.compress(b, compresslevel=1, mtime=0),
    "bz2": lambda b: bz2.compress(b, compresslevel=1),
    "xz": lambda b: lzma.compress(b, format=lzma.FORMAT_XZ, preset=0),
}
# how many bytes of a stream ``sniff`` reads to tell a next stream of the same format
_MAGIC = {"gzip": 2, "bz2": 10, "xz": 6}
kinds = st.sampled_from([GZIP, BZIP2, XZ])
# random bytes (which do not compress) and runs of a few bytes (which grow many times over)
payloads = st.one_of(
    st.binary(max_size=3000),
    st.builds(lambda piece, n: piece * n, st.binary(min_size=1, max_size=8), st.integers(1, 4000)),
)


@st.composite
def streams(draw: st.DrawFn) -> tuple[Compression, bytes, list[bytes]]:
    """A format, a payload and the payload cut into 1–3 pieces, compressed one stream each."""
    kind = draw(kinds)
    payload = draw(payloads)
    cuts = sorted(draw(st.lists(st.integers(0, len(payload)), max_size=2)))
    bounds = [0, *cuts, len(payload)]
    pieces = [payload[a:b] for a, b in itertools.pairwise(bounds)]
    return kind, payload, [_COMPRESS[kind.name](p) for p in pieces]


@settings(max_examples=300, deadline=None)
@given(case=streams())
def test_every_stream_is_read_and_their_data_concatenated(case):
    kind, payload, packed = case
    data = b"".join(packed)
    assert decompress(data, kind, len(payload)) == payload
    assert decompress(data, kind, len(payload) + 1000) == payload
    if kind is GZIP:
        assert inflate(data, GZIP_WBITS, len(payload)) == payload


@settings(max_examples=300, deadline=None)
@given(case=streams(), data=st.data())
def test_a_limit_below_the_size_stops_the_output_one_byte_past_it(case, data):
    kind, payload, packed = case
    if not payload:
        return
    limit = data.draw(st.integers(0, len(payload) - 1), label="limit")
    assert decompress(b"".join(packed), kind, limit) == payload[: limit + 1]


@settings(max_examples=300, deadline=None)
@given(case=streams(), data=st.data())
def test_data_cut_short_is_none(case, data):
    """Cut inside its last stream past the magic bytes that tell it (before them, what follows the
    streams before it is not another stream, and they are read whole)."""
    kind, payload, packed = case
    whole = b"".join(packed)
    start = len(whole) - len(packed[-1]) + _MAGIC[kind.name]
    end = data.draw(st.integers(start if len(packed) > 1 else 0, len(whole) - 1), label="end")
    assert decompress(whole[:end], kind, len(payload)) is None


def test_a_deflate_stream_is_read_alone():
    """zlib and raw deflate data (a Content-Encoding: deflate) is one stream: what follows it is not
    read, even when it is another stream."""
    one = zlib.compress(b"first")
    assert inflate(one + zlib.compress(b"second"), zlib.MAX_WBITS, 100) == b"first"
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    body = raw.compress(b"raw") + raw.flush()
    assert inflate(body, -zlib.MAX_WBITS, 100) == b"raw"
    assert inflate(body[:-1], -zlib.MAX_WBITS, 100) is None
