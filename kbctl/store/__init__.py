"""The store: PostgreSQL tables behind namespaces, documents, chunks, postings and the run ledger.

The only package that talks to PostgreSQL; ``db`` runs the embedded server and the migrations. Its static statements are the named files in ``sql/queries/<group>/<name>.sql``
(``queries.query``); dynamic parts (filters, identifiers, per-profile index names) are composed
with ``psycopg.sql``. Modules: ``namespaces``, ``documents`` (writes), ``stored`` (what is stored, read before writing), ``runs`` (the ledger), ``search``
(the lanes' statements), ``filters``, ``checks`` (verify), ``feeds``, ``admin`` (``kbctl db``), ``tenants`` (a role per tenant; row-level security), ``db`` (the embedded server, migrations).
"""

from .documents import WriteStats, delete_documents, write_documents
from .namespaces import (
    Namespace,
    check_pin,
    delete_namespace,
    ensure_namespace,
    ensure_profile,
    get_namespace,
    list_namespaces,
    namespace_ids,
    rebind_namespace,
)
from .stored import (
    cached_hashes,
    cached_vectors,
    chunk_count_of,
    source_version_count,
    source_versions,
    sources_holding,
    stored_hashes,
    stored_owners,
    stored_uris,
    stored_uris_of_sources,
    stored_versions,
)

__all__ = [
    "Namespace",
    "WriteStats",
    "cached_hashes",
    "source_version_count",
    "cached_vectors",
    "check_pin",
    "chunk_count_of",
    "delete_documents",
    "delete_namespace",
    "ensure_namespace",
    "ensure_profile",
    "get_namespace",
    "list_namespaces",
    "namespace_ids",
    "rebind_namespace",
    "source_versions",
    "sources_holding",
    "stored_hashes",
    "stored_owners",
    "stored_uris",
    "stored_versions",
    "stored_uris_of_sources",
    "write_documents",
]
