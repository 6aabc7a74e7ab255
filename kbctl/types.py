"""Typed values that flow between the pipeline stages and out of search.

fetch → ``Source`` → extract → ``Document`` (made of ``Block``s) → chunk → ``Chunk`` →
embed → ``EmbeddedChunk`` → store.  Search returns ``Hit``s inside a ``SearchResult``.

All are frozen dataclasses. ``to_json``/``from_json`` give the NDJSON form used between the
stage subcommands (bytes travel as base64).
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping

from .textutil.clean import CLEANED, clean_metadata, clean_text, escape_undecodable, removed

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "Source",
    "Block",
    "Document",
    "Chunk",
    "EmbeddedChunk",
    "ItemError",
    "Filter",
    "quote_value",
    "Principal",
    "Hit",
    "SearchResult",
    "store_id",
    "content_hash",
    "document_hash",
    "FETCH_FACTS",
    "REFRESHED_FACTS",
    "LargeDocument",
    "place",
]


# Characters of a document's text encoded at a time when hashing it (the same digest as all at once).
_HASH_WINDOW = 1 << 20


def content_hash(data: str | bytes) -> str:
    """The hash kbctl uses for document and chunk identity (sha256, hex)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


#: Metadata that tells of the fetch, not of the document (``kbctl.ingest.fetch``): the file's or
#: response's size, mtime, sha256, fetch time, ETag and Last-Modified, and a feed's count of entries.
#: A document carries them but they are not part of its ``content_hash``: a source whose bytes
#: changed while a document of it did not (a feed that gained an entry, an mbox that gained a
#: message, a file rewritten with the same text) leaves that document unchanged, not rewritten.
#: They are stored as they were at the latest fetch that changed the source's bytes, on the
#: document's row only (``documents.fact_keys`` names them; its chunks carry none, so a feed that
#: gained an entry writes no chunk row of a kept entry; hits show them and filters read them from
#: the row). Only the source's are left out (``Document.fetch_facts``): front matter or a record's
#: metadata of the same names is the document's own, and part of its version.
FETCH_FACTS = frozenset({"size", "mtime", "sha256", "fetched_at", "etag", "last_modified", "entries"})

#: The fetch facts that can change while the source's bytes do not (a file touched, a response with
#: a new ETag or Last-Modified for the same body): a source skipped as unchanged gives them to its
#: documents' rows (``store.refresh_facts``). Not ``fetched_at``: it is when the bytes stored were
#: fetched, so a poll that finds the same bytes writes nothing; ``size``, ``sha256`` and a feed's
#: ``entries`` are of the bytes, the same.
REFRESHED_FACTS = frozenset({"mtime", "etag", "last_modified"})


def document_hash(
    title: str, metadata: Mapping[str, Any], text: Iterable[str], fetch_facts: frozenset[str] = frozenset()
) -> str:
    """A document's ``content_hash``: its title, its metadata (but the keys ``fetch_facts``, its
    source's ``FETCH_FACTS``) and its text, given as consecutive pieces (the same digest however the
    text is cut, so a long text is never encoded whole)."""
    import json

    meta = json.dumps({k: v for k, v in metadata.items() if k not in fetch_facts}, sort_keys=True, default=str)
    h = hashlib.sha256(f"{title}\x00{meta}\x00".encode())
    for piece in text:
        for i in range(0, len(piece), _HASH_WINDOW):  # a long piece is encoded a window at a time
            h.update(piece[i : i + _HASH_WINDOW].encode("utf-8"))
    return h.hexdigest()


@dataclass(frozen=True)
class Source:
    """Raw bytes of one item, as fetched.

    ``uri`` is the canonical identity of the item inside a namespace: ``file:///abs/path`` for files
    (``%`` and ``#`` percent-encoded), the canonical URL for web pages and feeds (whose entries are
    documents ``<feed uri>#<guid>``). ``media_type`` is a best guess
    (from the file extension or the Content-Type header); extract decides from it and the bytes.
    """

    uri: str
    content: bytes
    media_type: str | None = None
    kind: str = "file"  # file | url | feed | stdin
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["content"] = base64.b64encode(self.content).decode("ascii")
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Source:
        d = dict(d)
        d["content"] = base64.b64decode(d.get("content", ""))
        return cls(**_known(cls, d))


