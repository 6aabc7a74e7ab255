"""Profiles and namespaces in the database, and the pin between them.

A namespace is bound to one recorded profile: its active generation's (``store.generations``).
Writing or querying a namespace with a profile whose fingerprint differs is refused before anything
is touched; rebinding a namespace that holds vectors is refused too (moving it to another profile
is ``kbctl reembed``: a shadow generation, then a swap).

A namespace also records the analyzer version its lexical postings were made with
(``Namespace.analyzer``, migration 019): it is written and searched with that version's analyzer,
and a new namespace gets the current one (``kbctl.textutil.analyze.ANALYZER_VERSION``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal, overload

from .. import validate
from ..config import FINGERPRINT_KEYS, Profile
from ..errors import NamespaceNotFound, ProfileMismatchError, UsageError
from ..textutil.analyze import ANALYZER_VERSION
from .connection import Conn, columns, scalar
from .generations import create_generation, drop_generation_indexes, generation_ids
from .queries import query
from .roles import as_owner, check_registered

#: Advisory lock class of a namespace's writes (``write_lock``): taken per transaction, not per run.
WRITE_CLASS = 0x6B63


def write_lock(conn: Conn, ns_id: int, tenant: str | None = None) -> None:
    """Take the namespace's write lock until the transaction ends; with ``tenant``, the namespace's
    tenant's lock too, shared (in the same statement), as a writer of documents does: the tenant's
    delete takes it exclusively, so a write lands wholly before the delete (and goes with it) or
    waits for it and then finds its namespace gone (``store.documents.still_active``).

    Every transaction that writes or removes documents updates the namespace's lexical statistics
    row and its vocabulary rows; the workers of one run write at once, and two such transactions
    locking shared terms in different orders would deadlock. They take turns instead, each for one
    batch (what is parallel is fetch, extract, chunk and embed, which happen before). The packer of
    the lexical lane takes it too, so a segment never misses a chunk written at the same time.
    """
    if tenant is None:
        conn.execute(query("runs/write_lock"), (WRITE_CLASS, ns_id))
    else:
        conn.execute(query("runs/write_lock_of_tenant"), (tenant, WRITE_CLASS, ns_id))


__all__ = [
    "Namespace",
    "ensure_profile",
    "find_profile",
    "get_namespace",
    "ensure_namespace",
    "list_namespaces",
    "namespace_ids",
    "delete_namespace",
    "remove_namespace",
    "untouched",
    "check_pin",
]


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
    generation_id: int = 0  # the active generation: what a search reads, what ingest writes
    storage: str = "vector"  # its vector storage (vector | halfvec)
    analyzer: int = ANALYZER_VERSION  # the analyzer version of its lexical postings (migration 019)

    @property
    def serving(self) -> tuple[int, str]:
        """What answers for it: its active generation and that generation's pin. A swap or a
        rollback changes it; whoever read the namespace before must read it again."""
        return self.generation_id, self.fingerprint


def find_profile(conn: Conn, fingerprint: str) -> int | None:
    """The id of the recorded profile with this fingerprint, if it was recorded."""
    row = conn.execute(query("namespaces/find_profile"), (fingerprint,)).fetchone()
    return None if row is None else int(row[0])


def ensure_profile(conn: Conn, profile: Profile) -> int:
    """Record a profile (once per fingerprint); returns its id."""
    pid = find_profile(conn, profile.fingerprint)
    if pid is not None:
        return pid
    with conn.transaction():
        return int(
            scalar(
                conn.execute(
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
                )
            )
        )


@overload
def get_namespace(conn: Conn, name: str, tenant: str = ..., *, required: Literal[True] = ...) -> Namespace: ...
@overload
def get_namespace(conn: Conn, name: str, tenant: str = ..., *, required: bool) -> Namespace | None: ...


def get_namespace(conn: Conn, name: str, tenant: str = "default", *, required: bool = True) -> Namespace | None:
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


def check_pin(ns: Namespace, profile: Profile, conn: Conn | None = None) -> None:
    """Refuse to use a namespace with a profile other than the one its vectors were made with; with
    ``conn``, a profile changed under its own name is refused naming each setting of the pin that
    changed (read from the recorded profile)."""
    if ns.fingerprint != profile.fingerprint and ns.profile_name == profile.name:
        # the same name, other settings: "use --profile NAME" would name the profile already in use
        changed = _pin_changes(conn, ns, profile) if conn is not None else ""
        raise ProfileMismatchError(
            f"namespace {ns.name!r} is pinned to profile {ns.profile_name!r} as it was ({ns.model},"
            f" {ns.dimension}-d, fingerprint {ns.fingerprint}); that profile changed since"
            f" ({changed or f'{profile.model}, {profile.dimension}-d'}, fingerprint {profile.fingerprint})"
            " and would mix vectors of two models",
            hint=f"restore the profile's settings, or move the namespace to the new ones: kbctl reembed {ns.name}"
            f" --profile {profile.name} --swap (an empty namespace: kbctl namespaces bind {ns.name} --profile"
            f" {profile.name})",
        )
    if ns.fingerprint != profile.fingerprint:
        raise ProfileMismatchError(
            f"namespace {ns.name!r} is pinned to profile {ns.profile_name!r} ({ns.model}, {ns.dimension}-d,"
            f" fingerprint {ns.fingerprint}); profile {profile.name!r} ({profile.model}, {profile.dimension}-d,"
            f" fingerprint {profile.fingerprint}) would mix vectors of two models",
            hint=f"use --profile {ns.profile_name}, or ingest into a new namespace",
        )


def _pin_changes(conn: Conn, ns: Namespace, profile: Profile) -> str:
    """``revision '2' -> '3', max_tokens 256 -> 512``: the settings of the pin recorded for the
    namespace's generation that the configured profile no longer has."""
    row = conn.execute(query("generations/profile"), (ns.profile_id,)).fetchone()
    if row is None:
        return ""
    recorded = dict(zip(FINGERPRINT_KEYS, row[1:10]))
    now = profile.pin
    return ", ".join(f"{k} {recorded[k]!r} -> {now[k]!r}" for k in FINGERPRINT_KEYS if recorded[k] != now[k])


