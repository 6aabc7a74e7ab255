"""The producer side of a run: fetch, extract and chunk in a background thread, into a bounded queue.

``start`` runs ``_produce`` in a thread while the calling thread embeds and stores what it hands
over (``writer.consume``), so the model is not idle waiting for input and memory does not grow
with the corpus. Each source becomes one ``Item`` (its documents and their chunks), an
``ItemError``, an ("unchanged", n, source URI, source hash, facts) marker (its version, which counts
its extractor's revision, is stored already; the facts that can change without its bytes, for its
documents' rows: ``kbctl.types.REFRESHED_FACTS``), a ``Restamp``
of a batch's sources stored under their hash of an earlier revision of the chunker whose
chunks it does not move (and whose extractor did not move) (``steps.previous_source_hash``; those it moves are read again), or, when it is large:
one ``LargeItem`` for a long text (its chunks made by ``steps.chunk_large`` as the writer reads
them), or one ``Item`` per entry of a large feed and then a ``SourceDone``.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from typing import Iterable, Iterator

from .. import telemetry
from ..chunk import check_length, moved_since
from ..config import Profile
from ..embed import get_tokenizer
from ..errors import KbctlError
from ..extract import source_revision
from ..store import source_versions, sources_holding
from ..types import REFRESHED_FACTS, Document, ItemError, LargeDocument, Source, content_hash
from .items import PARTIAL, IngestRun, Item, LargeItem, Restamp, SourceDone
from .steps import (
    batches,
    chunk_large,
    chunk_source,
    extract_source,
    item_error,
    once,
    previous_source_hash,
    source_hash,
)

__all__ = ["start", "BATCH_BYTES", "LARGE_IN_FLIGHT"]

#: Sources looked up and extracted together by the producer (one ``kbctl.ingest.extract`` span).
BATCH_SOURCES = 32

#: Bytes of sources looked up and extracted together by the producer (with at most ``BATCH_SOURCES``).
BATCH_BYTES = 64 << 20
#: Large documents (``LargeItem``) handed to the consumer and not yet stored, at most.
LARGE_IN_FLIGHT = 2
# How often ``Producer.halt`` cancels the thread's statement again while it waits for the thread.
_HALT_POLL = 0.25


def start(lookup, run: IngestRun, sources: Iterable[Source | ItemError]) -> tuple[Iterator, set[str], Producer]:
    """Start producing ``run``'s items from ``sources`` (``lookup``: the thread's own connection, for
    the stored source versions): the items to consume, the source URIs seen (filled as it goes, for
    --sync), and the thread, to join once the items are consumed."""
    seen: set[str] = set()
    q: queue.Queue = queue.Queue(maxsize=run.options.queue_size)
    large = threading.BoundedSemaphore(LARGE_IN_FLIGHT)
    stop = threading.Event()
    thread = Producer(
        stop,
        lookup,
        target=telemetry.bound(_produce),  # its spans are the run's children
        args=(lookup, run.namespace, run.profile, sources, q, seen, run.emit, large, run.extract_options, stop),
        daemon=True,
        name="kbctl-extract",
    )
    thread.start()
    return _drain(q, large), seen, thread


class Producer(threading.Thread):
    """The producer thread, which a consumer that stops early (Ctrl-C, an error) halts before the
    thread's connection is closed: closing a connection another thread is running a statement on
    crashes libpq (a segmentation fault, not an exception)."""

    def __init__(self, stop: threading.Event, lookup, **kwargs) -> None:
        super().__init__(**kwargs)
        self.stop, self.lookup = stop, lookup

    def halt(self, timeout: float = 30.0) -> bool:
        """Stop producing: no more items, the statement running on its connection cancelled, the
        thread waited for. False when it did not end within ``timeout`` (its connection must then
        be left open)."""
        self.stop.set()
        cancel = getattr(self.lookup, "cancel_safe", None)
        deadline = time.monotonic() + timeout
        while self.is_alive() and time.monotonic() < deadline:
            # again while the thread lives: a cancel that reaches the server before the thread's
            # statement does is lost (the statement then ran to its end: 20 s in a test under load)
            if cancel is not None:
                with contextlib.suppress(Exception):  # nothing running, or the server gone
                    cancel(timeout=2.0)
            self.join(min(_HALT_POLL, max(0.0, deadline - time.monotonic())))
        return not self.is_alive()


def _drain(q: queue.Queue, large: threading.BoundedSemaphore | None = None) -> Iterator:
    while True:
        item = q.get()
        if item is None:
            return
        if isinstance(item, BaseException):
            raise item
        yield item
        if large is not None and isinstance(item, LargeItem):  # stored: the producer may hand over another
            large.release()


def _produce(
    conn, ns, profile, sources, q: queue.Queue, seen: set[str], emit, large=None, options=None, stop=None
) -> None:
    """Fetch, extract and chunk in a background thread; put items on the queue, then None.

    Sources are looked up ``BATCH_SOURCES`` (32) at a time, or fewer when their bytes reach ``BATCH_BYTES``; at most
    ``LARGE_IN_FLIGHT`` large documents (each holding its source's bytes until it is stored) wait
    for the consumer at once, so many large files do not all sit in memory together.
    """
    stop = stop or threading.Event()
    try:
        tok = get_tokenizer(profile)
        for batch in _fetched(batches(once(sources), BATCH_SOURCES, BATCH_BYTES)):
            with telemetry.span("kbctl.ingest.extract", {"kbctl.items": len(batch)}) as span:
                counts = dict.fromkeys(("documents", "chunks", "unchanged", "failed"), 0)
                for out in _extract_batch(conn, batch, ns, profile, seen, tok, emit, options):
                    if large is not None and isinstance(out, LargeItem):
                        while not large.acquire(timeout=0.1):
                            if stop.is_set():
                                return
                    _count(counts, out)
                    if not _put(q, out, stop):
                        return
                span.set_attributes({f"kbctl.{k}": v for k, v in counts.items()})
            if stop.is_set():
                return
    except BaseException as e:  # hand anything unexpected to the consumer thread
        if not stop.is_set():
            _put(q, e, stop)
    finally:
        _put(q, None, stop)


def _put(q: queue.Queue, item, stop: threading.Event) -> bool:
    """Put ``item`` on the queue, unless the consumer stopped meanwhile (False: it reads no more)."""
    while not stop.is_set():
        try:
            q.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False


def _fetched(batches: Iterable[list]) -> Iterator[list]:
    """``batches``, each read from the fetch stage in a ``kbctl.ingest.fetch`` span."""
    it = iter(batches)
    while True:
        with telemetry.span("kbctl.ingest.fetch") as span:
            batch = next(it, None)
            ok = [s for s in batch or () if isinstance(s, Source)]
            span.set_attributes({"kbctl.items": len(batch or ()), "kbctl.bytes": sum(len(s.content) for s in ok)})
        if batch is None:
            return
        yield batch


def _count(counts: dict[str, int], out) -> None:
    """What one item of the producer holds, counted into its batch's span."""
    if isinstance(out, Item):
        counts["documents"] += len(out.docs)
        counts["chunks"] += sum(len(cs) for _, cs in out.docs)
    elif isinstance(out, LargeItem):
        counts["documents"] += 1
    elif isinstance(out, ItemError):
        counts["failed"] += 0 if out.is_warning else 1
    elif isinstance(out, tuple):
        counts["unchanged"] += out[1]
    elif isinstance(out, Restamp):
        counts["unchanged"] += sum(n for *_, n in out.sources)


def _extract_batch(conn, batch, ns, profile, seen, tok, emit, options=None) -> Iterator:
    shas = {s.uri: content_hash(s.content) for s in batch if isinstance(s, Source)}
    extractors = {s.uri: source_revision(s, options) for s in batch if isinstance(s, Source)}
    hashes = {uri: source_hash(sha, profile, extractors[uri]) for uri, sha in shas.items()}
    known = source_versions(conn, ns, list(hashes))
    previous = _restampable(conn, ns, profile, shas, extractors, hashes, known)
    if previous:
        yield Restamp(tuple((uri, h, hashes[uri], len(known[uri][1])) for uri, h in previous.items()))
    for s in batch:
        if isinstance(s, ItemError):
            seen.add(s.source)  # an unreadable source is not a removed one
            yield s
            continue
        seen.add(s.uri)
        h = hashes[s.uri]
        if s.uri in known and (known[s.uri][0] == h or s.uri in previous):
            seen.update(known[s.uri][1])
            if s.uri in previous:
                continue  # counted with its Restamp
            yield ("unchanged", len(known[s.uri][1]), s.uri, h, _refreshed(s))
            continue
        large = _extract_large(s, h, profile, tok, emit)
        if large is not None:
            yield from large
            continue
        docs = extract_source(s, options)
        if isinstance(docs, ItemError):
            yield docs
            continue
        chunked = chunk_source(s.uri, docs, profile, tok)
        if isinstance(chunked, ItemError):
            yield chunked
            continue
        emit("extracted", {"source": s.uri, "documents": len(docs)})
        yield Item(s.uri, h, s.kind, chunked)


def _refreshed(s: Source) -> dict:
    """The facts of a source skipped unchanged that its documents' rows take (``REFRESHED_FACTS``)."""
    return {k: v for k, v in s.metadata.items() if k in REFRESHED_FACTS}


def _restampable(conn, ns, profile: Profile, shas: dict, extractors: dict, hashes: dict, known: dict) -> dict[str, str]:
    """The sources stored under their hash of an earlier revision of the chunker
    (``steps.previous_source_hash``) none of whose chunks holds what it now cuts otherwise than
    that revision did (``kbctl.chunk.moved_since`` the profile: "" where nothing moved), so their chunks would come out alike: {source URI:
    that hash}. The others are read and chunked again (what comes out alike is kept, chunk ids and all),
    among them every source stored before its extractor's revision moved (``extractors``: each
    source's now, ``kbctl.extract.source_revision``): its text may differ, whatever its chunks hold."""
    older: dict[str, dict[str, str]] = {}  # the pattern that may move them -> {uri: their hash}
    for uri, (h, _) in known.items():
        if h == hashes[uri]:
            continue
        for revision, moved_by in moved_since(profile).items():
            if h == previous_source_hash(shas[uri], profile, revision, extractors[uri]):
                older.setdefault(moved_by, {})[uri] = h
                break
    kept: dict[str, str] = {}
    for pattern, sources in older.items():  # one statement per earlier revision met in the batch
        moved = sources_holding(conn, ns, list(sources), pattern) if pattern else set()
        kept.update({uri: h for uri, h in sources.items() if uri not in moved})
    return kept


def _extract_large(s: Source, h: str, profile: Profile, tok, emit) -> Iterator | None:
    """The items of a large source, or ``None`` for the others: one ``LargeItem`` for a long text
    (its chunks made as the writer stores them), or one ``Item`` per entry of a large feed then a ``SourceDone``."""
    from ..extract import extract_large

    try:
        large = extract_large(s, text=profile.chunk.strategy != "semantic")
    except Exception as e:
        return iter([item_error("extract", s.uri, e)])
    if large is None:
        return None
    if isinstance(large, LargeDocument):
        return iter([_large_item(s, h, large, profile, tok, emit)])
    return _entries(s, h, large, profile, tok, emit)


def _large_item(s: Source, h: str, large: LargeDocument, profile: Profile, tok, emit) -> LargeItem | ItemError:
    from ..acl import lift_acl
    from ..extract.stream import with_hash

    try:
        check_length(large.chars, profile.chunk.max_document_chars)
    except KbctlError as e:
        return item_error("chunk", s.uri, e)
    try:
        large = with_hash(large, lift_acl(large.head))  # a second pass over the bytes: the content hash
    except Exception as e:
        return item_error("extract", s.uri, e)
    emit("extracted", {"source": s.uri, "documents": 1})
    return LargeItem(s.uri, h, s.kind, large.head, large.chars, chunk_large(large, profile, tok))


def _entries(s: Source, h: str, docs: Iterator[Document], profile: Profile, tok, emit) -> Iterator:
    """A large feed's entries as one item each, as they are parsed, then the ``SourceDone`` that
    marks the feed whole. The entries are stored under a provisional source hash until then."""
    from ..acl import lift_acl

    uris: set[str] = set()
    try:
        for d in docs:
            d = lift_acl(d)
            uris.add(d.uri)
            chunked = chunk_source(s.uri, [d], profile, tok)
            yield chunked if isinstance(chunked, ItemError) else Item(s.uri, PARTIAL + h, s.kind, chunked, part=True)
    except Exception as e:  # the entries given so far stay provisional: the next run reads the feed again
        yield item_error("extract", s.uri, e)
        return
    emit("extracted", {"source": s.uri, "documents": len(uris)})
    yield SourceDone(s.uri, h, "feed", frozenset(uris))  # a feed file read from disk keeps its entries until --sync too
