"""Helpers shared by the extractors: decoding bytes, naming, metadata, building documents.

Text is accepted as UTF-8 (with or without a BOM), UTF-16 or UTF-32 with a BOM, or in the
charset a transport declared (an HTTP ``Content-Type``, kept by fetch as ``metadata["charset"]``)
when the bytes are not UTF-8. Anything else is an ``ExtractError``: guessing an encoding would
index mojibake silently. Two exceptions fall back to windows-1252 (``decode_web_text``): an HTML
page (the HTML standard's fallback) and text fetched from a URL (what HTTP/1.1 long said text
without a charset is, as browsers read it), each only when it declares no charset Python knows
and its bytes are not mostly UTF-8. A local text file is not guessed at: its user can re-encode
it (``NOT_UTF8_HINT`` says how), and nothing declared it to be anything.
"""

from __future__ import annotations

import codecs
import re
from datetime import date, datetime, time
from typing import Any, Iterable, Mapping
from urllib.parse import unquote_to_bytes, urldefrag, urlsplit

from ..errors import ExtractError
from ..mediatypes import inner_name
from ..textutil.dates import iso_datetime
from ..types import FETCH_FACTS, Block, Document, Source

__all__ = [
    "decode_text",
    "NOT_UTF8_HINT",
    "URL_NOT_UTF8_HINT",
    "decode_web_text",
    "windows_1252",
    "is_url",
    "sniff_encoding",
    "file_path",
    "item_name",
    "stem_of",
    "split_paragraphs",
    "json_safe",
    "normalise_tags",
    "common_metadata",
    "build_document",
    "RESERVED_KEYS",
    "source_facts",
    "MAX_METADATA_BYTES",
    "MAX_METADATA_DEPTH",
    "MetadataTooLarge",
]

#: Metadata keys an extractor's own metadata (front matter, PDF info…) may not overwrite.
RESERVED_KEYS = frozenset({"source_type", "path", "uri"})

# UTF-32 first: its little-endian BOM starts with the UTF-16 one.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
#: The most an item's metadata may hold once written out as JSON (about as ``json.dumps`` writes
#: it), and how deeply it may nest: YAML aliases can make a 400-byte front matter expand
#: to gigabytes, and every chunk carries its document's metadata again.
MAX_METADATA_BYTES = 256 << 10
MAX_METADATA_DEPTH = 32

# XML 1.0, appendix F: how "<?" (a declaration) begins in each wide encoding when there is no BOM.
_XML_STARTS = (
    (b"\x00\x00\x00<", "utf-32-be"),
    (b"<\x00\x00\x00", "utf-32-le"),
    (b"\x00<\x00?", "utf-16-be"),
    (b"<\x00?\x00", "utf-16-le"),
)
_BLANK_LINES = re.compile(r"\n[ \t]*\n\s*")
_TAG_KEYS = ("tags", "keywords", "categories")


#: The hint of text that is not UTF-8. Such a file is most often Windows-1252 (what Windows editors
#: and Excel write): ``-f latin1`` would turn its curly quotes and dashes (0x80-0x9F) into C1 control characters.
NOT_UTF8_HINT = "re-encode the file as UTF-8, e.g. `iconv -f windows-1252 -t utf-8 in.txt > out.txt`"
#: The hint of text fetched from a URL that no charset reads: there is no file to re-encode.
URL_NOT_UTF8_HINT = (
    "the server names no charset that reads it and kbctl does not guess one: ask the site to serve UTF-8"
    " or to name its charset in the Content-Type, or save it, re-encode it as UTF-8 and ingest the file"
)


