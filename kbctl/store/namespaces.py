"""Profiles and namespaces in the database, and the pin between them.

A namespace is bound to one recorded profile. Writing or querying a namespace with a profile whose
fingerprint differs is refused before anything is touched; rebinding a namespace that holds vectors
is refused too (the database enforces it with a foreign key as well).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from psycopg import sql

from ..config import Profile
from ..errors import NamespaceNotFound, ProfileMismatchError, UsageError

__all__ = ["Namespace", "ensure_profile", "get_namespace", "ensure_namespace", "list_namespaces", "delete_namespace", "check_pin"]

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
    row = conn.execute("SELECT id FROM kbctl.profiles WHERE fingerprint = %s", (profile.fingerprint,)).fetchone()
    if row:
        return int(row[0])
    with conn.transaction():
        row = conn.execute(
            "INSERT INTO kbctl.profiles (name, fingerprint, embedder, model, revision, dimension, distance,"
            " normalize, query_prefix, document_prefix, max_tokens, settings)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (fingerprint) DO UPDATE SET name = kbctl.profiles.name RETURNING id",
            (
                profile.name, profile.fingerprint, profile.embedder, profile.model, profile.revision,
                profile.dimension, profile.distance, profile.normalize, profile.query_prefix,
                profile.document_prefix, profile.max_tokens, json.dumps({"precision": profile.precision}),
            ),
        ).fetchone()
        pid = int(row[0])
        create_hnsw_index(conn, pid, profile)
    return pid


def create_hnsw_index(conn, profile_id: int, profile: Profile) -> None:
    """The partial HNSW index of one profile's vectors, typed to its dimension."""
    conn.execute(
        sql.SQL(
            "CREATE INDEX IF NOT EXISTS {name} ON kbctl.chunks USING hnsw"
            " ((embedding::vector({dim})) {ops}) WITH (m = {m}, ef_construction = {efc})"
            " WHERE profile_id = {pid}"
        ).format(
            name=sql.Identifier(hnsw_index_name(profile_id)),
            dim=sql.Literal(int(profile.dimension)),
            ops=sql.SQL(_OPS[profile.distance]),
            m=sql.Literal(int(profile.hnsw["m"])),
            efc=sql.Literal(int(profile.hnsw["ef_construction"])),
            pid=sql.Literal(int(profile_id)),
        )
    )


_NS_SELECT = (
    "SELECT n.id, n.tenant, n.name, n.profile_id, p.name, p.fingerprint, p.model, n.dimension, p.distance,"
    " n.description FROM kbctl.namespaces n JOIN kbctl.profiles p ON p.id = n.profile_id"
)


def get_namespace(conn, name: str, tenant: str = "default", *, required: bool = True) -> Namespace | None:
    """The namespace ``name`` of ``tenant``; raises NamespaceNotFound when ``required``."""
    row = conn.execute(_NS_SELECT + " WHERE n.tenant = %s AND n.name = %s", (tenant, name)).fetchone()
    if row is None:
        if required:
            known = [r[0] for r in conn.execute("SELECT name FROM kbctl.namespaces WHERE tenant = %s ORDER BY name", (tenant,))]
            hint = f"known namespaces: {', '.join(known)}" if known else "ingest something first: kbctl ingest PATH -n NAME"
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
    pid = ensure_profile(conn, profile)
    try:
        conn.execute(
            "INSERT INTO kbctl.namespaces (tenant, name, profile_id, dimension, description)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (tenant, name) DO NOTHING",
            (tenant, name, pid, profile.dimension, description),
        )
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
    n = conn.execute("SELECT count(*) FROM kbctl.chunks WHERE namespace_id = %s", (ns.id,)).fetchone()[0]
    if n:
        check_pin(ns, profile)  # raises with the full explanation
    pid = ensure_profile(conn, profile)
    conn.execute(
        "UPDATE kbctl.namespaces SET profile_id = %s, dimension = %s, updated_at = now() WHERE id = %s",
        (pid, profile.dimension, ns.id),
    )
    return get_namespace(conn, name, tenant)


def list_namespaces(conn, tenant: str | None = None) -> list[dict]:
    """Every namespace (of a tenant, or all) with its profile and document/chunk counts."""
    q = (
        "SELECT n.tenant, n.name, p.name AS profile, p.model, n.dimension, p.fingerprint,"
        " (SELECT count(*) FROM kbctl.documents d WHERE d.namespace_id = n.id) AS documents,"
        " (SELECT count(*) FROM kbctl.chunks c WHERE c.namespace_id = n.id) AS chunks,"
        " n.created_at FROM kbctl.namespaces n JOIN kbctl.profiles p ON p.id = n.profile_id"
    )
    params: tuple = ()
    if tenant is not None:
        q += " WHERE n.tenant = %s"
        params = (tenant,)
    cur = conn.execute(q + " ORDER BY n.tenant, n.name", params)
    cols = [c.name for c in cur.description]
    return [dict(zip(cols, r)) | {"created_at": r[-1].isoformat()} for r in cur]


def delete_namespace(conn, name: str, tenant: str) -> int:
    """Delete a namespace and everything in it; returns the number of documents removed."""
    ns = get_namespace(conn, name, tenant)
    with conn.transaction():
        n = conn.execute("SELECT count(*) FROM kbctl.documents WHERE namespace_id = %s", (ns.id,)).fetchone()[0]
        # documents first: their cascade removes the chunks (and postings) before the namespace row,
        # whose (id, profile, dimension) key the chunks also reference
        conn.execute("DELETE FROM kbctl.documents WHERE namespace_id = %s", (ns.id,))
        conn.execute("DELETE FROM kbctl.namespaces WHERE id = %s", (ns.id,))
    return int(n)
