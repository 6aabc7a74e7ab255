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
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Iterable, Sequence

import psycopg

from .config import Profile, Settings, load_settings
from .db import Database, register_vector
from .errors import ConfigError, UsageError, from_psycopg
from .search import SearchOptions, parse_filters, run_search
from .store import Namespace, ensure_namespace, get_namespace, list_namespaces
from .store import runs as runs_store
from .types import ItemError, SearchResult

if TYPE_CHECKING:  # the ingest pipeline is imported when ingesting: a search does not load it
    from .pipeline import Item, Progress, RunReport

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
            conn = self.db.connect(register=False)
            if self.settings.data["database"]["auto_migrate"]:
                self.db.migrate(conn)  # on the same connection: a cold command opens one, not two
            register_vector(conn)  # after migrating: the vector type exists from migration 001 on
            self._conn = conn
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
        from .pipeline import IngestOptions, IngestRun, run
        from .sources.options import FetchOptions  # a bad [fetch] table fails here, before the run starts

        conn = self.connection()
        prof = self.profile_for(namespace, profile)
        fetch_opts = FetchOptions.from_config(self.settings.data.get("fetch", {}), follow_symlinks=follow_symlinks)
        if plan:
            ns = get_namespace(conn, namespace, self.tenant, required=False) or _placeholder(namespace, self.tenant, prof)
        else:
            ns = ensure_namespace(conn, namespace, self.tenant, prof)
        opts = IngestOptions(tuple(include), tuple(exclude), sync, plan, no_wait, follow_links)
        req = IngestRun(ns, prof, targets=tuple(targets), options=opts, fetch_options=fetch_opts, stdin=stdin,
                        feed_state=_DbFeedState, retry_failed=retry_failed, verify=verify, progress=progress)
        return run(conn, req, connect=self.db.connect)

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
        from .pipeline import IngestRun, run

        conn = self.connection()
        prof = self.profile_for(namespace, profile)
        ns = ensure_namespace(conn, namespace, self.tenant, prof)
        req = IngestRun(ns, prof, targets=("records",), sources=_record_sources(records), verify=verify, progress=progress)
        return run(conn, req, connect=self.db.connect)

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
        counted unchanged, an ``ItemError`` is recorded in the ledger.
        """
        from .pipeline import IngestRun, run

        conn = self.connection()
        prof = self.profile_for(namespace, profile)
        ns = ensure_namespace(conn, namespace, self.tenant, prof)
        req = IngestRun(ns, prof, items=items, command="store", verify=verify, progress=progress)
        return run(conn, req, connect=self.db.connect)

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
        from .store.namespaces import namespace_ids

        return namespace_ids(self.connection(), self.tenant)


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


def _placeholder(name: str, tenant: str, prof: Profile) -> Namespace:
    return Namespace(-1, tenant, name, -1, prof.name, prof.fingerprint, prof.model, prof.dimension, prof.distance)


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
        from .store.feeds import feed_state

        return feed_state(self.conn, self.ns, url)

    def set(self, url: str, etag: str | None, last_modified: str | None) -> None:
        self.pending[url] = (etag, last_modified)

    def _save(self, url: str, etag: str | None, last_modified: str | None) -> None:
        from .store.feeds import save_feed_state

        save_feed_state(self.conn, self.ns, url, etag, last_modified)
