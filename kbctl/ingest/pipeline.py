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
``kbctl chunk`` call the same ``steps.extract_source`` and ``steps.chunk_source`` as the producer,
so an item fails the same way, with the same ``ItemError``, on every path.

A producer thread (``producer``) fetches, extracts and chunks sources (a large document's chunks
too, made as they are stored) into a bounded queue while the calling thread embeds and stores
(``writer.consume``, given the ``IngestRun``), so the model is not idle waiting for input and
memory does not grow with the corpus.

Incremental by construction:

- a source whose bytes (and the chunk settings) are unchanged is skipped before extraction;
- a changed source's documents are replaced, each in the same transaction as its chunks;
- chunk vectors are looked up by (profile, chunk hash) first: identical text is embedded once;
- with ``sync``, documents whose source is gone from the walked folders leave the store.

A run killed at any point leaves whole documents only; running again converges.
"""

from __future__ import annotations

import logging
import os
import time
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from .. import telemetry
from ..errors import GenerationMoved, UsageError
from ..interrupts import Interrupts
from ..store import Namespace, chunk_count_of, delete_documents, get_namespace, lexical, source_versions, stored_uris
from ..store import runs as runs_store
from ..store.documents import check_present, drop_unused_vocabulary
from ..store.roles import tenant_gone_said
from ..textutil.clean import escape_undecodable
from ..types import ItemError, Source
from . import producer
from .items import IngestOptions, IngestRun, Item, Progress, RunReport
from .writer import consume

log = logging.getLogger(__name__)

__all__ = ["IngestOptions", "IngestRun", "RunReport", "Item", "Progress", "run", "store_sources"]


def run(conn, req: IngestRun, *, connect: Callable[[], Any]) -> RunReport:
    """Run ``req`` on ``conn``: lock the namespace, open a run, stream the stages, close the run, verify.

    ``connect()`` opens the second connection the producer thread uses to look up stored source
    versions (a psycopg connection must not be used by two threads at once).

    Traced as ``kbctl.ingest``, its stages per batch as children (``kbctl.telemetry``, docs/telemetry.md).
    """
    ns = req.namespace
    attrs = {"kbctl.namespace": ns.name, "kbctl.command": req.command, "kbctl.profile": req.profile.name}
    with telemetry.span("kbctl.ingest", {**attrs, "kbctl.plan": req.options.plan}, root=True) as span:
        report = _run(conn, req, connect)
        span.set_attributes(
            {
                "kbctl.run_id": report.run_id or 0,
                **{f"kbctl.documents.{k}": v for k, v in report.documents.items()},
                **{f"kbctl.chunks.{k}": v for k, v in report.chunks.items()},
                "kbctl.errors": len(report.errors),
            }
        )
    return report


def _run(conn, req: IngestRun, connect: Callable[[], Any]) -> RunReport:
    req, retried = _with_retried(conn, req)
    if not req.targets and req.sources is None and req.items is None:
        raise UsageError("nothing to ingest", hint="give files, folders, URLs or - for stdin")
    opts, ns = req.options, req.namespace
    with nullcontext() if opts.plan else runs_store.namespace_lock(conn, ns, wait=not opts.no_wait):
        if not opts.plan:
            _same_generation(conn, ns)  # a swap may have held the lock this run waited for
        if not opts.plan and req.items is None:
            # the auto decision and ONNX export, made here once so a first search finds them; items
            # embedded upstream (kbctl store) need no model: the writer prepares when one must embed
            from ..embed import prepare

            with telemetry.span(
                "kbctl.ingest.prepare", {"kbctl.profile": req.profile.name, "kbctl.model": req.profile.model}
            ):
                prepare(req.profile)
        report = _ledgered(conn, req, retried, connect)
        if not opts.plan:
            _after(conn, req)
    return report


def _same_generation(conn, ns: Namespace) -> None:
    """Refuse, touching nothing, when the namespace's active generation changed since the run read
    it: a swap (or rollback) held the lock this run waited for, and the run's profile and vectors
    are the old generation's. Run again, it reads the new one."""
    now = get_namespace(conn, ns.name, ns.tenant, required=False)
    if now is not None and now.serving != ns.serving:
        raise GenerationMoved(
            f"namespace {ns.name!r} moved to another generation (profile {now.profile_name!r}) while this run"
            f" waited for its lock; nothing was written with the old one ({ns.profile_name!r})",
            hint="run the ingest again: it uses the namespace's new profile",
        )


