"""A tool's error as a client sees it: a readable line for the caller's mistakes, the kind of a
fault on the server's side (never its text, which names the database), and the HTTP status of each.
Used by both surfaces (``kbctl.server.mcp``, ``kbctl.server.app``)."""

from typing import Any

from ..errors import UsageError, cut

__all__ = ["validation_message", "public_fault", "error_status"]


def validation_message(e: Any) -> str:
    """A pydantic ``ValidationError`` as one line: each wrong argument and what was wrong with it
    (an argument's name is what the client sent, so it is cut as an echoed value is: ``kbctl.errors.cut``)."""
    parts = []
    for err in e.errors():
        where = ".".join(cut(str(p)) for p in err["loc"]) or "body"
        parts.append(f"{where}: {cut(err['msg'], 200)}")
    return "invalid arguments: " + "; ".join(parts[:5])


def public_fault(e: Exception, what: str) -> str:
    """What a client is told of a fault on the server's side (``error_status`` 500): which kind, never
    the cause's text, which names the database host and port (the server logs it whole)."""
    from ..errors import DatabaseError, StatementTimeout

    if isinstance(e, StatementTimeout):
        return f"{what} failed: the database took too long (a statement timeout); try again, or narrow it"
    if isinstance(e, DatabaseError):
        return f"{what} failed: the knowledge base's database is unavailable; try again later"
    return f"{what} failed (a fault on the server's side, logged there)"


def error_status(e: Exception) -> int:
    """The HTTP status of a tool's error: 400 for the caller's mistakes, 404 for a tenant that is not
    there (deleted under a running server: its agent's requests are refused, the tenant is not made
    again), 401 for a remembered token of a tenant made again since (``StaleToken``: a token unknown),
    500 for the rest."""
    from ..errors import ConfigError, TenantNotFound
    from .service import StaleToken

    if isinstance(e, TenantNotFound):
        return 404
    if isinstance(e, StaleToken):
        return 401
    return 400 if isinstance(e, (UsageError, ConfigError)) else 499 if type(e).__name__ == "Cancelled" else 500
