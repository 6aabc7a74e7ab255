"""``ingest``: fetch → extract → chunk → embed → store → verify, under the namespace lock and the run ledger.

This is the only module that knows the order of the stages, and the only one that opens and closes
runs in the ledger. Every way in is an ``IngestRun`` handed to ``run``; only where the stream
enters differs::

    caller                                      IngestRun           stages
    KnowledgeBase.ingest, kbctl ingest          targets             fetch → extract → … → verify
    KnowledgeBase.ingest_records                sources (records)   extract → chunk → … → verify
    KnowledgeBase.store, kbctl store (NDJSON)   items (embedded)    store → verify

``run`` takes the namespace lock (not for a plan), opens a run row, streams the stages, records
the items that failed, verifies, and closes the row ``ok``, ``partial`` (items failed) or
``failed_verify`` (verify did not hold: the command exits 3), with verify's report in its counts. A
run that ends in an exception is closed ``failed``; one stopped by Ctrl-C or SIGTERM (at a safe point: ``interrupts``),
``interrupted``; one killed outright (SIGKILL) stays ``running`` until the next run of its
namespace starts and marks it ``interrupted``. The NDJSON commands ``kbctl extract`` and
``kbctl chunk`` call ``extract_source`` and ``chunk_source``, so an item fails the same way, with
the same ``ItemError``, on every path.

A producer thread fetches, extracts and chunks sources into a bounded queue while the calling
thread embeds and stores (``writer.Writer``), so the model is not idle waiting for input and memory
does not grow with the corpus.

Incremental by construction:

- a source whose bytes (and the chunk settings) are unchanged is skipped before extraction;
- a changed source's documents are replaced, each in the same transaction as its chunks;
- chunk vectors are looked up by (profile, chunk hash) first: identical text is embedded once;
- with ``sync``, documents whose source is gone from the walked folders leave the store.

A run killed at any point leaves whole documents only; running again converges.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Iterator, Sequence

from .chunk import check_length, chunk_document
from .config import Profile
from .embed import get_tokenizer
from .errors import KbctlError, UsageError
from .interrupts import Interrupts
from .store import Namespace, chunk_count_of, delete_documents, source_versions, stored_uris
from .store import runs as runs_store
from .types import Document, ItemError, LargeDocument, Source, content_hash
from .writer import PARTIAL, Item, LargeItem, SourceDone, consume

log = logging.getLogger(__name__)

__all__ = [
    "STAGES",
    "IngestOptions",
    "IngestRun",
    "RunReport",
    "run",
    "consume",
    "Item",
    "extract_source",
    "chunk_source",
    "source_hash",
    "Progress",
]

STAGES = ("fetch", "extract", "chunk", "embed", "store", "verify")
#: Bytes of sources looked up and extracted together by the producer (with at most 32 sources).
BATCH_BYTES = 64 << 20
#: Large documents (``LargeItem``) handed to the consumer and not yet stored, at most.
LARGE_IN_FLIGHT = 2

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


@dataclass(frozen=True, eq=False)
class IngestRun:
    """One run as asked for: into which namespace, with which profile, from where, and how.

    The stream enters at fetch with ``targets``, at extract with ``sources`` (records made into
    ``Source``s), or at store with ``items`` (embedded upstream); ``targets`` also names the run in
    the ledger. ``feed_state(conn, namespace)`` keeps feeds' ETags between runs; ``command`` is the
    ledger's name for the run.
    """

    namespace: Namespace
    profile: Profile
    targets: tuple[str, ...] = ()
    sources: Iterable[Source | ItemError] | None = None
    items: Iterable[Item | ItemError] | None = None
    command: str = "ingest"
    options: IngestOptions = IngestOptions()
    fetch_options: Any = None  # a sources.options.FetchOptions; fetch's defaults when None
    extract_options: Any = None  # an extract.ExtractOptions ([extract]: OCR, tables); the defaults when None
    stdin: BinaryIO | None = None
    feed_state: Callable[[Any, Namespace], Any] | None = None
    retry_failed: bool = False
    verify: bool = True
    progress: Progress | None = None
    acl: Any = None  # the namespace's kbctl.acl.AclPolicy; None: documents keep only their own ACLs


@dataclass
class RunReport:
    """What one ingest run did (or, with ``plan``, would do)."""

    run_id: int | None
    namespace: str
    documents: dict[str, int] = field(default_factory=lambda: dict(new=0, changed=0, unchanged=0, removed=0, failed=0))
    chunks: dict[str, int] = field(default_factory=lambda: dict(embedded=0, reused=0, deleted=0))
    tokens_to_embed: int = 0
    errors: list[ItemError] = field(default_factory=list)
    warnings: list[ItemError] = field(default_factory=list)  # recorded, but the items went in
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
        if self.warnings:
            d["warnings"] = [w.to_json() for w in self.warnings]
        if self.plan:
            d["plan"] = True
            d["tokens_to_embed"] = self.tokens_to_embed
        if self.verify is not None:
            d["verify"] = self.verify
        return d


def source_hash(sha: str, profile: Profile) -> str:
    """Version of a source: the hash of its bytes and the settings that decide its chunks.

    ``max_document_chars`` is a limit, not a chunking setting: changing it (or adding it, as an
    upgrade did) must not make every stored source look changed.
    """
    chunk = {k: v for k, v in asdict(profile.chunk).items() if k != "max_document_chars"}
    settings = json.dumps([chunk, profile.max_tokens, profile.fingerprint], sort_keys=True)
    return content_hash(f"{sha}\x00{settings}")


def run(conn, req: IngestRun, *, connect: Callable[[], Any]) -> RunReport:
    """Run ``req`` on ``conn``: lock the namespace, open a run, stream the stages, close the run, verify.

    ``connect()`` opens the second connection the producer thread uses to look up stored source
    versions (a psycopg connection must not be used by two threads at once).
    """
    req, retried = _with_retried(conn, req)
    if not req.targets and req.sources is None and req.items is None:
        raise UsageError("nothing to ingest", hint="give files, folders, URLs or - for stdin")
    opts, ns = req.options, req.namespace
    with nullcontext() if opts.plan else runs_store.namespace_lock(conn, ns, wait=not opts.no_wait):
        if not opts.plan:  # the auto decision and ONNX export, made here once so a first search finds them
            from .embed import prepare

            prepare(req.profile)
        report = _ledgered(conn, req, retried, connect)
        if not opts.plan:  # configured ACLs (path rules, recipients) onto unchanged documents too
            from .store.acl import reapply_acls

            reapply_acls(conn, ns, req.acl)
    return report


def _ledgered(conn, req: IngestRun, retried: list[str], connect) -> RunReport:
    """Stream the stages inside a run of the ledger: opened first, closed however the stream ends."""
    ns, plan = req.namespace, req.options.plan
    options = {"targets": list(req.targets), "sync": req.options.sync}
    run_id = None if plan else runs_store.start_run(conn, ns, req.command, options)
    report = RunReport(run_id=run_id, namespace=ns.name, plan=plan)
    t0 = time.perf_counter()
    stop = Interrupts()
    try:
        with stop.deferred():
            _stream(conn, req, report, connect, stop.interruptible)
    except BaseException as e:
        report.seconds = time.perf_counter() - t0
        if run_id is not None:
            _close_quietly(conn, ns, report, "interrupted" if isinstance(e, KeyboardInterrupt) else "failed")
        raise
    report.seconds = time.perf_counter() - t0
    if run_id is not None:
        if retried:  # the ledger names sources by URI (file://…), not by the target given
            runs_store.mark_retried(conn, ns, retried)
        _verified(conn, req, report)
        _close(conn, ns, report, _status(report))
    return report


def _verified(conn, req: IngestRun, report: RunReport) -> None:
    """The verify stage, before the run is closed, so the run's status says what verify found."""
    if not req.verify:
        return
    from .verify import verify_namespace

    try:
        report.verify = verify_namespace(conn, req.namespace, req.profile).to_json()
    except BaseException as e:
        _close_quietly(conn, req.namespace, report, "interrupted" if isinstance(e, KeyboardInterrupt) else "failed")
        raise


