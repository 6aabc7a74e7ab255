"""``kb.ingestion``: runs of the pipeline into a namespace (``kbctl ingest``, ``kbctl store``) and
``verify``. The pipeline itself is imported when a run starts: a search does not load it."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, BinaryIO, Iterable, Sequence

from ..acl import AclPolicy
from ..extract.record import RECORD_MEDIA_TYPE
from ..store import Namespace, ensure_namespace, get_namespace
from ..store.feeds import feed_state, save_feed_state
from ..types import ItemError, Source
from ._boundary import Part, psycopg_boundary

if TYPE_CHECKING:
    from ..ingest.pipeline import Item, Progress, RunReport
    from ..ingest.verify import VerifyReport

__all__ = ["Ingestion"]


@psycopg_boundary
class Ingestion(Part):
    """fetch → extract → chunk → embed → store (→ verify) into one namespace, and ``verify`` alone."""

    def ingest(
        self,
        targets: Sequence[str],
        namespace: str,
        *,
        profile: str | None = None,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        sync: bool = False,
        plan: bool = False,
        no_wait: bool = False,
        follow_links: bool = False,
        follow_symlinks: bool = False,
        retry_failed: bool = False,
        verify: bool = True,
        stdin: BinaryIO | None = None,
        progress: Progress | None = None,
    ) -> RunReport:
        """Run fetch → extract → chunk → embed → store (→ verify) over ``targets`` into ``namespace``.

        Fetching follows the ``[fetch]`` settings; ``follow_symlinks`` lets folder walks follow
        symlinks that lead out of the folders given (skipped and recorded otherwise).
        """
        from ..ingest.pipeline import IngestOptions, IngestRun, run
        from ..sources.options import FetchOptions  # a bad [fetch] table fails here, before the run starts

        conn = self._conn()
        prof = self.kb.namespaces.profile_for(namespace, profile)
        fetch_opts = FetchOptions.from_config(self.settings.fetch, follow_symlinks=follow_symlinks)
        if plan:
            ns = get_namespace(conn, namespace, self.tenant, required=False) or self.kb.namespaces.placeholder(
                namespace, prof
            )
        else:
            ns = ensure_namespace(conn, namespace, self.tenant, prof)
        opts = IngestOptions(tuple(include), tuple(exclude), sync, plan, no_wait, follow_links)
        req = IngestRun(
            ns,
            prof,
            targets=tuple(targets),
            options=opts,
            fetch_options=fetch_opts,
            stdin=stdin,
            feed_state=_DbFeedState,
            retry_failed=retry_failed,
            verify=verify,
            progress=progress,
            acl=self._acl_policy(namespace),
        )
        return run(conn, req, connect=self.session.tenant_connection)

    def ingest_records(
        self,
        records: Iterable[dict],
        namespace: str,
        *,
        profile: str | None = None,
        verify: bool = True,
        progress: Progress | None = None,
    ) -> RunReport:
        """Ingest records ``{"id", "title", "text", "metadata"[, "acl"]}`` (a BEIR corpus, a JSONL export).

        Each record is a document keyed by its ``id`` and goes through the normal pipeline, so a
        re-import is incremental too.
        """
        from ..ingest.pipeline import IngestRun, run

        conn = self._conn()
        prof = self.kb.namespaces.profile_for(namespace, profile)
        ns = ensure_namespace(conn, namespace, self.tenant, prof)
        req = IngestRun(
            ns,
            prof,
            targets=("records",),
            sources=_record_sources(records),
            verify=verify,
            progress=progress,
            acl=self._acl_policy(namespace),
        )
        return run(conn, req, connect=self.session.tenant_connection)

    def store(
        self,
        items: Iterable[Item | ItemError],
        namespace: str,
        *,
        profile: str | None = None,
        verify: bool = True,
        progress: Progress | None = None,
    ) -> RunReport:
        """Store items embedded upstream (``kbctl store``): the store stage (→ verify) of a run.

        The same lock, ledger and writer as ``ingest``: a source whose version is stored already is
        counted unchanged, an ``ItemError`` is recorded in the ledger.
        """
        from ..ingest.pipeline import IngestRun, run

        conn = self._conn()
        prof = self.kb.namespaces.profile_for(namespace, profile)
        ns = ensure_namespace(conn, namespace, self.tenant, prof)
        req = IngestRun(
            ns, prof, items=items, command="store", verify=verify, progress=progress, acl=self._acl_policy(namespace)
        )
        return run(conn, req, connect=self.session.tenant_connection)

    def verify(self, namespace: str, sample: int = 20) -> VerifyReport:
        """Check that a namespace's store is whole: counts, orphans, vectors, pin, indexes and
        ``sample`` chunks that must find themselves (``report.ok`` is False when a check fails)."""
        from ..ingest.verify import verify_namespace

        ns = self.kb.namespaces.get(namespace)
        return verify_namespace(self._conn(), ns, self.kb.namespaces.profile_for(namespace), sample)

    def _acl_policy(self, namespace: str):
        return AclPolicy.of(self.settings.namespace_acl(namespace))


def _record_sources(records: Iterable[dict]):
    for r in records:
        rid = str(r.get("id", r.get("_id", "")))
        if not rid:
            yield ItemError("fetch", "record", "UsageError", "record without an id")
            continue
        body: dict[str, Any] = {
            "title": r.get("title") or "",
            "text": r.get("text") or "",
            "metadata": r.get("metadata") or {},
        }
        if r.get("acl") is not None and isinstance(
            body["metadata"], dict
        ):  # kbctl.acl.lift_acl moves it to Document.acl
            body["metadata"] = {**body["metadata"], "acl": r["acl"]}
        yield Source(
            uri=rid, content=json.dumps(body, sort_keys=True).encode(), media_type=RECORD_MEDIA_TYPE, kind="record"
        )


class _DbFeedState:
    """ETag / Last-Modified of remote feeds, kept per namespace in ``kbctl.feed_state``.

    New values are saved only by ``commit()`` after the run stored the feed's entries, so a run
    killed before that fetches the feed in full again instead of getting a 304.
    """

    def __init__(self, conn, ns: Namespace) -> None:
        self.conn, self.ns = conn, ns
        self.pending: dict[str, tuple[str | None, str | None]] = {}

    def commit(self) -> None:
        for url, (etag, lm) in self.pending.items():
            self._save(url, etag, lm)
        self.pending.clear()

    def get(self, url: str):
        return feed_state(self.conn, self.ns, url)

    def set(self, url: str, etag: str | None, last_modified: str | None) -> None:
        self.pending[url] = (etag, last_modified)

    def _save(self, url: str, etag: str | None, last_modified: str | None) -> None:
        save_feed_state(self.conn, self.ns, url, etag, last_modified)