def ensure_namespace(conn: Conn, name: str, tenant: str, profile: Profile, description: str = "") -> Namespace:
    """Get or create a namespace bound to ``profile``; a different existing pin is refused."""
    ns = get_namespace(conn, name, tenant, required=False)
    if ns is not None:
        check_pin(ns, profile, conn)
        return ns
    with as_owner(conn):  # profiles are shared: the owner records them
        pid = ensure_profile(conn, profile)
    try:
        with conn.transaction():  # the namespace with its first, active generation
            # under the tenant's lock, shared: the tenant's delete is wholly before (T deleted:
            # refused here) or after (it removes this namespace too) ``tenants.delete_tenant``
            conn.execute(query("tenants/lock_shared"), (tenant,))
            check_registered(conn, tenant)
            row = conn.execute(
                query("namespaces/insert_namespace"),
                (tenant, name, pid, profile.dimension, description, ANALYZER_VERSION),
            ).fetchone()
            if row is not None:
                create_generation(conn, int(row[0]), pid, profile, profile.storage, "active")
    except Exception as e:  # the CHECK on the name
        import psycopg

        if isinstance(e, psycopg.errors.CheckViolation):
            raise UsageError(
                f"invalid namespace name {name!r}",
                hint="use letters, digits, and _ . : - (at most 128 characters, starting with a letter or digit)",
            ) from None
        raise
    ns = get_namespace(conn, name, tenant)
    check_pin(ns, profile, conn)
    return ns


def rebind_namespace(conn: Conn, name: str, tenant: str, profile: Profile) -> Namespace:
    """Bind an existing, empty namespace to another profile (and the current analyzer); refused
    when it holds vectors."""
    ns = get_namespace(conn, name, tenant)
    if ns.fingerprint == profile.fingerprint:
        return ns
    n = scalar(conn.execute(query("namespaces/chunk_count"), (ns.id,)))
    if n:
        try:
            check_pin(ns, profile, conn)  # raises with the full explanation
        except ProfileMismatchError as e:  # the way there is a re-embed, not another profile to bind
            e.hint = f"move its vectors to the profile: kbctl reembed {name} --profile {profile.name} --swap"
            raise
    with as_owner(conn):
        pid = ensure_profile(conn, profile)
    old = generation_ids(conn, ns.id)
    with conn.transaction():  # an empty namespace: its generations are replaced by a new active one
        for gid in old:
            conn.execute(query("generations/delete"), (ns.id, gid))
        conn.execute(query("namespaces/rebind"), (pid, profile.dimension, ANALYZER_VERSION, ns.id))
        create_generation(conn, ns.id, pid, profile, profile.storage, "active")
    drop_generation_indexes(conn, old)
    return get_namespace(conn, name, tenant)


def list_namespaces(conn: Conn, tenant: str | None = None) -> list[dict]:
    """Every namespace (of a tenant, or all) with its profile and document/chunk counts."""
    cur = conn.execute(query("namespaces/list"), (tenant, tenant))
    cols = columns(cur)
    return [dict(zip(cols, r)) | {"created_at": r[-1].isoformat()} for r in cur]


def namespace_ids(conn: Conn, tenant: str) -> list[int]:
    """The ids of a tenant's namespaces."""
    return [r[0] for r in conn.execute(query("namespaces/ids_of_tenant"), (tenant,))]


def document_count(conn: Conn, ns_id: int) -> int:
    """How many documents a namespace holds."""
    return int(scalar(conn.execute(query("namespaces/document_count"), (ns_id,))) or 0)


def untouched(conn: Conn, ns_id: int) -> bool:
    """Whether a namespace holds no document and no run in the ledger (nothing was ever written to it)."""
    return bool(scalar(conn.execute(query("namespaces/untouched"), (ns_id, ns_id))))


def delete_namespace(conn: Conn, name: str, tenant: str) -> int:
    """Delete a namespace and everything in it; returns the number of documents removed."""
    n, gens = remove_namespace(conn, name, tenant)
    drop_generation_indexes(conn, gens)
    return n


def remove_namespace(conn: Conn, name: str, tenant: str) -> tuple[int, list[int]]:
    """Delete a namespace's rows (a savepoint inside the caller's transaction, if any): the number
    of documents removed and the ids of its generations, whose HNSW indexes the caller drops once
    its transaction has committed (``drop_generation_indexes``)."""
    ns = get_namespace(conn, name, tenant)
    gens = generation_ids(conn, ns.id)
    with conn.transaction():
        # after any write in progress (and the tenant's delete, whose own removal holds T's lock):
        # a writer then finds the namespace gone (``documents.still_active``: deleted, not moved)
        write_lock(conn, ns.id, tenant)
        n = scalar(conn.execute(query("namespaces/document_count"), (ns.id,)))
        # documents first: their cascade removes the chunks (postings, vectors) before the namespace
        # row's removes its generations
        conn.execute(query("namespaces/delete_documents"), (ns.id,))
        conn.execute(query("namespaces/delete_namespace"), (ns.id,))
    return int(n), gens
