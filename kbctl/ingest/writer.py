"""The embed and store stages of a run, in batches: ``Item``s in, documents written.

``pipeline`` hands the stream of every run to ``consume``, with the ``IngestRun`` it serves, and so
to one ``Writer``, whether an item was extracted and chunked in this process (``kbctl ingest``) or
arrived embedded on stdin (``kbctl store``), so the two write the same rows and count them the same way: a chunk is ``embedded`` when the store held
no vector for its hash before the batch, ``reused`` when it did (a kept document's chunks are
reused: their stored vectors stay, and are not read back); vectors computed upstream only spare
the model the work. Vectors are found or made by ``embedding.Embedding`` (the embed cache,
then the model), and the namespace's other generations get theirs from ``embedding.DualWrites``.

Every document given is stored, or recorded as failed (stage ``store``) with its reason, and what
is stored never depends on the rest of the batch. A document that writing would store again
exactly as it is (``_unchanged``: its content hash, source, parent, ACL and chunks; a family only
whole) is not written: its row keeps its chunks, postings and vectors and takes the source's new
hash (``store.keep_documents``), in the batch's transaction. Besides:

- a document URI another source owns in the namespace is never taken over (``UriCollision``);
- a document URI produced twice in one run is kept from the first item, in stream order, and
  the later one recorded (``UriCollision``), in a plan as in a run;
- a document the database refuses fails alone (``store.write_documents`` isolates it);
- a document's notes (values cleaned, an id repeated) become warnings of the run;
- a source skipped because its bytes did not change gives its documents' rows the facts that can
  change without them (a touched file's ``mtime``: ``kbctl.types.REFRESHED_FACTS``), many sources
  in one statement (``Writer.refresh``, ``store.refresh_facts``); no chunk row is written.

Documents are written ``batch_documents`` at a time (each batch of whole items in its own
transaction), but the model reads the chunks of several batches in one call, about
``GROUP_BATCHES`` of its batches (``_embed_ahead``; the first write batch goes alone, so documents
land early): it sorts one call's texts by length before cutting its batches, so a bigger call pads
less; which batches, counts and events are the same. A group's call runs on a thread while the
group before it is written (``Writer.flush``), one call at a time, so the model does not sit idle
during the writes.

Memory stays bounded by three such groups (one filling, one being embedded, one being written),
not by the item: a ``LargeItem`` (one document read in windows, ``kbctl.extract.stream``, its
chunks made by the orchestrator's chunker as they are read) is
embedded and stored ``STREAM_CHUNKS`` chunks at a time inside its own transaction
(``store.write_document_stream``), and a large feed arrives as one ``Item``
per entry (``part``) closed by a ``SourceDone``: its entries are stored under a provisional source
hash that becomes the feed's once the last one is in, so a run killed halfway never makes the feed
look unchanged to the next one, which reads it again.
"""

from __future__ import annotations

import logging
import sys
import threading
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Sequence

from .. import telemetry
from ..acl import AclPolicy
from ..embed import GROUP_BATCHES
from ..store import (
    WriteStats,
    chunk_count_of,
    delete_documents,
    stored_owners,
    stored_uris_of_sources,
    write_documents,
)
from ..store.acl import mark_explicit
from ..store.documents import (
    keep_documents,
    refresh_facts,
    restamp_sources,
    set_source_hash,
    write_document_stream,
)
from ..store.stored import StoredVersion, stored_chunks, stored_versions
from ..textutil.analyze import get_analyzer
from ..types import Chunk, Document, EmbeddedChunk, ItemError
from .embedding import DualWrites, Embedding, store_held, store_lookup
from .items import PARTIAL, IngestRun, Item, LargeItem, Restamp, RunReport, SourceDone
from .steps import ChunkFailed, batches, item_error

log = logging.getLogger(__name__)

__all__ = ["Writer", "consume", "STREAM_CHUNKS"]

#: Chunks of a large document embedded and stored at a time.
STREAM_CHUNKS = 128


#: Sources skipped unchanged whose documents' rows take their facts in one statement, at most.
REFRESH_SOURCES = 512


