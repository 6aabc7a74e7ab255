"""The one exception tree of kbctl.

Every error that reaches a user is a ``KbctlError``. Each class carries the process exit code the
CLI uses and an optional hint, so the CLI's single error boundary can print one readable line::

    KbctlError (1)                      runtime failure
    ├── UsageError (2)                  bad arguments on the command line
    │   └── KnowledgeBaseClosed (2)     a verb of a ``kbctl.open()`` handle after (or during) ``close()``
    ├── ConfigError (2)                 bad or unknown configuration keys, unknown profile
    │   ├── ProfileMismatchError (2)    namespace pinned to another model / dimension; a model
    │   │                               making vectors of another dimension than its profile says
    │   │   └── GenerationMoved (2)     a swap moved the namespace while a run waited for its lock
    │   └── ParameterError (2)          the server refused a setting's value (hnsw.ef_search…)
    ├── NamespaceNotFound (2)           no such namespace (for this tenant)
    ├── TenantNotFound (2)              no such tenant: deleted, or (with a DSN) never created
    ├── DatabaseError (1)               the store is unreachable or a statement failed
    │   ├── MigrationError (1)          a migration is missing, edited, or failed
    │   ├── DatabaseUnavailable (1)     the server went away (stopped, crashed, connection lost)
    │   ├── ResourceExhausted (1)       the server is out of disk space or memory
    │   ├── IntegrityViolation (1)      a constraint refused a write (unique, foreign key…)
    │   ├── StatementTimeout (1)        statement_timeout cancelled a statement
    │   └── TransactionConflict (1)     serialization failure or deadlock (after retries)
    ├── EmbeddingError (1)              the model could not load or embed
    ├── SourceError (1)                 a source could not be fetched
    ├── ExtractError (1)                a document could not be read (bad PDF, binary file…)
    ├── LockTimeout (1)                 another ingest holds the namespace (--no-wait, lock_timeout)
    └── CheckFailed (3)                 verify or an eval gate did not hold

Third-party exceptions are wrapped at the boundary of the stage that met them. Every
``psycopg.Error`` becomes one of these through ``from_psycopg`` where it leaves the library (the
public methods of ``KnowledgeBase``) and, for commands that call the store directly, at the CLI's
error boundary.
"""

from __future__ import annotations

__all__ = [
    "KbctlError",
    "UsageError",
    "KnowledgeBaseClosed",
    "ConfigError",
    "ProfileMismatchError",
    "GenerationMoved",
    "NamespaceNotFound",
    "TenantNotFound",
    "DatabaseError",
    "MigrationError",
    "EmbeddingError",
    "SourceError",
    "ExtractError",
    "LockTimeout",
    "CheckFailed",
    "ParameterError",
    "DatabaseUnavailable",
    "ResourceExhausted",
    "IntegrityViolation",
    "StatementTimeout",
    "TransactionConflict",
    "from_psycopg",
    "echo",
    "cut",
    "ECHO_CHARS",
]

ECHO_CHARS = 80
"""What a message shows at most of a value it was given (``echo``): enough to recognize it."""


def cut(text: str, limit: int = ECHO_CHARS) -> str:
    """``text`` as a message shows it: its first ``limit`` characters and an ellipsis when longer."""
    return text if len(text) <= limit else text[:limit] + "…"


def echo(value: object, limit: int = ECHO_CHARS) -> str:
    """How an error message quotes a value a client or user sent (a cursor, a name, an id, a
    filter): its ``repr``, a string cut at ``limit`` characters first (a 1 MB argument is not sent
    back whole, nor logged whole), any other value's ``repr`` cut the same way."""
    if isinstance(value, str):
        return repr(cut(value, limit))
    return cut(repr(value), limit)


