"""The library API: a ``KnowledgeBase`` opened on a store, and the verbs the CLI calls.

    import kbctl
    kb = kbctl.open()                                   # embedded server, default settings
    kb.ingest(["docs/"], namespace="billing_kb")
    result = kb.search("how long do refunds take", namespace="billing_kb")
    billing = kb.retriever("billing_kb")                # bound to one namespace for an agent
    billing.search("refund timeline")
"""

from __future__ import annotations

import functools
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Sequence

import psycopg

from .config import Profile, Settings, load_settings
from .db import Database
from .errors import ConfigError, UsageError, from_psycopg
from .pipeline import IngestOptions, Progress, RunReport, run_ingest
from .search import SearchOptions, parse_filters, run_search
from .store import Namespace, ensure_namespace, get_namespace, list_namespaces
from .store import runs as runs_store
from .types import ItemError, SearchResult

log = logging.getLogger(__name__)

__all__ = ["KnowledgeBase", "Retriever", "open_kb"]

_SEARCH_RETRIES = 2  # a search only reads: after a serialization failure or deadlock it simply runs again


def _psycopg_boundary(cls):
    """The library's error boundary: a psycopg error leaving a public method of ``cls`` leaves as a kbctl error."""
    for name, fn in list(vars(cls).items()):
        if callable(fn) and not name.startswith("_"):
            setattr(cls, name, _converting(fn))
    return cls


