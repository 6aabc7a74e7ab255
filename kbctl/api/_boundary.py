"""What every sub-API shares: the psycopg error boundary, the read retry, the "not available" answer,
and ``delegate`` (how the ``KnowledgeBase`` facade and a namespace handle reach a sub-API's verb)."""

from __future__ import annotations

import functools
import logging
import time
from typing import Any, Callable, Concatenate, ParamSpec, TypeVar

import psycopg

from ..errors import DatabaseUnavailable, UsageError, echo, from_psycopg

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")
C = TypeVar("C", bound=type)

_SEARCH_RETRIES = 2  # a search only reads: after a serialization failure or deadlock it simply runs again


def psycopg_boundary(cls: C) -> C:
    """The library's error boundary: a psycopg error leaving a public method of ``cls`` (or calling
    it: ``kb.namespaces()``) leaves as a kbctl error. Each such method but ``close`` runs as a verb
    of its session (``Session.call``): refused once the knowledge base is closed, and counted, so
    its thread's connections are neither lent nor closed under it."""
    for name, fn in list(vars(cls).items()):
        if callable(fn) and (name == "__call__" or not name.startswith("_")) and not isinstance(fn, type):
            setattr(cls, name, _converting(fn, verb=name != "close"))
    return cls


def _converting(fn, verb: bool = True):
    @functools.wraps(fn)
    def method(*args, **kwargs):
        session = getattr(args[0], "session", None) if args else None
        call = getattr(session, "call", None) if verb else None
        if call is None:
            return _converted(fn, args, kwargs)
        with call():
            return _converted(fn, args, kwargs)

    return method


def _converted(fn, args, kwargs):
    try:
        return fn(*args, **kwargs)
    except psycopg.Error as e:
        err = from_psycopg(e)  # keep psycopg's error as the cause of a new one, for debugging
        session = getattr(args[0], "session", None) if args else None
        if isinstance(err, DatabaseUnavailable) and session is not None:
            # the server went away (stopped, restarted): this thread's other connections are
            # gone too, each to fail its next call; the next call opens new ones instead
            session.mine().close()
        raise err from (e if err.__traceback__ is None else err.__cause__)


def read_retried(read: Callable[[], R]) -> R:
    """``read()``, run again (twice at most) when a serialization failure or deadlock cancels it."""
    for attempt in range(_SEARCH_RETRIES + 1):
        try:
            return read()
        except (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected) as e:
            if attempt == _SEARCH_RETRIES:
                raise
            log.info("search cancelled (%s); running it again", e.sqlstate)
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")


def unavailable(kind: str, ident: Any) -> UsageError:
    """The one answer for what does not exist and what the caller may not see (nothing tells them apart)."""
    return UsageError(f"{kind} {echo(ident)} is not available")


def delegate(part: str, fn: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], R]:
    """A method that calls ``fn`` on ``self.<part>`` (the sub-API that owns the verb), with ``fn``'s
    name, signature and docstring: the facade keeps every verb it had, written once, in its sub-API."""

    @functools.wraps(fn)
    def method(self: Any, *args: P.args, **kwargs: P.kwargs) -> R:
        return fn(getattr(self, part), *args, **kwargs)

    return method


class Part:
    """A sub-API of a ``KnowledgeBase``: the verbs of one noun (a CLI group), over its session.

    ``kb`` is the facade, so a verb may use another sub-API's (``kb.evals`` from a swap's gates)."""

    def __init__(self, kb: Any) -> None:
        self.kb = kb
        self.session = kb.session

    @property
    def settings(self):
        return self.session.settings

    @property
    def tenant(self) -> str:
        return self.session.tenant

    def _conn(self):
        return self.session.connection()
