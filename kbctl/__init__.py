"""kbctl: ingestion and search over PostgreSQL + pgvector.

The public API (everything else is internal)::

    import kbctl
    kb = kbctl.open()                                       # a KnowledgeBase
    kbctl.ingest(["sample_corpus/support/billing"], namespace="billing_kb")
    kbctl.search("how long do refunds take", namespace="billing_kb")
    billing = kbctl.retriever("billing_kb")                 # bound to one namespace

Module-level ``ingest``/``search``/``retriever`` use a knowledge base opened with the default
settings (``kbctl.toml``, ``KBCTL_*``); use ``kbctl.open(...)`` for anything else.
Imports are lazy so that ``kbctl --help`` stays fast.
"""

from __future__ import annotations

import threading
from typing import Any

from ._version import __version__

__all__ = [
    "__version__",
    "open",
    "ingest",
    "search",
    "retriever",
    "KnowledgeBase",
    "Retriever",
    "Settings",
    "Profile",
    "load_settings",
    "Source",
    "Block",
    "Document",
    "Chunk",
    "EmbeddedChunk",
    "ItemError",
    "Hit",
    "SearchResult",
    "Principal",
    "KbctlError",
]

_LAZY = {
    "KnowledgeBase": "kbctl.api",
    "Retriever": "kbctl.api",
    "Settings": "kbctl.config",
    "Profile": "kbctl.config",
    "load_settings": "kbctl.config",
    "Source": "kbctl.types",
    "Block": "kbctl.types",
    "Document": "kbctl.types",
    "Chunk": "kbctl.types",
    "EmbeddedChunk": "kbctl.types",
    "ItemError": "kbctl.types",
    "Principal": "kbctl.types",
    "Hit": "kbctl.types",
    "SearchResult": "kbctl.types",
    "KbctlError": "kbctl.errors",
}

_default = None
_DEFAULT_LOCK = threading.Lock()


def open(**kwargs: Any):  # shadows the builtin on purpose: sqlite3.connect / llm's module-level opener
    """Open a KnowledgeBase: ``config=``, ``dsn=``, ``home=``, ``tenant=``, ``profile=`` override settings."""
    from .api import open_kb

    return open_kb(**kwargs)


def _kb():
    """The default knowledge base, made once however many threads call first (each made is a set
    of connections: two made at once left one never closed)."""
    global _default
    if _default is None:
        with _DEFAULT_LOCK:
            if _default is None:
                _default = open()
    return _default


def ingest(targets, namespace: str, **options: Any):
    """Ingest files, folders, URLs or feeds into ``namespace`` with the default knowledge base."""
    return _kb().ingest(list(targets) if not isinstance(targets, str) else [targets], namespace, **options)


def search(query: str, namespace, **options: Any):
    """Search ``namespace`` (or a list of namespaces) with the default knowledge base."""
    return _kb().search(query, namespace, **options)


def retriever(namespace: str, **defaults: Any):
    """A search function bound to one namespace, for agents."""
    return _kb().retriever(namespace, **defaults)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'kbctl' has no attribute {name!r}")