def consume(conn, run: IngestRun, items: Iterable, report: RunReport, checkpoint: Any = None) -> None:
    """Embed and store a stream of ``Item``s, ``ItemError``s and ("unchanged", n, source URI) markers for
    ``run``, counting into ``report`` (the run's ``RunReport``, its ``run_id`` the ledger's row).
    ``checkpoint.checkpoint()`` (``interrupts.Interrupts``), when given, is called between the write
    batches of one flush: a safe point, as between items."""
    with _switch_interval(SWITCH_INTERVAL):
        _consume(conn, run, items, report, checkpoint)


#: Python's thread switch interval during a run (seconds; the default is 0.005). The model's thread
#: takes the GIL back after every torch operation, while other threads run Python (the producer's
#: chunking, the writer's analysis and COPY rows as the next group is embedded): at the default it
#: can wait 5 ms each time, and both cores idle meanwhile (docs/benchmarks.md, ingest).
SWITCH_INTERVAL = 0.0005


_SWITCH = {"runs": 0, "before": 0.0}  # runs under way in this process, and the interval before the first
_SWITCH_LOCK = threading.Lock()


@contextmanager
def _switch_interval(seconds: float) -> Iterator[None]:
    """``sys.setswitchinterval(seconds)`` (if shorter than the current one) while the block runs.
    Runs may overlap in one process (``kbctl serve``): the first to start sets it, the last to end
    puts back the interval from before the first."""
    with _SWITCH_LOCK:
        if _SWITCH["runs"] == 0:
            _SWITCH["before"] = sys.getswitchinterval()
            sys.setswitchinterval(min(_SWITCH["before"], seconds))
        _SWITCH["runs"] += 1
    try:
        yield
    finally:
        with _SWITCH_LOCK:
            _SWITCH["runs"] -= 1
            if _SWITCH["runs"] == 0:
                sys.setswitchinterval(_SWITCH["before"])


def _consume(conn, run: IngestRun, items: Iterable, report: RunReport, checkpoint: Any) -> None:
    writer = Writer(conn, run, report)
    writer.checkpoint = getattr(checkpoint, "checkpoint", None)
    emit = run.emit
    for item in items:
        if isinstance(item, ItemError) and item.is_warning:
            report.warnings.append(item)
            emit("warning", item.to_json())
        elif isinstance(item, ItemError):
            report.errors.append(item)
            report.add("documents", "failed", 1, item.source)
            emit("error", item.to_json())
        elif isinstance(item, tuple) and item[0] == "unchanged":  # ("unchanged", n, source URI[, hash, facts])
            report.add("documents", "unchanged", item[1], item[2])
            emit("unchanged", {"documents": item[1]})
            if len(item) == 5 and item[4]:
                writer.refresh(item[2], item[3], item[4])
        elif isinstance(item, Restamp):
            for uri, _, _, n in item.sources:
                report.add("documents", "unchanged", n, uri)
            emit("unchanged", {"documents": sum(n for *_, n in item.sources)})
            writer.restamp(item)
        elif isinstance(item, LargeItem):
            writer.add_large(item)
        elif isinstance(item, SourceDone):
            writer.done(item)
        else:
            writer.add(item)
    writer.flush()
    report.embedder = writer.embedding.backend or report.embedder


def _in_background(fn: Callable[[], Any]) -> Future[Any]:
    """``fn()`` on a daemon thread (an interrupted run does not wait for the model to finish)."""
    fut: Future[Any] = Future()

    def run() -> None:
        try:
            fut.set_result(fn())
        except BaseException as e:  # handed to whoever waits for the result
            fut.set_exception(e)

    threading.Thread(target=telemetry.bound(run), daemon=True, name="kbctl-embed").start()
    return fut