@dataclass(frozen=True, slots=True)  # slots: a long document has 100k of these
class Block:
    """A structural piece of a document: a section's paragraph, a PDF page's text, a message body.

    ``start`` is the character offset of ``text`` inside ``Document.text``. ``heading_path`` is the
    chain of headings above the block (Markdown/HTML), ``page`` the 1-based PDF page. ``boxes``
    (PDF) place its lines on the page: ``(offset in text, length, x0, top, x1, bottom)`` in points.
    """

    text: str
    start: int = 0
    heading_path: tuple[str, ...] = ()
    page: int | None = None
    boxes: tuple[tuple[float, ...], ...] = ()

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Block:
        d = dict(d)
        d["heading_path"] = tuple(d.get("heading_path") or ())
        d["boxes"] = tuple(tuple(b) for b in d.get("boxes") or ())
        return cls(**_known(cls, d))


@dataclass(frozen=True)
class Document:
    """Extracted text of one document, with its structure and metadata.

    ``text`` is the blocks' texts joined by blank lines; ``content_hash`` is computed from the text,
    the title and the metadata but its ``fetch_facts`` (the keys of ``FETCH_FACTS`` its source
    gave, not those of its own metadata: ``extract.base.build_document``), so a change in any of
    them is a new version of the document.
    ``parent_uri`` links child documents (an e-mail's attachments) to their parent.

    Whatever PostgreSQL cannot store (NUL, lone surrogates, NaN in metadata) is removed when a
    document is built (``kbctl.textutil.clean``); ``notes`` says what was, as (warning class,
    message) pairs the run records as warnings, with the extractors' own notes (a repeated id).
    """

    uri: str
    title: str
    text: str
    blocks: tuple[Block, ...]
    source_type: str  # text | markdown | html | pdf | email | feed
    metadata: Mapping[str, Any] = field(default_factory=dict)
    parent_uri: str | None = None
    content_hash: str = ""
    notes: tuple[tuple[str, str], ...] = ()
    # Who may view it (``kbctl.acl``): None when the document carries no ACL. Not part of
    # ``content_hash``: an ACL-only change rewrites the row and re-embeds nothing.
    acl: tuple[str, ...] | None = None
    # The metadata keys that are its source's fetch facts (``FETCH_FACTS``), not part of ``content_hash``.
    fetch_facts: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self._clean() or not self.content_hash:
            h = document_hash(self.title, self.metadata, (self.text,), self.fetch_facts)
            object.__setattr__(self, "content_hash", h)

    def _clean(self) -> bool:
        """Remove what the store refuses, in place (once, at construction); whether anything went."""
        notes = [note for f in ("uri", "parent_uri", "title") if (note := self._clean_field(f))]
        text, n = clean_text(self.text)
        if n:
            object.__setattr__(self, "blocks", _shifted(self.blocks, self.text))
            object.__setattr__(self, "text", text)
            notes.append(removed(n, "the text"))
        meta, meta_notes = clean_metadata(self.metadata)
        if meta_notes:
            object.__setattr__(self, "metadata", meta)
            notes += meta_notes
        if notes:
            object.__setattr__(self, "notes", (*self.notes, *((CLEANED, m) for m in notes)))
        return bool(notes)

    def _clean_field(self, name: str) -> str | None:
        value = getattr(self, name)
        if value is None:
            return None
        clean, n = clean_text(value)
        if not n:
            return None
        object.__setattr__(self, name, clean)
        return removed(n, f"the {name}")

    @classmethod
    def from_blocks(
        cls,
        uri: str,
        title: str,
        blocks: list[Block] | tuple[Block, ...],
        source_type: str,
        metadata: Mapping[str, Any] | None = None,
        parent_uri: str | None = None,
        notes: tuple[tuple[str, str], ...] = (),
        fetch_facts: frozenset[str] = frozenset(),
    ) -> Document:
        """Build a document from block texts, computing ``text`` and every block's ``start``."""
        parts: list[str] = []
        placed: list[Block] = []
        pos = 0
        dropped = 0
        for b in blocks:
            t, n = clean_text(b.text)  # here, so that blocks and text agree without shifting offsets
            dropped += n
            t = t.strip()
            if not t:
                continue
            if parts:
                pos += 2
            placed.append(Block(text=t, start=pos, heading_path=tuple(b.heading_path), page=b.page, boxes=b.boxes))
            parts.append(t)
            pos += len(t)
        return cls(
            uri=uri,
            title=title,
            text="\n\n".join(parts),
            blocks=tuple(placed),
            source_type=source_type,
            metadata=dict(metadata or {}),
            parent_uri=parent_uri,
            notes=(*notes, (CLEANED, removed(dropped, "the text"))) if dropped else notes,
            fetch_facts=fetch_facts,
        )

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        if not self.notes:
            del d["notes"]
        if self.acl is None:
            del d["acl"]
        if self.fetch_facts:
            d["fetch_facts"] = sorted(self.fetch_facts)
        else:
            del d["fetch_facts"]
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Document:
        d = dict(d)
        d["blocks"] = tuple(Block.from_json(b) for b in d.get("blocks") or ())
        d["notes"] = tuple((str(c), str(m)) for c, m in d.get("notes") or ())
        if d.get("acl") is not None:
            d["acl"] = tuple(str(a) for a in d["acl"]) if isinstance(d["acl"], (list, tuple)) else (str(d["acl"]),)
        d["fetch_facts"] = frozenset(str(k) for k in d.get("fetch_facts") or ())
        return cls(**_known(cls, d))


