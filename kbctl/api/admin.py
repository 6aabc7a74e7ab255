"""``kb.admin``: the database (status, migrate, optimize, the embedded server), the resolved
settings, and the run ledger (runs, errors, stats)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import CheckFailed, UsageError
from ..store import admin as admin_store
from ..store import reading
from ..store import runs as runs_store
from ..store.namespaces import namespace_ids
from ..store.queue import run_status
from ..validate import count
from ._boundary import Part, psycopg_boundary

if TYPE_CHECKING:
    from ..store.db import Migration

__all__ = ["Admin", "DatabaseStatus"]


@psycopg_boundary
class Admin(Part):
    """``kbctl db``, ``kbctl config``, ``kbctl runs``/``errors`` and ``kbctl stats``."""

    def migrate(self, target: int | None = None) -> list[Migration]:
        """Apply pending schema migrations (up to version ``target``); returns those applied now.

        Each runs in a transaction under an advisory lock, so concurrent callers apply it once.
        """
        return self.session.db.migrate(target=target)

    def db_status(self) -> DatabaseStatus:
        """The server, its PostgreSQL and pgvector versions, and every migration with its checksum.

        On a connection of its own that does not migrate: pending migrations show as not applied.
        """
        db = self.session.db
        conn = db.connect(register=False)
        try:
            rows = db.status(conn)
            version, pgvector = admin_store.server_versions(conn)
        finally:
            conn.close()
        home, pgdata = (self.settings.home, db.pgdata) if db.embedded else (None, None)
        return DatabaseStatus(db.embedded, home, pgdata, version, pgvector, rows)

    def optimize(self, *, reindex: bool = False, full: bool = False, repack: bool = True) -> list[dict]:
        """Vacuum and analyze kbctl's tables; ``reindex`` also compacts their B-tree indexes, ``full``
        rewrites everything under exclusive locks; first (``repack``) each namespace's packed
        postings are rewritten as one segment (``repack``). Returns each table's bytes before and after."""
        # autocommit (VACUUM cannot run in a transaction), migrated first when auto_migrate: after
        # an upgrade this may be the first command run, and it must not work on the old schema. One
        # connection for both steps (the migration check runs once).
        with self.session.admin() as conn:
            if repack:
                self._repack(conn)
            return admin_store.optimize(conn, reindex=reindex, full=full)

    def repack(self) -> list[dict]:
        """Rewrite every namespace's packed postings (the lexical lane's segments) as one segment,
        without the chunks deleted since; pack a namespace of ``PACK_MIN`` chunks or more that has
        none yet. Each waits for an ingest of its namespace to finish. Returns one row per
        namespace packed: its name, chunks and postings."""
        with self.session.admin() as conn:  # migrated first when auto_migrate, as every command
            return self._repack(conn)

    @staticmethod
    def _repack(conn) -> list[dict]:
        from ..errors import TenantNotFound
        from ..store import lexical

        out = []
        for ns_id, name, tenant in lexical.all_namespaces(conn):
            try:
                done = lexical.repack(conn, ns_id, tenant=tenant)
            except TenantNotFound:  # deleted since it was listed: its namespaces went with it
                continue
            if done is not None:
                out.append(
                    {"namespace_id": ns_id, "namespace": name, "chunks": done["chunks"], "postings": done["postings"]}
                )
        return out

    def start_server(self) -> Path | None:
        """Start the embedded server (it stays up until ``stop_server``); its data directory, or None with a DSN."""
        if not self.session.db.embedded:
            return None
        self.session.db.dsn()
        return self.session.db.pgdata

    def stop_server(self) -> bool | None:
        """Stop the embedded server; False when none was running, None with a DSN (there is none)."""
        if not self.session.db.embedded:
            return None
        return self.session.db.stop()

    def dsn(self) -> str:
        """The connection URL (the embedded server is started when there is no DSN)."""
        return self.session.db.dsn()

    def config_report(self, profile: str | None = None) -> dict:
        """The resolved settings: the layers read, every setting, a profile's pin and fingerprint,
        and the precision decision recorded on this machine (read, never measured here)."""
        from ..embed.precision import cached_decision

        prof = self.settings.profile(profile)
        return {
            "sources": list(self.settings.sources),
            "settings": self.settings.redacted(),  # passwords never printed
            "profile": {"name": prof.name, "fingerprint": prof.fingerprint, **prof.pin},
            "precision": _precision_json(prof.precision, cached_decision(prof)),
        }

    # -- the run ledger ----------------------------------------------------------------------------

    def runs(self, namespace: str | None = None, limit: int = 20) -> list[dict]:
        """The latest runs (of ``namespace``, else of every namespace of the tenant), newest first."""
        limit = _limit(limit)  # PostgreSQL refuses a negative LIMIT; 0 showed "(none)"
        from ..ingest.items import ordered_counts

        rows = runs_store.list_runs(self._conn(), self._ns_ids(namespace), limit)
        return [{**r, "counts": ordered_counts(r["counts"])} if r.get("counts") else r for r in rows]

    def errors(self, namespace: str | None = None, run_id: int | None = None, limit: int = 100) -> list[dict]:
        """The items the latest runs (or run ``run_id``) recorded as failed, newest first; a
        ``run_id`` that is no run of those namespaces is a ``UsageError`` (not found)."""
        limit = _limit(limit)
        ns_ids = self._ns_ids(namespace)
        if run_id is not None:  # an empty list would say "no errors" of a run that does not exist
            self.check_run(run_id, namespace, ns_ids)
        return runs_store.list_errors(self._conn(), ns_ids, run_id, limit)

    def check_run(self, run_id: int, namespace: str | None, ns_ids: list[int]) -> None:
        """Refuse (``UsageError``, not found) a ``run_id`` that is no run of the namespaces ``ns_ids``
        (``namespace``'s, else the tenant's): ``errors --run``, ``progress --run``."""
        run = run_status(self._conn(), run_id) if abs(run_id) <= _BIGINT else None
        if run is None or run[0] not in ns_ids:
            where = f"namespace {namespace!r}" if namespace else f"tenant {self.tenant!r}"
            raise UsageError(f"no run {run_id} in {where}", hint="see `kbctl runs`")

    def stats(self) -> dict:
        """Ingest figures of this tenant from the run ledger (what ``/metrics`` exports, without a server)."""
        rows = reading.ledger_stats(self._conn(), self.tenant)
        totals = {k: sum(r[k] for r in rows) for k in ("runs", "dead_runs", "documents", "chunks", "errors")}
        return {"tenant": self.tenant, "totals": totals, "namespaces": rows}

    def ns_ids(self, namespace: str | None) -> list[int]:
        """The ids of ``namespace`` (which must exist), else of every namespace of the tenant."""
        return self._ns_ids(namespace)

    def _ns_ids(self, namespace: str | None) -> list[int]:
        if namespace:
            return [self.kb.namespaces.get(namespace).id]
        return namespace_ids(self._conn(), self.tenant)