def _after(conn, req: IngestRun) -> None:
    """What follows the stream: configured ACLs (path rules, recipients) onto unchanged documents
    too, the vocabulary's terms no document holds any more (left at 0 by the run's replacements),
    and the lexical lane's packed postings (a new segment once enough chunks are unpacked)."""
    from ..store.acl import reapply_acls

    ns = req.namespace
    with tenant_gone_said(conn, ns.tenant):  # a delete of the tenant after the run's last write
        check_present(conn, ns)  # or of the namespace alone: what the run wrote is gone, say so
        with telemetry.span("kbctl.ingest.acl", {"kbctl.namespace": ns.name}) as span:
            span.set_attribute("kbctl.documents", reapply_acls(conn, ns, req.acl))
        with telemetry.span("kbctl.ingest.lexical", {"kbctl.namespace": ns.name}) as span:
            span.set_attribute("kbctl.unused_terms", drop_unused_vocabulary(conn, ns))
            lacking = lexical.lacks_forward(conn, ns.id)
            if lacking:
                # once, after an upgrade: at a million chunks about four minutes, so say so first
                why = "its segments were packed before the forward index (migration 017)"
                log.info("namespace %s: packing the lexical postings again, whole, once: %s", ns.name, why)
                req.emit("repacking", {"namespace": ns.name, "reason": why})
            packed = lexical.maintain(conn, ns.id, lacking=lacking, tenant=ns.tenant)
            span.set_attributes(
                {
                    "kbctl.packed": bool(packed and packed["segment"] is not None),
                    "kbctl.chunks": int(packed["chunks"]) if packed else 0,
                    "kbctl.postings": int(packed["postings"]) if packed else 0,
                }
            )


def _ledgered(conn, req: IngestRun, retried: list[str], connect) -> RunReport:
    """Stream the stages inside a run of the ledger: opened first, closed however the stream ends."""
    ns, plan = req.namespace, req.options.plan
    # a path given that is not UTF-8 is shown with \xff escapes (the ledger is text)
    options = {"targets": [escape_undecodable(t) for t in req.targets], "sync": req.options.sync}
    if req.distribute is not None and telemetry.traceparent():  # workers' batches join the run's trace
        options["traceparent"] = telemetry.traceparent()
    stop = Interrupts()
    t0 = time.perf_counter()
    # Signals are held from before the run row is written: one that came between that statement and
    # the stream raised there, leaving the run 'running' (and its connection mid-command).
    with stop.deferred():
        run_id = None if plan else runs_store.start_run(conn, ns, req.command, options)
        report = RunReport(run_id=run_id, namespace=ns.name, plan=plan)
        try:
            _stream(conn, req, report, connect, stop.interruptible)
            stop.checkpoint()  # one held back until the stream ended is raised here, inside the try
        except BaseException as e:
            report.seconds = time.perf_counter() - t0
            if run_id is not None:
                _close_quietly(conn, ns, report, _ending(e, req, report))
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
        with telemetry.span("kbctl.ingest.verify", {"kbctl.namespace": req.namespace.name}) as span:
            report.verify = verify_namespace(conn, req.namespace, req.profile).to_json()
            span.set_attribute("kbctl.ok", bool(report.verify["ok"]))
    except BaseException as e:
        _close_quietly(conn, req.namespace, report, _ending(e, req, report))
        raise


def _status(report: RunReport) -> str:
    """``failed_verify`` when verify failed (the command exits 3), else ``ok``, or ``partial`` with failed items."""
    if report.verify is not None and not report.verify["ok"]:
        return "failed_verify"
    return "ok" if not report.errors else "partial"


def _ending(e: BaseException, req: IngestRun, report: RunReport) -> str:
    """The status of a run ending in ``e``: ``interrupted`` by Ctrl-C (or SIGTERM), and by what
    stopped it from outside (``req.stopped``: the library's handle closed, its statement cancelled),
    the reason then kept in its counts; else ``failed``. Run again, an interrupted run goes on."""
    if isinstance(e, KeyboardInterrupt):
        return "interrupted"
    why = req.stopped() if req.stopped is not None else None
    if why:
        report.details["interrupted"] = why
        return "interrupted"
    return "failed"