class KbctlError(Exception):
    """Root of every error kbctl raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(KbctlError):
    """The command line asked for something that cannot be done as asked."""

    exit_code = 2


class KnowledgeBaseClosed(UsageError):
    """A verb of a knowledge base (``kbctl.open()``) called after its ``close()``, or one that was still
    running when ``close()`` stopped waiting for it (its statement cancelled)."""


class ConfigError(KbctlError):
    """Configuration is invalid: unknown keys, wrong types, unknown profiles.

    ``key`` is the dotted key the error is about, as its table names it (``server.port``, or
    ``chunk.size`` of a profile), when there is one: the loader finds its line in the user's file,
    and records the file and the line (``file``, ``line``) where it could tell them.
    """

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        key: str | None = None,
        file: str | None = None,
        line: int | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.key = key
        self.file = file
        self.line = line


class ProfileMismatchError(ConfigError):
    """A namespace is pinned to a profile whose fingerprint differs from the one requested."""


class GenerationMoved(ProfileMismatchError):
    """A swap or rollback moved the namespace to another generation while a run waited for its lock
    (nothing was written). ``Ingestion`` reads the namespace again and runs once more."""


class NamespaceNotFound(KbctlError):
    """The namespace does not exist for this tenant."""

    exit_code = 2


class TenantNotFound(KbctlError):
    """The tenant a command or request names is not registered, and its first use may not make it:
    it was deleted (``kbctl tenants delete``; only ``kbctl tenants create`` makes it again), or, with
    a DSN, it was never created."""

    exit_code = 2


class DatabaseError(KbctlError):
    """The database could not be reached or refused a statement."""


class MigrationError(DatabaseError):
    """A migration is missing, was edited after it was applied, or failed."""


class ParameterError(ConfigError):
    """The server refused the value of a setting kbctl sent (an out-of-range ``hnsw.ef_search``)."""


class DatabaseUnavailable(DatabaseError):
    """The server went away: stopped, crashed, or the connection was lost mid-command."""


class ResourceExhausted(DatabaseError):
    """The server ran out of disk space or memory."""


class IntegrityViolation(DatabaseError):
    """A constraint refused a write: unique, foreign key, not-null or check."""


class StatementTimeout(DatabaseError):
    """A statement ran past ``statement_timeout`` (or was cancelled)."""


class TransactionConflict(DatabaseError):
    """A serialization failure or deadlock that retrying did not resolve (or that could not be retried)."""


class EmbeddingError(KbctlError):
    """The embedding model could not be loaded or failed to embed."""


class SourceError(KbctlError):
    """A source (file, URL, feed) could not be fetched."""


class ExtractError(KbctlError):
    """A fetched item could not be turned into text (corrupt, binary, undecodable)."""


class LockTimeout(KbctlError):
    """Another process holds the namespace's ingest lock."""


class CheckFailed(KbctlError):
    """A check (verify, an eval gate) ran and did not hold. ``report``, when given, is what the
    check found (a swap's side-by-side eval), for the caller to show before the error."""

    exit_code = 3

    def __init__(self, message: str, *, hint: str | None = None, report: dict | None = None) -> None:
        super().__init__(message, hint=hint)
        self.report = report


# -- psycopg errors --------------------------------------------------------------------------------
#
#   SQLSTATE (class)                        kbctl error            exit
#   08xxx, 57P01-05, no SQLSTATE            DatabaseUnavailable    1   connection lost, server stopped
#   53100 disk full / 53200 out of memory   ResourceExhausted      1
#   23xxx unique, foreign key, not null…    IntegrityViolation     1   names the constraint
#   22023 invalid parameter value           ParameterError         2   names the parameter
#   55P03 lock not available                LockTimeout            1
#   57014 query canceled                    StatementTimeout       1
#   40001 serialization, 40P01 deadlock     TransactionConflict    1   (searches retry first)
#   anything else                           DatabaseError          1   the message's first line


def from_psycopg(e: BaseException) -> KbctlError:
    """The kbctl error for a ``psycopg.Error``: one line, a hint and the exit code of its kind.

    A statement that fails only because an earlier error killed the connection (an unlock in a
    ``finally``) chains to that error; the first one is what gets reported.
    """
    e = _original(e)
    if isinstance(e, KbctlError):
        return e
    state, line = getattr(e, "sqlstate", None) or "", _first_line(e)
    for prefixes, make in _BY_SQLSTATE:
        if state.startswith(prefixes):
            return make(e, line)
    if not state and _is_operational(e):  # raised by the client: the connection is gone
        return _gone(e, line)
    return DatabaseError(f"database error: {line}", hint=f"PostgreSQL error {state or type(e).__name__}")


