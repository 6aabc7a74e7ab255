"""The library API: a ``KnowledgeBase`` opened on a store, its sub-APIs (one per noun), and a
handle per namespace. The CLI and the agent server (``kbctl.server``) are adapters over it; it
imports neither.

    import kbctl
    kb = kbctl.open()                                   # embedded server, default settings
    kb.ingest(["docs/"], namespace="billing_kb")
    result = kb.search("how long do refunds take", namespace="billing_kb")
    billing = kb["billing_kb"]                          # a handle on one namespace
    billing.search("refund timeline", k=3)
    kb.generations("billing_kb"); kb.tenants(); kb.namespaces()       # the nouns, listed
    kb.evals.evaluate("golden.jsonl", gates=["ndcg@10=0.6"])

Modules: ``session`` (connections, the tenant role), ``kb`` (the facade), ``handle`` (a namespace),
``namespaces``, ``generations``, ``tenants``, ``agents`` (tokens, query log, feedback), ``records``
(the NDJSON stages), ``admin`` (database, settings, run ledger), ``evals``, ``ingest``, ``search``,
``evidence`` (``verify_claim``, ``research``).
"""

from __future__ import annotations

from ..validate import output_file  # a file a command writes its result to, checked before the work
from .admin import Admin, DatabaseStatus
from .agents import Agents
from .evals import EvalRun, Evals, SweepResults, compare_reports, convert_smart
from .evidence import Evidence
from .generations import Generations
from .handle import NamespaceHandle
from .ingest import Ingestion
from .kb import KnowledgeBase, open_kb
from .namespaces import Namespaces
from .records import Records
from .search import Retriever, Searching
from .session import Session
from .tenants import Tenants

__all__ = [
    "KnowledgeBase",
    "Retriever",
    "DatabaseStatus",
    "open_kb",
    "compare_reports",
    "convert_smart",
    "output_file",
    "Session",
    "NamespaceHandle",
    "Namespaces",
    "Generations",
    "Tenants",
    "Agents",
    "Records",
    "Admin",
    "Evals",
    "EvalRun",
    "SweepResults",
    "Ingestion",
    "Searching",
    "Evidence",
]