def _close(conn, ns: Namespace, report: RunReport, status: str) -> None:
    if report.run_id is None:  # a plan opens no run
        return
    if not report.ledgered:
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


def store_sources(conn, req: IngestRun, report: RunReport, *, lookup) -> None:
    """A worker's batch of a run (``kbctl.ingest.workers``): ``req.sources`` through extract →
    chunk → embed → store, counted into ``report``, under no lock and with no run of its own (the
    run's coordinator holds both, and closes the run once the workers have stored every item).
    ``lookup`` is the producer thread's connection, kept by the worker from batch to batch."""
    assert req.sources is not None
    _produce_and_consume(conn, lookup, req, req.sources, None, report, lambda items: items)


def _with_retried(conn, req: IngestRun) -> tuple[IngestRun, list[str]]:
    """With ``retry_failed``, the sources that failed in the last run join the targets: files and
    URLs only, since stdin (or a link of another scheme) cannot be fetched again, and read as a path
    it became a new error about a file that never existed."""
    if not req.retry_failed or req.namespace.id <= 0:
        return req, []
    from ..sources.url import is_http_url

    retried = [s for s in runs_store.failed_sources(conn, req.namespace) if s.startswith("file://") or is_http_url(s)]
    targets = list(req.targets)
    targets += [_target_of(s) for s in retried if _target_of(s) not in targets]
    return replace(req, targets=tuple(targets)), retried


def _stream(conn, req: IngestRun, report: RunReport, connect, interruptible) -> None:
    """The stages from where ``req`` enters; Ctrl-C and SIGTERM stop it only where it waits for input."""
    if req.items is not None:  # embedded upstream: the store stage only
        consume(conn, req, _unless_stored(conn, req.namespace, interruptible(req.items)), report)
        return
    if req.distribute is not None:  # workers store the targets (kbctl.ingest.workers); this process waits
        seen = req.distribute(conn, req, report, interruptible)
        if req.options.sync:
            _sync(conn, req.namespace, report, seen, _covered(req.targets), False, req.emit)
        return
    lookup = connect()
    try:
        sources, state = _sources(lookup, req)
        covered = _covered(req.targets) if req.sources is None else None
        _produce_and_consume(conn, lookup, req, sources, covered, report, interruptible)
        if state is not None:  # feeds' new ETags are kept only once their entries are stored
            state.commit()
    finally:
        lookup.close()


def _sources(lookup, req: IngestRun) -> tuple[Iterable[Source | ItemError], Any]:
    """The stream's input and the feed state to commit: the sources given, or the targets fetched."""
    if req.sources is not None:
        return req.sources, None
    from ..sources.state import SyncFeedState
    from ..store import source_version_count
    from .fetch import fetch

    o = req.options
    state = req.feed_state(lookup, req.namespace) if req.feed_state and req.namespace.id > 0 and not o.plan else None
    it = fetch(
        req.targets,
        include=o.include,
        exclude=o.exclude,
        follow_links=o.follow_links,
        # --sync reads a feed whole when its stored entries are not all of one fetch: a 304 shows
        # no entries, so one that left the feed in a run without --sync (kept, as it should be,
        # with its old version) stayed after every --sync run that followed. A feed whose stored
        # entries are all of one version is asked conditionally, as without --sync; one with none
        # stored under the URL asked (a feed behind a redirect) in full.
        state=SyncFeedState(state, lambda url: source_version_count(lookup, req.namespace, url) != 1)
        if state is not None and o.sync
        else state,
        stdin=req.stdin,
        options=req.fetch_options,
    )
    return it, state


def _produce_and_consume(conn, lookup, req: IngestRun, sources, covered, report: RunReport, interruptible) -> None:
    """Fetch, extract and chunk in a producer thread; embed and store here; then ``--sync``."""
    items, seen_sources, thread = producer.start(lookup, req, sources)
    try:
        # between the write batches of one call of the model, a signal stops the run too (a safe point)
        consume(conn, req, interruptible(items), report, checkpoint=getattr(interruptible, "__self__", None))
    except BaseException:
        # the producer may be running a statement on ``lookup``, which the caller closes next:
        # closing it under that statement crashed the process (libpq) instead of ending the run
        if not thread.halt():
            log.warning("the extract thread did not stop within 30 s of the run's end")
        raise
    thread.join()
    if req.options.sync and covered is not None:
        _sync(conn, req.namespace, report, seen_sources, covered, req.options.plan, req.emit)


