"""Document ACLs in the store: which came with their documents, and the configured ones re-applied.

What an ACL means and where it is enforced is ``kbctl.acl``'s; the gate reads each hit's ACL with
the hit (``sql/queries/search/hits.sql``).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from .connection import Conn
from .namespaces import Namespace
from .queries import query

__all__ = ["mark_explicit", "reapply_acls"]


def mark_explicit(conn: Conn, ns: Namespace, uris: Sequence[str]) -> None:
    """Record that these documents' ACLs came with them (rules are not re-applied to them)."""
    if uris:
        conn.execute(query("acl/mark_explicit"), (ns.id, list(uris)))


def reapply_acls(conn: Conn, ns: Namespace, policy: Any = None) -> int:
    """Give every document without its own ACL the one ``policy`` (a ``kbctl.acl.AclPolicy``)
    derives now, updating only the rows that change (no re-chunking, no embedding); how many changed.

    An attachment takes its message's ACL. With no policy, derived ACLs are cleared.
    """
    from ..acl import AclPolicy

    policy = policy or AclPolicy()
    new: dict[str, Any] = {}
    changes = []
    for did, uri, parent, source_type, meta, acl in conn.execute(
        query("acl/derived_documents"), (ns.id, policy.derives)
    ):
        want = new[parent] if parent in new else policy.derived(uri, meta, source_type)
        new[uri] = want
        if (list(want) if want is not None else None) != acl:
            changes.append({"id": did, "acl": None if want is None else list(want)})
    if changes:
        with conn.transaction():
            conn.execute(query("acl/set_acls"), (json.dumps(changes), ns.id))
    return len(changes)