def _converting(fn):
    @functools.wraps(fn)
    def method(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except psycopg.Error as e:
            err = from_psycopg(e)  # keep psycopg's error as the cause of a new one, for debugging
            raise err from (e if err.__traceback__ is None else err.__cause__)

    return method


def _read_retried(read):
    """``read()``, run again (twice at most) when a serialization failure or deadlock cancels it."""
    for attempt in range(_SEARCH_RETRIES + 1):
        try:
            return read()
        except (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected) as e:
            if attempt == _SEARCH_RETRIES:
                raise
            log.info("search cancelled (%s); running it again", e.sqlstate)
            time.sleep(0.05 * (attempt + 1))


@_psycopg_boundary
class KnowledgeBase:
    """A store plus resolved settings. Holds one connection, opened on first use."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.db = Database(settings)
        self._conn = None
        self._sides: dict[str, Any] = {}

    # -- connection --------------------------------------------------------------------------------

    def connection(self):
        """The open connection (migrations applied when ``database.auto_migrate``)."""
        if self._conn is None or self._conn.closed:
            if self.settings.data["database"]["auto_migrate"]:
                self.db.migrate()
            self._conn = self.db.connect()
        return self._conn

    def _side_connection(self, purpose: str):
        """Another connection for one purpose of the search engine (opened on first use)."""
        c = self._sides.get(purpose)
        if c is None or c.closed:
            c = self._sides[purpose] = self.db.connect()
        return c

    def close(self) -> None:
        for c in (self._conn, *self._sides.values()):
            if c is not None and not c.closed:
                c.close()
        self._conn = None
        self._sides = {}

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def tenant(self) -> str:
        return self.settings.tenant

    # -- profiles and namespaces ------------------------------------------------------------------

    def profile_for(self, namespace: str, profile: str | None = None) -> Profile:
        """The profile to use with ``namespace``: explicit, declared in config, as stored, or the default."""
        if profile:
            return self.settings.profile(profile)
        declared = self.settings.namespace_profile(namespace)
        if declared:
            return self.settings.profile(declared)
        ns = get_namespace(self.connection(), namespace, self.tenant, required=False)
        if ns is not None:
            if ns.profile_name not in self.settings.profile_names():
                raise ConfigError(
                    f"namespace {namespace!r} is pinned to profile {ns.profile_name!r}, which this configuration does not define",
                    hint=f"add [profiles.{ns.profile_name}] to kbctl.toml with model {ns.model!r}, dimension {ns.dimension}",
                )
            return self.settings.profile(ns.profile_name)
        return self.settings.profile()

    def namespace(self, name: str) -> Namespace:
        return get_namespace(self.connection(), name, self.tenant)

    def namespaces(self, all_tenants: bool = False) -> list[dict]:
        return list_namespaces(self.connection(), None if all_tenants else self.tenant)

    def create_namespace(self, name: str, profile: str | None = None, description: str = "") -> Namespace:
        return ensure_namespace(self.connection(), name, self.tenant, self.profile_for(name, profile), description)

    # -- ingest -------------------------------------------------------------------------------------

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
    ) -> RunReport:
        """Run fetch → extract → chunk → embed → store (→ verify) over ``targets`` into ``namespace``.

        Fetching follows the ``[fetch]`` settings; ``follow_symlinks`` lets folder walks follow
        symlinks that lead out of the folders given (skipped and recorded otherwise).
        """
        conn = self.connection()
        prof = self.profile_for(namespace, profile)
        opts = IngestOptions(tuple(include), tuple(exclude), sync, plan, no_wait, follow_links)
        from .sources.options import FetchOptions  # a bad [fetch] table fails here, before the run starts

        fetch_opts = FetchOptions.from_config(self.settings.data.get("fetch", {}), follow_symlinks=follow_symlinks)
        if plan:
            ns = get_namespace(conn, namespace, self.tenant, required=False) or _placeholder(namespace, self.tenant, prof)
        else:
            ns = ensure_namespace(conn, namespace, self.tenant, prof)
        targets = list(targets)
        retried: list[str] = []
        if retry_failed and ns.id > 0:
            retried = runs_store.failed_sources(conn, ns)
            targets += [_target_of(s) for s in retried if _target_of(s) not in targets]
        if not targets:
            raise UsageError("nothing to ingest", hint="give files, folders, URLs or - for stdin")
        def sources(lookup):
            from .fetch import fetch

            state = _DbFeedState(lookup, ns) if ns.id > 0 and not opts.plan else None
            it = fetch(targets, include=opts.include, exclude=opts.exclude, follow_links=opts.follow_links, state=state, stdin=stdin,
                       options=fetch_opts)
            return it, state

        with runs_store.namespace_lock(conn, ns, wait=not no_wait) if not plan else _nullcontext():
            return self._ingest_locked(conn, ns, prof, targets, sources, _covered(targets), opts, progress, verify, retried)

    def ingest_records(
        self,
        records: Iterable[dict],
        namespace: str,
        *,
        profile: str | None = None,
        verify: bool = True,
        progress: Progress | None = None,
    ) -> RunReport:
        """Ingest records ``{"id", "title", "text", "metadata"}`` (a BEIR corpus, a JSONL export).

        Each record is a document keyed by its ``id`` and goes through the normal pipeline, so a
        re-import is incremental too.
        """
        conn = self.connection()
        prof = self.profile_for(namespace, profile)
        ns = ensure_namespace(conn, namespace, self.tenant, prof)
        opts = IngestOptions()
        with runs_store.namespace_lock(conn, ns):
            return self._ingest_locked(conn, ns, prof, ["records"], lambda lookup: (_record_sources(records), None),
                                       None, opts, progress, verify, [])

    def _ingest_locked(self, conn, ns, prof, targets, make_sources, covered, opts, progress, verify, retried) -> RunReport:
        run_id = None if opts.plan else runs_store.start_run(conn, ns, "ingest", {"targets": targets, "sync": opts.sync})
        lookup = self.db.connect()
        status = "failed"
        try:
            sources, state = make_sources(lookup)
            report = run_ingest(conn, ns, prof, sources, opts, lookup_conn=lookup, covered=covered,
                                run_id=run_id, progress=progress)
            status = "ok" if not report.errors else "partial"
            if state is not None:
                state.commit()
        finally:
            lookup.close()
            if run_id is not None and status == "failed":
                runs_store.finish_run(conn, ns, run_id, "failed", {})
        if run_id is not None:
            if retried:  # the ledger names sources by URI (file://…), not by the target given
                runs_store.mark_retried(conn, ns, retried)
            runs_store.record_errors(conn, ns, run_id, report.errors)
            runs_store.finish_run(conn, ns, run_id, status, report.to_json())
        if verify and not opts.plan:
            from .verify import verify_namespace

            report.verify = verify_namespace(conn, ns, prof).to_json()
        return report

    # -- search -------------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        namespace: str | Sequence[str],
        *,
        profile: str | None = None,
        mode: str = "auto",
        k: int | None = None,
        filters: Sequence[str] = (),
        **options: Any,
    ) -> SearchResult:
        """Search one namespace, or several listed explicitly (they must share a profile)."""
        names = [namespace] if isinstance(namespace, str) else list(namespace)
        if not names:
            raise UsageError("no namespace given", hint="pass --namespace NAME (repeat it to search several)")
        conn = self.connection()
        nss = [get_namespace(conn, n, self.tenant) for n in names]
        prof = self.profile_for(names[0], profile)
        opts = SearchOptions(mode=mode, k=k, filters=parse_filters(list(filters)), **options)
        return _read_retried(lambda: run_search(conn, nss, prof, query, opts, side=self._side_connection))

    def retriever(self, namespace: str, **defaults: Any) -> Retriever:
        """A search function bound to one namespace; the namespace cannot be changed per call."""
        self.namespace(namespace)  # fail now, not at the first query
        return Retriever(self, namespace, dict(defaults))

    # -- ledger -------------------------------------------------------------------------------------

    def runs(self, namespace: str | None = None, limit: int = 20) -> list[dict]:
        return runs_store.list_runs(self.connection(), self._ns_ids(namespace), limit)

    def errors(self, namespace: str | None = None, run_id: int | None = None, limit: int = 100) -> list[dict]:
        return runs_store.list_errors(self.connection(), self._ns_ids(namespace), run_id, limit)

    def _ns_ids(self, namespace: str | None) -> list[int]:
        if namespace:
            return [self.namespace(namespace).id]
        return [r[0] for r in self.connection().execute("SELECT id FROM kbctl.namespaces WHERE tenant = %s", (self.tenant,))]


@dataclass(frozen=True)
class Retriever:
    """Search bound to one namespace (for agents: the corpus is fixed when the retriever is made)."""

    kb: KnowledgeBase
    namespace: str
    defaults: dict

    def search(self, query: str, **options: Any) -> SearchResult:
        if "namespace" in options:
            raise UsageError(f"this retriever is bound to namespace {self.namespace!r}; it cannot search another")
        return self.kb.search(query, self.namespace, **{**self.defaults, **options})

    __call__ = search


def open_kb(
    *,
    config: str | Path | None = None,
    dsn: str | None = None,
    home: str | Path | None = None,
    tenant: str | None = None,
    profile: str | None = None,
) -> KnowledgeBase:
    """Open a knowledge base with layered settings (explicit arguments win)."""
    overrides = {
        "database.dsn": dsn,
        "database.home": str(home) if home else None,
        "defaults.tenant": tenant,
        "defaults.profile": profile,
    }
    return KnowledgeBase(load_settings(config, overrides))


from .extract.record import RECORD_MEDIA_TYPE  # noqa: E402


def _record_sources(records: Iterable[dict]):
    import json

    from .types import Source

    for r in records:
        rid = str(r.get("id", r.get("_id", "")))
        if not rid:
            yield ItemError("fetch", "record", "UsageError", "record without an id")
            continue
        body = {"title": r.get("title") or "", "text": r.get("text") or "", "metadata": r.get("metadata") or {}}
        yield Source(uri=rid, content=json.dumps(body, sort_keys=True).encode(), media_type=RECORD_MEDIA_TYPE, kind="record")


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _placeholder(name: str, tenant: str, prof: Profile) -> Namespace:
    return Namespace(-1, tenant, name, -1, prof.name, prof.fingerprint, prof.model, prof.dimension, prof.distance)


def _target_of(source_uri: str) -> str:
    return source_uri[len("file://"):] if source_uri.startswith("file://") else source_uri


def _covered(targets: Sequence[str]) -> Callable[[str], bool]:
    """Which stored source URIs the walked targets speak for (for --sync)."""
    prefixes, exact = [], set()
    for t in targets:
        if t == "-":
            continue
        p = Path(t)
        if p.is_dir():
            prefixes.append("file://" + os.path.abspath(t).rstrip("/") + "/")
        elif p.exists() or "://" not in t:
            exact.add("file://" + os.path.abspath(t))
        # URLs are never "gone": a fetch that failed or answered 304 yields no source
    return lambda uri: uri in exact or any(uri.startswith(px) for px in prefixes)


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
        row = self.conn.execute(
            "SELECT etag, last_modified FROM kbctl.feed_state WHERE namespace_id = %s AND url = %s", (self.ns.id, url)
        ).fetchone()
        return (row[0], row[1]) if row else None

    def set(self, url: str, etag: str | None, last_modified: str | None) -> None:
        self.pending[url] = (etag, last_modified)

    def _save(self, url: str, etag: str | None, last_modified: str | None) -> None:
        self.conn.execute(
            "INSERT INTO kbctl.feed_state (namespace_id, url, etag, last_modified) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (namespace_id, url) DO UPDATE SET etag = EXCLUDED.etag,"
            " last_modified = EXCLUDED.last_modified, updated_at = now()",
            (self.ns.id, url, etag, last_modified),
        )