@dataclass(frozen=True, eq=False)
class LargeDocument:
    """A document too large to hold whole (``kbctl.extract.stream``): read once to know it, again to chunk it.

    ``head`` is the document without its text (``text`` empty, no blocks) but with the
    ``content_hash`` of the whole and its notes; ``chars`` is the length its ``text`` would have;
    ``blocks()`` reads the blocks again from the source's bytes, in order, each with its ``start``
    in that text (the blocks joined by blank lines), so chunks carry the same offsets and hashes as
    when the document is held whole.
    """

    head: Document
    chars: int
    blocks: Callable[[], Iterator[Block]]


@dataclass(frozen=True, slots=True)  # slots: a long document has 100k of these
class Chunk:
    """A piece of a document sized for the embedding model.

    ``text`` is exactly ``Document.text[char_start:char_end]``, but for a piece of a Markdown table
    after its first, which is preceded by the table's header lines (and its caption, marked
    continued), a piece of a long code block (its fences) and a piece going on a line cut mid-line
    (``…`` before it): ``kbctl.chunk``;
    ``header`` (the document title and the heading path) is put before it when embedding and
    indexing, but is not part of the cited text.
    """

    document_uri: str
    position: int
    text: str
    token_count: int
    char_start: int
    char_end: int
    heading_path: tuple[str, ...] = ()
    page: int | None = None
    header: str = ""
    content_hash: str = ""
    # Where the text is on its PDF page: one ``(page, x0, top, x1, bottom)`` box (points) per line.
    boxes: tuple[tuple[float, ...], ...] = ()

    def __post_init__(self) -> None:
        if not self.content_hash:
            object.__setattr__(self, "content_hash", content_hash(self.embed_text))

    @property
    def embed_text(self) -> str:
        """What the model reads: the context header (title, headings) and the chunk's text."""
        return f"{self.header}\n\n{self.text}" if self.header else self.text

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Chunk:
        d = dict(d)
        d["heading_path"] = tuple(d.get("heading_path") or ())
        d["boxes"] = tuple(tuple(b) for b in d.get("boxes") or ())
        return cls(**_known(cls, d))