def _status(report: RunReport) -> str:
    """``failed_verify`` when verify failed (the command exits 3), else ``ok``, or ``partial`` with failed items."""
    if report.verify is not None and not report.verify["ok"]:
        return "failed_verify"
    return "ok" if not report.errors else "partial"


def _close(conn, ns: Namespace, report: RunReport, status: str) -> None:
    if report.run_id is None:  # a plan opens no run
        return
    runs_store.record_errors(conn, ns, report.run_id, [*report.errors, *report.warnings])
    runs_store.finish_run(conn, ns, report.run_id, status, report.to_json())


def _close_quietly(conn, ns: Namespace, report: RunReport, status: str) -> None:
    """Close a run that is ending in an exception; a failure here must not hide that exception."""
    try:
        _close(conn, ns, report, status)
    except Exception as e:  # the database may be what failed; the next run marks this one instead
        # A lost connection is the error being reported already: no second line on stderr for it.
        log.log(
            logging.INFO if conn.closed else logging.WARNING, "could not mark run %s %s: %s", report.run_id, status, e
        )


def _with_retried(conn, req: IngestRun) -> tuple[IngestRun, list[str]]:
    """With ``retry_failed``, the sources that failed in the last run join the targets."""
    if not req.retry_failed or req.namespace.id <= 0:
        return req, []
    retried = runs_store.failed_sources(conn, req.namespace)
    targets = list(req.targets)
    targets += [_target_of(s) for s in retried if _target_of(s) not in targets]
    return replace(req, targets=tuple(targets)), retried


