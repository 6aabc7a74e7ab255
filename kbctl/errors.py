"""The one exception tree of kbctl.

Every error that reaches a user is a ``KbctlError``. Each class carries the process exit code the
CLI uses and an optional hint, so the CLI's single error boundary can print one readable line::

    KbctlError (1)                      runtime failure
    ├── UsageError (2)                  bad arguments on the command line
    ├── ConfigError (2)                 bad or unknown configuration keys, unknown profile
    │   └── ProfileMismatchError (2)    namespace pinned to another model / dimension
    ├── NamespaceNotFound (2)           no such namespace (for this tenant)
    ├── DatabaseError (1)               the store is unreachable or a statement failed
    │   └── MigrationError (1)          a migration is missing, edited, or failed
    ├── EmbeddingError (1)              the model could not load or embed
    ├── SourceError (1)                 a source could not be fetched
    ├── ExtractError (1)                a document could not be read (bad PDF, binary file…)
    ├── LockTimeout (1)                 another ingest holds the namespace (with --no-wait)
    └── CheckFailed (3)                 verify or an eval gate did not hold

Third-party exceptions are wrapped at the boundary of the stage that met them.
"""

from __future__ import annotations

__all__ = [
    "KbctlError",
    "UsageError",
    "ConfigError",
    "ProfileMismatchError",
    "NamespaceNotFound",
    "DatabaseError",
    "MigrationError",
    "EmbeddingError",
    "SourceError",
    "ExtractError",
    "LockTimeout",
    "CheckFailed",
]


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


class ConfigError(KbctlError):
    """Configuration is invalid: unknown keys, wrong types, unknown profiles."""

    exit_code = 2


class ProfileMismatchError(ConfigError):
    """A namespace is pinned to a profile whose fingerprint differs from the one requested."""


class NamespaceNotFound(KbctlError):
    """The namespace does not exist for this tenant."""

    exit_code = 2


class DatabaseError(KbctlError):
    """The database could not be reached or refused a statement."""


class MigrationError(DatabaseError):
    """A migration is missing, was edited after it was applied, or failed."""


class EmbeddingError(KbctlError):
    """The embedding model could not be loaded or failed to embed."""


class SourceError(KbctlError):
    """A source (file, URL, feed) could not be fetched."""


class ExtractError(KbctlError):
    """A fetched item could not be turned into text (corrupt, binary, undecodable)."""


class LockTimeout(KbctlError):
    """Another process holds the namespace's ingest lock."""


class CheckFailed(KbctlError):
    """A check (verify, an eval gate) ran and did not hold."""

    exit_code = 3