def _unless_stored(conn, ns: Namespace, items: Iterable[Item | ItemError]) -> Iterator:
    """Items embedded upstream whose source version is stored already become ("unchanged", n, source URI); one
    with a vector the store must not hold becomes an ``ItemError`` (nothing of it is stored)."""
    for item in items:
        if isinstance(item, Item):
            known = source_versions(conn, ns, [item.source_uri]).get(item.source_uri)
            if known and known[0] == item.source_hash:
                yield ("unchanged", len(known[1]), item.source_uri)
                continue
            bad = _bad_vector(item, ns.dimension)
            if bad is not None:
                yield bad
                continue
        yield item


def _bad_vector(item: Item, dimension: int) -> ItemError | None:
    """The error of an item embedded upstream whose vectors are not finite, non-zero and of ``dimension`` numbers."""
    from ..validate import vector_problem

    for h, v in (item.vectors or {}).items():
        problem = vector_problem(v, dimension)
        if problem:
            return ItemError("store", item.source_uri, "UsageError", f"the vector of chunk {h[:12]} {problem}")
    return None


def _target_of(source_uri: str) -> str:
    from ..sources.folder import file_path

    return file_path(source_uri) if source_uri.startswith("file://") else source_uri


def _still_there(source_uri: str) -> bool:
    """Whether a ``file://`` source still exists (a symlink: its target); other sources never are.

    Only a file the system says is not there (ENOENT, ENOTDIR) is gone: one that cannot be looked
    at (a folder made unreadable, an I/O error) may be there still, and ``os.path.exists``, false
    for it, made ``--sync`` remove the documents of every file of an unreadable folder."""
    from ..sources.folder import file_path

    if not source_uri.startswith("file://"):
        return False
    try:
        os.stat(file_path(source_uri))
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:  # cannot tell (permission, I/O, a name too long): keep the document
        return True
    return True


def _covered(targets: Sequence[str]) -> Callable[[str], bool]:
    """Which stored source URIs the walked targets speak for (for --sync)."""
    from ..sources.folder import file_uri

    prefixes, exact = [], set()
    for t in targets:
        if t == "-":
            continue
        p = Path(t)
        try:
            is_dir, exists = p.is_dir(), p.exists()
        except OSError:  # a name too long for a path (a long URL): no folder, and its fetch says why
            is_dir = exists = False
        if is_dir:
            prefixes.append(file_uri(t).rstrip("/") + "/")
        elif exists or "://" not in t:
            exact.add(file_uri(t))
        # URLs are never "gone": a fetch that failed or answered 304 yields no source
    return lambda uri: uri in exact or any(uri.startswith(px) for px in prefixes)


def _sync(
    conn, ns: Namespace, report: RunReport, seen: set[str], covered: Callable[[str], bool], plan: bool, emit
) -> None:
    """Remove documents whose source lies under the walked targets, was not seen this run, and is
    gone: a file still on disk that this walk left out (--include, --exclude, a symlink not
    followed) keeps its document, as rsync keeps excluded files. Traced as ``kbctl.ingest.sync``:
    the documents and chunks removed (or that a plan would remove)."""
    with telemetry.span("kbctl.ingest.sync", {"kbctl.namespace": ns.name, "kbctl.plan": plan}) as span:
        gone = [
            uri
            for uri, src in stored_uris(conn, ns).items()
            if covered(src or uri) and (src or uri) not in seen and not _still_there(src or uri)
        ]
        n_chunks = int(chunk_count_of(conn, ns, gone)) if gone else 0
        span.set_attributes({"kbctl.documents": len(gone), "kbctl.chunks": n_chunks})
        if not gone:
            return
        report.documents["removed"] += len(gone)
        report.chunks["deleted"] += n_chunks
        if not plan:
            delete_documents(conn, ns, gone)
            emit("removed", {"documents": len(gone)})
