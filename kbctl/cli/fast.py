"""The console script's entry: ``kbctl search`` through a running server before the CLI is imported.

With ``[server] url`` (or ``KBCTL_SERVER``) set, ``kbctl search`` asks the running ``kbctl serve``
(``kbctl.server.client``, urllib only) and prints what the CLI would print, without importing
typer, ``kbctl.api``, psycopg or numpy: the process costs the interpreter, ``kbctl.config`` and one
request. Only a search whose every argument is understood here takes this path; anything else
(``--help``, ``--as``, ``--format context``, two output formats, ``--explain`` as a table, an option typer would reject,
a store named by ``--dsn`` or ``--home``, no server configured, a server that cannot answer) runs the normal CLI (``kbctl.cli.main``), which
searches in-process exactly as it would have (with a warning when a configured server is down).
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

from .search_spec import SEARCH_OPTIONS, output_formats, render, search_arguments, unused_options
from .terminal import fit_stdout, flush_stdout

__all__ = ["main", "parse_search"]

# Global options of kbctl (kbctl.cli.main._global) → their key; flags are counted / set.
_GLOBAL_VALUES = {
    "--config": "config",
    "-c": "config",
    "--dsn": "dsn",
    "--home": "home",
    "--tenant": "tenant",
    "--profile": "profile",
    "-p": "profile",
}
_GLOBAL_FLAGS = {"--verbose": "verbose", "-v": "verbose", "--quiet": "quiet", "-q": "quiet"}
# Options of kbctl search this path takes: read from the one declaration of the command's options
# (kbctl.cli.search_spec). --as and --group are not among them: a principal's search is not forwarded.
_TAKEN = [o for o in SEARCH_OPTIONS if o.fast and not o.argument]
_SEARCH_FLAGS = {n: v for o in _TAKEN for n, v in o.switches().items()}
_SEARCH_VALUES = {f: o.name for o in _TAKEN if not o.switches() for f in o.flags}
_LISTS = {o.name for o in _TAKEN if o.annotation == list[str]}
_INTS = {o.name for o in _TAKEN if o.annotation in (int, int | None)}
_FORMATS = {"table", "json", "jsonl", "markdown"}  # --format context needs the knowledge base


class _Declined(Exception):
    """This invocation is not one the fast path takes: the normal CLI runs it."""


def main(argv: list[str] | None = None) -> None:
    """The ``kbctl`` console script: the fast path when it applies, else ``kbctl.cli.main.main``."""
    args = sys.argv[1:] if argv is None else list(argv)
    fit_stdout()
    code = _fast(args)
    if code is not None:
        flush_stdout()
        sys.exit(code)
    from .main import main as full

    full(argv)


def _fast(argv: list[str]) -> int | None:
    """The exit code of the search when this path answered it, else None (nothing printed)."""
    try:
        parsed = parse_search(argv)
    except _Declined:
        return None
    try:
        from ..config import load_settings

        settings = load_settings(parsed["config"], parsed["overrides"])
        if parsed["overrides"]["defaults.profile"]:  # an unknown -p: the normal CLI refuses it
            settings.profile(parsed["overrides"]["defaults.profile"], embedder=False)
        if not settings.server.url.strip():
            return None
        from ..errors import KbctlError
        from ..server.client import Unusable, ask_server, skip_once
    except Exception:  # a config error and the like: the normal CLI reports it as it always does
        return None
    try:
        result = ask_server(settings, parsed["query"], parsed["namespace"], parsed["options"])
    except Unusable as e:
        skip_once(settings, str(e))  # the CLI warns (through its logging) and searches in-process
        return None
    except KbctlError as e:  # the server refused the search (4xx): the error the CLI would print
        from .terminal import printable

        print(f"error: {printable(e.message, keep='')}", file=sys.stderr)
        if e.hint:
            print(f"hint: {printable(e.hint, keep='')}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception:
        return None
    if result is None:
        return None
    with contextlib.suppress(BrokenPipeError):  # as kbctl.cli.main: a closed pipe is not an error
        render(result, parsed["format"], quiet=parsed["quiet"], notes=parsed["notes"])
    return 0


def parse_search(argv: list[str]) -> dict[str, Any]:
    """``argv`` of a ``kbctl [global options] search ...`` this path takes, as the search's
    arguments; ``_Declined`` for anything else (the normal CLI parses it, and reports its errors)."""
    glob: dict[str, Any] = {"verbose": 0, "quiet": False}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "search":
            break
        key, value, i = _option(argv, i, _GLOBAL_VALUES, {k: (v, True) for k, v in _GLOBAL_FLAGS.items()})
        if key == "verbose":
            glob["verbose"] += 1
        else:
            glob[key] = value
    else:
        raise _Declined
    opts: dict[str, Any] = {"namespace": [], "filter": [], "explain": False, "json": False, "jsonl": False}
    positional: list[str] = []
    i += 1
    while i < len(argv):
        a = argv[i]
        if a == "--":
            positional += argv[i + 1 :]
            break
        if not a.startswith("-") or a == "-":
            positional.append(a)
            i += 1
            continue
        key, value, i = _option(argv, i, _SEARCH_VALUES, _SEARCH_FLAGS)
        if key in _INTS:
            value = _int(value)
        if key in _LISTS:
            opts[key].append(value)
        else:
            opts[key] = value
    if len(positional) > 1 or not opts["namespace"]:
        raise _Declined
    if glob.get("dsn") or glob.get("home"):  # the user named a store: it is searched in-process, not a server's
        raise _Declined
    if any(k in glob and not glob[k].strip() for k in ("dsn", "home", "config")):  # the CLI refuses an empty one
        raise _Declined
    if any(opts.get(o) is not None and opts[o] < 1 for o in ("ef_search", "budget")):  # typer's range errors
        raise _Declined
    formats = output_formats(opts)
    fmt = formats[0]
    if (
        len(formats) > 1 or fmt not in _FORMATS or (fmt == "table" and opts["explain"])
    ):  # the lanes table: kbctl.cli.search
        raise _Declined
    return {
        "config": glob.get("config"),
        "overrides": {
            "database.dsn": glob.get("dsn"),
            "database.home": glob.get("home"),
            "defaults.tenant": glob.get("tenant"),
            "defaults.profile": glob.get("profile"),
        },
        "quiet": glob["quiet"],
        "query": positional[0] if positional else "",
        "namespace": opts["namespace"],
        "format": fmt,
        "notes": unused_options(opts, fmt),
        # what kbctl.cli.search.search passes to KnowledgeBase.search (forwarded to the server)
        "options": search_arguments(opts),
    }


def _option(argv: list[str], i: int, values: dict, flags: dict) -> tuple[str, Any, int]:
    """The option at ``argv[i]`` (``--name value``, ``--name=value``, ``-x value``, ``-xvalue`` or a
    flag): its key, value and the index after it."""
    a = argv[i]
    if a in flags:
        key, value = flags[a]
        return key, value, i + 1
    if a in values:
        if i + 1 >= len(argv):
            raise _Declined
        return values[a], argv[i + 1], i + 2
    if a.startswith("--") and "=" in a:
        name, value = a.split("=", 1)
        if name in values:
            return values[name], value, i + 1
    elif not a.startswith("--") and len(a) > 2 and a[:2] in values:
        return values[a[:2]], a[2:], i + 1
    raise _Declined


def _int(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise _Declined from None
