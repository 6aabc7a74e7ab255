"""``kb.searching``: search one or several namespaces as a principal, read a document, bind a
``Retriever``; the audit of searches; and the reads the agent tools build on (stored vectors)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .. import validate
from ..acl import Gate
from ..config import Profile
from ..errors import UsageError, echo
from ..search import SearchOptions, check_text, parse_filters, run_grouped, run_search
from ..search.context import format_context
from ..store import Namespace, get_namespace
from ..store import audit as audit_store
from ..store.reading import chunk_position, chunk_row, document_chunks, document_row
from ..store.search import feedback_vectors
from ..types import Principal, SearchResult
from ._boundary import Part, psycopg_boundary, read_retried, unavailable

__all__ = ["Searching", "Retriever", "search_options"]


@psycopg_boundary
class Searching(Part):
    """Searches and reads of the tenant's namespaces, each held to what the principal may view."""

    def search(
        self,
        query: str,
        namespace: str | Sequence[str],
        *,
        profile: str | None = None,
        mode: str = "auto",
        k: int | None = None,
        filters: Sequence[str] = (),
        principal: Principal | None = None,
        unrestricted: bool = False,
        **options: Any,
    ) -> SearchResult:
        """Search one namespace, or several listed explicitly. Namespaces pinned to different profiles
        are searched apart, each profile's with it, and their hits merged by rank
        (``kbctl.search.engine.run_grouped``); with ``profile`` given they must all be pinned to it.

        ``principal`` is who is searching: hits of documents they may not view are withheld before
        fusion (nothing returned is computed from them) and counted in ``result.withheld`` when the
        query has no filters (0 with any filter: ``kbctl.acl``). Without one the search is
        anonymous: ``public`` documents, and documents without an ACL in namespaces whose
        ``acl_default`` is ``public``. ``unrestricted=True`` (library only) skips the gate. With
        ``[audit] enabled``, a search made as a principal is audited (one row).
        """
        result, nss = self._searched(
            query, namespace, profile=profile, mode=mode, k=k, filters=filters, principal=principal,
            unrestricted=unrestricted, **options,
        )  # fmt: skip
        audit = self.settings.audit
        if principal is not None and audit.enabled:
            audit_store.record_search(self._conn(), self.tenant, nss, principal, query, result, audit.retention_days)
        return result

    def timed(self, query: str, namespace: str | Sequence[str], **options: Any) -> float:
        """How long ``search(query, namespace, **options)`` takes, in milliseconds; its hits are not
        returned. Nothing of them is read, so it writes no audit row (an eval's latency, which the
        search whose hits it scores follows: ``kbctl.api.evals.search_fn``)."""
        t0 = time.perf_counter()
        self._searched(query, namespace, **options)
        return (time.perf_counter() - t0) * 1000.0

    def _searched(
        self,
        query: str,
        namespace: str | Sequence[str],
        *,
        profile: str | None = None,
        mode: str = "auto",
        k: int | None = None,
        filters: Sequence[str] = (),
        principal: Principal | None = None,
        unrestricted: bool = False,
        **options: Any,
    ) -> tuple[SearchResult, list[Namespace]]:
        """``search`` without its audit: the result and the namespaces searched."""
        names = _names(namespace)
        if not names:
            raise UsageError("no namespace given", hint="pass --namespace NAME (repeat it to search several)")
        check_text("query", validate.text("query", query))
        conn = self._conn()
        nss = [get_namespace(conn, n, self.tenant) for n in names]
        generation = options.pop("generation", None)
        if generation not in (None, "active"):  # an eval of a shadow or previous generation
            nss = [self.kb.namespaces.at_generation(ns, generation) for ns in nss]
        # Each namespace and its generation are read once: the whole search (lanes, feedback, query
        # embedding) uses them, so a swap meanwhile cannot mix two generations' vectors.
        opts = search_options(mode=mode, k=k, filters=filters, **options)
        gate = self.gate(nss, principal, unrestricted)
        side = self.session.sides_of_caller()  # the worker threads open this thread's side connections
        pins: dict[str, list[Namespace]] = {}
        for ns in nss:
            pins.setdefault(ns.fingerprint, []).append(ns)
        if profile is None and len(pins) > 1:
            # namespaces of several profiles: each profile's searched with it, merged by rank
            groups = [(group, self.kb.namespaces.search_profile(group[0], None)) for group in pins.values()]
            result = read_retried(lambda: run_grouped(conn, groups, query, opts, side=side, gate=gate))
            return result, nss
        prof = self.kb.namespaces.search_profile(nss[0], profile)
        result = read_retried(lambda: run_search(conn, nss, prof, query, opts, side=side, gate=gate))
        return result, nss

    def principal(self, user: str | None, groups: Sequence[str] = ()) -> Principal | None:
        """Who is searching, from ``user:u1042`` (or ``u1042``) and group names (``eng`` or
        ``group:eng``); None when neither is given. A malformed one is a UsageError."""
        try:
            return Principal.parse(user, tuple(groups))
        except ValueError as e:
            raise UsageError(str(e), hint="pass --as user:ID and --group NAME") from None

    def gate(self, nss: Sequence[Namespace], principal: Principal | None, unrestricted: bool) -> Gate:
        """The view-permission gate of a search over ``nss`` (their ``acl_default`` from the config)."""
        if principal is not None and not isinstance(principal, Principal):
            raise UsageError(f"principal must be a kbctl.Principal, got {type(principal).__name__}")
        if unrestricted is not False and (unrestricted is not True or principal is not None):
            raise UsageError(
                "unrestricted=True searches as no one in particular", hint="pass either principal= or unrestricted=True"
            )
        return Gate(principal, {n.id: self.settings.namespace_acl(n.name).default for n in nss}, unrestricted)

    def retriever(self, namespace: str, **defaults: Any) -> Retriever:
        """A search function bound to one namespace; the namespace cannot be changed per call.

        ``principal=`` among the defaults binds who is searching (a call may pass another)."""
        self.kb.namespaces.get(namespace)  # fail now, not at the first query
        search_options(
            **{k: v for k, v in defaults.items() if k not in ("profile", "principal", "unrestricted")}
        )  # and for bad defaults
        return Retriever(self.kb, namespace, dict(defaults))

    def context(self, result: SearchResult, budget: int = 2000) -> str:
        """A search result as a context block for a prompt: the best hits with citations, within ``budget`` tokens."""
        return format_context(result, budget)

    def document(
        self,
        doc_id: int,
        namespaces: Sequence[str],
        *,
        around_chunk: int | None = None,
        window: int = 2,
        principal: Principal | None = None,
    ) -> dict:
        """Document ``doc_id`` if it is in one of ``namespaces`` and ``principal`` may view it: its fields
        and its chunks (all of them, or ``window`` on each side of chunk ``around_chunk``).

        Anything else (no such document, another namespace, withheld by its ACL, a chunk not of this
        document) is the same ``UsageError`` ("… is not available"), so a caller learns nothing of it.
        """
        validate.count("window", window, 0, 50)
        doc_id = _id("document", doc_id)
        conn = self._conn()
        found = (get_namespace(conn, name, self.tenant, required=False) for name in _names(namespaces))
        nss = {n.id: n for n in found if n}
        row = document_row(conn, doc_id, list(nss)) if nss else None
        if row is None or not self.gate(list(nss.values()), principal, False).allows(row["namespace_id"], row["acl"]):
            raise unavailable("document", doc_id)
        lo, hi = 0, max(row["chunk_count"], 1)
        if around_chunk is not None:
            pos = chunk_position(conn, row["namespace_id"], row["id"], int(around_chunk))
            if pos is None:
                raise unavailable("chunk", around_chunk)
            lo, hi = max(pos - window, 0), pos + window
        chunks = document_chunks(conn, row["namespace_id"], row["id"], lo, hi)
        doc = {k: v for k, v in row.items() if k not in ("namespace_id", "acl")}
        return {**doc, "doc_id": doc.pop("id"), "chunks": chunks}

    def chunk(self, chunk_id: int, namespaces: Sequence[str], *, highlight: str | Path | None = None) -> dict:
        """Chunk ``chunk_id`` of one of ``namespaces``: its text, heading path, page, the boxes of its
        lines on the PDF page (``boxes``) and its document's uri and title. With ``highlight``, the
        page of a PDF chunk is rendered to that PNG file with the passage boxed (the PDF is read
        again from its path: ``kbctl.extract.highlight``). A namespace of the tenant's that does not
        exist is ``NamespaceNotFound`` (this is the operator's read, as ``kbctl search``: no agent
        reaches it, and for them missing and forbidden stay one answer); a chunk not in them is a
        UsageError ("… is not available")."""
        from ..extract.base import file_path

        chunk_id = _id("chunk", chunk_id)
        conn = self._conn()
        nss = [get_namespace(conn, name, self.tenant) for name in _names(namespaces)]
        row = chunk_row(conn, chunk_id, [n.id for n in nss]) if nss else None
        if row is None or not self.gate(nss, None, True).allows(row["namespace_id"], row["acl"]):
            refused = unavailable("chunk", chunk_id)  # the operator may know where it is not
            where = ", ".join(repr(n.name) for n in nss)
            refused.hint = (
                f"it is not in namespace {where}: kbctl show takes the chunk_id of a `kbctl search … --json` hit,"
                " with the namespace it was found in (-n)"
            )
            raise refused
        meta = dict(row["metadata"] or {})
        out = {k: row[k] for k in ("chunk_id", "doc_id", "position", "text", "heading_path", "page", "uri", "title")}
        out["boxes"] = meta.get("boxes", [])
        if highlight is not None:
            out["highlight"] = _highlight(chunk_id, row, out["boxes"], Path(highlight), file_path(row["uri"]) or "")
        return out

    def passage_vectors(self, hits: Sequence[Any]) -> dict[tuple[str, int], Any]:
        """The stored vector of each hit's chunk, keyed by (namespace name, chunk id) (for MMR)."""
        return self.passage_vectors_and_profiles(hits)[0]

    def passage_vectors_and_profiles(
        self, hits: Sequence[Any]
    ) -> tuple[dict[tuple[str, int], Any], dict[str, Profile]]:
        """The stored vector of each hit's chunk and, per namespace, the profile that made them: both
        from one read of each namespace, so a swap between the two cannot pair a vector of one
        generation with the query embedder of another."""
        conn = self._conn()
        spaces = {n: get_namespace(conn, n, self.tenant) for n in {h.namespace for h in hits}}
        ids = {n: ns.id for n, ns in spaces.items()}
        names = {v: k for k, v in ids.items()}
        gens = [ns.generation_id for ns in spaces.values()]
        vecs = feedback_vectors(conn, [(ids[h.namespace], h.chunk_id) for h in hits], gens)
        profiles = {n: self.kb.namespaces.search_profile(ns, None) for n, ns in spaces.items()}
        return {(names[a], b): v for (a, b), v in vecs.items()}, profiles

    def audit(self, limit: int = 100) -> list[dict]:
        """This tenant's latest audited searches (``[audit] enabled``), newest first."""
        return audit_store.list_audit(self._conn(), self.tenant, limit)

    def prune_audit(self) -> int:
        """Delete audit rows older than ``[audit] retention_days``; how many went."""
        return audit_store.prune(self._conn(), self.settings.audit.retention_days)


