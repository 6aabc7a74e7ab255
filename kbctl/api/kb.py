"""``KnowledgeBase``: a session and the sub-APIs over it, one per noun; ``open_kb``.

The verbs live in the sub-APIs (``kb.namespaces``, ``kb.generations``, ``kb.tenants``,
``kb.agents``, ``kb.records``, ``kb.admin``, ``kb.evals``, ``kb.ingestion``, ``kb.searching``,
``kb.evidence``); ``kb["billing_kb"]`` is a handle on one namespace. The facade keeps every verb it
had (``kb.search``, ``kb.swap_generation``, ``kb.create_tenant``…) as a delegate to the sub-API
that owns it: the same name, signature and docstring, written once.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from .. import telemetry
from ..config import Settings, load_settings
from ..search import memory as search_memory
from ._boundary import delegate, psycopg_boundary
from .admin import Admin
from .agents import Agents
from .evals import Evals
from .evidence import Evidence
from .generations import Generations
from .ingest import Ingestion
from .namespaces import Namespaces
from .records import Records
from .search import Searching
from .session import Session
from .tenants import Tenants

if TYPE_CHECKING:
    from ..store import Namespace
    from .handle import NamespaceHandle

__all__ = ["KnowledgeBase", "open_kb"]


def _apply_process_sections(settings: Settings) -> None:
    """The settings that hold for the whole process, not one knowledge base: traces on or off
    (``[telemetry]``, ``OTEL_*``) and the packed segments' caches (``[cache]``). The knowledge base
    opened, or given settings, last sets them."""
    telemetry.configure(settings.telemetry)
    search_memory.configure(**dataclasses.asdict(settings.cache))


@psycopg_boundary
class KnowledgeBase:
    """A store plus resolved settings: a ``Session`` (its connections, opened on first use) and
    the sub-APIs over it."""

    def __init__(self, settings: Settings) -> None:
        _apply_process_sections(settings)
        self.session = Session(settings)
        self.db = self.session.db
        self.namespaces = Namespaces(self)
        self.generations = Generations(self)
        self.tenants = Tenants(self)
        self.agents = Agents(self)
        self.records = Records(self)
        self.admin = Admin(self)
        self.evals = Evals(self)
        self.ingestion = Ingestion(self)
        self.searching = Searching(self)
        self.evidence = Evidence(self)

    @property
    def settings(self) -> Settings:
        """The resolved settings every sub-API reads (the session's): assigning new ones (for
        example ``kb.settings.with_overrides({...})``) reaches all of them, and the process-wide
        sections (``[telemetry]``, ``[cache]``) are applied again, as opening applied them."""
        return self.session.settings

    @settings.setter
    def settings(self, settings: Settings) -> None:
        _apply_process_sections(settings)
        self.session.settings = settings

    def __getitem__(self, namespace: str) -> NamespaceHandle:
        """A handle on one namespace: ``kb["billing_kb"].search("refunds")``."""
        return self.namespaces[namespace]

    # -- the session -------------------------------------------------------------------------------

    def connection(self):
        """The open connection (migrations applied when ``database.auto_migrate``)."""
        return self.session.connection()

    def close(self, timeout: float = 10.0) -> None:
        """Close the knowledge base for good: a verb called afterwards, in any thread, raises
        ``KnowledgeBaseClosed`` (open another with ``kbctl.open()``). Verbs already running in other
        threads are waited for, up to ``timeout`` seconds; those still running then have their
        statements cancelled and end with ``KnowledgeBaseClosed`` (what a run stored stays stored).
        No connection is closed under a running statement: one still in use when the waits end is
        closed by its thread when its verb ends. Calling it again is harmless."""
        self.session.shut(timeout)

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def tenant(self) -> str:
        return self.settings.tenant

    def namespace(self, name: str) -> Namespace:
        """Namespace ``name`` as stored (a ``UsageError`` when there is none)."""
        return self.namespaces.get(name)

    # -- every verb the facade had, each owned by a sub-API ----------------------------------------

    profile_for = delegate("namespaces", Namespaces.profile_for)
    namespace_names = delegate("namespaces", Namespaces.names)
    create_namespace = delegate("namespaces", Namespaces.create)
    bind_namespace = delegate("namespaces", Namespaces.bind)
    delete_namespace = delegate("namespaces", Namespaces.delete)

    create_tenant = delegate("tenants", Tenants.create)
    delete_tenant = delegate("tenants", Tenants.delete)
    ids = delegate("tenants", Tenants.ids)
    ids_with_token = delegate("tenants", Tenants.ids_with_token)
    open_id = delegate("tenants", Tenants.open_id)

    reembed = delegate("generations", Generations.reembed)
    swap_generation = delegate("generations", Generations.swap)
    rollback_generation = delegate("generations", Generations.rollback)
    drop_generation = delegate("generations", Generations.drop)
    compare_generations = delegate("generations", Generations.compare)

    ingest = delegate("ingestion", Ingestion.ingest)
    ingest_records = delegate("ingestion", Ingestion.ingest_records)
    store = delegate("ingestion", Ingestion.store)
    verify = delegate("ingestion", Ingestion.verify)
    work = delegate("ingestion", Ingestion.work)
    run_progress = delegate("ingestion", Ingestion.progress)

    search = delegate("searching", Searching.search)
    principal = delegate("searching", Searching.principal)
    retriever = delegate("searching", Searching.retriever)
    context = delegate("searching", Searching.context)
    document = delegate("searching", Searching.document)
    chunk = delegate("searching", Searching.chunk)
    passage_vectors = delegate("searching", Searching.passage_vectors)
    passage_vectors_and_profiles = delegate("searching", Searching.passage_vectors_and_profiles)
    audit = delegate("searching", Searching.audit)
    prune_audit = delegate("searching", Searching.prune_audit)

    verify_claim = delegate("evidence", Evidence.verify_claim)
    research = delegate("evidence", Evidence.research)

    fetch_records = delegate("records", Records.fetch)
    extract_records = delegate("records", Records.extract)
    chunk_records = delegate("records", Records.chunk)
    embed_records = delegate("records", Records.embed)
    store_records = delegate("records", Records.store)

    agent_list = delegate("agents", Agents.__call__)
    create_agent_token = delegate("agents", Agents.create_token)
    revoke_agent_tokens = delegate("agents", Agents.revoke_tokens)
    agent_of_token = delegate("agents", Agents.of_token)
    holder_of_token = delegate("agents", Agents.holder_of_token)
    log_query = delegate("agents", Agents.log_query)
    record_feedback = delegate("agents", Agents.record_feedback)
    import_feedback = delegate("agents", Agents.import_feedback)

    migrate = delegate("admin", Admin.migrate)
    db_status = delegate("admin", Admin.db_status)
    optimize = delegate("admin", Admin.optimize)
    repack = delegate("admin", Admin.repack)
    start_server = delegate("admin", Admin.start_server)
    stop_server = delegate("admin", Admin.stop_server)
    dsn = delegate("admin", Admin.dsn)
    config_report = delegate("admin", Admin.config_report)
    runs = delegate("admin", Admin.runs)
    errors = delegate("admin", Admin.errors)
    stats = delegate("admin", Admin.stats)

    import_beir = delegate("evals", Evals.import_beir)
    evaluate = delegate("evals", Evals.evaluate)
    sweep = delegate("evals", Evals.sweep)


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
    settings = load_settings(config, overrides)
    if profile:  # a profile named here must exist: a search of a pinned namespace would not say so
        settings.profile(profile, embedder=False)
    return KnowledgeBase(settings)
