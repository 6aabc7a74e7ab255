"""Access control: who may view a document, and the gate that withholds what a principal may not.

Enforced where:

- **Tenant**: at retrieval, before ranking. A search resolves its namespaces within the caller's
  tenant (``KnowledgeBase.tenant``), and every lane filters by namespace id in SQL.
- **View permission**: by ``Gate``, on the lanes' candidates before fusion and again on the
  page (``kbctl.search.access``): a hit the principal may not view is dropped before anything
  observable (scores, ranks, near-duplicate removal, per-document caps, reranking, paging) is
  computed, and only counted (``SearchResult.withheld``, for queries without filters: a filter's
  count would reveal withheld documents' metadata). The gate fails closed: an ACL it cannot read
  (a malformed entry, a value that is not a list) or any error while deciding withholds the hit,
  never the other way.

An ACL is a list of entries ``public``, ``user:<id>`` or ``group:<name>``. A document gets one
(first that applies):

1. from the document itself: front matter ``acl: [group:eng, user:u1042]``, a record's ``acl``
   field (``lift_acl``); explicit, kept until the document changes. Given empty (``acl: []``,
   ``acl: ""``) it is an ACL of no one, not an absent one;
2. from its parent (an e-mail's attachments share the message's);
3. from the namespace's configuration (``AclPolicy``): ``acl_from_recipients = true`` gives an
   e-mail ``user:<address>`` for its From, To and Cc; else the first of ``acl_rules`` whose
   ``glob`` matches the document's path or URI. These are re-applied after every ingest
   (``kbctl.store.acl.reapply``), so a changed rule updates the stored rows without re-chunking;
4. none (NULL): the namespace's ``acl_default`` decides, ``public`` (anyone, anonymous searches
   included) or ``deny`` (no one).

A search without a principal is anonymous: it sees ``public`` documents and ACL-less documents of
``public`` namespaces. ``unrestricted`` (library only, explicit) skips the gate.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
from dataclasses import dataclass
from email.utils import getaddresses
from typing import Any, Iterable, Mapping, Sequence

from .config import ACL_DEFAULTS, ACL_ENTRY, AccessSettings
from .types import Document, Principal

log = logging.getLogger(__name__)

__all__ = ["ACL_DEFAULTS", "AclPolicy", "AclRule", "Gate", "normalize_acl", "lift_acl", "valid_entry"]


def valid_entry(entry: Any) -> bool:
    """Whether ``entry`` is an ACL entry the gate can read."""
    return isinstance(entry, str) and ACL_ENTRY.fullmatch(entry) is not None


def normalize_acl(value: Any) -> tuple[str, ...] | None:
    """An ACL from untrusted input (front matter, a record): ``None`` when absent, else its entries.

    A string is one entry or a comma-separated list. What is not a string is kept as a marker the
    gate cannot read (``?int``), so the document is withheld rather than published.
    """
    if value is None:
        return None
    if isinstance(value, str):
        return tuple(p.strip() for p in value.split(",")) if value.strip() else ()
    if isinstance(value, (list, tuple)):
        return tuple(x.strip() if isinstance(x, str) else f"?{type(x).__name__}" for x in value)
    return (f"?{type(value).__name__}",)


def lift_acl(doc: Document) -> Document:
    """``doc`` with an ``acl`` metadata key (front matter, a record's field) moved to ``Document.acl``.

    The key leaves the metadata (and so the content hash and the chunks' metadata): an ACL-only
    change keeps the document's content hash and re-embeds nothing. A key given without entries
    (``acl: []``, ``acl: ""``, ``acl:``) is an ACL of no one: fail closed, never the namespace's
    default (which may be ``public``).
    """
    if "acl" not in doc.metadata:
        return doc
    meta = {k: v for k, v in doc.metadata.items() if k != "acl"}
    acl = normalize_acl(doc.metadata["acl"])
    return dataclasses.replace(doc, metadata=meta, acl=() if acl is None else acl, content_hash="")


@dataclass(frozen=True)
class AclRule:
    """Documents whose path or URI matches ``glob`` get ``principals`` as their ACL."""

    glob: str
    principals: tuple[str, ...]

    def matches(self, names: Sequence[str]) -> bool:
        rx = _glob(self.glob)
        return any(rx.fullmatch(n) for n in names)


@functools.lru_cache(maxsize=256)
def _glob(text: str) -> re.Pattern[str]:
    from .sources.globs import compile_glob

    return compile_glob(text).regex


@dataclass(frozen=True)
class AclPolicy:
    """A namespace's access settings (``[namespaces.NAME]`` ``acl_default``, ``acl_rules``, ``acl_from_recipients``)."""

    default: str = "public"
    rules: tuple[AclRule, ...] = ()
    from_recipients: bool = False

    @classmethod
    def of(cls, access: AccessSettings) -> AclPolicy:
        """The policy of a namespace's access settings (``Settings.namespace_acl``)."""
        return cls(access.default, tuple(AclRule(g, p) for g, p in access.rules), access.from_recipients)

    @property
    def derives(self) -> bool:
        """Whether the configuration gives ACLs to documents that carry none."""
        return bool(self.rules) or self.from_recipients

    def derived(self, uri: str, metadata: Mapping[str, Any], source_type: str) -> tuple[str, ...] | None:
        """The ACL the configuration gives a document without its own (step 3), or None."""
        if self.from_recipients and source_type == "email":
            users = sorted(
                {f"user:{a.lower()}" for _, a in getaddresses(_addresses(metadata)) if a and valid_entry(f"user:{a}")}
            )
            if users:
                return tuple(users)
        names = _names(uri, metadata)
        for rule in self.rules:
            if rule.matches(names):
                return rule.principals
        return None

    def resolve(self, docs: Iterable[Document]) -> list[tuple[Document, bool]]:
        """Each document with its effective ACL set, and whether it is explicit (its own or its parent's own)."""
        out: list[tuple[Document, bool]] = []
        by_uri: dict[str, tuple[tuple[str, ...] | None, bool]] = {}
        for d in docs:
            acl: tuple[str, ...] | None
            if d.acl is not None:
                acl, explicit = d.acl, True
            elif d.parent_uri is not None and d.parent_uri in by_uri:
                acl, explicit = by_uri[d.parent_uri]
            else:
                acl, explicit = self.derived(d.uri, d.metadata, d.source_type), False
            by_uri[d.uri] = (acl, explicit)
            out.append((d if acl == d.acl else dataclasses.replace(d, acl=acl), explicit))
        return out


def _addresses(meta: Mapping[str, Any]) -> list[str]:
    return [str(meta[k]) for k in ("from", "to", "cc") if meta.get(k)]


def _names(uri: str, meta: Mapping[str, Any]) -> list[str]:
    """What a rule's glob is matched against: the URI, and the path with every tail of it
    (``hr/**`` matches ``/srv/corpus/hr/leave.md``)."""
    names = [uri]
    path = meta.get("path")
    if isinstance(path, str) and path:
        parts = path.strip("/").split("/")
        names += ["/".join(parts[i:]) for i in range(len(parts))]
    return names


@dataclass(frozen=True)
class Gate:
    """The view-permission gate of one search: which hits ``principal`` may see.

    ``defaults`` maps each searched namespace id to its ``acl_default``; a namespace missing from it
    counts as ``deny``. ``unrestricted`` lets everything through (the library's explicit admin mode).
    """

    principal: Principal | None = None
    defaults: Mapping[int, str] = dataclasses.field(default_factory=dict)
    unrestricted: bool = False

    def allows(self, namespace_id: int, acl: Any) -> bool:
        """Whether the principal may view a document of ``namespace_id`` with ``acl``; False when
        the gate cannot decide (fails closed)."""
        try:
            return self._allows(namespace_id, acl)
        except Exception:  # anything unexpected withholds the hit; the list is never let through unfiltered
            log.warning("access gate could not decide for a document of namespace %s; withheld", namespace_id)
            return False

    def _allows(self, namespace_id: int, acl: Any) -> bool:
        if self.unrestricted:
            return True
        if acl is None:
            return self.defaults.get(namespace_id, "deny") == "public"
        entries = list(acl) if isinstance(acl, (list, tuple)) else None
        if entries is None or not all(valid_entry(e) for e in entries):
            return False  # malformed: cannot decide
        keys = self.principal.keys if self.principal is not None else frozenset({"public"})
        return any(e in keys for e in entries)

    def deny_note(self, names: Mapping[int, str]) -> str | None:
        """Why documents without an ACL are hidden, when a searched namespace's default is deny."""
        if self.unrestricted:
            return None
        denied = sorted(names[i] for i, d in self.defaults.items() if d == "deny" and i in names)
        if not denied:
            return None
        return (
            f'namespace {", ".join(denied)} has acl_default = "deny": documents without an ACL are shown to no one;'
            " give them an ACL (front matter acl, acl_rules)"
        )
