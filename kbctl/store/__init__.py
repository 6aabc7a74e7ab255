"""The store: PostgreSQL tables behind namespaces, documents, chunks, postings and the run ledger.

The only package that writes corpus data. Search reads through ``kbctl.search``.
"""

from .documents import (
    WriteStats,
    cached_vectors,
    delete_documents,
    source_versions,
    stored_hashes,
    stored_uris,
    stored_uris_of_source,
    write_documents,
)
from .namespaces import (
    Namespace,
    check_pin,
    delete_namespace,
    ensure_namespace,
    ensure_profile,
    get_namespace,
    list_namespaces,
    rebind_namespace,
)

__all__ = [
    "Namespace", "WriteStats", "cached_vectors", "check_pin", "delete_documents", "delete_namespace",
    "ensure_namespace", "ensure_profile", "get_namespace", "list_namespaces", "rebind_namespace",
    "source_versions", "stored_hashes", "stored_uris", "stored_uris_of_source", "write_documents",
]