class Writer:
    """Embeds what the store does not have and writes documents in batches."""

    def __init__(self, conn, run: IngestRun, report: RunReport) -> None:
        self.conn, self.ns, self.profile, self.report, self.opts = conn, run.namespace, run.profile, report, run.options
        self.run_id, self.emit = report.run_id, run.emit
        self.pending: list[Item] = []
        self.refreshing: list[tuple[str, str, dict]] = []  # skipped sources whose rows take their facts
        self.pending_docs = self.pending_chunks = 0  # documents pending, and their chunks the model may read
        self.open_docs = 0  # documents of the last pending write batch, not yet closed
        self.flushed = False  # whether a batch was flushed yet
        self.checkpoint: Callable[[], None] | None = None  # a safe point for signals, between write batches
        # The model sorts the texts of one call by length before cutting batches, so it reads the
        # chunks of as many write batches as make GROUP_BATCHES of its batches in one call (the
        # chunks of 64 abstracts are ~140 texts: 1.19x the padded tokens of one sorted call).
        self.group = GROUP_BATCHES * max(1, int(self.profile.batch_size))
        self.ahead: dict = {}  # {chunk hash: vector} the model made for the write batches being flushed
        # A group whose vectors the model is making while the group before it is written: its write
        # batches, the model's call (a Future) and the hashes it embeds (``flush``).
        self.staged: tuple[list, Future | None, set[str]] | None = None
        self.analyzer = get_analyzer(self.profile.lexical.language, self.ns.analyzer)  # the version it holds
        # the active generation's vectors (and which exist, asked without reading them); items
        # embedded upstream prepare the profile only if one of their chunks comes without its vector
        self.embedding = Embedding(
            self.profile, store_lookup(conn, self.ns), store_held(conn, self.ns), prepare=run.items is not None
        )
        self.claimed: dict[str, str] = {}  # document URI -> the source that produced it first in this run
        self.acl = run.acl or AclPolicy()  # the namespace's access settings
        self.dual = DualWrites(conn, self.ns, self.profile)  # a shadow's (and the previous generation's) vectors

    def add(self, item: Item) -> None:
        """Documents are written ``batch_documents`` at a time (whole items); the pending batches are
        flushed, where a batch ends, once their chunks make a group for the model (or they need no
        model, or hold ``group`` documents); the first batch at once."""
        self.pending.append(item)
        self.pending_docs += len(item.docs)
        self.open_docs += len(item.docs)
        if item.vectors is None:  # vectors computed upstream (kbctl store) need no model
            self.pending_chunks += sum(len(cs) for _, cs in item.docs)
        if self.open_docs < self.opts.batch_documents:  # flushed only where a write batch ends
            return
        self.open_docs = 0
        # The first batch goes alone, so the store holds documents (and progress shows) early.
        first = not self.flushed
        if first or self.pending_chunks == 0 or self.pending_chunks >= self.group or self.pending_docs >= self.group:
            self.flush(stage=not first)

    def flush(self, stage: bool = False) -> None:
        """Embed what the pending items' chunks need in one call, then write them batch by batch.

        With ``stage`` (a full group, mid-stream), the group's model call starts on a thread and the
        group waits, staged, while the group staged before it is written: the model and the writes
        (the server's inserts, its HNSW index) run at once instead of in turn. The model still reads
        one group at a time (``Embedding`` lets one call run at once), so the next group's call
        starts when the staged one's ends, and the writes of that one run meanwhile. A group is written
        only once its vectors are made, whole items per write batch as always, so an interrupted run
        loses at most the staged group's embedding, never a half-written document. Without
        ``stage`` everything pending is written before it returns."""
        if self.pending:
            items, self.pending = self.pending, []
            self.pending_docs = self.pending_chunks = self.open_docs = 0
            self.flushed = True
            batches = _write_batches(items, self.opts.batch_documents)
            ahead, hashes = self._embed_ahead(items) if len(batches) > 1 and not self.opts.plan else (None, set())
            self._write_staged()
            self.staged = (batches, ahead, hashes)
        if not stage:
            self._write_staged()
            self._refresh()

    def _write_staged(self) -> None:
        """Write the staged group batch by batch, its model call finished first."""
        if self.staged is None:
            return
        batches, ahead, _ = self.staged
        self.staged = None
        try:
            self.ahead = ahead.result() if ahead is not None else {}
            for n, batch in enumerate(batches):
                if n and self.checkpoint is not None:
                    self.checkpoint()
                self._write_batch(batch)
        finally:
            self.ahead = {}

    def _embed_ahead(self, items: list[Item]) -> tuple[Future[dict] | None, set[str]]:
        """The model's vectors of every chunk of ``items`` that the store and upstream do not have,
        in one call on a thread, for ``_vectors`` to take batch by batch (counts are still made per
        batch). Chunks the staged group's call is making are left out: that group is written
        first, so the store has them by then."""
        chunks = {c.content_hash: c for i in items if i.vectors is None for _, cs in i.docs for c in cs}
        # which exist is all it needs: the batches read the vectors they write (a re-import of a
        # changed mbox read every kept message's vectors here to throw them away)
        have = self.embedding.held(chunks)
        staged = self.staged[2] if self.staged is not None else set()
        missing = {h: c.embed_text for h, c in chunks.items() if h not in have and h not in staged}
        if not missing:
            return None, set()
        return _in_background(lambda: self.embedding.embed(missing)), set(missing)

    def _write_batch(self, items: list[Item]) -> None:
        versions = stored_versions(self.conn, self.ns, [d.uri for i in items for d, _ in i.docs])
        stored = {u: (v.content_hash, v.source_uri) for u, v in versions.items()}
        docs, explicit = self._with_acls(self._admit(items, stored))
        kinds = {d.uri: _kind(stored.get(d.uri), d) for d, _, _ in docs}
        for d, _, _ in docs:  # the same text under another ACL of its own (an edited front matter acl:) is a
            # change of the document; one the namespace's rules give is the configuration's (kbctl.store.acl.reapply)
            v, own = versions.get(d.uri), d.uri in explicit
            if (
                kinds[d.uri] == "unchanged"
                and v is not None
                and (own or v.explicit)
                and (v.acl, v.explicit) != (d.acl, own)
            ):
                kinds[d.uri] = "changed"
        owners = {d.uri: i.source_uri for d, _, i in docs}
        all_chunks = [c for _, cs, _ in docs for c in cs]
        attrs = {"kbctl.items": len(items), "kbctl.documents": len(docs), "kbctl.chunks": len(all_chunks)}
        if self.opts.plan:
            with telemetry.span("kbctl.ingest.embed", attrs) as span:
                _, todo = self._vectors(all_chunks, items, [i.source_uri for _, cs, i in docs for _ in cs])
                span.set_attribute("kbctl.embedded", todo)
            self._count(kinds, owners)
            self._drop_stale(items)  # counted, not deleted
            return
        keep = _unchanged(self.conn, self.ns, docs, set(explicit), kinds, versions)
        sources = {d.uri: (i.source_uri, i.source_hash) for d, _, i in docs}
        written = [x for x in docs if x[0].uri not in keep]
        with telemetry.span("kbctl.ingest.embed", attrs) as span:
            # A kept document's chunks keep their stored vectors: counted reused, never read back (an
            # mbox re-imported after one appended message read 20,000 vectors for nothing).
            for _, cs, i in (x for x in docs if x[0].uri in keep):
                self.report.chunks["reused"] += len(cs)
                self.report.attribute(i.source_uri, "chunks", "reused", len(cs))
            cache, todo = self._vectors(
                [c for _, cs, _ in written for c in cs], items, [i.source_uri for _, cs, i in written for _ in cs]
            )
            span.set_attribute("kbctl.embedded", todo)
        extra = self.dual.vectors([c for _, cs, _ in written for c in cs])
        with (
            telemetry.span("kbctl.ingest.store", attrs),
            self.conn.transaction(),  # a document's ACL and whether it is its own land together
        ):
            kept = keep_documents(
                self.conn,
                self.ns,
                [
                    (versions[d.uri].id, sources[d.uri][1], d, versions[d.uri].explicit)
                    for d, _, _ in docs
                    if d.uri in keep
                ],
            )
            if kept != keep:  # a row written again since it was read: its family is written whole
                lost = _families(docs, keep - kept)
                kept -= lost
                written = [x for x in docs if x[0].uri not in kept]
                self._vectors_of_lost([(c, i.source_uri) for d, cs, i in written if d.uri in keep for c in cs], cache)
                extra = self.dual.vectors([c for _, cs, _ in written for c in cs])
            payload = [(d, [EmbeddedChunk(c, cache[c.content_hash]) for c in cs]) for d, cs, _ in written]
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
            mark_explicit(self.conn, self.ns, [u for u in explicit if u not in refused and u not in kept])
        for uri, error_class, reason in stats.failed:
            kinds.pop(uri, None)
            self._fail(sources[uri][0], error_class, f"{uri} was not stored: {reason}")
        self._count(kinds, owners)
        self._drop_stale(items)  # the kept documents are among what their items produced
        self.emit("stored", {"documents": stats.documents + len(kept), "chunks": len(all_chunks), "embedded": todo})

    def _vectors(self, chunks: list[Chunk], items: Iterable[Item] = (), owners: Sequence[str] = ()) -> tuple[dict, int]:
        """The vector of every chunk (from the store's cache, from upstream, else from the model), and
        how many were not in the store; counted into the report (to each chunk's source, ``owners``,
        when the report tallies them). In a plan, no vectors: which the store holds is asked, tokens counted."""
        hashes = [c.content_hash for c in chunks]
        if self.opts.plan:
            cache, held = {}, self.embedding.held(hashes)
        else:
            cache = self.embedding.cached(hashes)
            held = set(cache)
        todo = {c.content_hash: c for c in chunks if c.content_hash not in held}
        # one vector made per new hash; every other chunk reuses one (stored, or an identical chunk's)
        self.report.chunks["reused"] += len(chunks) - len(todo)
        self.report.chunks["embedded"] += len(todo)
        if self.report.by_source is not None:  # the first chunk of a new hash made its vector
            made: set[str] = set()
            for c, owner in zip(chunks, owners):
                new = c.content_hash in todo and c.content_hash not in made
                made.add(c.content_hash)
                self.report.attribute(owner, "chunks", "embedded" if new else "reused")
        if self.opts.plan:
            self.report.tokens_to_embed += sum(c.token_count for c in todo.values())
            return {}, len(todo)
        for i in items:  # vectors computed upstream (kbctl embed) need no model here
            cache.update((h, v) for h, v in (i.vectors or {}).items() if h in todo)
        for h in todo:  # made for this flush's batches in one call (_embed_ahead)
            if h not in cache and h in self.ahead:
                cache[h] = self.ahead[h]
        missing = {h: c.embed_text for h, c in todo.items() if h not in cache}
        if missing:
            cache.update(self.embedding.embed(missing))
        return cache, len(todo)

    def _vectors_of_lost(self, chunks: list[tuple[Chunk, str]], cache: dict) -> None:
        """Into ``cache``, the vectors of the chunks (with their sources) of documents that were to be
        kept but are written after all (a row written again since it was read): counted reused with
        the kept ones, they are read from the store's cache now, and a hash it does not hold is made
        by the model and counted embedded instead (its first chunk, as ``_vectors`` counts)."""
        need = {c.content_hash: c.embed_text for c, _ in chunks if c.content_hash not in cache}
        if not need:
            return
        cache.update(self.embedding.cached(need))
        missing = {h: t for h, t in need.items() if h not in cache}
        if not missing:
            return
        cache.update(self.embedding.embed(missing))
        for c, owner in chunks:
            if missing.pop(c.content_hash, None) is not None:
                self.report.add("chunks", "reused", -1, owner)
                self.report.add("chunks", "embedded", 1, owner)

    def add_large(self, item: LargeItem) -> None:
        """Embed and store one large document ``STREAM_CHUNKS`` chunks at a time, in its own
        transaction: it is stored whole, or (refused, or its chunker failed) not at all and recorded."""
        self.flush()
        d = item.head
        stored = stored_owners(self.conn, self.ns, [d.uri])
        why = self._collision(d.uri, item.source_uri, stored)
        if why:
            self._fail(item.source_uri, "UriCollision", why)
            return
        self.claimed[d.uri] = item.source_uri
        self._warn(item, d)
        ((head, own),) = self.acl.resolve([d])
        kind = _kind(stored.get(d.uri), head)
        try:
            stats = self._write_large(item, head, own)
        except ChunkFailed as e:
            self.claimed.pop(d.uri, None)
            error = item_error("chunk", item.source_uri, e.__cause__ or e)
            self.report.errors.append(error)
            self.report.add("documents", "failed", 1, item.source_uri)
            self.emit("error", error.to_json())
            return
        if stats is None:  # a plan
            self._count({d.uri: kind}, {d.uri: item.source_uri})
            return
        for uri, error_class, reason in stats.failed:
            self._fail(item.source_uri, error_class, f"{uri} was not stored: {reason}")
        if stats.failed:
            return
        self._count({d.uri: kind}, {d.uri: item.source_uri})
        self._drop_stale_of(item.source_uri, item.kind, {d.uri})
        self.emit("stored", {"documents": 1, "chunks": 0, "embedded": 0})  # its chunks were counted per batch

    def _write_large(self, item: LargeItem, head: Document, own: bool) -> WriteStats | None:
        """The large document's chunks, embedded and written batch by batch: the store's
        ``WriteStats``, or ``None`` in a plan (chunks counted, nothing written)."""
        if self.opts.plan:
            for b in batches(item.chunks, STREAM_CHUNKS):
                self._embedded(b, item.source_uri)
            return None
        with telemetry.span("kbctl.ingest.store", {"kbctl.documents": 1}), self.conn.transaction():
            with write_document_stream(
                self.conn,
                self.ns,
                head,
                item.chars,
                self.analyzer,
                title_weight=self.profile.lexical.title_weight,
                run_id=self.run_id,
                source=(item.source_uri, item.source_hash),
            ) as out:
                if out.stats is None:  # else refused before its first chunk
                    for b in batches(item.chunks, STREAM_CHUNKS):
                        out.write(self._embedded(b, item.source_uri), self.dual.vectors(b))
            stats = out.stats
            assert stats is not None  # set when the block ends: written, or refused
            if own and not stats.failed:
                mark_explicit(self.conn, self.ns, [head.uri])
        return stats

    def _embedded(self, chunks: list[Chunk], source: str) -> list[EmbeddedChunk]:
        with telemetry.span("kbctl.ingest.embed", {"kbctl.documents": 1, "kbctl.chunks": len(chunks)}) as span:
            cache, embedded = self._vectors(chunks, (), [source] * len(chunks))
            span.set_attribute("kbctl.embedded", embedded)
        if self.opts.plan:
            return []
        self.emit("stored", {"documents": 0, "chunks": len(chunks), "embedded": embedded})  # progress, per batch
        return [EmbeddedChunk(c, cache[c.content_hash]) for c in chunks]

    def restamp(self, item: Restamp) -> None:
        """Unchanged sources stored under their previous source hash take the current one (in a plan: nothing)."""
        if not self.opts.plan:
            restamp_sources(self.conn, self.ns, [(uri, old, new) for uri, old, new, _ in item.sources])

    def refresh(self, source_uri: str, source_hash: str, facts: dict) -> None:
        """A source skipped unchanged: its documents' rows take ``facts`` (a touched file's mtime),
        ``REFRESH_SOURCES`` sources in one statement (in a plan: nothing)."""
        if self.opts.plan:
            return
        self.refreshing.append((source_uri, source_hash, facts))
        if len(self.refreshing) >= REFRESH_SOURCES:
            self._refresh()

    def _refresh(self) -> None:
        sources, self.refreshing = self.refreshing, []
        refresh_facts(self.conn, self.ns, sources)

    def done(self, done: SourceDone) -> None:
        """A source given in parts is whole: what it no longer produces goes, and its documents take its hash."""
        self.flush()
        self._drop_stale_of(done.source_uri, done.kind, done.uris)
        if self.opts.plan:
            return
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
        resolved = self.acl.resolve([d for d, _, _ in docs])
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
        self.report.add("documents", "failed", 1, source)
        self.emit("error", e.to_json())

    def _count(self, kinds: dict[str, str], owners: dict[str, str]) -> None:
        """Count documents by kind (``kinds``: URI -> new/changed/unchanged), each to its source (``owners``)."""
        for uri, kind in kinds.items():
            self.report.add("documents", kind, 1, owners.get(uri))

    def _drop_stale(self, items: list[Item]) -> None:
        """Documents a re-read source no longer produces (a message gone from an mbox) leave the store.

        Feed entries are the exception: feeds drop old entries routinely, so those go only with --sync.
        """
        todo = []
        for i in items:
            if not i.part:  # a source in parts: when it is done
                feed = any(d.source_type == "feed" for d, _ in i.docs)  # a feed file read from disk too
                todo.append((i.source_uri, "feed" if feed else i.kind, {d.uri for d, _ in i.docs}))
        todo = [t for t in todo if t[1] != "feed" or self.opts.sync]
        # the batch's sources' stored documents in one statement, not one a source (5,000 files, 5,000 round trips)
        stored = stored_uris_of_sources(self.conn, self.ns, [s for s, _, _ in todo])
        for source_uri, kind, now in todo:
            self._drop_stale_of(source_uri, kind, now, stored.get(source_uri, []))

    def _drop_stale_of(
        self, source_uri: str, kind: str, now: set[str] | frozenset[str], stored: list[str] | None = None
    ) -> None:
        """Remove (in a plan: count) the stored documents of ``source_uri`` not among ``now``, and their
        chunks; ``stored``: the URIs of its stored documents, when the caller read them already."""
        if kind == "feed" and not self.opts.sync:
            return
        if stored is None:
            stored = stored_uris_of_sources(self.conn, self.ns, [source_uri]).get(source_uri, [])
        stale = [u for u in stored if u not in now]
        if not stale:
            return
        self.report.add("chunks", "deleted", chunk_count_of(self.conn, self.ns, stale), source_uri)
        removed = len(stale) if self.opts.plan else delete_documents(self.conn, self.ns, stale)
        self.report.add("documents", "removed", removed, source_uri)


