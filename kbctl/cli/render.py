"""Rendering of results: Rich tables for people, JSON/NDJSON for programs, context blocks for prompts.

Whatever is shown to people is data (stored text, titles, file names): it goes through
``kbctl.cli.terminal.printable`` and into Rich as ``Text`` (never read as markup); JSON is exact
and inert (``inert_json``).
"""

from __future__ import annotations

import json
import sys
from typing import Any, Iterable

from rich.table import Table
from rich.text import Text

from .state import out
from .terminal import json_line, printable


def print_json(obj: Any) -> None:
    """One JSON document on stdout."""
    sys.stdout.write(json_line(obj))
    sys.stdout.flush()


def print_jsonl(rows: Iterable[Any]) -> None:
    for r in rows:
        sys.stdout.write(json_line(r))
    sys.stdout.flush()


def table(rows: list[dict], columns: list[str] | None = None, title: str | None = None) -> None:
    """A Rich table of dict rows on stdout."""
    if not rows:
        out.print("(none)")
        return
    columns = columns or list(rows[0])
    t = Table(title=printable(title) if title else None, show_lines=False, highlight=False)
    for c in columns:
        t.add_column(printable(c), overflow="fold")
    for r in rows:
        t.add_row(*[_cell(r.get(c)) for c in columns])
    out.print(t)


def human_size(n: int) -> str:
    """A size in bytes as it reads: ``0 B``, ``999 B``, ``12.3 kB``, ``172 kB``, ``5.3 MB``, ``2.15 GB``
    (SI units, three significant figures at most; ``--json`` gives the exact bytes)."""
    if n < 1000:
        return f"{n} B"
    size = float(n)
    for unit in ("kB", "MB", "GB"):
        size /= 1000
        shown = f"{size:.3g}"
        if unit == "GB":
            return f"{size:.3g} GB" if size < 1000 else f"{size:.0f} GB"
        if "e" not in shown and float(shown) < 1000:
            return f"{shown} {unit}"
    raise AssertionError("unreachable")


def dead_runs(rows: list[dict]) -> list[str]:
    """For a table of runs (``kbctl runs``, ``kbctl progress``): a ``running`` run no process runs
    (``alive`` false: killed) reads ``running (no process)``; the lines that say what that means,
    for stderr. The rows' ``status`` is the stored one, as ``--json`` gives it."""
    notes = []
    for r in rows:
        if r.get("status") == "running" and r.get("alive") is False:
            r["status"] = "running (no process)"
            notes.append(
                f"run {r['run_id']} of {r['namespace']} is recorded running, but no process runs it (killed:"
                f" SIGKILL, out of memory, a lost machine); the namespace's next run"
                f" (kbctl ingest -n {r['namespace']} ...) marks it interrupted"
            )
    return notes


def _cell(v: Any) -> Text:
    if v is None:
        return Text("")
    if isinstance(v, float):
        return Text(f"{v:z.4f}")  # z: a tiny negative delta is 0.0000, not -0.0000
    if isinstance(v, (dict, list)):
        return _text(json.dumps(v, default=str))
    return _text(str(v))


def _text(s: str) -> Text:
    """A table cell of data: control characters escaped, no markup read, one line."""
    return Text(printable(s, keep=""))


def snippet(text: str, width: int = 240) -> str:
    t = " ".join(printable(text, keep="\n\t").split())
    return t if len(t) <= width else t[: width - 1] + "…"


def hits_table(result) -> None:
    """Search hits as a table: rank, relevance (0–1; raw scores are in --json and --explain),
    namespace, citation and a snippet."""
    t = Table(highlight=False, show_lines=True)
    t.add_column("#", justify="right")
    t.add_column("relevance", justify="right")
    if len(result.namespaces) > 1:
        t.add_column("namespace")
    t.add_column("source", overflow="fold", max_width=40)
    t.add_column("text", overflow="fold")
    for h in result.hits:
        row = [Text(str(h.rank)), Text(_relevance(h))]
        if len(result.namespaces) > 1:
            row.append(_text(h.namespace))
        row += [_text(h.citation), Text(snippet(h.text))]
        t.add_row(*row)
    out.print(t)


def _relevance(h) -> str:
    """A hit's 0–1 relevance as shown to people (its raw score when no relevance is known)."""
    rel = getattr(h, "relevance", None)
    if rel is not None:
        return f"{rel:.2f}"
    return "—" if h.score is None else f"{h.score:.4f}"


def hits_markdown(result) -> str:
    """The hits as Markdown for a person's terminal: stored text with its control characters
    escaped (``printable``); headings and citations on one line each."""
    lines = [f"## Results for: {printable(result.query, keep='')}", ""]
    for h in result.hits:
        score = "" if h.score is None else f" (relevance {_relevance(h)})"
        head = printable(h.title or h.source, keep="")
        lines += [f"### {h.rank}. {head}{score}", "", f"*{printable(h.citation, keep='')}*", ""]
        lines += [printable(h.text.strip()), ""]
    return "\n".join(lines)
