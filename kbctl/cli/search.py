"""``kbctl search``: its parameters are ``search_spec.SEARCH_OPTIONS`` (shared with the fast path)."""

from __future__ import annotations

import inspect
from typing import Any

import typer

from .search_spec import (
    DEFAULT_BUDGET,
    FORMATS,
    SEARCH_OPTIONS,
    output_formats,
    render,
    search_arguments,
    unused_options,
)
from .state import NAME_PREFIXES, STATE, name_value


def register(app: typer.Typer) -> None:
    app.command("search")(search)


def search(**params: Any) -> None:
    """Search one namespace (or several, listed explicitly)."""
    from ..server.client import forward_search

    p = params
    if p["fmt"] is not None and p["fmt"] not in FORMATS:  # before the store opens or a model loads
        from ..errors import UsageError

        raise UsageError(f"unknown --format {p['fmt']!r}", hint="use one of: " + ", ".join(FORMATS))
    formats = output_formats({"json": p["json_"], "jsonl": p["jsonl"], "format": p["fmt"]})
    if len(formats) > 1:
        from ..errors import UsageError

        flags = {"json": p["json_"], "jsonl": p["jsonl"]}
        asked = [f"--{f}" if flags.get(f) else f"--format {f}" for f in formats]
        raise UsageError(
            f"{' and '.join(asked)} ask for two outputs",
            hint="give one: --json, --jsonl or --format " + "|".join(FORMATS),
        )
    kb = STATE.kb()
    options = search_arguments(p, kb.principal(p["as_"], p["group"]))
    # the running server at [server] url answers when there is one (a warm process: no model load);
    # else (none configured, unreachable, options it does not take) the search runs in this process.
    # A store named on the command line (--dsn, --home) is the one searched: never a server's.
    named_store = bool(STATE.dsn or STATE.home)
    result = None if named_store else forward_search(kb.settings, p["query"], p["namespace"], options)
    if result is None:
        result = kb.search(p["query"], p["namespace"], **options)
    fmt = formats[0]
    budget = DEFAULT_BUDGET if p["budget"] is None else p["budget"]
    render(
        result,
        fmt,
        quiet=STATE.quiet,
        explain=p["explain"],
        context=lambda r: kb.context(r, budget),
        notes=unused_options(p, fmt),
    )


def _parameter(o) -> inspect.Parameter:
    if o.argument:
        default = typer.Argument(o.default, help=o.help)
    else:
        callback = name_value if o.flags[0] in NAME_PREFIXES else None  # --as, --group
        default = typer.Option(o.default, *o.flags, help=o.help, min=o.min, callback=callback)
    return inspect.Parameter(o.param, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=o.annotation)


# typer reads the command's parameters from its signature: the one declaration, in order
search.__signature__ = inspect.Signature([_parameter(o) for o in SEARCH_OPTIONS], return_annotation=None)  # type: ignore[attr-defined]
search.__annotations__ = {o.param: o.annotation for o in SEARCH_OPTIONS} | {"return": None}