def _stream(conn, req: IngestRun, report: RunReport, connect, interruptible) -> None:
    """The stages from where ``req`` enters; Ctrl-C and SIGTERM stop it only where it waits for input."""
    emit = req.progress or (lambda event, data: None)
    ns, prof, opts = req.namespace, req.profile, req.options
    if req.items is not None:  # embedded upstream: the store stage only
        consume(
            conn,
            ns,
            prof,
            _unless_stored(conn, ns, interruptible(req.items)),
            report,
            opts,
            report.run_id,
            emit,
            acl=req.acl,
        )
        return
    lookup = connect()
    try:
        sources, state = _sources(lookup, req)
        covered = _covered(req.targets) if req.sources is None else None
        _produce_and_consume(conn, lookup, req, sources, covered, report, emit, interruptible)
        if state is not None:  # feeds' new ETags are kept only once their entries are stored
            state.commit()
    finally:
        lookup.close()


def _sources(lookup, req: IngestRun) -> tuple[Iterable[Source | ItemError], Any]:
    """The stream's input and the feed state to commit: the sources given, or the targets fetched."""
    if req.sources is not None:
        return req.sources, None
    from .fetch import fetch

    o = req.options
    state = req.feed_state(lookup, req.namespace) if req.feed_state and req.namespace.id > 0 and not o.plan else None
    it = fetch(
        req.targets,
        include=o.include,
        exclude=o.exclude,
        follow_links=o.follow_links,
        state=state,
        stdin=req.stdin,
        options=req.fetch_options,
    )
    return it, state


def _produce_and_consume(
    conn, lookup, req: IngestRun, sources, covered, report: RunReport, emit, interruptible
) -> None:
    """Fetch, extract and chunk in a producer thread; embed and store here; then ``--sync``."""
    ns, profile, opts = req.namespace, req.profile, req.options
    seen_sources: set[str] = set()
    q: queue.Queue = queue.Queue(maxsize=opts.queue_size)
    large = threading.BoundedSemaphore(LARGE_IN_FLIGHT)
    producer = threading.Thread(
        target=_produce,
        args=(lookup, ns, profile, sources, q, seen_sources, emit, large, req.extract_options),
        daemon=True,
        name="kbctl-extract",
    )
    producer.start()
    consume(conn, ns, profile, interruptible(_drain(q, large)), report, opts, report.run_id, emit, acl=req.acl)
    producer.join()
    if opts.sync and covered is not None:
        _sync(conn, ns, report, seen_sources, covered, opts.plan, emit)


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