@dataclass(frozen=True, eq=False)
class EmbeddedChunk:
    """A chunk with its vector: floats of the profile's dimension, as a tuple, or (on the way to
    the store) the numpy array the model or the vector cache returned."""

    chunk: Chunk
    embedding: tuple[float, ...] | np.ndarray

    def to_json(self) -> dict[str, Any]:
        return {"chunk": self.chunk.to_json(), "embedding": list(self.embedding)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> EmbeddedChunk:
        return cls(chunk=Chunk.from_json(d["chunk"]), embedding=tuple(float(x) for x in d["embedding"]))


@dataclass(frozen=True)
class ItemError:
    """One item that failed a stage; recorded in the run ledger, never fatal to the batch.

    A warning (an ``error_class`` ending in ``Warning``: a value cleaned, an id repeated, a source
    given twice) is recorded the same way, but the item was stored (or read once) all the same.
    """

    stage: str  # fetch | extract | chunk | embed | store
    source: str
    error_class: str
    message: str

    def __post_init__(self) -> None:
        # a path that is not UTF-8 (its surrogate-escaped bytes) in a message must not fail the ledger's write
        for name in ("source", "message"):
            object.__setattr__(self, name, escape_undecodable(getattr(self, name)))

    @property
    def is_warning(self) -> bool:
        return self.error_class.endswith("Warning")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ItemError:
        return cls(**_known(cls, d))


@dataclass(frozen=True)
class Filter:
    """One metadata filter of a search, ``key <op> value`` (``kbctl.search.filters.parse_filter``)."""

    key: str
    op: str  # = != >= <= > < ~ in, exists (written "key") and !exists ("!key"), whose value is ""
    value: str | tuple[str, ...]

    def __str__(self) -> str:
        """The filter as it is written: it parses back as this filter (values quoted where needed)."""
        if self.op == "exists":
            return self.key
        if self.op == "!exists":
            return f"!{self.key}"
        if isinstance(self.value, tuple):
            return f"{self.key} in " + ",".join(quote_value(v, in_list=True) for v in self.value)
        return f"{self.key}{self.op}{quote_value(self.value)}"


def quote_value(value: str, in_list: bool = False) -> str:
    """``value`` as a filter writes it (``kbctl.search.filters``): as it is, or between double quotes
    with each ``"`` doubled when it could be read otherwise (empty; spaces at an end; a quote, or an
    operator's character, first; a comma, in an ``in`` list)."""
    plain = value and value == value.strip() and value[0] not in "\"'=<>!~" and not (in_list and "," in value)
    return value if plain else '"' + value.replace('"', '""') + '"'


def place(page: int | None, heading: Iterable[str] | None) -> str:
    """Where a passage is in its document, as citations and ``kbctl show`` write it: ``p. 3``,
    ``§ Guide › Setup`` (the heading path joined by ``›``), both, or the empty text. JSON output
    carries ``page`` and the ``heading_path`` list instead, never this text."""
    parts = [f"p. {page}"] if page else []
    path = [h for h in heading or () if h]
    if path:
        parts.append("§ " + " › ".join(path))
    return " ".join(parts)


@dataclass(frozen=True)
class Principal:
    """Who is searching: a user id and the groups they belong to (``kbctl.acl`` decides what they may view).

    A document is viewable by a principal when its ACL names ``public``, ``user:<user>`` or
    ``group:<g>`` for one of ``groups``; a search without a principal sees only ``public``.
    """

    user: str | None = None
    groups: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """A user or group that is not 1-256 characters without spaces or ':' is a ValueError."""
        groups = (self.groups,) if isinstance(self.groups, str) else tuple(self.groups)
        object.__setattr__(self, "groups", groups)
        for what, v in [("user", self.user), *(("group", g) for g in groups)]:
            if v is None and what == "user":
                continue
            if not isinstance(v, str) or not _PRINCIPAL_ID.fullmatch(v):
                raise ValueError(f"invalid {what} {v!r}: a {what} is 1-256 characters, no spaces or ':'")

    @classmethod
    def parse(cls, user: str | None, groups: list[str] | tuple[str, ...] = ()) -> Principal | None:
        """From a command line's ``--as user:u1042`` (or ``u1042``) and ``--group eng`` (or
        ``group:eng``); None when neither is given. An empty user (``user:``) is a ValueError: a
        principal named by mistake is not the anonymous one."""
        u = (user[5:] if user.startswith("user:") else user) if user is not None else None
        if u is None and not groups:
            return None
        return cls(u, tuple(g[6:] if g.startswith("group:") else g for g in groups))

    @property
    def keys(self) -> frozenset[str]:
        """The ACL entries that grant this principal a view: public, user:<user>, group:<g>…"""
        own = {f"user:{self.user}"} if self.user else set()
        return frozenset({"public", *own, *(f"group:{g}" for g in self.groups)})

    def __str__(self) -> str:
        return " ".join([f"user:{self.user}"] * bool(self.user) + [f"group:{g}" for g in self.groups]) or "anonymous"


_PRINCIPAL_ID = re.compile(r"[^\s:]{1,256}")


@dataclass(frozen=True)
class Hit:
    """One search result with everything needed to cite it."""

    rank: int
    score: float | None
    # the store's ids in this process; an agent server's opaque ids (``kbctl.ids``, strings such as
    # ``c_…``) in a result read from one (``kbctl.server.client``, a forwarded search)
    doc_id: int | str
    chunk_id: int | str
    source: str
    title: str
    text: str
    namespace: str
    metadata: Mapping[str, Any]
    citation: str
    lanes: Mapping[str, Mapping[str, float | int | None]] = field(default_factory=dict)
    # 0 to 1 for people: the score over the best score this query could get (``kbctl.search.engine``);
    # ``score`` stays the raw fused (or lane, or reranker) score.
    relevance: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def store_id(value: int | str) -> int:
    """A hit's id as the store knows it: a search made in this process. An opaque id (a result a
    server forwarded, ``kbctl.server.client``) names nothing here and is refused."""
    if isinstance(value, int):
        return value
    raise TypeError(f"an agent server's opaque id where a store id was expected: {value[:40]!r}")


@dataclass(frozen=True)
class SearchResult:
    """What one query returned, and how."""

    query: str
    namespaces: tuple[str, ...]
    mode: str
    strategy: str
    hits: tuple[Hit, ...]
    degraded: bool = False
    notes: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    # Hits the access gate withheld (a count only: nothing of them is in the result; ``kbctl.acl``).
    # 0 for a query with filters, whatever was withheld: that count would reveal their metadata.
    withheld: int = 0
    # An opaque mark per withheld hit (``kbctl.search.access.withheld_marks``): several searches'
    # marks count the hits they withheld together once each (``kb.research``). Never shown.
    withheld_marks: frozenset[bytes] = field(default=frozenset(), repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "namespace": self.namespaces[0] if len(self.namespaces) == 1 else list(self.namespaces),
            "mode": self.mode,
            "strategy": self.strategy,
            "degraded": self.degraded,
            "notes": list(self.notes),
            "details": dict(self.details),
            "withheld": self.withheld,
            "hits": [h.to_json() for h in self.hits],
        }


def _shifted(blocks: tuple[Block, ...], text: str) -> tuple[Block, ...]:
    """``blocks`` of ``text`` cleaned, their ``start`` moved back by what was removed before them."""
    import bisect

    gone = [i for i, ch in enumerate(text) if ch == "\x00" or "\ud800" <= ch <= "\udfff"]
    out = []
    for b in blocks:
        t, _ = clean_text(b.text)
        if t:
            out.append(Block(t, b.start - bisect.bisect_left(gone, b.start), b.heading_path, b.page, b.boxes))
    return tuple(out)


def _known(cls: type, d: Mapping[str, Any]) -> dict[str, Any]:
    """Keep only the keys that are fields of ``cls`` (validation happens in the constructor)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in d.items() if k in names}
