"""``kb.ingestion``: runs of the pipeline into a namespace (``kbctl ingest``, ``kbctl store``) and
``verify``. The pipeline itself is imported when a run starts: a search does not load it."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any, BinaryIO, Iterable, Sequence

from .. import telemetry, validate
from ..acl import AclPolicy
from ..errors import GenerationMoved, UsageError
from ..extract.record import RECORD_MEDIA_TYPE
from ..store import Namespace, check_pin, ensure_namespace, get_namespace, namespace_ids
from ..store.feeds import feed_state, save_feed_state
from ..types import ItemError, Source
from ._boundary import Part, psycopg_boundary

# The longest --lease (and --poll) in seconds: a lease is renewed while its item is worked on, so a
# day is past any need; ``inf`` or ``1e300`` passed a mere "positive" check (``nan`` any check) and
# reached PostgreSQL as an interval out of range, failing the run.
MAX_LEASE = 86400.0
#: The lease of an item a worker claims, in seconds, when none is given (``--lease``).
LEASE_SECONDS = 60.0
#: The connections a local worker may hold at once (its own, its producer thread's, one reopened
#: after a lost one) and those the coordinator keeps in hand beside its own, when the server's
#: free connections bound how many workers start.
WORKER_CONNECTIONS = 3
SPARE_CONNECTIONS = 2
#: The memory a local worker adds to the machine, when the machine's available memory bounds how
#: many workers start: each is a process that loads the profile's model. Measured (VmHWM) with the
#: default profile, all-MiniLM-L6-v2, embedding batches of 64 chunks of 256 tokens: torch fp32 470 MB
#: loaded, 890 MB at the peak; onnx-int8 210 MB loaded, 890 MB at the peak (activations, not
#: weights, make the peak); bf16 (what ``auto`` chose on a 2-core VM) 580 MB and 750 MB. Rounded up.
WORKER_MEMORY = 1 << 30
#: The same for a profile of the ``hash`` embedder, which loads no model: kbctl's modules (55 MB)
#: and a batch of documents in the making.
WORKER_MEMORY_NO_MODEL = 128 << 20

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from ..config import Profile
    from ..ingest.pipeline import Item, Progress, RunReport
    from ..ingest.verify import VerifyReport

__all__ = ["Ingestion"]


def worker_memory(profile: Profile) -> int:
    """The memory a local worker of ``profile`` is taken to add (``WORKER_MEMORY``)."""
    return WORKER_MEMORY_NO_MODEL if profile.embedder == "hash" else WORKER_MEMORY


def local_workers(
    asked: int, *, free: int, limit: int, memory: int | None, cpus: int, profile: Profile
) -> tuple[int, list[str]]:
    """How many of ``asked`` local workers start, and a warning for each bound that took some away:
    the server's ``free`` connections (of ``max_connections`` ``limit``; the rest would fail to
    connect), the machine's available ``memory`` in bytes (None: unknown; the rest would swap or be
    killed), and, when the profile loads a model, the ``cpus`` (each worker's model already embeds
    on all of them: more workers would only share them, a model's memory each). At least one starts:
    the run was refused before it opened when none fitted."""
    n, warnings = asked, []

    def bound(room: int, why: str) -> None:
        nonlocal n
        room = max(room, 1)
        if n > room:
            warnings.append(f"starting {room} of the {n} workers asked: {why}")
            n = room

    bound(
        (free - SPARE_CONNECTIONS) // WORKER_CONNECTIONS,
        f"the server can take {free} more connections (max_connections {limit}) "
        f"and a worker opens up to {WORKER_CONNECTIONS}",
    )
    need = worker_memory(profile)
    if memory is not None:
        bound(
            memory // need, f"this machine has {_mb(memory)} of memory available and a worker takes about {_mb(need)}"
        )
    if profile.embedder != "hash":
        bound(cpus, f"this machine has {cpus} CPU(s) for this process and each worker's model embeds on all of them")
    return n, warnings


def queue_options(
    *, workers: int | None = None, lease: float | None = None, poll: float | None = None, batch: int | None = None
) -> None:
    """The work queue's options (``kbctl ingest --workers``, ``kbctl worker``), each checked on its
    own: the first out of range is a UsageError naming it and its value."""
    if workers is not None and workers < 0:
        raise UsageError(
            f"--workers must be 0 or more, got {workers}",
            hint="--workers N starts N local workers; --workers 0 queues the run for `kbctl worker`s started elsewhere",
        )
    for flag, seconds in (("--lease", lease), ("--poll", poll)):
        if seconds is not None and not 0 < seconds <= MAX_LEASE:
            raise UsageError(
                f"{flag} must be in (0, {MAX_LEASE:g}] seconds, got {seconds:g}",
                hint=f"give {flag} a number of seconds above 0, at most {MAX_LEASE:g} (a day)",
            )
    if batch is not None and batch < 1:
        raise UsageError(
            f"--batch must be at least 1, got {batch}", hint="--batch is how many items a worker claims at a time"
        )


def _mb(n: int) -> str:
    return f"{n / 2**20:,.0f} MB"


# the statuses of a run whose coordinator summed its workers' batches into the counts it recorded
_SUMMED = frozenset({"ok", "partial", "failed_verify"})


@psycopg_boundary
class Ingestion(Part):
    """fetch → extract → chunk → embed → store (→ verify) into one namespace, and ``verify`` alone."""

    def ingest(
        self,
        targets: Sequence[str],
        namespace: str,
        *,
        profile: str | None = None,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        sync: bool = False,
        plan: bool = False,
        no_wait: bool = False,
        follow_links: bool = False,
        follow_symlinks: bool = False,
        retry_failed: bool = False,
        verify: bool = True,
        stdin: BinaryIO | None = None,
        progress: Progress | None = None,
        workers: int | None = None,
        lease: float | None = None,
    ) -> RunReport:
        """Run fetch → extract → chunk → embed → store (→ verify) over ``targets`` into ``namespace``.

        Fetching follows the ``[fetch]`` settings; ``follow_symlinks`` lets folder walks follow
        symlinks that lead out of the folders given (skipped and recorded otherwise). With
        ``workers``, the items go to the run's work queue and ``workers`` local ``kbctl worker``
        processes (0: none, only workers started elsewhere) store them, each item leased for
        ``lease`` seconds (default ``LEASE_SECONDS``; ``kbctl.ingest.workers``); this call waits and
        closes the run. A ``lease`` without ``workers`` is a ``UsageError``: this process stores the
        items itself, and nothing would be leased.

        A ``plan`` writes nothing and makes nothing, not even the tenant a run would make (embedded,
        on its first write): it reads such a tenant as one with no rows, and its report's notes say
        that the run would make it (``Session.planning``).
        """
        targets = validate.targets(targets)  # before anything is made: a string is one target
        if lease is not None and workers is None:  # it was ignored without a word
            raise UsageError(
                "--lease needs --workers",
                hint="a lease is how long a worker holds the items it claimed: give --workers N "
                "(0: workers started elsewhere), or leave --lease out to store in this process",
            )
        self._refuse_only_missing_paths(targets, namespace)
        with contextlib.ExitStack() as stack:
            if plan:
                stack.enter_context(self.session.planning())
                prof = self.kb.namespaces.profile_for(namespace, profile)
            else:
                # before the tenant, the namespace and the run are made, and in the coordinator, not in each worker
                prof = self._checked_profile(namespace, profile, keep=workers is None)
            from ..extract.options import ExtractOptions
            from ..ingest.pipeline import IngestOptions, IngestRun
            from ..sources.options import FetchOptions  # a bad [fetch] table fails here, before the run starts

            conn = self._conn()
            fetch_opts = FetchOptions.from_config(self.settings.fetch, follow_symlinks=follow_symlinks)
            extract_opts = ExtractOptions.from_config(self.settings.extract)
            if plan:  # creates nothing, but refuses what the run would refuse: a profile other than the pin
                ns = get_namespace(conn, namespace, self.tenant, required=False) or self.kb.namespaces.placeholder(
                    namespace, prof
                )
                check_pin(ns, prof, conn)
            else:
                made = get_namespace(conn, namespace, self.tenant, required=False) is None
                ns = ensure_namespace(conn, namespace, self.tenant, prof)
            opts = IngestOptions(tuple(include), tuple(exclude), sync, plan, no_wait, follow_links)
            req = IngestRun(
                ns,
                prof,
                targets=tuple(targets),
                options=opts,
                fetch_options=fetch_opts,
                extract_options=extract_opts,
                stdin=stdin,
                feed_state=_DbFeedState,
                retry_failed=retry_failed,
                verify=verify,
                progress=progress,
                acl=self._acl_policy(namespace),
            )
            try:  # a refusal of the workers' options leaves no namespace made for the run behind either
                if workers is not None:
                    req = self._distributed(conn, req, workers, LEASE_SECONDS if lease is None else lease, fetch_opts)
                report = self._run(conn, req, profile)
            except BaseException:
                if not plan and made:
                    _forget_if_untouched(conn, ns)
                raise
            if self.session.unmade:  # read as no tenant's (a plan): say what the run would make
                notes = report.details.setdefault("notes", [])
                notes.append(f"tenant {self.tenant!r} does not exist yet: the ingest would create it")
            return report

    def _checked_profile(self, namespace: str, profile: str | None, *, keep: bool = True) -> Profile:
        """The profile a write of ``namespace`` embeds with (``profile_for``), its model checked
        (``kbctl.embed.check``; ``keep``: the model loaded by a check stays for this process) before
        anything is made for it, the tenant included: the profile is looked up as a plan reads
        (a tenant never made is read as one with no namespace, and not made), and the session says
        it writes (``Session.writing``) only once the check has passed."""
        from ..embed import check as check_model

        with self.session.planning():
            prof = self.kb.namespaces.profile_for(namespace, profile)
        check_model(prof, keep=keep)
        self.session.writing()
        return prof

    def _distributed(self, conn, req, workers: int, lease: float, fetch_opts):
        """``req`` stored through the work queue by ``workers`` local worker processes."""
        from dataclasses import replace

        from .. import machine
        from ..ingest.workers import Coordinator
        from ..store.admin import free_connections

        if req.options.plan:
            raise UsageError(
                "--plan lists what one process would do; it takes no --workers",
                hint="run the plan without --workers (it stores nothing to share), then the run with them",
            )
        if "-" in req.targets:
            raise UsageError("stdin cannot be shared by workers", hint="ingest stdin without --workers")
        queue_options(workers=workers, lease=lease)

        if workers:  # refused before the run opens when not even one fits
            free, limit = free_connections(conn)
            if free < WORKER_CONNECTIONS + SPARE_CONNECTIONS:
                raise UsageError(
                    f"the server can take {free} more connection(s) (max_connections {limit}): "
                    f"no room for a local worker, which opens up to {WORKER_CONNECTIONS}",
                    hint="close idle sessions, raise max_connections, or ingest without --workers",
                )
            memory, need = machine.available_memory(), worker_memory(req.profile)
            if memory is not None and memory < need:
                raise UsageError(
                    f"this machine has {_mb(memory)} of memory available: "
                    f"no room for a local worker, which takes about {_mb(need)}",
                    hint="free some memory, ingest without --workers, or run `kbctl worker` on other "
                    "machines (with --workers 0 here)",
                )

        def spawn(run_id: int, items: int) -> list[subprocess.Popen]:
            """At most one worker a queued item (more would start with nothing to claim), and no more
            than the server's free connections, the machine's available memory and, for a model,
            its CPUs hold (``local_workers``)."""
            free, limit = free_connections(conn)
            n, warnings = local_workers(
                min(workers, items),
                free=free,
                limit=limit,
                memory=machine.available_memory(),
                cpus=machine.cpu_count(),
                profile=req.profile,
            )
            for warning in warnings:
                log.warning("%s", warning)
            argv = [sys.executable, "-m", "kbctl", "worker", "--run", str(run_id), "--lease", str(lease)]
            # stdout is the coordinator's results (--json): a worker's messages go to stderr only
            env, quiet = self._worker_env(), subprocess.DEVNULL
            return [subprocess.Popen(argv, env=env, stdin=quiet, stdout=quiet) for _ in range(n)]

        return replace(req, distribute=Coordinator(spawn=spawn if workers else None, fetch_options=fetch_opts))

    def _worker_env(self) -> dict[str, str]:
        """The environment of a local worker: this knowledge base's server, tenant and config file,
        and the run's trace (``TRACEPARENT``)."""
        env = dict(os.environ)
        if self.settings.dsn:
            env["KBCTL_DSN"] = self.settings.dsn
        else:
            env["KBCTL_HOME"] = str(self.settings.home)
        env["KBCTL_TENANT"] = self.tenant
        traceparent = telemetry.traceparent()  # the run's span: the workers' batches are its children
        if traceparent:
            env["TRACEPARENT"] = traceparent
            env.pop("TRACESTATE", None)
        if len(self.settings.sources) > 1:  # the packaged defaults, then the user's file
            env["KBCTL_CONFIG"] = self.settings.sources[-1]
        return env

    def work(
        self,
        namespaces: Sequence[str] = (),
        *,
        run_id: int | None = None,
        lease: float = 60.0,
        batch: int = 32,
        poll: float = 0.5,
        exit_idle: bool = False,
        progress: Progress | None = None,
    ) -> dict[str, int]:
        """Be a worker (``kbctl worker``): claim and store the items of run ``run_id`` until it is
        over, else of any running run of ``namespaces`` (default: every namespace of the tenant)
        with a work queue, until stopped (SIGTERM, Ctrl-C) or, with ``exit_idle``, idle. Returns
        what it did as the run counts it (batches, the items it settled, their documents and chunks
        counts) and ``taken_over``: items of its batches another worker settled (``ingest.workers.work``)."""
        from ..extract.options import ExtractOptions
        from ..ingest.workers import WorkerContext, WorkerOptions, work
        from ..sources.options import FetchOptions
        from ..store import queue

        queue_options(lease=lease, poll=poll, batch=batch)
        conn = self._conn()
        fetch_opts = FetchOptions.from_config(self.settings.fetch)
        extract_opts = ExtractOptions.from_config(self.settings.extract)
        names = list(namespaces)

        def ids() -> list[int]:
            return [self.kb.namespaces.get(n).id for n in names] if names else namespace_ids(conn, self.tenant)

        def context(ns_id: int) -> WorkerContext:
            name = queue.namespace_name(conn, ns_id)
            if name is None:
                raise UsageError(f"namespace {ns_id} is not one of tenant {self.tenant!r}'s")
            ns = self.kb.namespaces.get(name)
            prof = self.kb.namespaces.search_profile(ns)  # the profile it is pinned to
            return WorkerContext(ns, prof, self._acl_policy(name), fetch_opts, extract_opts)

        if run_id is not None and queue.run_status(conn, run_id) is None:
            raise UsageError(f"no run {run_id} in tenant {self.tenant!r}", hint="see `kbctl runs`")
        opts = WorkerOptions(lease=lease, batch=batch, poll=poll, exit_idle=exit_idle)
        return work(
            conn,
            connect=self.session.tenant_connection,
            context=context,
            namespaces=ids,
            run_id=run_id,
            options=opts,
            progress=progress,
        )

    def progress(self, namespace: str | None = None, run_id: int | None = None, limit: int = 5) -> list[dict]:
        """The work queue of run ``run_id``, else of the latest runs that had one (of ``namespace``,
        else of every namespace of the tenant): each run's items by state, the workers holding a
        lease, and the documents and chunks its workers' batches counted so far; once the run
        ended with its batches summed (ok, partial, failed_verify), the counts it recorded, as
        ``runs`` shows them: with what its coordinator counted itself, the documents ``--sync``
        removed and the items refused before any worker. (A run that failed or was interrupted
        while its workers stored recorded its coordinator's counts only: the batches' are shown.)"""
        from ..store import queue

        conn = self._conn()
        ids = self.kb.admin.ns_ids(namespace)
        if run_id is not None:  # "(none)" would say the run has no queue, where it does not exist
            self.kb.admin.check_run(run_id, namespace, ids)
        out = []
        for r in queue.latest_runs(conn, ids, 1_000_000 if run_id is not None else limit):
            if run_id is not None and r["run_id"] != run_id:
                continue
            p = queue.progress(conn, r["namespace_id"], r["run_id"])
            recorded = r.pop("counts")
            ended = (recorded or {}) if r["status"] in _SUMMED else {}
            documents: dict[str, int] = {}
            chunks: dict[str, int] = {}
            for c in [ended] if ended else queue.batch_counts(conn, r["namespace_id"], r["run_id"]):
                for k, v in (c.get("documents") or {}).items():
                    documents[k] = documents.get(k, 0) + int(v)
                for k, v in (c.get("chunks") or {}).items():
                    chunks[k] = chunks.get(k, 0) + int(v)
            r.pop("namespace_id")
            out.append({**r, **p, "documents": documents, "chunks": chunks})
        return out

    def ingest_records(
        self,
        records: Iterable[dict],
        namespace: str,
        *,
        profile: str | None = None,
        verify: bool = True,
        progress: Progress | None = None,
    ) -> RunReport:
        """Ingest records ``{"id", "title", "text", "metadata"[, "acl"]}`` (a BEIR corpus, a JSONL export).

        Each record is a document keyed by its ``id`` and goes through the normal pipeline, so a
        re-import is incremental too.
        """
        from ..ingest.pipeline import IngestRun

        prof = self._checked_profile(namespace, profile)  # before the tenant and the namespace are made
        conn = self._conn()
        ns = ensure_namespace(conn, namespace, self.tenant, prof)
        req = IngestRun(
            ns,
            prof,
            targets=("records",),
            sources=_record_sources(records),
            verify=verify,
            progress=progress,
            acl=self._acl_policy(namespace),
        )
        return self._run(conn, req, profile)

    def store(
        self,
        items: Iterable[Item | ItemError],
        namespace: str,
        *,
        profile: str | None = None,
        verify: bool = True,
        progress: Progress | None = None,
    ) -> RunReport:
        """Store items embedded upstream (``kbctl store``): the store stage (→ verify) of a run.

        The same lock, ledger and writer as ``ingest``: a source whose version is stored already is
        counted unchanged, an ``ItemError`` is recorded in the ledger. No items for a namespace
        that does not exist create nothing: neither the namespace nor a run (``run_id`` None), nor
        the tenant: the profile and the namespace are looked up as a plan reads
        (``Session.planning``), and the session says it writes once there is something to store.
        """
        import itertools

        from ..ingest.pipeline import IngestRun, RunReport

        with self.session.planning():
            prof = self.kb.namespaces.profile_for(namespace, profile)
            exists = get_namespace(self._conn(), namespace, self.tenant, required=False) is not None
        items = iter(items)
        first = next(items, None)  # a malformed first record fails here, before anything is made
        if first is None and not exists:
            return RunReport(run_id=None, namespace=namespace)
        if first is not None:
            items = itertools.chain([first], items)
        self.session.writing()
        conn = self._conn()
        ns = ensure_namespace(conn, namespace, self.tenant, prof)
        req = IngestRun(
            ns, prof, items=items, command="store", verify=verify, progress=progress, acl=self._acl_policy(namespace)
        )
        return self._run(conn, req, profile)

    def _refuse_only_missing_paths(self, targets: Sequence[str], namespace: str) -> None:
        """Every target a local path where nothing is, into a namespace not made yet: a mistyped
        command, refused before anything is made (the tenant, the namespace, a run). Into a
        namespace that exists, or with one target there, the batch rule holds: each missing path is
        a failed item (a folder of a cron job's that is not mounted keeps its documents)."""
        from ..ingest.fetch import missing_paths

        missing = missing_paths(targets)
        if not targets or len(missing) < len(targets):
            return
        with self.session.planning():  # read as a plan reads: nothing made, the tenant neither
            if get_namespace(self._conn(), namespace, self.tenant, required=False) is not None:
                return
        raise UsageError(
            f"no such file or folder: {', '.join(missing)}",
            hint=f"check the path; nothing was made (namespace {namespace!r} does not exist yet)",
        )

    def _run(self, conn, req, profile: str | None) -> RunReport:
        """``ingest.pipeline.run``, and once more (at most twice) when a swap or rollback moved the
        namespace to another generation while the run waited for its lock: nothing was read from
        the sources nor written yet, so the run goes on with the namespace read again and its new
        profile (an explicit ``profile`` that is not the new pin is refused as ever). A run that
        ``kb.close()`` cuts short (its statement cancelled) ends ``interrupted``, as Ctrl-C ends it
        (``_stopped``)."""
        from dataclasses import replace

        from ..ingest.pipeline import run

        req = replace(req, stopped=self._stopped)
        for _ in range(2):
            try:
                return run(conn, req, connect=self.session.tenant_connection)
            except GenerationMoved:
                prof = self.kb.namespaces.profile_for(req.namespace.name, profile)
                ns = get_namespace(conn, req.namespace.name, self.tenant)
                check_pin(ns, prof, conn)
                req = replace(req, namespace=ns, profile=prof)
        return run(conn, req, connect=self.session.tenant_connection)

    def _stopped(self) -> str | None:
        """Why a run of this session stopped, when it was from outside: the handle was closed."""
        if self.session.closing:
            return "the knowledge base was closed (kb.close()) while the run ran; run it again to go on"
        return None

    def verify(self, namespace: str, sample: int = 20) -> VerifyReport:
        """Check that a namespace's store is whole: counts, orphans, vectors, pin, indexes and
        ``sample`` chunks that must find themselves (``report.ok`` is False when a check fails)."""
        from ..ingest.verify import verify_namespace

        ns = self.kb.namespaces.get(namespace)
        return verify_namespace(self._conn(), ns, self.kb.namespaces.profile_for(namespace), sample)

    def _acl_policy(self, namespace: str):
        return AclPolicy.of(self.settings.namespace_acl(namespace))


def _record_sources(records: Iterable[dict]):
    for r in records:
        rid = str(r.get("id", r.get("_id", "")))
        if not rid:
            yield ItemError("fetch", "record", "UsageError", "record without an id")
            continue
        body: dict[str, Any] = {
            "title": r.get("title") or "",
            "text": r.get("text") or "",
            "metadata": r.get("metadata") or {},
        }
        if "acl" in r and isinstance(body["metadata"], dict):
            # kbctl.acl.lift_acl moves it to Document.acl; given without entries (null, [], "") it is
            # an ACL of no one, as front matter's "acl:" is: only a record without the key takes
            # the namespace's default
            body["metadata"] = {**body["metadata"], "acl": r["acl"]}
        yield Source(
            uri=rid, content=json.dumps(body, sort_keys=True).encode(), media_type=RECORD_MEDIA_TYPE, kind="record"
        )


class _DbFeedState:
    """ETag / Last-Modified of remote feeds, kept per namespace in ``kbctl.feed_state``.

    New values are saved only by ``commit()`` after the run stored the feed's entries, so a run
    killed before that fetches the feed in full again instead of getting a 304.
    """

    def __init__(self, conn, ns: Namespace) -> None:
        self.conn, self.ns = conn, ns
        self.pending: dict[str, tuple[str | None, str | None]] = {}

    def commit(self) -> None:
        for url, (etag, lm) in self.pending.items():
            self._save(url, etag, lm)
        self.pending.clear()

    def get(self, url: str):
        return feed_state(self.conn, self.ns, url)

    def set(self, url: str, etag: str | None, last_modified: str | None) -> None:
        self.pending[url] = (etag, last_modified)

    def _save(self, url: str, etag: str | None, last_modified: str | None) -> None:
        save_feed_state(self.conn, self.ns, url, etag, last_modified)


def _forget_if_untouched(conn, ns: Namespace) -> None:
    """Delete a namespace this call made when the call failed before it wrote anything (no run in
    the ledger, no document): a profile whose model cannot make its vectors failed as the model was
    made ready, and left the namespace pinned to that profile, so the mended profile's next ingest
    was refused for mixing two models. A failure here must not hide the one being raised."""
    from ..store.namespaces import delete_namespace, untouched

    try:
        if not conn.closed and untouched(conn, ns.id):
            delete_namespace(conn, ns.name, ns.tenant)
    except Exception as e:
        log.info("could not remove the empty namespace %r this failed ingest made: %s", ns.name, e)
