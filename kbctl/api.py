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
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Iterable, Iterator, Sequence

import psycopg

from . import validate
from .config import Profile, Settings, load_settings
from .db import Database, register_vector
from .errors import CheckFailed, ConfigError, UsageError, from_psycopg
from .search import SearchOptions, parse_filters, run_search
from .store import Namespace, delete_namespace, ensure_namespace, get_namespace, list_namespaces, rebind_namespace
from .store import runs as runs_store
from .types import ItemError, Principal, SearchResult

if TYPE_CHECKING:  # the ingest pipeline is imported when ingesting: a search does not load it
    from .acl import Gate
    from .db import Migration
    from .evaluate import EvalRun
    from .generations import BuildReport, ReembedPlan
    from .pipeline import Item, Progress, RunReport
    from .verify import VerifyReport

log = logging.getLogger(__name__)

__all__ = ["KnowledgeBase", "Retriever", "DatabaseStatus", "open_kb"]

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
        validate.name("tenant", settings.tenant)  # every namespace name is scoped by it
        self.settings = settings
        self.db = Database(settings)
        self._conn = None
        self._sides: dict[str, Any] = {}
        self._role: str | None = None  # this tenant's role, once looked up

    # -- connection --------------------------------------------------------------------------------

    def connection(self):
        """The open connection (migrations applied when ``database.auto_migrate``)."""
        if self._conn is None or self._conn.closed:
            conn = self.db.connect(register=False)
            if self.settings.data["database"]["auto_migrate"]:
                self.db.migrate(conn)  # on the same connection: a cold command opens one, not two
            register_vector(conn)  # after migrating: the vector type exists from migration 001 on
            self._enter_tenant(conn)
            self._conn = conn
        return self._conn

    def _side_connection(self, purpose: str):
        """Another connection for one purpose of the search engine (opened on first use)."""
        c = self._sides.get(purpose)
        if c is None or c.closed:
            c = self._sides[purpose] = self._tenant_connection()
        return c

    def _tenant_connection(self):
        """A new connection acting as this tenant's role (the ingest lookup's, the search engine's sides)."""
        conn = self.db.connect()
        try:
            self._enter_tenant(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _enter_tenant(self, conn) -> None:
        """``SET ROLE`` to the tenant's role: row-level security then holds every statement to its rows.

        Embedded, a tenant's role is created on first use; with a DSN it must exist (``kbctl tenants create``).
        """
        from .store import tenants

        if self._role is None:
            role = tenants.tenant_role(conn, self.tenant)
            if role is None and not self.db.embedded:
                raise ConfigError(
                    f"tenant {self.tenant!r} has no role on this server",
                    hint=f"the database owner creates it: kbctl --tenant {self.tenant} tenants create",
                )
            self._role = role or tenants.create_tenant(conn, self.tenant)
        tenants.enter(conn, self._role)

    def _admin_connection(self):
        """A connection acting as the role kbctl logs in as (the tables' owner), migrated when
        ``database.auto_migrate``: for ``kbctl tenants`` and other administration."""
        conn = self.db.connect(register=False)
        try:
            if self.settings.data["database"]["auto_migrate"]:
                self.db.migrate(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def close(self) -> None:
        for c in (self._conn, *self._sides.values()):
            if c is not None and not c.closed:
                c.close()
        self._conn = None
        self._sides = {}
        self._role = None

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

    def _at_generation(self, ns: Namespace, state: str) -> Namespace:
        from . import generations as gen

        g = gen.generation_of(self.connection(), ns, state)
        if g is None:
            raise UsageError(f"namespace {ns.name!r} has no {state} generation")
        return gen.as_generation(ns, g)

    def _search_profile(self, ns: Namespace, profile: str | None) -> Profile:
        """The profile a search of ``ns`` embeds its query with: explicit, else its active
        generation's (as read with ``ns``), else what ``profile_for`` finds."""
        if profile:
            return self.settings.profile(profile)
        if ns.profile_name in self.settings.profile_names():
            prof = self.settings.profile(ns.profile_name)
            if prof.fingerprint == ns.fingerprint:
                return prof
        if ns.generation_id:  # as recorded: a generation's profile needs no configuration to search it
            from .generations import stored_profile

            return stored_profile(self.connection(), ns.profile_id, self.settings.profile())
        return self.profile_for(ns.name)

    def namespace(self, name: str) -> Namespace:
        return get_namespace(self.connection(), name, self.tenant)

    def namespaces(self, all_tenants: bool = False) -> list[dict]:
        """This tenant's namespaces with their profile and counts; ``all_tenants``: every registered
        tenant's, each read as that tenant's role (on the owner's connection)."""
        if not all_tenants:
            return list_namespaces(self.connection(), self.tenant)
        from .store import tenants

        conn = self._admin_connection()
        try:
            rows = []
            for t in tenants.list_tenants(conn):
                with tenants.as_role(conn, t["role"]):
                    rows += list_namespaces(conn, t["name"])
            return rows
        finally:
            conn.close()

    # -- tenants (row-level security: a role per tenant) --------------------------------------------

    def create_tenant(self, name: str | None = None) -> dict:
        """Register tenant ``name`` (default: this one) and create its NOLOGIN role; idempotent.

        Needs a login that may create roles (the tables' owner with CREATEROLE, or a superuser)."""
        from .store import tenants

        tenant = validate.name("tenant", name or self.tenant)
        conn = self._admin_connection()
        try:
            return {"tenant": tenant, "role": tenants.create_tenant(conn, tenant)}
        finally:
            conn.close()

    def tenants(self) -> list[dict]:
        """The registered tenants with their roles (every one, to the tables' owner)."""
        from .store import tenants

        conn = self._admin_connection()
        try:
            return tenants.list_tenants(conn)
        finally:
            conn.close()

    def delete_tenant(self, name: str) -> dict | None:
        """Delete a tenant's namespaces (with everything in them), its audit, tokens and query log,
        then its role; what went, or None when no such tenant is registered."""
        from .store import tenants

        conn = self._admin_connection()
        try:
            gone = tenants.delete_tenant(conn, validate.name("tenant", name))
        finally:
            conn.close()
        if name == self.tenant:
            self.close()
            self._role = None
        return gone

    def create_namespace(self, name: str, profile: str | None = None, description: str = "") -> Namespace:
        """Create ``name`` pinned to a profile (or return it, when it exists with the same pin)."""
        return ensure_namespace(self.connection(), name, self.tenant, self.profile_for(name, profile), description)

    def bind_namespace(self, name: str, profile: str) -> Namespace:
        """Pin an existing namespace to another profile.

        Refused (``ConfigError``) when it holds vectors of another model or dimension: the new
        profile could not search them.
        """
        return rebind_namespace(self.connection(), name, self.tenant, self.settings.profile(profile))

    def delete_namespace(self, name: str) -> int:
        """Delete a namespace with its documents and chunks; returns how many documents it held."""
        return delete_namespace(self.connection(), name, self.tenant)

    # -- generations (docs/lifecycle.md) ---------------------------------------------------------------

    def generations(self, namespace: str) -> list[dict]:
        """A namespace's generations: profile, storage, state, vectors and bytes on disk."""
        from . import generations as gen

        return gen.describe(self.connection(), self.namespace(namespace))

    def reembed(
        self,
        namespace: str,
        profile: str | None = None,
        *,
        storage: str | None = None,
        plan: bool = False,
        batch: int = 256,
        progress: Callable[[int, int], None] | None = None,
    ) -> BuildReport | ReembedPlan:
        """Build (or resume) the shadow generation of ``profile`` stored as ``storage`` (default: the
        profile's ``storage``): every chunk gets a vector, from the embed cache or the model. Without
        ``profile``, resumes the shadow being built. ``plan``: what it would embed, and how long."""
        from . import generations as gen

        conn = self.connection()
        ns = self.namespace(namespace)
        shadow = gen.generation_of(conn, ns, "shadow")
        active = self._search_profile(ns, None)
        if profile is None and shadow is None:
            raise UsageError(f"namespace {namespace!r} has no shadow generation", hint="pass --profile NAME")
        prof = (
            self.settings.profile(profile) if profile else gen.stored_profile(conn, shadow.profile_id, active)  # type: ignore[union-attr]
        )
        store_as = storage or (shadow.storage if profile is None and shadow else prof.storage)
        if store_as not in ("vector", "halfvec"):
            raise UsageError(f"storage must be vector or halfvec, not {store_as!r}")
        if plan:
            return gen.plan(conn, ns, prof, store_as)
        target = gen.start_shadow(conn, ns, prof, store_as, active)
        return gen.build(conn, ns, target, prof, batch=batch, progress=progress)

    def swap_generation(
        self,
        namespace: str,
        *,
        require: Sequence[str] = (),
        dataset: str | Path | None = None,
        limit: int | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict:
        """Make the shadow generation active (one transaction, under the namespace lock). ``require``
        gates (``hybrid:ndcg@10>=active``, ``dense:recall@10>=0.8``) are checked first on ``dataset``
        side by side; one failing raises ``CheckFailed`` (exit 3) and nothing is swapped."""
        from . import generations as gen

        out: dict[str, Any] = {}
        if require:
            if dataset is None:
                raise UsageError("--require needs --eval DATASET", hint="the gates compare the generations on it")
            side = self.compare_generations(namespace, dataset, limit=limit)
            failures = gen.check_gates(side, require)
            out["eval"] = side
            if failures:
                raise CheckFailed("swap refused: " + "; ".join(failures), hint="nothing was swapped")
        ns = self.namespace(namespace)
        out.update(gen.swap(self.connection(), ns, self._search_profile(ns, None), progress=progress))
        return out

    def rollback_generation(self, namespace: str) -> dict:
        """Make the previous generation active again (one transaction, under the namespace lock)."""
        from . import generations as gen

        ns = self.namespace(namespace)
        return gen.rollback(self.connection(), ns, self._search_profile(ns, None))

    def drop_generation(self, namespace: str, state: str = "previous") -> dict:
        """Delete the ``previous`` generation (no rollback after it) or the ``shadow`` being built."""
        from . import generations as gen

        ns = self.namespace(namespace)
        if state == "previous":
            return gen.drop_old(self.connection(), ns)
        if state == "shadow":
            return gen.drop_shadow(self.connection(), ns)
        raise UsageError(f"cannot drop the {state} generation", hint="drop previous or shadow")

    def compare_generations(
        self,
        namespace: str,
        dataset: str | Path,
        *,
        modes: Sequence[str] = ("lexical", "dense", "hybrid"),
        k: int = 10,
        depth: int = 100,
        split: str = "test",
        limit: int | None = None,
    ) -> dict:
        """The eval of ``dataset`` on the active and the shadow generation, side by side: each
        mode's metrics and latency, and each generation's size on disk."""
        sides: dict[str, Any] = {}
        gens = {g["state"]: g for g in self.generations(namespace)}
        if "shadow" not in gens:
            raise UsageError(f"namespace {namespace!r} has no shadow generation to compare")
        for state in ("active", "shadow"):
            run = self.evaluate(
                dataset, namespace=namespace, modes=modes, k=k, depth=depth, split=split, limit=limit,
                generation=state,
            )  # fmt: skip
            sides[state] = {
                "generation": gens[state],
                "modes": {m.mode: dict(m.metrics) for m in run.report.modes},
            }
        return {"namespace": namespace, "dataset": str(dataset), "k": k, **sides}

    def verify(self, namespace: str, sample: int = 20) -> VerifyReport:
        """Check that a namespace's store is whole: counts, orphans, vectors, pin, indexes and
        ``sample`` chunks that must find themselves (``report.ok`` is False when a check fails)."""
        from .verify import verify_namespace

        ns = self.namespace(namespace)
        return verify_namespace(self.connection(), ns, self.profile_for(namespace), sample)

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
        from .extract.options import ExtractOptions  # so does a bad [extract] table
        from .pipeline import IngestOptions, IngestRun, run
        from .sources.options import FetchOptions  # a bad [fetch] table fails here, before the run starts

        conn = self.connection()
        prof = self.profile_for(namespace, profile)
        fetch_opts = FetchOptions.from_config(self.settings.data.get("fetch", {}), follow_symlinks=follow_symlinks)
        extract_opts = ExtractOptions.from_config(self.settings.data.get("extract", {}))
        if plan:
            ns = get_namespace(conn, namespace, self.tenant, required=False) or _placeholder(
                namespace, self.tenant, prof
            )
        else:
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
        return run(conn, req, connect=self._tenant_connection)

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
        from .pipeline import IngestRun, run

        conn = self.connection()
        prof = self.profile_for(namespace, profile)
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
        return run(conn, req, connect=self._tenant_connection)

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
        req = IngestRun(
            ns, prof, items=items, command="store", verify=verify, progress=progress, acl=self._acl_policy(namespace)
        )
        return run(conn, req, connect=self._tenant_connection)

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
        principal: Principal | None = None,
        unrestricted: bool = False,
        **options: Any,
    ) -> SearchResult:
        """Search one namespace, or several listed explicitly (they must share a profile).

        ``principal`` is who is searching: hits of documents they may not view are withheld after
        ranking and counted in ``result.withheld`` (``kbctl.acl``). Without one the search is
        anonymous: ``public`` documents, and documents without an ACL in namespaces whose
        ``acl_default`` is ``public``. ``unrestricted=True`` (library only) skips the gate.
        """
        names = [namespace] if isinstance(namespace, str) else list(namespace)
        if not names:
            raise UsageError("no namespace given", hint="pass --namespace NAME (repeat it to search several)")
        conn = self.connection()
        nss = [get_namespace(conn, n, self.tenant) for n in names]
        generation = options.pop("generation", None)
        if generation not in (None, "active"):  # an eval of a shadow or previous generation
            nss = [self._at_generation(ns, generation) for ns in nss]
        # Each namespace and its generation are read once: the whole search (lanes, feedback, query
        # embedding) uses them, so a swap meanwhile cannot mix two generations' vectors.
        prof = self._search_profile(nss[0], profile)
        opts = _search_options(mode=mode, k=k, filters=filters, **options)
        gate = self._gate(nss, principal, unrestricted)
        result = _read_retried(lambda: run_search(conn, nss, prof, query, opts, side=self._side_connection, gate=gate))
        if principal is not None and self.settings.data["audit"]["enabled"]:
            from .store.audit import record_search

            record_search(
                conn, self.tenant, nss, principal, query, result, self.settings.data["audit"]["retention_days"]
            )
        return result

    def principal(self, user: str | None, groups: Sequence[str] = ()) -> Principal | None:
        """Who is searching, from ``user:u1042`` (or ``u1042``) and group names (``eng`` or
        ``group:eng``); None when neither is given. A malformed one is a UsageError."""
        try:
            return Principal.parse(user, tuple(groups))
        except ValueError as e:
            raise UsageError(str(e), hint="pass --as user:ID and --group NAME") from None

    def _gate(self, nss: Sequence[Namespace], principal: Principal | None, unrestricted: bool) -> Gate:
        """The view-permission gate of a search over ``nss`` (their ``acl_default`` from the config)."""
        from .acl import Gate

        if principal is not None and not isinstance(principal, Principal):
            raise UsageError(f"principal must be a kbctl.Principal, got {type(principal).__name__}")
        if unrestricted is not False and (unrestricted is not True or principal is not None):
            raise UsageError(
                "unrestricted=True searches as no one in particular", hint="pass either principal= or unrestricted=True"
            )
        return Gate(principal, {n.id: self.settings.namespace_acl(n.name).default for n in nss}, unrestricted)

    def _acl_policy(self, namespace: str):
        from .acl import AclPolicy

        return AclPolicy.of(self.settings.namespace_acl(namespace))

    def audit(self, limit: int = 100) -> list[dict]:
        """This tenant's latest audited searches (``[audit] enabled``), newest first."""
        from .store.audit import list_audit

        return list_audit(self.connection(), self.tenant, limit)

    def prune_audit(self) -> int:
        """Delete audit rows older than ``[audit] retention_days``; how many went."""
        from .store.audit import prune

        return prune(self.connection(), self.settings.data["audit"]["retention_days"])

    def retriever(self, namespace: str, **defaults: Any) -> Retriever:
        """A search function bound to one namespace; the namespace cannot be changed per call.

        ``principal=`` among the defaults binds who is searching (a call may pass another)."""
        self.namespace(namespace)  # fail now, not at the first query
        _search_options(
            **{k: v for k, v in defaults.items() if k not in ("profile", "principal", "unrestricted")}
        )  # and for bad defaults
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

    # -- the stages as NDJSON records (kbctl fetch | extract | chunk | embed | store) ---------------

    def fetch_records(
        self,
        targets: Sequence[str],
        *,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        follow_links: bool = False,
        follow_symlinks: bool = False,
        stdin: BinaryIO | None = None,
    ) -> Iterator[dict]:
        """``source`` records of what ``targets`` name (an ``error`` record for each that fails), per ``[fetch]``."""
        from .fetch import FetchOptions, fetch
        from .stages import source_records

        opts = FetchOptions.from_config(self.settings.data.get("fetch", {}), follow_symlinks=follow_symlinks)
        return source_records(
            fetch(
                list(targets),
                include=list(include),
                exclude=list(exclude),
                follow_links=follow_links,
                options=opts,
                stdin=stdin,
            )
        )

    def extract_records(self, lines: Iterable[str]) -> Iterator[dict]:
        """NDJSON ``source`` records → ``document`` records; other records pass through."""
        from . import stages
        from .extract.options import ExtractOptions

        options = ExtractOptions.from_config(self.settings.data.get("extract", {}))
        return stages.extract_records(stages.read_records(lines), options)

    def chunk_records(
        self, lines: Iterable[str], *, namespace: str | None = None, profile: str | None = None
    ) -> Iterator[dict]:
        """NDJSON ``document`` records → ``chunked`` records, in the tokens of the namespace's (or the named) profile."""
        from . import stages

        return stages.chunk_records(stages.read_records(lines), self._stage_profile(namespace, profile))

    def embed_records(
        self, lines: Iterable[str], *, namespace: str | None = None, profile: str | None = None
    ) -> Iterator[dict]:
        """NDJSON ``chunked`` records → ``embedded`` records; chunks ``namespace`` stores already keep their vectors."""
        from . import stages

        prof = self._stage_profile(namespace, profile)
        return stages.embed_records(stages.read_records(lines), prof, cache=self._stored_vectors(namespace))

    def store_records(
        self, lines: Iterable[str], namespace: str, *, profile: str | None = None, verify: bool = True
    ) -> RunReport:
        """Write NDJSON ``embedded`` (and ``error``) records into ``namespace``: ``store`` over them as items."""
        from . import stages

        prof = self.profile_for(namespace, profile)
        return self.store(
            stages.store_items(stages.read_records(lines), prof), namespace, profile=prof.name, verify=verify
        )

    def _stage_profile(self, namespace: str | None, profile: str | None) -> Profile:
        return self.profile_for(namespace, profile) if namespace else self.settings.profile(profile)

    def _stored_vectors(self, namespace: str | None):
        """``lookup(hashes) -> {hash: vector}`` over the namespace's stored chunks; None without one."""
        ns = get_namespace(self.connection(), namespace, self.tenant, required=False) if namespace else None
        if ns is None:
            return None
        from .store import cached_vectors

        return lambda hashes: cached_vectors(self.connection(), ns, hashes)

    # -- the database ------------------------------------------------------------------------------

    def migrate(self, target: int | None = None) -> list[Migration]:
        """Apply pending schema migrations (up to version ``target``); returns those applied now.

        Each runs in a transaction under an advisory lock, so concurrent callers apply it once.
        """
        return self.db.migrate(target=target)

    def db_status(self) -> DatabaseStatus:
        """The server, its PostgreSQL and pgvector versions, and every migration with its checksum.

        On a connection of its own that does not migrate: pending migrations show as not applied.
        """
        from .store.admin import server_versions

        conn = self.db.connect(register=False)
        try:
            rows = self.db.status(conn)
            version, pgvector = server_versions(conn)
        finally:
            conn.close()
        embedded = self.db.embedded
        return DatabaseStatus(
            embedded,
            self.settings.home if embedded else None,
            self.db.pgdata if embedded else None,
            version,
            pgvector,
            rows,
        )

    def optimize(self, *, reindex: bool = False, full: bool = False) -> list[dict]:
        """Vacuum and analyze kbctl's tables; ``reindex`` also compacts their B-tree indexes, ``full``
        rewrites everything under exclusive locks. Returns each table's bytes before and after."""
        from .store.admin import optimize

        conn = self.db.connect(register=False)  # autocommit: VACUUM cannot run in a transaction
        try:
            return optimize(conn, reindex=reindex, full=full)
        finally:
            conn.close()

    def start_server(self) -> Path | None:
        """Start the embedded server (it stays up until ``stop_server``); its data directory, or None with a DSN."""
        if not self.db.embedded:
            return None
        self.db.dsn()
        return self.db.pgdata

    def stop_server(self) -> bool:
        """Stop the embedded server; False when none was running."""
        return self.db.stop()

    def dsn(self) -> str:
        """The connection URL (the embedded server is started when there is no DSN)."""
        return self.db.dsn()

    # -- the agent surface (kbctl serve, kbctl mcp) -----------------------------------------------

    def document(
        self,
        doc_id: int,
        namespaces: Sequence[str],
        *,
        around_chunk: int | None = None,
        window: int = 2,
        principal: Principal | None = None,
    ) -> dict:
        """Document ``doc_id`` if it is in one of ``namespaces`` and ``principal`` may view it: its fields
        and its chunks (all of them, or ``window`` on each side of chunk ``around_chunk``).

        Anything else (no such document, another namespace, withheld by its ACL, a chunk not of this
        document) is the same ``UsageError`` ("… is not available"), so a caller learns nothing of it.
        """
        from .store.reading import chunk_position, document_chunks, document_row

        validate.count("window", window, 0, 50)
        conn = self.connection()
        nss = {n.id: n for n in (get_namespace(conn, name, self.tenant, required=False) for name in namespaces) if n}
        row = document_row(conn, int(doc_id), list(nss)) if nss else None
        if row is None or not self._gate(list(nss.values()), principal, False).allows(row["namespace_id"], row["acl"]):
            raise _unavailable("document", doc_id)
        lo, hi = 0, max(row["chunk_count"], 1)
        if around_chunk is not None:
            pos = chunk_position(conn, row["namespace_id"], row["id"], int(around_chunk))
            if pos is None:
                raise _unavailable("chunk", around_chunk)
            lo, hi = max(pos - window, 0), pos + window
        chunks = document_chunks(conn, row["namespace_id"], row["id"], lo, hi)
        doc = {k: v for k, v in row.items() if k not in ("namespace_id", "acl")}
        return {**doc, "doc_id": doc.pop("id"), "chunks": chunks}

    def chunk(self, chunk_id: int, namespaces: Sequence[str], *, highlight: str | Path | None = None) -> dict:
        """Chunk ``chunk_id`` of one of ``namespaces``: its text, heading path, page, the boxes of its
        lines on the PDF page (``boxes``) and its document's uri and title. With ``highlight``, the
        page of a PDF chunk is rendered to that PNG file with the passage boxed (the PDF is read
        again from its path: ``kbctl.extract.highlight``). A chunk that is not there is a UsageError."""
        from .extract.base import file_path
        from .store.reading import chunk_row

        conn = self.connection()
        nss = [n for n in (get_namespace(conn, name, self.tenant, required=False) for name in namespaces) if n]
        row = chunk_row(conn, int(chunk_id), [n.id for n in nss]) if nss else None
        if row is None or not self._gate(nss, None, True).allows(row["namespace_id"], row["acl"]):
            raise _unavailable("chunk", chunk_id)
        meta = dict(row["metadata"] or {})
        out = {k: row[k] for k in ("chunk_id", "doc_id", "position", "text", "heading_path", "page", "uri", "title")}
        out["boxes"] = meta.get("boxes", [])
        if highlight is not None:
            path = file_path(row["uri"]) or ""
            if row["source_type"] != "pdf" or not path:
                raise UsageError(
                    f"chunk {chunk_id} is not from a PDF file", hint="--highlight shows passages of PDF files"
                )
            from .extract.highlight import render_highlight

            try:
                data = Path(path).read_bytes()
            except OSError as e:
                raise UsageError(
                    f"cannot read {path}: {e.strerror}", hint="the PDF must still be where it was ingested from"
                ) from e
            out["highlight"] = render_highlight(data, out["boxes"], Path(highlight))
        return out

    def namespace_names(self) -> list[str]:
        """This tenant's namespace names (without the counts ``namespaces`` reads)."""
        from .store.reading import namespace_names

        return namespace_names(self.connection(), self.tenant)

    def passage_vectors(self, hits: Sequence[Any]) -> dict[tuple[str, int], Any]:
        """The stored vector of each hit's chunk, keyed by (namespace name, chunk id) (for MMR)."""
        return self.passage_vectors_and_profiles(hits)[0]

    def passage_vectors_and_profiles(
        self, hits: Sequence[Any]
    ) -> tuple[dict[tuple[str, int], Any], dict[str, Profile]]:
        """The stored vector of each hit's chunk and, per namespace, the profile that made them: both
        from one read of each namespace, so a swap between the two cannot pair a vector of one
        generation with the query embedder of another."""
        from .store.search import feedback_vectors

        conn = self.connection()
        spaces = {n: get_namespace(conn, n, self.tenant) for n in {h.namespace for h in hits}}
        ids = {n: ns.id for n, ns in spaces.items()}
        names = {v: k for k, v in ids.items()}
        gens = [ns.generation_id for ns in spaces.values()]
        vecs = feedback_vectors(conn, [(ids[h.namespace], h.chunk_id) for h in hits], gens)
        profiles = {n: self._search_profile(ns, None) for n, ns in spaces.items()}
        return {(names[a], b): v for (a, b), v in vecs.items()}, profiles

    def create_agent_token(self, agent: str) -> str:
        """A new bearer token for ``[agents.AGENT]`` (stored hashed: it is shown only now)."""
        import secrets

        from .store.agents import create_token

        if agent not in self.settings.data.get("agents", {}):
            raise ConfigError(f"no agent {agent!r} is configured", hint=f"add [agents.{agent}] to kbctl.toml")
        token = "kb_" + secrets.token_urlsafe(32)
        create_token(self.connection(), self.tenant, agent, token)
        return token

    def revoke_agent_tokens(self, agent: str) -> int:
        """Revoke every token of ``agent``; how many were valid."""
        from .store.agents import revoke_tokens

        return revoke_tokens(self.connection(), self.tenant, agent)

    def agent_of_token(self, token: str) -> tuple[str, str] | None:
        """(tenant, agent) of a valid bearer token, else None."""
        from .store.agents import agent_of_token

        return agent_of_token(self.connection(), token)

    def log_query(self, agent: str, tool: str, result: SearchResult) -> int:
        """Log a query of ``agent`` and the documents it returned (``[server] log_queries``); its id."""
        from .store.agents import log_query

        conn = self.connection()
        ids = {n: get_namespace(conn, n, self.tenant).id for n in result.namespaces}
        docs = list(dict.fromkeys((ids[h.namespace], h.doc_id) for h in result.hits))
        return log_query(conn, self.tenant, agent, tool, list(ids.values()), result.query, docs)

    def record_feedback(self, agent: str, query_id: int, doc_id: int, useful: bool) -> None:
        """Judge a document a logged query of ``agent`` returned; any other pair is ``_unavailable``."""
        from .store.agents import logged_query, record_feedback

        logged = logged_query(self.connection(), int(query_id), self.tenant, agent)
        if logged is None:
            raise _unavailable("query", query_id)
        owners = [ns for ns, d in logged[1] if d == int(doc_id)]
        if not owners:
            raise _unavailable("document", doc_id)
        record_feedback(self.connection(), int(query_id), owners[0], int(doc_id), bool(useful))

    def import_feedback(self, namespace: str, path: str | Path) -> int:
        """Write the judged queries over ``namespace`` as a golden JSONL eval dataset (``kbctl eval
        run`` reads it); how many queries. A query with no useful document is left out."""
        import json

        from .store.agents import judged_queries

        queries: dict[int, dict] = {}
        for qid, text, uri, useful in judged_queries(self.connection(), self.namespace(namespace).id):
            q = queries.setdefault(qid, {"id": f"fb{qid}", "query": text, "namespace": namespace, "relevant": {}})
            q["relevant"][uri] = 1 if useful else 0
        keep = [q for q in queries.values() if any(g > 0 for g in q["relevant"].values())]
        Path(path).write_text("".join(json.dumps(q, sort_keys=True) + "\n" for q in keep))
        return len(keep)

    def stats(self) -> dict:
        """Ingest figures of this tenant from the run ledger (what ``/metrics`` exports, without a server)."""
        from .store.reading import ledger_stats

        rows = ledger_stats(self.connection(), self.tenant)
        totals = {k: sum(r[k] for r in rows) for k in ("runs", "documents", "chunks", "errors")}
        return {"tenant": self.tenant, "totals": totals, "namespaces": rows}

    def serve(self, *, host: str | None = None, port: int | None = None) -> None:
        """Run ``kbctl serve``: MCP over streamable HTTP at /mcp, the JSON API, /healthz and /metrics
        (``kbctl.server``), until SIGTERM or Ctrl-C; requests in flight are drained first."""
        from .server import serve_http

        serve_http(self.settings, KnowledgeBase, host=host, port=port)

    def serve_stdio(self, agent: str | None = None) -> None:
        """Run ``kbctl mcp``: MCP over stdin/stdout, scoped to ``[agents.AGENT]`` when given."""
        from .server import serve_stdio

        serve_stdio(self.settings, KnowledgeBase, agent)

    def search_via_server(self, query: str, namespace: str | Sequence[str], **options: Any) -> SearchResult:
        """``search``, answered by the running server at ``[server] url`` when there is one (a warm
        process: no model load), else (none configured, unreachable, or options it does not take)
        in this process."""
        from .server.client import forward_search

        result = forward_search(self.settings, query, namespace, options)
        return result if result is not None else self.search(query, namespace, **options)

    # -- evaluation --------------------------------------------------------------------------------

    def import_beir(
        self, path: str | Path, namespace: str, *, profile: str | None = None, progress: Progress | None = None
    ) -> RunReport:
        """Ingest a BEIR ``corpus.jsonl`` as documents keyed by their ``_id`` (incremental, the normal pipeline)."""
        from .evaluate import import_beir

        return import_beir(self, Path(path), namespace, profile=profile, progress=progress)

    def evaluate(
        self,
        dataset: str | Path,
        *,
        namespace: str | None = None,
        modes: Sequence[str] = ("lexical", "dense", "hybrid"),
        k: int = 10,
        depth: int = 100,
        split: str = "test",
        limit: int | None = None,
        gates: Sequence[str] = (),
        baseline: str | Path | dict | None = None,
        tolerance: float = 0.01,
        principal: Principal | None = None,
        generation: str | None = None,
    ) -> EvalRun:
        """Score each search mode on a dataset's queries, then check ``gates`` and a ``baseline``.

        ``dataset`` is a BEIR folder or a golden JSONL file; a gate reads ``ndcg@10=0.65`` or
        ``hybrid:recall@10=0.8``; ``baseline`` is an earlier report (its JSON, or the file), and a
        quality metric more than ``tolerance`` below it is a regression. ``run.ok`` is False when a
        gate fails or a metric regressed. ``principal``: the queries are searched as this principal
        (hits they may not view are withheld, as in ``search``). ``generation``: search the
        namespace's ``shadow`` (or ``previous``) generation instead of the active one.
        """
        from .evaluate import evaluate

        return evaluate(
            self,
            Path(dataset),
            namespace=namespace,
            modes=modes,
            k=k,
            depth=depth,
            split=split,
            limit=limit,
            gates=gates,
            baseline=baseline,
            tolerance=tolerance,
            principal=principal,
            generation=generation,
        )

    def sweep(
        self,
        dataset: str | Path,
        *,
        namespace: str | None = None,
        split: str = "test",
        limit: int | None = None,
        grid: dict[str, Sequence[Any]] | None = None,
        metric: str = "ndcg@10",
    ) -> list[tuple[dict, float]]:
        """Evaluate hybrid search over a grid of fusion settings; (settings, ``metric``) pairs, best first."""
        from .evals import load_dataset
        from .evaluate import sweep

        return sweep(self, load_dataset(Path(dataset), split=split), namespace, limit=limit, grid=grid, metric=metric)

    # -- settings ----------------------------------------------------------------------------------

    def config_report(self, profile: str | None = None) -> dict:
        """The resolved settings: the layers read, every setting, a profile's pin and fingerprint,
        and the precision decision recorded on this machine (read, never measured here)."""
        from .embed.precision import cached_decision

        prof = self.settings.profile(profile)
        return {
            "sources": list(self.settings.sources),
            "settings": self.settings.data,
            "profile": {"name": prof.name, "fingerprint": prof.fingerprint, **prof.pin},
            "precision": _precision_json(prof.precision, cached_decision(prof)),
        }

    def context(self, result: SearchResult, budget: int = 2000) -> str:
        """A search result as a context block for a prompt: the best hits with citations, within ``budget`` tokens."""
        from .search.context import format_context

        return format_context(result, budget)


@dataclass(frozen=True)
class DatabaseStatus:
    """What ``kb.db_status()`` found: the server, its versions and every migration with its checksum."""

    embedded: bool
    home: Path | None  # the embedded server's home (None with a DSN)
    pgdata: Path | None
    server_version: str
    pgvector: str | None
    migrations: list[dict]

    @property
    def checksums_ok(self) -> bool:
        """False when an applied migration's file changed since it was applied."""
        return not any(m["checksum_ok"] is False for m in self.migrations)

    def to_json(self) -> dict[str, Any]:
        return {
            "embedded": self.embedded,
            "home": str(self.home) if self.home else None,
            "server_version": self.server_version,
            "pgvector": self.pgvector,
            "migrations": self.migrations,
        }


def _precision_json(precision: str, d) -> dict:
    if d is None:
        return {"setting": precision, "decided": False}
    return {
        "setting": precision,
        "decided": True,
        "throughput": d.precision,
        "throughput_reason": d.reason,
        "query": d.for_purpose("query"),
        "query_reason": d.query_reason or d.reason,
        "cpu_flags": list(d.cpu_flags),
    }


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


def _unavailable(kind: str, ident: Any) -> UsageError:
    """The one answer for what does not exist and what the caller may not see (nothing tells them apart)."""
    return UsageError(f"{kind} {ident!r} is not available")


def _search_options(*, filters: Sequence[str] = (), **options: Any) -> SearchOptions:
    """Per-query settings from a caller's keywords, each checked (``SearchOptions``); an unknown one is a UsageError."""
    if isinstance(filters, str):
        filters = [filters]
    try:
        return SearchOptions(filters=parse_filters(list(filters)), **options)
    except TypeError as e:  # an unknown keyword
        raise UsageError(f"unknown search option: {e}", hint="see kbctl.search.SearchOptions") from None


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
        body: dict[str, Any] = {
            "title": r.get("title") or "",
            "text": r.get("text") or "",
            "metadata": r.get("metadata") or {},
        }
        if r.get("acl") is not None and isinstance(
            body["metadata"], dict
        ):  # kbctl.acl.lift_acl moves it to Document.acl
            body["metadata"] = {**body["metadata"], "acl": r["acl"]}
        yield Source(
            uri=rid, content=json.dumps(body, sort_keys=True).encode(), media_type=RECORD_MEDIA_TYPE, kind="record"
        )


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
