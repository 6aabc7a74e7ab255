"""``ingest``: fetch → extract → chunk → embed → store → verify, as one stream.

This is the only module that knows the order of the stages. A producer thread fetches, extracts
and chunks sources into a bounded queue while the calling thread embeds and stores, so the model is
not idle waiting for input and memory does not grow with the corpus.

Incremental by construction:

- a source whose bytes (and the chunk settings) are unchanged is skipped before extraction;
- a changed source's documents are replaced, each in the same transaction as its chunks;
- chunk vectors are looked up by (profile, chunk hash) first: identical text is embedded once;
- with ``sync``, documents whose source is gone from the walked folders leave the store.

A run killed at any point leaves whole documents only; running again converges.
"""

from __future__ import annotations

import hashlib
import json
import logging
import queue
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Iterator, Sequence

from .chunk import chunk_document
from .config import Profile
from .embed import get_embedder, get_tokenizer
from .errors import KbctlError, LockTimeout
from .search.analyze import get_analyzer
from .store import Namespace, cached_vectors, stored_uris_of_source, delete_documents, source_versions, stored_hashes, stored_uris, write_documents
from .types import Chunk, Document, EmbeddedChunk, ItemError, Source

log = logging.getLogger(__name__)

__all__ = ["IngestOptions", "RunReport", "run_ingest", "consume", "Item", "source_hash", "content_sha", "Progress"]

Progress = Callable[[str, dict], None]


@dataclass(frozen=True)
class IngestOptions:
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    sync: bool = False
    plan: bool = False
    no_wait: bool = False
    follow_links: bool = False
    batch_documents: int = 64
    queue_size: int = 256


@dataclass
class RunReport:
    """What one ingest run did (or, with ``plan``, would do)."""

    run_id: int | None
    namespace: str
    documents: dict[str, int] = field(default_factory=lambda: dict(new=0, changed=0, unchanged=0, removed=0, failed=0))
    chunks: dict[str, int] = field(default_factory=lambda: dict(embedded=0, reused=0, deleted=0))
    tokens_to_embed: int = 0
    errors: list[ItemError] = field(default_factory=list)
    seconds: float = 0.0
    plan: bool = False
    verify: dict | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d = {
            "run_id": self.run_id,
            "namespace": self.namespace,
            "documents": dict(self.documents),
            "chunks": dict(self.chunks),
            "errors": [e.to_json() for e in self.errors],
            "seconds": round(self.seconds, 3),
        }
        if self.plan:
            d["plan"] = True
            d["tokens_to_embed"] = self.tokens_to_embed
        if self.verify is not None:
            d["verify"] = self.verify
        return d


