"""The embed and store stages of a run, in batches: ``Item``s in, documents written.

``pipeline`` hands the stream of every run to ``consume``, and so to one ``Writer``, whether an
item was extracted and chunked in this process (``kbctl ingest``) or arrived embedded on stdin
(``kbctl store``), so the two write the same rows and count them the same way: a chunk is ``embedded`` when the store held
no vector for its hash before the batch, ``reused`` when it did; vectors computed upstream only
spare the model the work.

Every document given is stored, or recorded as failed (stage ``store``) with its reason, and what
is stored never depends on the rest of the batch:

- a document URI another source owns in the namespace is never taken over (``UriCollision``);
- a document URI produced twice in one run is kept from the first item, in stream order, and
  the later one recorded (``UriCollision``), in a plan as in a run;
- a document the database refuses fails alone (``store.write_documents`` isolates it);
- a document's notes (values cleaned, an id repeated) become warnings of the run.

Memory stays bounded by the batch, not by the item: a ``LargeItem`` (one document read in windows,
``kbctl.extract.stream``) is chunked, embedded and stored ``STREAM_CHUNKS`` chunks at a time inside
its own transaction (``store.write_document_stream``), and a large feed arrives as one ``Item``
per entry (``part``) closed by a ``SourceDone``: its entries are stored under a provisional source
hash that becomes the feed's once the last one is in, so a run killed halfway never makes the feed
look unchanged to the next one, which reads it again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from ..acl import AclPolicy
from ..chunk import iter_chunks
from ..config import Profile
from ..embed import get_embedder, get_tokenizer
from ..errors import KbctlError
from ..store import Namespace, cached_vectors, delete_documents, stored_owners, stored_uris_of_source, write_documents
from ..store.acl import mark_explicit
from ..store.documents import set_source_hash, write_document_stream
from ..textutil.analyze import get_analyzer
from ..types import Chunk, Document, EmbeddedChunk, ItemError, LargeDocument
from .reembed import DualWrites

log = logging.getLogger(__name__)

__all__ = ["Item", "LargeItem", "SourceDone", "Writer", "consume", "PARTIAL", "STREAM_CHUNKS"]

#: Chunks of a large document embedded and stored at a time.
STREAM_CHUNKS = 128
#: The prefix of the provisional source hash of a source written in parts (``Item.part``).
PARTIAL = "partial:"


@dataclass(frozen=True, eq=False)
class Item:
    """One source after extract and chunk (and, from ``kbctl embed``, with vectors) on its way to store."""

    source_uri: str
    source_hash: str
    kind: str
    docs: tuple[tuple[Document, tuple[Chunk, ...]], ...]
    vectors: Any = None  # {chunk hash: vector} when embedded upstream
    part: bool = False  # one of several items of its source (a feed's entry); a SourceDone follows


@dataclass(frozen=True, eq=False)
class LargeItem:
    """One source that is one document too large to hold whole: chunked as it is stored."""

    source_uri: str
    source_hash: str
    kind: str
    document: LargeDocument


@dataclass(frozen=True, eq=False)
class SourceDone:
    """The end of a source given in parts: its documents (``uris``) were all handed over, stored
    under ``PARTIAL + source_hash``; they take ``source_hash`` now, and the source's other stored
    documents are stale (feeds: with --sync only)."""

    source_uri: str
    source_hash: str
    kind: str
    uris: frozenset[str]


def consume(conn, ns: Namespace, profile: Profile, items: Iterable, report, opts, run_id, emit, acl=None) -> None:
    """Embed and store a stream of ``Item``s, ``ItemError``s and ("unchanged", n) markers.

    ``report`` is the run's ``pipeline.RunReport`` (counted into), ``opts`` its ``pipeline.IngestOptions``
    (not imported here: ``pipeline`` imports this module).
    """
    writer = Writer(conn, ns, profile, report, opts, run_id, emit)
    writer.acl = acl or AclPolicy()
    for item in items:
        if isinstance(item, ItemError) and item.is_warning:
            report.warnings.append(item)
            emit("warning", item.to_json())
        elif isinstance(item, ItemError):
            report.errors.append(item)
            report.documents["failed"] += 1
            emit("error", item.to_json())
        elif isinstance(item, tuple) and item[0] == "unchanged":
            report.documents["unchanged"] += item[1]
            emit("unchanged", {"documents": item[1]})
        elif isinstance(item, LargeItem):
            writer.add_large(item)
        elif isinstance(item, SourceDone):
            writer.done(item)
        else:
            writer.add(item)
    writer.flush()


class Writer:
    """Embeds what the store does not have and writes documents in batches."""

    def __init__(
        self, conn, ns: Namespace, profile: Profile, report, opts, run_id, emit: Callable[[str, dict], None]
    ) -> None:
        self.conn, self.ns, self.profile, self.report, self.opts = conn, ns, profile, report, opts
        self.run_id, self.emit = run_id, emit
        self.pending: list[Item] = []
        self.analyzer = get_analyzer(profile.lexical.language)
        self._embedder: Any = None  # the Embedder, loaded when a chunk needs a vector
        self._tok: Any = None  # the profile's tokenizer, loaded for a large document
        self.claimed: dict[str, str] = {}  # document URI -> the source that produced it first in this run
        self.acl = AclPolicy()  # the namespace's access settings (consume sets them)
        self.dual = DualWrites(conn, ns, profile)  # a shadow's (and the previous generation's) vectors

    def add(self, item: Item) -> None:
        self.pending.append(item)
        if sum(len(i.docs) for i in self.pending) >= self.opts.batch_documents:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        items, self.pending = self.pending, []
        stored = stored_owners(self.conn, self.ns, [d.uri for i in items for d, _ in i.docs])
        docs, explicit = self._with_acls(self._admit(items, stored))
        kinds = {d.uri: _kind(stored.get(d.uri), d) for d, _, _ in docs}
        all_chunks = [c for _, cs, _ in docs for c in cs]
        cache, todo = self._vectors(all_chunks, items)
        if self.opts.plan:
            self._count(kinds)
            return
        payload = [(d, [EmbeddedChunk(c, cache[c.content_hash]) for c in cs]) for d, cs, _ in docs]
        extra = self.dual.vectors(all_chunks)
        sources = {d.uri: (i.source_uri, i.source_hash) for d, _, i in docs}
        with self.conn.transaction():  # a document's ACL and whether it is its own land together
            stats = write_documents(
                self.conn,
                self.ns,
                payload,
                self.analyzer,
                title_weight=self.profile.lexical.title_weight,
                run_id=self.run_id,
                sources=sources,
                extra=extra,
            )
            refused = {uri for uri, _, _ in stats.failed}
            mark_explicit(self.conn, self.ns, [u for u in explicit if u not in refused])
        for uri, error_class, reason in stats.failed:
            kinds.pop(uri, None)
            self._fail(sources[uri][0], error_class, f"{uri} was not stored: {reason}")
        self._count(kinds)
        self._drop_stale(items)
        self.emit("stored", {"documents": stats.documents, "chunks": len(all_chunks), "embedded": todo})

    def _vectors(self, chunks: list[Chunk], items: Iterable[Item] = ()) -> tuple[dict, int]:
        """The vector of every chunk (from the store's cache, from upstream, else from the model), and
        how many were not in the store; counted into the report. In a plan, no vectors: tokens counted."""
        cache = cached_vectors(self.conn, self.ns, [c.content_hash for c in chunks])
        todo = {c.content_hash: c for c in chunks if c.content_hash not in cache}
        self.report.chunks["reused"] += len(chunks) - sum(1 for c in chunks if c.content_hash in todo)
        self.report.chunks["embedded"] += len(todo)
        if self.opts.plan:
            self.report.tokens_to_embed += sum(c.token_count for c in todo.values())
            return {}, len(todo)
        for i in items:  # vectors computed upstream (kbctl embed) need no model here
            cache.update((h, v) for h, v in (i.vectors or {}).items() if h in todo)
        missing = [c for h, c in todo.items() if h not in cache]
        if missing:
            cache.update(self._embed(missing))
        return cache, len(todo)

    def add_large(self, item: LargeItem) -> None:
        """Chunk, embed and store one large document ``STREAM_CHUNKS`` chunks at a time, in its own
        transaction: it is stored whole, or (refused, or its chunker failed) not at all and recorded."""
        self.flush()
        d = item.document.head
        stored = stored_owners(self.conn, self.ns, [d.uri])
        why = self._collision(d.uri, item.source_uri, stored)
        if why:
            self._fail(item.source_uri, "UriCollision", why)
            return
        self.claimed[d.uri] = item.source_uri
        self._warn(item, d)
        ((head, own),) = self.acl.resolve([d])
        kind = _kind(stored.get(d.uri), head)
        if self._tok is None:
            self._tok = get_tokenizer(self.profile)
        chunks = _guarded(
            iter_chunks(LargeDocument(head, item.document.chars, item.document.blocks), self.profile, self._tok)
        )
        batches = (self._embedded(b) for b in _batches(chunks, STREAM_CHUNKS))
        try:
            if self.opts.plan:
                for _ in batches:
                    pass
                self._count({d.uri: kind})
                return
            with self.conn.transaction():
                stats = write_document_stream(
                    self.conn,
                    self.ns,
                    head,
                    item.document.chars,
                    batches,
                    self.analyzer,
                    title_weight=self.profile.lexical.title_weight,
                    run_id=self.run_id,
                    source=(item.source_uri, item.source_hash),
                    extra_of=lambda batch: self.dual.vectors([ec.chunk for ec in batch]),
                )
                if own and not stats.failed:
                    mark_explicit(self.conn, self.ns, [d.uri])
        except _ChunkFailed as e:
            self.claimed.pop(d.uri, None)
            error = _item_error("chunk", item.source_uri, e.__cause__ or e)
            self.report.errors.append(error)
            self.report.documents["failed"] += 1
            self.emit("error", error.to_json())
            return
        for uri, error_class, reason in stats.failed:
            self._fail(item.source_uri, error_class, f"{uri} was not stored: {reason}")
        if stats.failed:
            return
        self._count({d.uri: kind})
        self._drop_stale_of(item.source_uri, item.kind, {d.uri})
        self.emit("stored", {"documents": 1, "chunks": 0, "embedded": 0})  # its chunks were counted per batch

    def _embedded(self, chunks: list[Chunk]) -> list[EmbeddedChunk]:
        cache, embedded = self._vectors(chunks)
        if self.opts.plan:
            return []
        self.emit("stored", {"documents": 0, "chunks": len(chunks), "embedded": embedded})  # progress, per batch
        return [EmbeddedChunk(c, cache[c.content_hash]) for c in chunks]

    def done(self, done: SourceDone) -> None:
        """A source given in parts is whole: what it no longer produces goes, and its documents take its hash."""
        self.flush()
        if self.opts.plan:
            return
        self._drop_stale_of(done.source_uri, done.kind, done.uris)
        set_source_hash(self.conn, self.ns, done.source_uri, PARTIAL + done.source_hash, done.source_hash)

    def _admit(
        self, items: list[Item], stored: dict[str, tuple[str, str]]
    ) -> list[tuple[Document, tuple[Chunk, ...], Item]]:
        """The documents that may be written: not owned by another source, not produced earlier in
        this run; the others are recorded. Each admitted document's notes become warnings."""
        admitted = []
        for i in items:
            for d, cs in i.docs:
                why = self._collision(d.uri, i.source_uri, stored)
                if why:
                    self._fail(i.source_uri, "UriCollision", why)
                    continue
                self.claimed[d.uri] = i.source_uri
                admitted.append((d, cs, i))
                self._warn(i, d)
        return admitted

    def _with_acls(self, docs: list[tuple[Document, tuple[Chunk, ...], Item]]):
        """The documents with their effective ACLs (``kbctl.acl.AclPolicy.resolve``), and the URIs
        of those whose ACL is their own."""
        resolved = self.acl.resolve(d for d, _, _ in docs)
        out = [(d2, cs, i) for (d2, _), (_, cs, i) in zip(resolved, docs)]
        return out, [d.uri for d, own in resolved if own]

    def _collision(self, uri: str, source: str, stored: dict[str, tuple[str, str]]) -> str | None:
        """Why ``source`` may not write the document ``uri``, or ``None``."""
        first = self.claimed.get(uri)
        if first is not None:
            by = "the same source" if first == source else first
            return f"{uri} was produced earlier in this run by {by}; the first one is kept"
        owner = stored.get(uri, ("", source))[1]
        if owner != source:
            return (
                f"{uri} belongs to {owner} in this namespace; {source} may not replace it; if {owner} no longer"
                " produces it, ingest it again with --sync"
            )
        return None

    def _warn(self, item: Item | LargeItem, d: Document) -> None:
        """One warning per class of note a document carries (cleaned values, a repeated id)."""
        by_class: dict[str, list[str]] = {}
        for cls, message in d.notes:
            by_class.setdefault(cls, []).append(message)
        for cls, messages in by_class.items():
            w = ItemError("extract", item.source_uri, cls, f"{d.uri}: {'; '.join(messages)}")
            self.report.warnings.append(w)
            self.emit("warning", w.to_json())

    def _fail(self, source: str, error_class: str, message: str) -> None:
        e = ItemError("store", source, error_class, message)
        self.report.errors.append(e)
        self.report.documents["failed"] += 1
        self.emit("error", e.to_json())

    def _count(self, kinds: dict[str, str]) -> None:
        for kind in kinds.values():
            self.report.documents[kind] += 1

    def _drop_stale(self, items: list[Item]) -> None:
        """Documents a re-read source no longer produces (a message gone from an mbox) leave the store.

        Feed entries are the exception: feeds drop old entries routinely, so those go only with --sync.
        """
        for i in items:
            if not i.part:  # a source in parts: when it is done
                self._drop_stale_of(i.source_uri, i.kind, {d.uri for d, _ in i.docs})

    def _drop_stale_of(self, source_uri: str, kind: str, now: set[str] | frozenset[str]) -> None:
        if kind == "feed" and not self.opts.sync:
            return
        stale = [u for u, src in stored_uris_of_source(self.conn, self.ns, source_uri) if u not in now]
        if stale:
            self.report.documents["removed"] += delete_documents(self.conn, self.ns, stale)

    def _embed(self, chunks: list[Chunk]) -> dict:
        if self._embedder is None:
            self._embedder = get_embedder(self.profile)
        vectors = self._embedder.embed_documents([c.embed_text for c in chunks])
        return {c.content_hash: v for c, v in zip(chunks, vectors)}


class _ChunkFailed(Exception):
    """The chunker failed on a large document (its cause): the document is rolled back and recorded."""


def _guarded(chunks: Iterator[Chunk]) -> Iterator[Chunk]:
    """``chunks``, with what the chunker raises as ``_ChunkFailed`` (not taken for the database's refusal)."""
    while True:
        try:
            c = next(chunks)
        except StopIteration:
            return
        except Exception as e:
            raise _ChunkFailed() from e
        yield c


def _batches(items: Iterable, n: int) -> Iterator[list]:
    batch: list = []
    for x in items:
        batch.append(x)
        if len(batch) >= n:
            yield batch
            batch = []
    if batch:
        yield batch


def _item_error(stage: str, source: str, e: BaseException) -> ItemError:
    if isinstance(e, KbctlError):
        return ItemError(stage, source, type(e).__name__, e.message)
    log.error("%s failed on %s: %s", stage, source, e, exc_info=e)
    return ItemError(stage, source, type(e).__name__, str(e) or type(e).__name__)


def _kind(stored: tuple[str, str] | None, d: Document) -> str:
    """new, changed or unchanged: the document against its stored version (content hash, source)."""
    if stored is None:
        return "new"
    return "unchanged" if stored[0] == d.content_hash else "changed"