def _write_batches(items: list[Item], documents: int) -> list[list[Item]]:
    """``items`` cut into write batches of whole items, each closed once it holds ``documents`` documents."""
    out: list[list[Item]] = [[]]
    n = 0
    for i in items:
        if n >= documents:
            out.append([])
            n = 0
        out[-1].append(i)
        n += len(i.docs)
    return out


def _kind(stored: tuple[str, str] | None, d: Document) -> str:
    """new, changed or unchanged: the document against its stored version (content hash, source)."""
    if stored is None:
        return "new"
    return "unchanged" if stored[0] == d.content_hash else "changed"


def _unchanged(
    conn,
    ns,
    docs: list[tuple[Document, tuple[Chunk, ...], Item]],
    explicit: set[str],
    kinds: dict[str, str],
    versions: dict[str, StoredVersion],
) -> set[str]:
    """The URIs of the documents a write would store again exactly as they are: unchanged (content
    hash), of the same source, parent and type, with the same effective ACL (and whether it is their
    own) and the same chunks as their stored version. A family (a message and its attachments) is
    left whole only if every member is, and the store holds no other child of any of them."""
    same = {
        d.uri
        for d, _, i in docs
        if kinds.get(d.uri) == "unchanged"
        and (v := versions.get(d.uri)) is not None
        and v.source_uri == i.source_uri
        and v.parent_uri == d.parent_uri
        and v.source_type == d.source_type
        and v.acl == d.acl
        and v.explicit == (d.uri in explicit)
    }
    if not same:
        return set()
    chunks = stored_chunks(conn, ns, [versions[u].id for u in same])
    same = {d.uri for d, cs, _ in docs if d.uri in same and chunks.get(versions[d.uri].id, []) == _signature(cs)}
    children: dict[str, set[str]] = {}
    for v in versions.values():
        if v.parent_uri is not None:
            children.setdefault(v.parent_uri, set()).add(v.uri)
    keep: set[str] = set()
    for family in _family_sets(docs):
        if family <= same and all(children.get(u, set()) <= family for u in family):
            keep |= family
    return keep