def content_sha(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def source_hash(sha: str, profile: Profile) -> str:
    """Version of a source: the hash of its bytes and the settings that decide its chunks."""
    settings = json.dumps([dict(profile.chunk), profile.max_tokens, profile.fingerprint], sort_keys=True)
    return hashlib.sha256(f"{sha}\x00{settings}".encode()).hexdigest()


@dataclass(frozen=True, eq=False)
class Item:
    """One source after extract and chunk (and, from ``kbctl embed``, with vectors) on its way to store."""

    source_uri: str
    source_hash: str
    kind: str
    docs: tuple[tuple[Document, tuple[Chunk, ...]], ...]
    vectors: Any = None  # {chunk hash: vector} when embedded upstream


def run_ingest(
    conn,
    ns: Namespace,
    profile: Profile,
    sources: Iterable[Source | ItemError],
    opts: IngestOptions,
    *,
    lookup_conn,
    covered: Callable[[str], bool] | None = None,
    run_id: int | None = None,
    progress: Progress | None = None,
) -> RunReport:
    """Ingest a stream of sources into ``ns`` (already locked by the caller when writing).

    ``lookup_conn`` is a second connection, used only by the producer thread to look up stored
    source versions (a psycopg connection must not be used by two threads at once).
    """
    t0 = time.perf_counter()
    emit = progress or (lambda event, data: None)
    report = RunReport(run_id=run_id, namespace=ns.name, plan=opts.plan)
    seen_sources: set[str] = set()
    q: queue.Queue = queue.Queue(maxsize=opts.queue_size)
    producer = threading.Thread(
        target=_produce, args=(lookup_conn, ns, profile, sources, q, seen_sources, emit), daemon=True, name="kbctl-extract"
    )
    producer.start()
    consume(conn, ns, profile, _drain(q), report, opts, run_id, emit)
    producer.join()
    if opts.sync and covered is not None:
        _sync(conn, ns, report, seen_sources, covered, opts.plan, emit)
    report.seconds = time.perf_counter() - t0
    return report


def _drain(q: queue.Queue) -> Iterator:
    while True:
        item = q.get()
        if item is None:
            return
        if isinstance(item, BaseException):
            raise item
        yield item


def consume(conn, ns: Namespace, profile: Profile, items: Iterable, report: RunReport, opts: IngestOptions, run_id, emit) -> None:
    """Embed and store a stream of ``Item``s, ``ItemError``s and ("unchanged", n) markers."""
    writer = _Writer(conn, ns, profile, report, opts, run_id, emit)
    for item in items:
        if isinstance(item, ItemError):
            report.errors.append(item)
            report.documents["failed"] += 1
            emit("error", item.to_json())
        elif isinstance(item, tuple) and item[0] == "unchanged":
            report.documents["unchanged"] += item[1]
            emit("unchanged", {"documents": item[1]})
        else:
            writer.add(item)
    writer.flush()


def _produce(conn, ns, profile, sources, q: queue.Queue, seen: set[str], emit) -> None:
    """Fetch, extract and chunk in a background thread; put items on the queue, then None."""
    try:
        from .extract import extract

        tok = get_tokenizer(profile)
        for batch in _batches(sources, 32):
            for out in _extract_batch(conn, batch, ns, profile, seen, extract, tok, emit):
                q.put(out)
    except BaseException as e:  # hand anything unexpected to the consumer thread
        q.put(e)
    finally:
        q.put(None)


def _extract_batch(conn, batch, ns, profile, seen, extract, tok, emit) -> Iterator:
    hashes = {s.uri: source_hash(content_sha(s.content), profile) for s in batch if isinstance(s, Source)}
    known = source_versions(conn, ns, list(hashes))
    for s in batch:
        if isinstance(s, ItemError):
            seen.add(s.source)  # an unreadable source is not a removed one
            yield s
            continue
        seen.add(s.uri)
        h = hashes[s.uri]
        if s.uri in known and known[s.uri][0] == h:
            seen.update(known[s.uri][1])
            yield ("unchanged", len(known[s.uri][1]))
            continue
        try:
            docs = extract(s)
        except KbctlError as e:
            yield ItemError("extract", s.uri, type(e).__name__, e.message)
            continue
        except Exception as e:  # an extractor bug must not stop the batch
            log.exception("extractor failed on %s", s.uri)
            yield ItemError("extract", s.uri, type(e).__name__, str(e) or type(e).__name__)
            continue
        try:
            chunked = tuple((d, tuple(chunk_document(d, profile, tok))) for d in docs)
        except Exception as e:
            yield ItemError("chunk", s.uri, type(e).__name__, str(e))
            continue
        emit("extracted", {"source": s.uri, "documents": len(docs)})
        yield Item(s.uri, h, s.kind, chunked)


def _batches(items: Iterable, n: int) -> Iterator[list]:
    batch: list = []
    for x in items:
        batch.append(x)
        if len(batch) >= n:
            yield batch
            batch = []
    if batch:
        yield batch


class _Writer:
    """Embeds what the cache does not have and writes documents in batches."""

    def __init__(self, conn, ns: Namespace, profile: Profile, report: RunReport, opts: IngestOptions, run_id, emit) -> None:
        self.conn, self.ns, self.profile, self.report, self.opts = conn, ns, profile, report, opts
        self.run_id, self.emit = run_id, emit
        self.pending: list[Item] = []
        self.analyzer = get_analyzer(str(profile.lexical["language"]))
        self._embedder = None

    def add(self, item: Item) -> None:
        self.pending.append(item)
        if sum(len(i.docs) for i in self.pending) >= self.opts.batch_documents:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        items, self.pending = self.pending, []
        docs = [(d, c, i) for i in items for d, c in i.docs]
        old = stored_hashes(self.conn, self.ns, [d.uri for d, _, _ in docs])
        for d, _, _ in docs:
            key = "unchanged" if old.get(d.uri) == d.content_hash else ("changed" if d.uri in old else "new")
            self.report.documents[key] += 1
        all_chunks = [c for _, cs, _ in docs for c in cs]
        cache = cached_vectors(self.conn, self.ns, [c.content_hash for c in all_chunks])
        for i in items:  # vectors computed upstream (kbctl embed) count as embedded there
            for h, v in (i.vectors or {}).items():
                cache.setdefault(h, v)
        todo = {c.content_hash: c for c in all_chunks if c.content_hash not in cache}
        self.report.chunks["reused"] += len(all_chunks) - sum(1 for c in all_chunks if c.content_hash in todo)
        if self.opts.plan:
            self.report.chunks["embedded"] += len(todo)
            self.report.tokens_to_embed += sum(c.token_count for c in todo.values())
            return
        if todo:
            vecs = self._embed(list(todo.values()))
            cache.update(vecs)
            self.report.chunks["embedded"] += len(todo)
        payload = [(d, [EmbeddedChunk(c, cache[c.content_hash]) for c in cs]) for d, cs, _ in docs]
        sources = {d.uri: (i.source_uri, i.source_hash) for d, _, i in docs}
        write_documents(
            self.conn, self.ns, payload, self.analyzer,
            title_weight=float(self.profile.lexical["title_weight"]), run_id=self.run_id, sources=sources,
        )
        self._drop_stale(items)
        self.emit("stored", {"documents": len(payload), "chunks": len(all_chunks), "embedded": len(todo)})

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


def _sync(conn, ns: Namespace, report: RunReport, seen: set[str], covered: Callable[[str], bool], plan: bool, emit) -> None:
    """Remove documents whose source lies under the walked targets but was not seen this run."""
    gone = [uri for uri, src in stored_uris(conn, ns).items() if covered(src or uri) and (src or uri) not in seen]
    if not gone:
        return
    n_chunks = conn.execute(
        "SELECT count(*) FROM kbctl.chunks c JOIN kbctl.documents d ON d.namespace_id = c.namespace_id"
        " AND d.id = c.document_id WHERE d.namespace_id = %s AND d.uri = ANY(%s)",
        (ns.id, gone),
    ).fetchone()[0]
    report.documents["removed"] += len(gone)
    report.chunks["deleted"] += int(n_chunks)
    if not plan:
        delete_documents(conn, ns, gone)
        emit("removed", {"documents": len(gone)})
