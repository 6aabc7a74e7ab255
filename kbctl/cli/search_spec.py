"""``kbctl search``'s options, declared once, and the one function that prints its result.

The typer command (``kbctl.cli.search``) is built from ``SEARCH_OPTIONS``, and the fast path
(``kbctl.cli.fast``) parses argv with the same table, so an option added here exists on both paths
(or is declined by the fast path: ``fast=False``). ``render`` prints a result for both. This module
imports nothing heavy: rich only inside ``render``, for the formats people read.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .terminal import json_line, printable

__all__ = [
    "SearchOption",
    "SEARCH_OPTIONS",
    "FORMATS",
    "DEFAULT_BUDGET",
    "search_arguments",
    "output_formats",
    "unused_options",
    "render",
]

FORMATS = ("table", "json", "jsonl", "markdown", "context")
DEFAULT_BUDGET = 2000  # tokens of --format context


@dataclass(frozen=True)
class SearchOption:
    """One parameter of ``kbctl search``: its typer declaration and how the fast path reads it."""

    param: str  # the command function's parameter
    flags: tuple[str, ...]  # its option names; a boolean pair is one "--on/--off" name
    annotation: Any
    default: Any
    help: str
    key: str = ""  # its name in the fast path's parse (default: param)
    fast: bool = True  # False: the fast path declines a search that uses it
    min: int | None = None
    argument: bool = False  # a positional argument, not an option

    @property
    def name(self) -> str:
        return self.key or self.param

    def switches(self) -> dict[str, tuple[str, Any]]:
        """A flag's names → (key, value set): ``--rerank`` → True, ``--no-rerank`` → False."""
        if self.annotation not in (bool, bool | None):
            return {}
        names = [n for f in self.flags for n in f.split("/")]
        return {n: (self.name, not n.startswith("--no-") or len(names) == 1) for n in names}


_LANGS = (
    "key=value, key!=v, key>=v, key<=v, key~prefix, 'key in a,b', key (has a value), !key (has none);"
    " quote a value as 'author=\"Priya Raman\"', the empty one as 'author=\"\"'"
)

SEARCH_OPTIONS: tuple[SearchOption, ...] = (
    SearchOption(
        "query", (), str, "", "What to look for (may be empty with --filter: a metadata query).", argument=True
    ),
    SearchOption("namespace", ("--namespace", "-n"), list[str], ..., "Namespace to search (repeat to search several)."),
    SearchOption("mode", ("--mode", "-m"), str, "auto", "auto | dense | lexical | hybrid."),
    SearchOption("k", ("-k", "--top"), int | None, None, "Number of results (default: profile search.k)."),
    SearchOption("filter", ("--filter", "-f"), list[str], [], f"Metadata filter: {_LANGS}."),
    SearchOption("per_doc", ("--per-doc",), int | None, None, "At most this many chunks per document."),
    SearchOption("fusion", ("--fusion",), str | None, None, "rrf | convex (default: profile search.fusion)."),
    SearchOption(
        "ef_search",
        ("--ef-search",),
        int | None,
        None,
        "HNSW ef_search for this query (default: the profile's hnsw.ef_search); higher is slower and closer to exact.",
        min=1,
    ),
    SearchOption(
        "rerank", ("--rerank/--no-rerank",), bool | None, None, "Rerank fused candidates with the profile's reranker."
    ),
    SearchOption(
        "prf",
        ("--prf",),
        str | None,
        None,
        "Pseudo-relevance feedback: off | rescore (bounded: the candidates scored again) | hybrid (two full rounds); default: profile search.prf; hybrid searches only.",
    ),
    SearchOption("explain", ("--explain",), bool, False, "Show each hit's rank and score in every lane."),
    SearchOption("json_", ("--json",), bool, False, "One JSON object on stdout.", key="json"),
    SearchOption("jsonl", ("--jsonl",), bool, False, "One JSON object per hit on stdout."),
    SearchOption("fmt", ("--format",), str | None, None, " | ".join(FORMATS) + " (default: table).", key="format"),
    SearchOption(
        "budget",
        ("--budget",),
        int | None,
        None,
        f"Token budget for --format context (default {DEFAULT_BUDGET}); other formats take none.",
        min=1,
    ),
    SearchOption(
        "as_",
        ("--as",),
        str | None,
        None,
        "Search as this user (user:ID): hits they may not view are withheld. Without --as: anonymous, public documents only.",
        fast=False,  # a principal's search is not forwarded (kbctl.server.client)
    ),
    SearchOption(
        "group", ("--group", "-g"), list[str], [], "A group the principal belongs to (repeatable).", fast=False
    ),
)


# option → the keyword of ``KnowledgeBase.search`` it becomes (the rest choose how to print)
_ARGUMENTS = {
    "mode": "mode",
    "k": "k",
    "filter": "filters",
    "per_doc": "per_doc",
    "fusion": "fusion",
    "rerank": "rerank",
    "explain": "explain",
    "ef_search": "ef_search",
    "prf": "prf",
}


