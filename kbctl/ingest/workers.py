"""Ingest workers: one run's items shared by processes, on this machine and others, through the
run's work queue in PostgreSQL (``kbctl.store.queue``, migration 015).

``kbctl ingest --workers N`` runs the pipeline as always (``pipeline.run``: the namespace's ingest
lock, one run in the ledger, --sync, ACLs, the lexical lane's packing, verify), but its stream is
the ``Coordinator``: it lists the targets' items into the queue without reading them, starts N
local ``kbctl worker --run ID`` processes, waits until every item is done or failed, and sums what
the workers recorded into the run's report. ``kbctl worker`` (``work``) started anywhere with the
same DSN claims a few items at a time under a lease, runs fetch → extract → chunk → embed → store
on them (``pipeline.store_sources``), renews its leases while it works (a thread on its own
connection) and settles them done or failed, with the batch's counts and errors, in one transaction.
Each claimed batch is a ``kbctl.ingest.batch`` span in the run's trace: the coordinator stores its
``kbctl.ingest`` span's traceparent with the run (and gives it to local workers as ``TRACEPARENT``).

What makes a run converge whoever dies:

- a worker killed (SIGKILL, a lost machine) leaves its items claimed; their lease expires and
  another worker claims them again (``MAX_ATTEMPTS`` times at most, then the coordinator records
  them failed). What the dead worker stored is whole documents only (one transaction per batch),
  and an item stored before its worker died is found unchanged by its source hash, so nothing is
  stored twice;
- a worker stopped by SIGTERM or Ctrl-C settles the batch at hand and hands nothing back half done;
- a coordinator killed leaves its run ``running`` and releases its run's lock (its session is
  gone): workers claim nothing more from that run (``claim`` checks that lock, not the namespace's,
  which a swap or the next run may hold by then; a worker given that run stops, the
  coordinator's own orphaned local workers included), and the next run of the namespace marks it
  ``interrupted`` and reads what is stored as unchanged. A batch in flight meanwhile whose
  namespace a swap moved to another generation is refused as it is written, whole
  (``store.documents.still_active``), and left to its lease; the worker goes on.

Workers write without the namespace's ingest lock (the coordinator holds it for the run); their
write transactions take turns on the namespace's write lock (``store.runs.write_lock``), which is
held for one batch's writes, not for the run.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from .. import telemetry
from ..errors import KbctlError, NamespaceNotFound, ProfileMismatchError
from ..interrupts import Interrupts
from ..sources.folder import file_uri
from ..store import Namespace, get_namespace
from ..store import queue as q
from ..store import runs as runs_store
from ..types import ItemError
from .fetch import fetch_items, list_items
from .items import IngestOptions, IngestRun, RunReport
from .pipeline import store_sources

log = logging.getLogger(__name__)

__all__ = ["Coordinator", "WorkerOptions", "WorkerContext", "work", "worker_name"]

#: Items enqueued per statement while the targets are listed (workers start on the first ones).
ENQUEUE_BATCH = 500


def worker_name() -> str:
    """host:pid, unique among the workers of one server."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class WorkerOptions:
    """How a worker claims: ``batch`` items at a time, leased for ``lease`` seconds (renewed every
    third of it while it works), the queue polled every ``poll`` seconds when it is empty."""

    lease: float = 60.0
    batch: int = 32
    poll: float = 0.5
    name: str = field(default_factory=worker_name)
    exit_idle: bool = False  # without a run given: stop when no run has items to claim


@dataclass(frozen=True)
class WorkerContext:
    """What a worker needs to store into one namespace: the namespace, its profile, and the
    settings of the process (ACLs, fetch and extract options)."""

    namespace: Namespace
    profile: Any
    acl: Any = None
    fetch_options: Any = None
    extract_options: Any = None