_BIGINT = 2**63 - 1


def _limit(limit: int) -> int:
    """A ``--limit`` of 1 or more; one past PostgreSQL's bigint (``--limit 99999999999999999999``,
    "everything") is the largest it takes: a ledger never holds more rows."""
    return min(count("limit", limit, 1, flag="--limit"), _BIGINT)


@dataclass(frozen=True)
class DatabaseStatus:
    """What ``kb.db_status()`` found: the server, its versions and every migration with its checksum."""

    embedded: bool
    home: Path | None  # the embedded server's home (None with a DSN)
    pgdata: Path | None
    server_version: str
    pgvector: str | None
    migrations: list[dict]

    @property
    def checksums_ok(self) -> bool:
        """False when an applied migration's file changed since it was applied."""
        return not any(m["checksum_ok"] is False for m in self.migrations)

    def problem(self) -> CheckFailed | None:
        """The failed check (exit 3) when an applied migration's file changed, naming them; else None."""
        changed = [f"{m['version']:03d}-{m['name']}" for m in self.migrations if m["checksum_ok"] is False]
        if not changed:
            return None
        return CheckFailed(
            f"migration {', '.join(changed)} was changed after it was applied",
            hint="restore the released file; a schema change is a new numbered migration",
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "embedded": self.embedded,
            "home": str(self.home) if self.home else None,
            "pgdata": str(self.pgdata) if self.pgdata else None,
            "checksums_ok": self.checksums_ok,
            "server_version": self.server_version,
            "pgvector": self.pgvector,
            "migrations": self.migrations,
        }


def _precision_json(precision: str, d) -> dict:
    if d is None:
        return {"setting": precision, "decided": False}
    return {
        "setting": precision,
        "decided": True,
        "throughput": d.precision,
        "throughput_reason": d.reason,
        "query": d.for_purpose("query"),
        "query_reason": d.query_reason or d.reason,
        "cpu_flags": list(d.cpu_flags),
    }