def search_arguments(values: dict[str, Any], principal: Any = None) -> dict[str, Any]:
    """The keywords of ``KnowledgeBase.search`` from parsed option values (by option name; a
    missing one is its declared default), on both paths."""
    defaults = {o.name: o.default for o in SEARCH_OPTIONS}
    return {arg: values.get(name, defaults[name]) for name, arg in _ARGUMENTS.items()} | {"principal": principal}


def output_formats(values: dict[str, Any]) -> list[str]:
    """The output formats asked for (by option name: ``--json``, ``--jsonl``, ``--format``), each
    once, in that order; none asked is the table. More than one disagree (``--json --jsonl``):
    both paths refuse that rather than drop one without a word."""
    asked = [f for f in ("json", "jsonl") if values.get(f)]
    if values.get("format") is not None:
        asked.append(values["format"])
    return list(dict.fromkeys(asked)) or ["table"]


def unused_options(values: dict[str, Any], fmt: str) -> list[str]:
    """Notes on options given (by option name) that the output ``fmt`` does not use: dropped
    without a word, they looked as if they had applied (``--budget 300 --json``)."""
    notes = []
    if values.get("budget") is not None and fmt != "context":
        notes.append(f"--budget applies to --format context only; the {fmt} output took none")
    if values.get("explain") and fmt in ("markdown", "context"):
        notes.append(
            f"--explain shows each lane's rank and score in the table; the {fmt} output took none"
            " (--json and --jsonl hold them in each hit's lanes)"
        )
    return notes


def render(
    result: Any,
    fmt: str,
    *,
    quiet: bool,
    explain: bool = False,
    context: Callable[[Any], str] | None = None,
    notes: Sequence[str] = (),
) -> None:
    """Print a search result as ``kbctl search`` does: notes on stderr, one line each, in every
    format (the result's, then ``notes``: the command line's own, which json's ``notes`` also
    holds; jsonl, one hit a line, has no place for them), then ``fmt`` (json and jsonl on stdout without rich; table,
    markdown and ``--explain``'s lanes table through it); ``context`` makes the prompt-ready block
    of ``--format context``."""
    _notes(result, quiet)
    for note in () if quiet else notes:
        print(f"note: {_line(note)}", file=sys.stderr)
    if fmt == "json":  # the command line's notes join the result's, as a reader of the JSON sees them
        doc = result.to_json()
        doc["notes"] = [*doc.get("notes", []), *notes]
        _write(doc)
    elif fmt == "jsonl":
        for h in result.hits:
            _write(h.to_json())
    elif fmt in ("markdown", "context"):
        from .render import hits_markdown
        from .state import out

        text = hits_markdown(result) if fmt == "markdown" else printable(context(result))  # type: ignore[misc]
        if fmt == "context" and result.hits and not text.strip() and not quiet:
            print(
                "note: no passage fits the budget (not even the first one's citation); raise --budget", file=sys.stderr
            )
        out.print(text, markup=False, highlight=False)
    else:
        _table(result, explain)
    sys.stdout.flush()


def _write(obj: Any) -> None:
    sys.stdout.write(json_line(obj))


def _notes(result: Any, quiet: bool) -> None:
    for note in result.notes:
        if quiet:
            continue
        if result.degraded:
            from rich.markup import escape

            from .state import err

            err.print(f"[yellow]warning:[/] {escape(_line(note))}", highlight=False)
        else:
            print(f"note: {_line(note)}", file=sys.stderr)


def _line(note: str) -> str:
    """A note as one line of stderr (a newline in it, as an embedder's error message has, written
    ``\\x0a``): with ``--jsonl``, which has no envelope for notes, stderr is where a reader takes
    them, one a line."""
    return printable(note, keep="")


def _table(result: Any, explain: bool) -> None:
    from .render import hits_table

    print(
        printable(f"strategy: {result.strategy}  mode: {result.mode}  namespaces: {', '.join(result.namespaces)}"),
        file=sys.stderr,
    )
    if result.hits:
        hits_table(result)
    else:
        print("no results", file=sys.stderr)
    if result.withheld:
        print(f"withheld: {result.withheld}", file=sys.stderr)
    if explain:
        _explain(result)


def _explain(result: Any) -> None:
    from .render import table

    rows = []
    for h in result.hits:
        row = {"#": h.rank, "relevance": h.relevance, "fused": h.score}
        for lane, v in h.lanes.items():
            row[f"{lane} rank"] = v.get("rank")
            row[f"{lane} score"] = v.get("score")
        rows.append(row)
    table(rows, title="lanes")
    if result.details:
        print(f"details: {printable(result.details)}", file=sys.stderr)
