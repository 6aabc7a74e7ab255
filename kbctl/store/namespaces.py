"""Profiles and namespaces in the database, and the pin between them.

A namespace is bound to one recorded profile. Writing or querying a namespace with a profile whose
fingerprint differs is refused before anything is touched; rebinding a namespace that holds vectors
is refused too (the database enforces it with a foreign key as well).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal, overload

from psycopg import sql

from .. import validate
from ..config import Profile
from ..errors import NamespaceNotFound, ProfileMismatchError, UsageError
from .queries import query, template
from .roles import as_owner

__all__ = [
    "Namespace",
    "ensure_profile",
    "get_namespace",
    "ensure_namespace",
    "list_namespaces",
    "namespace_ids",
    "delete_namespace",
    "check_pin",
]

_OPS = {"cosine": "vector_cosine_ops", "l2": "vector_l2_ops", "ip": "vector_ip_ops"}


@dataclass(frozen=True)
class Namespace:
    """A namespace as stored, with the pin of its profile."""

    id: int
    tenant: str
    name: str
    profile_id: int
    profile_name: str
    fingerprint: str
    model: str
    dimension: int
    distance: str
    description: str = ""


def hnsw_index_name(profile_id: int) -> str:
    return f"chunks_hnsw_p{profile_id}"


def ensure_profile(conn, profile: Profile) -> int:
    """Record a profile (once per fingerprint) and its HNSW index; returns its id."""
    row = conn.execute(query("namespaces/find_profile"), (profile.fingerprint,)).fetchone()
    if row:
        return int(row[0])
    with conn.transaction():
        row = conn.execute(
            query("namespaces/insert_profile"),
            (
                profile.name,
                profile.fingerprint,
                profile.embedder,
                profile.model,
                profile.revision,
                profile.dimension,
                profile.distance,
                profile.normalize,
                profile.query_prefix,
                profile.document_prefix,
                profile.max_tokens,
                json.dumps({"precision": profile.precision}),
            ),
        ).fetchone()
        pid = int(row[0])
        create_hnsw_index(conn, pid, profile)
    return pid


def create_hnsw_index(conn, profile_id: int, profile: Profile) -> None:
    """The partial HNSW index of one profile's vectors, typed to its dimension."""
    conn.execute(
        template(
            "namespaces/create_hnsw_index",
            name=sql.Identifier(hnsw_index_name(profile_id)),
            dim=sql.Literal(int(profile.dimension)),
            ops=sql.SQL(_OPS[profile.distance]),
            m=sql.Literal(profile.hnsw.m),
            efc=sql.Literal(profile.hnsw.ef_construction),
            pid=sql.Literal(int(profile_id)),
        )
    )


@overload
def get_namespace(conn, name: str, tenant: str = ..., *, required: Literal[True] = ...) -> Namespace: ...
@overload
def get_namespace(conn, name: str, tenant: str = ..., *, required: bool) -> Namespace | None: ...


def get_namespace(conn, name: str, tenant: str = "default", *, required: bool = True) -> Namespace | None:
    """The namespace ``name`` of ``tenant``; raises NamespaceNotFound when ``required``.

    Every verb of the library finds its namespace here first, so a name that no namespace can have
    (empty, spaces, a slash: ``validate.name``) is a UsageError here, for every caller.
    """
    validate.name("namespace", name)
    row = conn.execute(query("namespaces/get_namespace"), (tenant, name)).fetchone()
    if row is None:
        if required:
            known = [r[0] for r in conn.execute(query("namespaces/names_of_tenant"), (tenant,))]
            hint = (
                f"known namespaces: {', '.join(known)}"
                if known
                else "ingest something first: kbctl ingest PATH -n NAME"
            )
            raise NamespaceNotFound(f"namespace {name!r} does not exist (tenant {tenant!r})", hint=hint)
        return None
    return Namespace(*row)


def check_pin(ns: Namespace, profile: Profile) -> None:
    """Refuse to use a namespace with a profile other than the one its vectors were made with."""
    if ns.fingerprint != profile.fingerprint:
        raise ProfileMismatchError(
            f"namespace {ns.name!r} is pinned to profile {ns.profile_name!r} ({ns.model}, {ns.dimension}-d,"
            f" fingerprint {ns.fingerprint}); profile {profile.name!r} ({profile.model}, {profile.dimension}-d,"
            f" fingerprint {profile.fingerprint}) would mix vectors of two models",
            hint=f"use --profile {ns.profile_name}, or ingest into a new namespace",
        )


def ensure_namespace(conn, name: str, tenant: str, profile: Profile, description: str = "") -> Namespace:
    """Get or create a namespace bound to ``profile``; a different existing pin is refused."""
    ns = get_namespace(conn, name, tenant, required=False)
    if ns is not None:
        check_pin(ns, profile)
        return ns
    with as_owner(conn):  # a new profile's HNSW index is the owner's to build
        pid = ensure_profile(conn, profile)
    try:
        conn.execute(query("namespaces/insert_namespace"), (tenant, name, pid, profile.dimension, description))
    except Exception as e:  # the CHECK on the name
        import psycopg

        if isinstance(e, psycopg.errors.CheckViolation):
            raise UsageError(
                f"invalid namespace name {name!r}",
                hint="use letters, digits, and _ . : - (at most 128 characters, starting with a letter or digit)",
            ) from None
        raise
    ns = get_namespace(conn, name, tenant)
    check_pin(ns, profile)
    return ns


def rebind_namespace(conn, name: str, tenant: str, profile: Profile) -> Namespace:
    """Bind an existing, empty namespace to another profile; refused when it holds vectors."""
    ns = get_namespace(conn, name, tenant)
    if ns.fingerprint == profile.fingerprint:
        return ns
    n = conn.execute(query("namespaces/chunk_count"), (ns.id,)).fetchone()[0]
    if n:
        check_pin(ns, profile)  # raises with the full explanation
    with as_owner(conn):  # a new profile's HNSW index is the owner's to build
        pid = ensure_profile(conn, profile)
    conn.execute(query("namespaces/rebind"), (pid, profile.dimension, ns.id))
    return get_namespace(conn, name, tenant)


def list_namespaces(conn, tenant: str | None = None) -> list[dict]:
    """Every namespace (of a tenant, or all) with its profile and document/chunk counts."""
    if tenant is None:
        cur = conn.execute(query("namespaces/list"))
    else:
        cur = conn.execute(query("namespaces/list_of_tenant"), (tenant,))
    cols = [c.name for c in cur.description]
    return [dict(zip(cols, r)) | {"created_at": r[-1].isoformat()} for r in cur]


def namespace_ids(conn, tenant: str) -> list[int]:
    """The ids of a tenant's namespaces."""
    return [r[0] for r in conn.execute(query("namespaces/ids_of_tenant"), (tenant,))]


def delete_namespace(conn, name: str, tenant: str) -> int:
    """Delete a namespace and everything in it; returns the number of documents removed."""
    ns = get_namespace(conn, name, tenant)
    with conn.transaction():
        n = conn.execute(query("namespaces/document_count"), (ns.id,)).fetchone()[0]
        # documents first: their cascade removes the chunks (and postings) before the namespace row,
        # whose (id, profile, dimension) key the chunks also reference
        conn.execute(query("namespaces/delete_documents"), (ns.id,))
        conn.execute(query("namespaces/delete_namespace"), (ns.id,))
    return int(n)