def _signature(chunks: Sequence[Chunk]) -> list[tuple]:
    """The chunks as ``store.stored.stored_chunks`` reads them back."""
    return [
        (
            c.content_hash,
            c.char_start,
            c.char_end,
            c.token_count,
            c.page,
            tuple(c.heading_path),
            [list(b) for b in c.boxes] if c.boxes else None,
        )
        for c in chunks
    ]


def _family_sets(docs: list[tuple[Document, tuple[Chunk, ...], Item]]) -> list[set[str]]:
    """The documents grouped by family: each with its parent, up to one that has none in ``docs``.
    A document whose parent is not among them (its family not whole here) is a family of its own
    holding its parent's URI too, so it is never left alone."""
    parent = {d.uri: d.parent_uri for d, _, _ in docs}
    groups: dict[str, set[str]] = {}
    for uri in parent:
        root, seen = uri, {uri}
        while (up := parent.get(root)) is not None:
            if up not in parent:  # its parent is not here: the family is not whole
                root = up
                break
            if up in seen:  # a loop of parents (never whole either)
                root = "\x00" + up
                break
            root = up
            seen.add(up)
        groups.setdefault(root, {root} if root not in parent else set()).add(uri)
    return list(groups.values())


def _families(docs: list[tuple[Document, tuple[Chunk, ...], Item]], uris: set[str]) -> set[str]:
    """Every member of the families of ``uris``."""
    return set().union(*(f for f in _family_sets(docs) if f & uris)) if uris else set()
