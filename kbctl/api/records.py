"""``kb.records``: the stages as NDJSON records (``kbctl fetch | extract | chunk | embed | store``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, BinaryIO, Iterable, Iterator, Sequence

from .. import validate
from ..config import Profile
from ..store import cached_vectors, get_namespace
from ._boundary import Part, psycopg_boundary

if TYPE_CHECKING:
    from ..ingest.pipeline import RunReport

__all__ = ["Records"]


@psycopg_boundary
class Records(Part):
    """Each stage on its own, reading and writing NDJSON records (``kbctl.ingest.stages``)."""

    def fetch(
        self,
        targets: Sequence[str],
        *,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        follow_links: bool = False,
        follow_symlinks: bool = False,
        stdin: BinaryIO | None = None,
    ) -> Iterator[dict]:
        """``source`` records of what ``targets`` name (an ``error`` record for each that fails), per ``[fetch]``."""
        from ..ingest.fetch import FetchOptions, fetch
        from ..ingest.stages import source_records

        targets = validate.targets(targets)
        opts = FetchOptions.from_config(self.settings.fetch, follow_symlinks=follow_symlinks)
        return source_records(
            fetch(
                list(targets),
                include=list(include),
                exclude=list(exclude),
                follow_links=follow_links,
                options=opts,
                stdin=stdin,
            )
        )

    def extract(self, lines: Iterable[str]) -> Iterator[dict]:
        """NDJSON ``source`` records → ``document`` records; other records pass through."""
        from ..extract.options import ExtractOptions
        from ..ingest import stages

        return stages.extract_records(stages.read_records(lines), ExtractOptions.from_config(self.settings.extract))

    def chunk(
        self, lines: Iterable[str], *, namespace: str | None = None, profile: str | None = None
    ) -> Iterator[dict]:
        """NDJSON ``document`` records → ``chunked`` records, in the tokens of the namespace's (or the named) profile.

        It writes nothing, so it makes no tenant (``_reading``)."""
        from ..ingest import stages

        with self._reading():
            prof = self._stage_profile(namespace, profile)
        return stages.chunk_records(stages.read_records(lines), prof)

    def embed(
        self, lines: Iterable[str], *, namespace: str | None = None, profile: str | None = None
    ) -> Iterator[dict]:
        """NDJSON ``chunked`` records → ``embedded`` records; chunks ``namespace`` stores already keep their vectors.

        It writes nothing, so it makes no tenant (``_reading``)."""
        from ..ingest import stages

        with self._reading():
            prof = self._stage_profile(namespace, profile)
            cache = self._stored_vectors(namespace, prof)
        return stages.embed_records(stages.read_records(lines), prof, cache=cache)

    def store(
        self, lines: Iterable[str], namespace: str, *, profile: str | None = None, verify: bool = True
    ) -> RunReport:
        """Write NDJSON ``embedded`` (and ``error``) records into ``namespace``: ``kb.store`` over them as
        items. What it refuses before the first item is stored (a profile not configured, a malformed
        first record), or nothing to store, makes nothing, the tenant included (``Ingestion.store``)."""
        from ..ingest import stages

        with self._reading():
            prof = self.kb.namespaces.profile_for(namespace, profile)
        return self.kb.ingestion.store(
            stages.store_items(stages.read_records(lines), prof), namespace, profile=prof.name, verify=verify
        )

    def _reading(self):
        """What ``chunk`` and ``embed`` read (a namespace's profile, its stored vectors) is read as a
        plan reads (``Session.planning``): only ``store`` writes, so only it makes a tenant (embedded, on
        its first use). A tenant not made yet is one with no namespace: the settings' profile, no
        vectors to reuse, which is what ``store`` will make it, so the first pipe into a new tenant
        works; a deleted one, or one never made by DSN, is a ``TenantNotFound`` as for any read."""
        return self.session.planning()

    def _stage_profile(self, namespace: str | None, profile: str | None) -> Profile:
        return self.kb.namespaces.profile_for(namespace, profile) if namespace else self.settings.profile(profile)

    def _stored_vectors(self, namespace: str | None, prof: Profile):
        """``lookup(hashes) -> {hash: vector}``: the tenant's embed cache for ``prof``, as the store
        that follows reuses it (the namespace's own generation when it serves ``prof``; else, a
        namespace not created yet or another profile named, ``prof`` as recorded, as an ingest plan
        reads it: ``kb.namespaces.placeholder``). None without a namespace, or for a tenant not made
        yet (it holds no vectors)."""
        if not namespace:
            return None
        conn = self._conn()
        if self.session.unmade:
            return None
        ns = get_namespace(conn, namespace, self.tenant, required=False)
        if ns is None or ns.fingerprint != prof.fingerprint:
            ns = self.kb.namespaces.placeholder(namespace, prof)
        return lambda hashes: cached_vectors(self._conn(), ns, hashes)