def decode_text(data: bytes, charset: str | None = None) -> str:
    """Bytes → text with ``\\n`` line ends; ``ExtractError`` when they are not text we accept.

    Order: a BOM decides; else strict UTF-8; else the declared ``charset`` (when a transport
    declared one, since servers often declare latin-1 for UTF-8 bodies, UTF-8 is tried first).
    """
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return _normalise_newlines(_strict(data, codec, codec.split("-sig")[0].upper()))
    try:
        return _normalise_newlines(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        first = e
    if charset and _known_codec(charset):
        return _normalise_newlines(_strict(data, charset, charset))
    raise ExtractError(
        f"not valid UTF-8 text (byte 0x{data[first.start]:02x} at offset {first.start})",
        hint=NOT_UTF8_HINT,
    ) from None


def decode_web_text(data: bytes, charsets: Iterable[str | None], *, url: bool) -> str:
    """Text fetched from a URL, or an HTML page: a BOM, else UTF-8, else each declared charset
    in turn (``charsets``: the transport's first, then a page's own ``<meta>``), else, when none
    names a codec Python knows, windows-1252 (``windows_1252``). ``ExtractError`` otherwise, with
    ``URL_NOT_UTF8_HINT`` for a ``url`` (the first refusal's message)."""
    declared: list[str] = [c for c in dict.fromkeys(charsets) if c]
    refused: ExtractError | None = None
    for c in declared or (None,):
        try:
            return decode_text(data, c)
        except ExtractError as e:
            refused = refused or e
    assert refused is not None
    if not any(_known_codec(c) for c in declared) and windows_1252(data):
        return _normalise_newlines(data.decode("cp1252"))
    if url:
        refused.hint = URL_NOT_UTF8_HINT
    raise refused


#: A UTF-8 sequence of two to four bytes (its lead byte and continuation bytes).
_UTF8_SEQUENCE = re.compile(rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}")
_HIGH_BYTES = bytes(range(0x80, 0x100))
#: The five bytes windows-1252 leaves undefined (Python's codec refuses them).
_CP1252_UNDEFINED = (b"\x81", b"\x8d", b"\x8f", b"\x90", b"\x9d")


def windows_1252(data: bytes) -> bool:
    """Whether bytes that are not UTF-8 may be read as windows-1252: none of the five bytes it
    leaves undefined, and their bytes of 0x80 or more not mostly in UTF-8 sequences (UTF-8 with a
    damaged byte, which windows-1252 would garble throughout, is refused, not guessed at)."""
    if any(b in data for b in _CP1252_UNDEFINED):
        return False
    high = len(data) - len(data.translate(None, _HIGH_BYTES))
    in_sequences = sum(len(m.group()) for m in _UTF8_SEQUENCE.finditer(data))
    return in_sequences * 2 <= high


def is_url(uri: str) -> bool:
    """Whether a source's uri is an http(s) URL (what it was fetched from)."""
    return uri[:8].lower().startswith(("http://", "https://"))


def sniff_encoding(head: bytes) -> str | None:
    """The encoding a BOM names (``utf-32``, ``utf-16``, ``utf-8-sig``), else the UTF-16/32 form that
    an XML document's first ``<`` has without one (``utf-16-le``…); ``None`` otherwise."""
    for bom, codec in _BOMS:
        if head.startswith(bom):
            return codec
    return next((codec for start, codec in _XML_STARTS if head.startswith(start)), None)


def _strict(data: bytes, codec: str, label: str) -> str:
    """Decode strictly; a failure is an ExtractError naming the encoding."""
    try:
        return data.decode(codec)
    except UnicodeDecodeError as e:
        raise ExtractError(
            f"not valid {label} text (undecodable bytes at offset {e.start})",
            hint="re-encode the file as UTF-8",
        ) from None


def _known_codec(name: str) -> bool:
    try:
        codecs.lookup(name)
    except LookupError:
        return False
    return True


def _normalise_newlines(text: str) -> str:
    """``\\r\\n`` and ``\\r`` → ``\\n``; a leftover BOM character is dropped."""
    return text.replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff")


def file_path(uri: str) -> str | None:
    """The local path of a ``file://`` uri (fragment dropped, ``%25``/``%23`` decoded), else ``None``.

    As text to show: bytes of a name that are not UTF-8 (``%FF`` in the uri) come out as ``\\xff``."""
    if not uri.startswith("file://"):
        return None
    return _shown(urldefrag(uri)[0][len("file://") :]) or None


def _shown(quoted: str) -> str:
    """A percent-encoded path or name as text, bytes that are not UTF-8 written ``\\xff``."""
    return unquote_to_bytes(quoted).decode("utf-8", "backslashreplace")


def item_name(uri: str) -> str:
    """The file name an item's uri ends in: an e-mail attachment's name, else the last path segment."""
    if "#attachment/" in uri:
        return uri.rsplit("#attachment/", 1)[1]
    base = urldefrag(uri)[0]
    if base.startswith("stdin:"):
        return base[len("stdin:") :]
    if "://" in base:
        parts = urlsplit(base)
        return _shown(parts.path.rstrip("/").rsplit("/", 1)[-1]) or parts.netloc
    return base.rstrip("/").rsplit("/", 1)[-1]


def stem_of(uri: str) -> str:
    """A readable fallback title: the item's file name without its suffix (and ``.gz``, ``.bz2``,
    ``.xz``: ``draft.md.gz`` is ``draft``), or the host."""
    name = inner_name(item_name(uri))
    if "." in name.lstrip("."):
        name = name.rsplit(".", 1)[0]
    return name or uri


def split_paragraphs(text: str) -> list[str]:
    """Text split on blank lines, each paragraph stripped, empty ones dropped."""
    return [p.strip() for p in _BLANK_LINES.split(text) if p.strip()]


class MetadataTooLarge(ValueError):
    """Metadata past ``MAX_METADATA_BYTES`` or ``MAX_METADATA_DEPTH`` (front matter, headers…)."""


def json_safe(value: Any) -> Any:
    """A copy of ``value`` that ``json.dumps`` takes as is: dates become ISO strings, tuples lists.

    The copy is bounded: ``MetadataTooLarge`` as soon as it would pass ``MAX_METADATA_BYTES`` or nest
    deeper than ``MAX_METADATA_DEPTH`` (a cycle never ends, so it is too deep), before it is built, so
    a value whose shared parts expand without bound costs at most that much work.
    """
    return _json_safe(value, 0, [MAX_METADATA_BYTES])


def _json_safe(value: Any, depth: int, budget: list[int]) -> Any:
    if depth > MAX_METADATA_DEPTH:
        raise MetadataTooLarge(f"metadata nested more than {MAX_METADATA_DEPTH} levels deep")
    if isinstance(value, Mapping):
        _spend(budget, 4)
        return {_json_safe(str(k), depth + 1, budget): _json_safe(v, depth + 1, budget) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        _spend(budget, 4)
        return [_json_safe(v, depth + 1, budget) for v in value]
    if isinstance(value, (datetime, date)):
        value = iso_datetime(value)
    elif isinstance(value, time):
        value = value.isoformat()
    elif not (value is None or isinstance(value, (str, int, float, bool))):
        value = str(value)
    _spend(budget, _cost(value))
    return value


def _cost(scalar: Any) -> int:
    """About the bytes ``json.dumps`` writes for a scalar, with its quotes and separator."""
    if isinstance(scalar, str):
        return len(scalar) + 4
    if isinstance(scalar, int) and not isinstance(scalar, bool):
        return scalar.bit_length() * 3 // 10 + 6  # its decimal digits (str() refuses past 4300 of them)
    return 28  # null, a boolean, a float


def _spend(budget: list[int], n: int) -> None:
    """Take ``n`` bytes (a value written out as JSON, with its quotes and separator) from the budget."""
    budget[0] -= n
    if budget[0] < 0:
        raise MetadataTooLarge(f"metadata larger than {MAX_METADATA_BYTES >> 10} KB once expanded")


def normalise_tags(meta: dict[str, Any]) -> dict[str, Any]:
    """``tags``/``keywords``/``categories`` as lists of strings (``"a, b"`` → ``["a", "b"]``)."""
    for key in _TAG_KEYS:
        value = meta.get(key)
        if isinstance(value, str):
            meta[key] = [t.strip() for t in value.split(",") if t.strip()]
        elif isinstance(value, (list, tuple)):
            meta[key] = [str(t).strip() for t in value if str(t).strip()]
    return meta


def common_metadata(source: Source, source_type: str) -> dict[str, Any]:
    """What every document carries: ``path`` (of a file uri), the source's metadata, ``source_type``."""
    meta: dict[str, Any] = {}
    path = file_path(source.uri)
    if path:
        meta["path"] = path
    meta.update(json_safe(dict(source.metadata)))
    meta["source_type"] = source_type
    return meta


def build_document(
    source: Source,
    *,
    title: str,
    blocks: Iterable[Block],
    source_type: str,
    metadata: Mapping[str, Any] | None = None,
    uri: str | None = None,
    parent_uri: str | None = None,
    notes: tuple[tuple[str, str], ...] = (),
) -> Document:
    """A ``Document`` with the common metadata merged in; ``ExtractError`` when it has no text.

    The extractor's own ``metadata`` wins over the source's, except for ``RESERVED_KEYS``;
    ``notes`` are (warning class, message) pairs the run records as warnings.
    """
    blocks = [b for b in blocks if b.text.strip()]
    if not blocks:
        raise ExtractError("empty document (no text)", hint="the item holds no extractable text")
    try:
        meta = common_metadata(source, source_type)
        own = normalise_tags(json_safe(dict(metadata or {})))
    except MetadataTooLarge as e:
        raise ExtractError(
            str(e), hint="the item's metadata (headers, document properties) is too large to keep"
        ) from None
    # An empty value says nothing and is dropped, except an ``acl``: given empty it means no one
    # (``kbctl.acl.lift_acl``), and dropping it would leave the document to the namespace's default.
    own = {k: v for k, v in own.items() if k not in RESERVED_KEYS and (k == "acl" or v not in (None, "", [], {}))}
    meta.update(own)
    return Document.from_blocks(
        uri=uri or source.uri,
        title=(title or "").strip() or stem_of(uri or source.uri),
        blocks=blocks,
        source_type=source_type,
        metadata=meta,
        parent_uri=parent_uri,
        notes=notes,
        fetch_facts=source_facts(source, own),
    )


def source_facts(source: Source, own: Mapping[str, Any]) -> frozenset[str]:
    """The keys of a document's metadata that are ``source``'s fetch facts (``FETCH_FACTS``), not
    part of its content hash; a key the extractor's own metadata (front matter) sets is the document's."""
    return frozenset(k for k in FETCH_FACTS if k in source.metadata and k not in own)