class Coordinator:
    """A run's stream handed to workers (``IngestRun.distribute``): list the items into the queue,
    start local workers (``spawn(run_id, items queued)`` returns their processes), wait, sum their counts."""

    def __init__(
        self,
        *,
        spawn: Callable[[int, int], list[subprocess.Popen]] | None = None,
        fetch_options: Any = None,
        poll: float = 0.5,
    ) -> None:
        self.spawn, self.fetch_options, self.poll = spawn, fetch_options, poll

    def __call__(self, conn, req: IngestRun, report: RunReport, interruptible) -> set[str]:
        ns, run_id = req.namespace, report.run_id
        assert run_id is not None  # a plan is refused before (api)
        with telemetry.span("kbctl.ingest.enqueue", {"kbctl.namespace": ns.name, "kbctl.run_id": run_id}) as span:
            seen = self._enqueue(conn, req, report)
            span.set_attributes({"kbctl.items": report.details["items"], "kbctl.failed": report.documents["failed"]})
        procs = self.spawn(run_id, report.details["items"]) if self.spawn else []
        waited = False
        try:
            with telemetry.span("kbctl.ingest.wait", {"kbctl.run_id": run_id, "kbctl.workers": len(procs)}):
                self._wait(conn, req, report, procs, interruptible)
            waited = True
        finally:
            _stop(procs)
            if not waited:  # Ctrl-C, the local workers gone: what they stored is stored, and the run says so
                self._sum_quietly(conn, req, report)
        lost = [
            ItemError("store", _uri(t), "WorkerLost", f"claimed {n} times, no worker stored it (each one died)")
            for t, n in q.abandon(conn, ns.id, run_id)
        ]
        runs_store.record_errors(conn, ns, run_id, lost)
        report.documents["failed"] += len(lost)
        self._sum(conn, req, report)
        return seen

    def _enqueue(self, conn, req: IngestRun, report: RunReport) -> set[str]:
        """The targets' items into the queue, ``ENQUEUE_BATCH`` at a time; what the walk refused in
        the ledger. Returns the source URIs listed (for --sync)."""
        ns, run_id, o = req.namespace, report.run_id, req.options
        assert run_id is not None
        seen: set[str] = set()
        batch: list[tuple[str, str | None]] = []
        refused: list[ItemError] = []
        n = 0
        for it in list_items(req.targets, o.include, o.exclude, self.fetch_options):
            if isinstance(it, ItemError):
                seen.add(it.source)  # an unreadable source is not a removed one
                refused.append(it)
                req.emit("error", it.to_json())
                continue
            seen.add(_uri(it[0]))
            batch.append(it)
            if len(batch) >= ENQUEUE_BATCH:
                n, batch = q.enqueue(conn, ns, run_id, n, batch), []
        n = q.enqueue(conn, ns, run_id, n, batch)
        runs_store.record_errors(conn, ns, run_id, refused)
        report.documents["failed"] += sum(1 for e in refused if not e.is_warning)
        report.details["items"] = n
        req.emit("queued", {"items": n, "run_id": run_id})
        return seen

    def _wait(self, conn, req: IngestRun, report: RunReport, procs: list, interruptible) -> None:
        """Until no item is queued or claimed (or claimable again); progress as the workers store."""
        ns, run_id = req.namespace, report.run_id
        assert run_id is not None
        done = 0
        for _ in interruptible(_ticks(self.poll)):
            p = q.progress(conn, ns.id, run_id)
            if p["done"] + p["failed"] > done:
                req.emit("stored", {"documents": p["done"] + p["failed"] - done, "chunks": 0, "embedded": 0})
                done = p["done"] + p["failed"]
            req.emit("queue", p)
            if p["queued"] + p["claimed"] + p["expired"] == 0:
                return
            if procs and p["claimed"] == 0 and all(pr.poll() is not None for pr in procs):
                raise KbctlError(
                    f"the {len(procs)} local worker(s) of run {run_id} exited with {p['queued'] + p['expired']}"
                    " item(s) left",
                    hint=f"see their messages above; `kbctl worker --run {run_id}` can finish the run while this one waits",
                )

    def _sum_quietly(self, conn, req: IngestRun, report: RunReport) -> None:
        """``_sum`` for a run ending in an exception, which a failure here must not hide (the
        database gone, say: the run is then closed with the coordinator's counts, as before)."""
        try:
            self._sum(conn, req, report)
        except Exception:
            log.warning("run %s: the workers' counts could not be read", report.run_id, exc_info=True)

    def _sum(self, conn, req: IngestRun, report: RunReport) -> None:
        """The workers' batch counts and the run's errors (all in the ledger) into the report."""
        ns, run_id = req.namespace, report.run_id
        assert run_id is not None
        for c in q.batch_counts(conn, ns.id, run_id):
            for k, v in (c.get("documents") or {}).items():
                report.documents[k] = report.documents.get(k, 0) + int(v)
            for k, v in (c.get("chunks") or {}).items():
                report.chunks[k] = report.chunks.get(k, 0) + int(v)
        recorded = runs_store.list_errors(conn, [ns.id], run_id, limit=1_000_000)
        for r in reversed(recorded):  # oldest first
            e = ItemError(r["stage"], r["source"], r["error_class"], r["message"])
            (report.warnings if e.is_warning else report.errors).append(e)
        report.ledgered = True