def _original(e: BaseException) -> BaseException:
    while not getattr(e, "sqlstate", None) and _is_operational(e):
        before = e.__cause__ or e.__context__
        if before is None or not (isinstance(before, KbctlError) or _is_psycopg(before)):
            break
        e = before
    return e


def _is_psycopg(e: BaseException) -> bool:
    return any(c.__module__.startswith("psycopg") and c.__name__ == "Error" for c in type(e).__mro__)


def _is_operational(e: BaseException) -> bool:
    return any(c.__module__.startswith("psycopg") and c.__name__ == "OperationalError" for c in type(e).__mro__)


def _first_line(e: BaseException) -> str:
    s = str(e).strip()
    return s.splitlines()[0].strip() if s else type(e).__name__


def _gone(e, line: str) -> KbctlError:
    return DatabaseUnavailable(
        f"the database server went away: {line}",
        hint="check that it runs (`kbctl db start` for the embedded server, or --dsn / KBCTL_DSN), then run the command again",
    )


def _resources(e, line: str) -> KbctlError:
    what = {"53100": "disk space", "53200": "memory"}.get(e.sqlstate, "resources")
    hint = (
        "free disk space where the server keeps its data (the embedded one: <home>/pgdata), then run the command again"
        if what == "disk space"
        else "give the server more memory, or run fewer commands at once, then run the command again"
    )
    return ResourceExhausted(f"the database server is out of {what}: {line}", hint=hint)


_INTEGRITY_HINTS = {
    "23505": "another process may have written the same rows at the same time; run the command again",
    "23503": "a row it refers to is gone (was the namespace deleted meanwhile?); run the command again",
}


def _integrity(e, line: str) -> KbctlError:
    diag = getattr(e, "diag", None)
    name = getattr(diag, "constraint_name", None) or _quoted(line, "constraint") or getattr(diag, "column_name", None)
    msg = f"the database refused a write: {line}" + (f" ({name})" if name and name not in line else "")
    hint = _INTEGRITY_HINTS.get(
        e.sqlstate, "the data does not fit the schema: check `kbctl db status` for pending migrations"
    )
    return IntegrityViolation(msg, hint=hint)


def _parameter(e, line: str) -> KbctlError:
    name = _quoted(line, "parameter")
    if name is None:
        return ParameterError(
            f"invalid parameter value: {line}", hint="check the options and profile settings of this command"
        )
    return ParameterError(
        f"invalid value for {name}: {line}",
        hint=f"set {name} within the range given (an option of this command or a profile setting; `kbctl config show`)",
    )


def _quoted(line: str, word: str) -> str | None:
    import re

    m = re.search(word + r' "([^"]+)"', line)
    return m.group(1) if m else None


def _lock(e, line: str) -> KbctlError:
    return LockTimeout(
        f"timed out waiting for a lock: {line}",
        hint="another kbctl process (an ingest, `kbctl db optimize --full`) holds it: run the command again when it is done",
    )


def _cancelled(e, line: str) -> KbctlError:
    return StatementTimeout(
        f"the database cancelled a statement: {line}",
        hint="raise statement_timeout for kbctl's role (or PGOPTIONS='-c statement_timeout=…'), or narrow the command",
    )


def _conflict(e, line: str) -> KbctlError:
    return TransactionConflict(
        f"a concurrent transaction conflicted: {line}",
        hint="another process changed the same rows: run the command again",
    )


def _schema(e, line: str) -> KbctlError:
    return DatabaseError(
        f"database error: {line}", hint="kbctl's schema is missing or out of date: run `kbctl db migrate`"
    )


def _privilege(e, line: str) -> KbctlError:
    return DatabaseError(
        f"database error: {line}", hint="connect as a role that owns kbctl's schema (see --dsn / KBCTL_DSN)"
    )


_BY_SQLSTATE = (
    (("08", "57P01", "57P02", "57P03", "57P04", "57P05"), _gone),
    (("53",), _resources),
    (("23",), _integrity),
    (("22023",), _parameter),
    (("55P03",), _lock),
    (("57014",), _cancelled),
    (("40001", "40P01"), _conflict),
    (("42P01", "3F000"), _schema),
    (("42501",), _privilege),
)