def _unless_stored(conn, ns: Namespace, items: Iterable[Item | ItemError]) -> Iterator:
    """Items embedded upstream whose source version is stored already become ("unchanged", n); one
    with a vector the store must not hold becomes an ``ItemError`` (nothing of it is stored)."""
    for item in items:
        if isinstance(item, Item):
            known = source_versions(conn, ns, [item.source_uri]).get(item.source_uri)
            if known and known[0] == item.source_hash:
                yield ("unchanged", len(known[1]))
                continue
            bad = _bad_vector(item, ns.dimension)
            if bad is not None:
                yield bad
                continue
        yield item


def _bad_vector(item: Item, dimension: int) -> ItemError | None:
    """The error of an item embedded upstream whose vectors are not finite, non-zero and of ``dimension`` numbers."""
    from .validate import vector_problem

    for h, v in (item.vectors or {}).items():
        problem = vector_problem(v, dimension)
        if problem:
            return ItemError("store", item.source_uri, "UsageError", f"the vector of chunk {h[:12]} {problem}")
    return None


def _produce(conn, ns, profile, sources, q: queue.Queue, seen: set[str], emit, large=None, options=None) -> None:
    """Fetch, extract and chunk in a background thread; put items on the queue, then None.

    Sources are looked up 32 at a time, or fewer when their bytes reach ``BATCH_BYTES``; at most
    ``LARGE_IN_FLIGHT`` large documents (each holding its source's bytes until it is stored) wait
    for the consumer at once, so many large files do not all sit in memory together.
    """
    try:
        tok = get_tokenizer(profile)
        for batch in _batches(_once(sources), 32, BATCH_BYTES):
            for out in _extract_batch(conn, batch, ns, profile, seen, tok, emit, options):
                if large is not None and isinstance(out, LargeItem):
                    large.acquire()
                q.put(out)
    except BaseException as e:  # hand anything unexpected to the consumer thread
        q.put(e)
    finally:
        q.put(None)


def _once(sources: Iterable[Source | ItemError]) -> Iterator[Source | ItemError]:
    """Each source once: one given again in the same run (``docs docs/a.md``) is a warning."""
    given: set[str] = set()
    for s in sources:
        if isinstance(s, Source) and s.uri in given:
            yield ItemError(
                "fetch", s.uri, "DuplicateSourceWarning", f"{s.uri} was given more than once in this run; read once"
            )
            continue
        if isinstance(s, Source):
            given.add(s.uri)
        yield s


def _extract_batch(conn, batch, ns, profile, seen, tok, emit, options=None) -> Iterator:
    hashes = {s.uri: source_hash(content_hash(s.content), profile) for s in batch if isinstance(s, Source)}
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


def _extract_large(s: Source, h: str, profile: Profile, tok, emit) -> Iterator | None:
    """The items of a large source, or ``None`` for the others: one ``LargeItem`` for a long text
    (chunked as it is stored), or one ``Item`` per entry of a large feed then a ``SourceDone``."""
    from .extract import extract_large

    try:
        large = extract_large(s, text=profile.chunk.strategy != "semantic")
    except Exception as e:
        return iter([_item_error("extract", s.uri, e)])
    if large is None:
        return None
    if isinstance(large, LargeDocument):
        return iter([_large_item(s, h, large, profile, emit)])
    return _entries(s, h, large, profile, tok, emit)


def _large_item(s: Source, h: str, large: LargeDocument, profile: Profile, emit) -> LargeItem | ItemError:
    from .acl import lift_acl
    from .extract.stream import with_hash

    try:
        check_length(large.chars, profile.chunk.max_document_chars)
    except KbctlError as e:
        return _item_error("chunk", s.uri, e)
    try:
        large = with_hash(large, lift_acl(large.head))  # a second pass over the bytes: the content hash
    except Exception as e:
        return _item_error("extract", s.uri, e)
    emit("extracted", {"source": s.uri, "documents": 1})
    return LargeItem(s.uri, h, s.kind, large)