def work(
    conn,
    *,
    connect: Callable[[], Any],
    context: Callable[[int], WorkerContext],
    namespaces: Callable[[], Sequence[int]],
    run_id: int | None = None,
    options: WorkerOptions = WorkerOptions(),
    progress: Callable[[str, dict], None] | None = None,
) -> dict[str, int]:
    """Claim and store items until stopped: of run ``run_id`` until it is no longer running, else
    of any running run of ``namespaces()`` (with ``exit_idle``, until none has items to claim).
    SIGTERM and Ctrl-C stop it once the batch at hand is settled. Returns what it did, counted as
    the run counts it: ``batches`` stored, the ``items`` it settled and their documents and chunks
    counts (``new``…, ``chunks_embedded``…); an item of its batches whose lease expired and another
    worker took over is that worker's to count, and is counted only in ``taken_over``."""
    emit = progress or (lambda event, data: None)
    totals: dict[str, int] = {"batches": 0, "items": 0, "taken_over": 0}
    traces: dict[int, str | None] = {}  # run -> the traceparent its coordinator stored
    floors: dict[tuple[int, int], int] = {}  # (namespace, run) -> the position after the last item claimed
    contexts: dict[int, WorkerContext] = {}
    stop = Interrupts()
    lookup = connect()  # the producer thread's connection, for every batch
    try:
        with stop.deferred():
            for _ in stop.interruptible(_ticks(0)):
                runs = _runs(conn, run_id, namespaces, options.poll)
                if runs is None:
                    break
                claimed = None
                for ns_id, rid in runs:
                    # the namespace's context first: a worker that cannot serve it (a profile or ACL
                    # its configuration lacks) fails before it claims, leaving the items' attempts
                    # to workers that can, not spent by each restart of this one
                    ctx = current_context(conn, contexts, ns_id, context)
                    got = q.claim(
                        conn, ns_id, rid, options.name, options.batch, options.lease, floors.get((ns_id, rid), 0)
                    )
                    if got:
                        claimed = (ns_id, rid, got, ctx)
                        break
                if claimed is None:
                    if options.exit_idle and run_id is None and not runs:
                        break
                    time.sleep(options.poll)  # signals are let through here too: the next tick waits
                    continue
                ns_id, rid, got, ctx = claimed
                floors[(ns_id, rid)] = max(floors.get((ns_id, rid), 0), got[-1].item + 1)
                if rid not in traces:
                    traces[rid] = q.run_traceparent(conn, rid) if telemetry.enabled() else None
                try:
                    own, settled = _store(conn, lookup, connect, ctx, rid, got, options, emit, traces[rid])
                except ProfileMismatchError as e:
                    # The namespace moved to another generation while the batch was embedded (a swap
                    # after its run's coordinator died): nothing of it was written. Its leases run
                    # out; a worker that reads the namespace again claims it if the run lives on.
                    log.warning("%s; its %d item(s) are left to their lease", e, len(got))
                    contexts.pop(ns_id, None)
                    continue
                except NamespaceNotFound as e:
                    # `kbctl namespaces delete` ran: the run and its items went with the namespace
                    log.warning("%s", e)
                    contexts.pop(ns_id, None)
                    continue
                totals["batches"] += 1
                totals["items"] += settled
                totals["taken_over"] += len(got) - settled
                chunks = {f"chunks_{k}": v for k, v in own.get("chunks", {}).items()}
                for k, v in {**own.get("documents", {}), **chunks}.items():
                    totals[k] = totals.get(k, 0) + v
    except KeyboardInterrupt:
        totals["stopped"] = 1
    finally:
        lookup.close()
    return totals


def current_context(
    conn, contexts: dict[int, WorkerContext], ns_id: int, context: Callable[[int], WorkerContext]
) -> WorkerContext:
    """The namespace's context, made again when its active generation changed since it was made: a
    polling worker outlives swaps, and must not embed with the previous generation's profile into
    it (read once per batch claimed)."""
    ctx = contexts.get(ns_id)
    if ctx is not None:
        ns = ctx.namespace
        now = get_namespace(conn, ns.name, ns.tenant, required=False)
        if now is None or now.serving != ns.serving:
            ctx = None
    if ctx is None:
        ctx = contexts[ns_id] = context(ns_id)
    return ctx


def _runs(
    conn, run_id: int | None, namespaces: Callable[[], Sequence[int]], poll: float = 0.5
) -> list[tuple[int, int]] | None:
    """The runs to claim from now; None: the run given is over (or unknown), stop. A run whose
    coordinator is gone (killed: it stays ``running`` until the namespace's next run) is over too,
    for nothing is claimed from it again; it is looked at twice, a poll apart, so a run seen between
    its row's commit and its lock is not taken for a dead one."""
    if run_id is None:
        return q.open_runs(conn, namespaces())
    st = q.run_status(conn, run_id)
    if st is None or st[2] != "running":
        return None
    if not q.coordinated(conn, run_id):
        time.sleep(poll)
        st = q.run_status(conn, run_id)
        if st is None or st[2] != "running":
            return None
        if not q.coordinated(conn, run_id):
            log.warning(
                "run %d has no coordinator (its kbctl ingest was killed): nothing more is claimed from it;"
                " the next `kbctl ingest -n %s` marks it interrupted and stores what it lacks",
                run_id,
                st[1],
            )
            return None
    return [(st[0], run_id)]