@dataclass(frozen=True)
class Retriever:
    """Search bound to one namespace (for agents: the corpus is fixed when the retriever is made)."""

    kb: Any
    namespace: str
    defaults: dict

    def search(self, query: str, **options: Any) -> SearchResult:
        if "namespace" in options:
            raise UsageError(f"this retriever is bound to namespace {self.namespace!r}; it cannot search another")
        return self.kb.search(query, self.namespace, **{**self.defaults, **options})

    __call__ = search


def _names(namespaces: Any) -> list[str]:
    """One namespace's name, or a list of them, each once (in the order first given: ``-n a -n a`` is
    ``a``); anything else is a UsageError (a string is one name)."""
    names = [namespaces] if isinstance(namespaces, str) else namespaces
    if isinstance(names, (bytes, bytearray, Mapping)) or not isinstance(names, Iterable):
        names = None
    names = None if names is None else list(names)
    if names is None or not all(isinstance(n, str) for n in names):
        raise UsageError(
            f"a namespace is given by its name (a string, or a list of them), got {echo(namespaces)}",
            hint="pass namespace='billing_kb' or ['billing_kb', 'tech_kb']",
        )
    return list(dict.fromkeys(names))


def _id(kind: str, value: Any) -> int:
    """A document's or chunk's id: a whole number (its ASCII digits as a string too, as a URL gives
    them; '٣' and '²' are digits to ``str.isdigit``, and int('٣') is 3)."""
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(
            f"a {kind} id is a whole number, got {echo(value)}", hint=f"pass the {kind}_id of a search hit"
        )
    return value


def search_options(*, filters: Sequence[str] = (), **options: Any) -> SearchOptions:
    """Per-query settings from a caller's keywords, each checked (``SearchOptions``); an unknown one is a UsageError."""
    if isinstance(filters, str):
        filters = [filters]
    try:
        return SearchOptions(filters=parse_filters(list(filters)), **options)
    except TypeError as e:  # an unknown keyword
        raise UsageError(f"unknown search option: {e}", hint="see kbctl.search.SearchOptions") from None


def _highlight(chunk_id: int, row: dict, boxes: list, out: Path, path: str) -> dict:
    """``kb.chunk(..., highlight=)``: the chunk's PDF page rendered to ``out`` with its lines boxed."""
    if row["source_type"] != "pdf" or not path:
        raise UsageError(f"chunk {chunk_id} is not from a PDF file", hint="--highlight shows passages of PDF files")
    from ..extract.highlight import render_highlight

    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise UsageError(
            f"cannot read {path}: {e.strerror}", hint="the PDF must still be where it was ingested from"
        ) from e
    return render_highlight(data, boxes, out)