def _entries(s: Source, h: str, docs: Iterator[Document], profile: Profile, tok, emit) -> Iterator:
    """A large feed's entries as one item each, as they are parsed, then the ``SourceDone`` that
    marks the feed whole. The entries are stored under a provisional source hash until then."""
    from .acl import lift_acl

    uris: set[str] = set()
    try:
        for d in docs:
            d = lift_acl(d)
            uris.add(d.uri)
            chunked = chunk_source(s.uri, [d], profile, tok)
            yield chunked if isinstance(chunked, ItemError) else Item(s.uri, PARTIAL + h, s.kind, chunked, part=True)
    except Exception as e:  # the entries given so far stay provisional: the next run reads the feed again
        yield _item_error("extract", s.uri, e)
        return
    emit("extracted", {"source": s.uri, "documents": len(uris)})
    yield SourceDone(s.uri, h, s.kind, frozenset(uris))


def extract_source(source: Source, options: Any = None) -> tuple[Document, ...] | ItemError:
    """The extract stage for one source: its documents, or the ``ItemError`` that stands for it
    (``options``: an ``extract.ExtractOptions``, the defaults when ``None``)."""
    from .acl import lift_acl
    from .extract import extract

    try:
        return tuple(lift_acl(d) for d in extract(source, options))
    except Exception as e:  # an extractor bug must not stop the batch either
        return _item_error("extract", source.uri, e)


def chunk_source(source_uri: str, docs: Sequence[Document], profile: Profile, tok) -> tuple | ItemError:
    """The chunk stage for one source's documents: ``((document, chunks), ...)``, or one ``ItemError``."""
    try:
        return tuple((d, tuple(chunk_document(d, profile, tok))) for d in docs)
    except Exception as e:
        return _item_error("chunk", source_uri, e)


def _item_error(stage: str, source: str, e: Exception) -> ItemError:
    if isinstance(e, KbctlError):
        return ItemError(stage, source, type(e).__name__, e.message)
    log.exception("%s failed on %s", stage, source)
    return ItemError(stage, source, type(e).__name__, str(e) or type(e).__name__)


def _batches(items: Iterable, n: int, max_bytes: int | None = None) -> Iterator[list]:
    """Lists of ``n`` items, or fewer once the sources among them hold ``max_bytes`` bytes."""
    batch: list = []
    size = 0
    for x in items:
        batch.append(x)
        size += len(x.content) if isinstance(x, Source) else 0
        if len(batch) >= n or (max_bytes is not None and size >= max_bytes):
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _target_of(source_uri: str) -> str:
    from .sources.folder import file_path

    return file_path(source_uri) if source_uri.startswith("file://") else source_uri


def _covered(targets: Sequence[str]) -> Callable[[str], bool]:
    """Which stored source URIs the walked targets speak for (for --sync)."""
    from .sources.folder import file_uri

    prefixes, exact = [], set()
    for t in targets:
        if t == "-":
            continue
        p = Path(t)
        if p.is_dir():
            prefixes.append(file_uri(t).rstrip("/") + "/")
        elif p.exists() or "://" not in t:
            exact.add(file_uri(t))
        # URLs are never "gone": a fetch that failed or answered 304 yields no source
    return lambda uri: uri in exact or any(uri.startswith(px) for px in prefixes)


def _sync(
    conn, ns: Namespace, report: RunReport, seen: set[str], covered: Callable[[str], bool], plan: bool, emit
) -> None:
    """Remove documents whose source lies under the walked targets but was not seen this run."""
    gone = [uri for uri, src in stored_uris(conn, ns).items() if covered(src or uri) and (src or uri) not in seen]
    if not gone:
        return
    n_chunks = chunk_count_of(conn, ns, gone)
    report.documents["removed"] += len(gone)
    report.chunks["deleted"] += int(n_chunks)
    if not plan:
        delete_documents(conn, ns, gone)
        emit("removed", {"documents": len(gone)})