def _store(
    conn,
    lookup,
    connect,
    ctx: WorkerContext,
    run_id: int,
    got: list[q.Claimed],
    options: WorkerOptions,
    emit,
    traceparent: str | None = None,
) -> tuple[dict, int]:
    """One claimed batch, traced as ``kbctl.ingest.batch`` in the run's trace (``traceparent``, else
    the process's ``TRACEPARENT``), its stages as children: the counts this worker recorded of it
    (``documents`` and ``chunks``: none when another worker took over every item) and how many of
    its items it settled."""
    attrs = {
        "kbctl.namespace": ctx.namespace.name,
        "kbctl.run_id": run_id,
        "kbctl.worker": options.name,
        "kbctl.items": len(got),
    }
    with telemetry.continued(traceparent), telemetry.span("kbctl.ingest.batch", attrs, root=True) as span:
        report, own, settled = _stored(conn, lookup, connect, ctx, run_id, got, options, emit)
        span.set_attributes(
            {
                **{f"kbctl.documents.{k}": v for k, v in report.documents.items()},
                **{f"kbctl.chunks.{k}": v for k, v in report.chunks.items()},
                "kbctl.errors": len(report.errors),
                "kbctl.settled": settled,
            }
        )
    return own, settled


def _stored(conn, lookup, connect, ctx: WorkerContext, run_id: int, got: list[q.Claimed], options: WorkerOptions, emit):
    """One claimed batch through the stages, its leases renewed meanwhile, then settled: its report,
    what this worker counts of it (the run's counts of the batch) and how many of its items it settled."""
    items = [c.item for c in got]
    by_uri = {_uri(c.target): c.item for c in got}
    report = RunReport(run_id=run_id, namespace=ctx.namespace.name, by_source={})  # counted by item too
    req = IngestRun(
        ctx.namespace,
        ctx.profile,
        targets=tuple(c.target for c in got),
        sources=fetch_items([(c.target, c.rel) for c in got], options=ctx.fetch_options),
        options=IngestOptions(),
        extract_options=ctx.extract_options,
        verify=False,
        acl=ctx.acl,
        progress=emit,
    )
    with _Lease(connect, ctx.namespace.id, run_id, options, items):
        store_sources(conn, req, report, lookup=lookup)
    failed = sorted({by_uri[e.source] for e in report.errors if e.source in by_uri})
    item_counts = {by_uri[uri]: c for uri, c in (report.by_source or {}).items() if uri in by_uri}
    counts = report.to_json()
    settled = q.settle(
        conn, ctx.namespace, run_id, options.name, items, failed, counts, [*report.errors, *report.warnings],
        by_uri, item_counts,
    )  # fmt: skip
    lost = set(items) - settled
    if lost:
        log.info("run %s: %d item(s) were taken over by another worker (their lease expired)", run_id, len(lost))
    own = q.own_counts(counts, lost, item_counts) if settled else {}
    return report, own, len(settled)


class _Lease:
    """Renews a batch's leases every third of the lease, from a thread on its own connection."""

    def __init__(self, connect, ns_id: int, run_id: int, options: WorkerOptions, items: list[int]) -> None:
        self.connect, self.ns_id, self.run_id, self.options, self.items = connect, ns_id, run_id, options, items
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._renew, daemon=True, name="kbctl-lease")

    def __enter__(self) -> _Lease:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()

    def _renew(self) -> None:
        conn = None
        try:
            while not self.done.wait(self.options.lease / 3):
                conn = conn or self.connect()
                held = q.renew(conn, self.ns_id, self.run_id, self.options.name, self.items, self.options.lease)
                if len(held) < len(self.items):
                    log.info("run %s: lost the lease of %d item(s)", self.run_id, len(self.items) - len(held))
        except Exception as e:  # the batch goes on; its lease may expire and another worker store it again
            log.warning("could not renew the lease of run %s's items: %s", self.run_id, e)
        finally:
            if conn is not None:
                conn.close()


def _ticks(seconds: float) -> Iterator[None]:
    """One tick now, then one every ``seconds`` (slept where a signal may stop the loop)."""
    yield None
    while True:
        if seconds:
            time.sleep(seconds)
        yield None


def _uri(target: str) -> str:
    """The source URI of an item's target (a file's, or the URL as given)."""
    return target if "://" in target else file_uri(target)


def _stop(procs: list[subprocess.Popen]) -> None:
    """Stop local workers: SIGTERM (each settles its batch), then SIGKILL after a while."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 30
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
