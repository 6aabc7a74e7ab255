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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from .acl import AclPolicy
from .config import Profile
from .embed import get_embedder
from .generations import DualWrites
from .store import Namespace, cached_vectors, delete_documents, stored_owners, stored_uris_of_source, write_documents
from .store.acl import mark_explicit
from .textutil.analyze import get_analyzer
from .types import Chunk, Document, EmbeddedChunk, ItemError

__all__ = ["Item", "Writer", "consume"]


@dataclass(frozen=True, eq=False)
class Item:
    """One source after extract and chunk (and, from ``kbctl embed``, with vectors) on its way to store."""

    source_uri: str
    source_hash: str
    kind: str
    docs: tuple[tuple[Document, tuple[Chunk, ...]], ...]
    vectors: Any = None  # {chunk hash: vector} when embedded upstream


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
        cache = cached_vectors(self.conn, self.ns, [c.content_hash for c in all_chunks])
        todo = {c.content_hash: c for c in all_chunks if c.content_hash not in cache}
        self.report.chunks["reused"] += len(all_chunks) - sum(1 for c in all_chunks if c.content_hash in todo)
        self.report.chunks["embedded"] += len(todo)
        if self.opts.plan:
            self.report.tokens_to_embed += sum(c.token_count for c in todo.values())
            self._count(kinds)
            return
        for i in items:  # vectors computed upstream (kbctl embed) need no model here
            cache.update((h, v) for h, v in (i.vectors or {}).items() if h in todo)
        missing = [c for h, c in todo.items() if h not in cache]
        if missing:
            cache.update(self._embed(missing))
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
        self.emit("stored", {"documents": stats.documents, "chunks": len(all_chunks), "embedded": len(todo)})

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

    def _warn(self, item: Item, d: Document) -> None:
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
            if i.kind == "feed" and not self.opts.sync:
                continue
            now = {d.uri for d, _ in i.docs}
            stale = [u for u, src in stored_uris_of_source(self.conn, self.ns, i.source_uri) if u not in now]
            if stale:
                self.report.documents["removed"] += delete_documents(self.conn, self.ns, stale)

    def _embed(self, chunks: list[Chunk]) -> dict:
        if self._embedder is None:
            self._embedder = get_embedder(self.profile)
        vectors = self._embedder.embed_documents([c.embed_text for c in chunks])
        return {c.content_hash: v for c, v in zip(chunks, vectors)}


def _kind(stored: tuple[str, str] | None, d: Document) -> str:
    """new, changed or unchanged: the document against its stored version (content hash, source)."""
    if stored is None:
        return "new"
    return "unchanged" if stored[0] == d.content_hash else "changed"
