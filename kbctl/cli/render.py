"""Rendering of results: Rich tables for people, JSON/NDJSON for programs, context blocks for prompts."""

from __future__ import annotations

import json
import sys
from typing import Any, Iterable

from rich.table import Table

from .state import out


def print_json(obj: Any) -> None:
    """One JSON document on stdout."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def print_jsonl(rows: Iterable[Any]) -> None:
    for r in rows:
        sys.stdout.write(json.dumps(r, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def table(rows: list[dict], columns: list[str] | None = None, title: str | None = None) -> None:
    """A Rich table of dict rows on stdout."""
    if not rows:
        out.print("(none)")
        return
    columns = columns or list(rows[0])
    t = Table(title=title, show_lines=False, highlight=False)
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*[_cell(r.get(c)) for c in columns])
    out.print(t)


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4f}"
    if isinstance(v, (dict, list)):
        return json.dumps(v, default=str)
    return str(v)


def snippet(text: str, width: int = 240) -> str:
    t = " ".join(text.split())
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
        row = [str(h.rank), _relevance(h)]
        if len(result.namespaces) > 1:
            row.append(h.namespace)
        row += [h.citation, snippet(h.text)]
        t.add_row(*row)
    out.print(t)


def _relevance(h) -> str:
    """A hit's 0–1 relevance as shown to people (its raw score when no relevance is known)."""
    rel = getattr(h, "relevance", None)
    if rel is not None:
        return f"{rel:.2f}"
    return "—" if h.score is None else f"{h.score:.4f}"


def hits_markdown(result) -> str:
    lines = [f"## Results for: {result.query}", ""]
    for h in result.hits:
        score = "" if h.score is None else f" (relevance {_relevance(h)})"
        lines += [f"### {h.rank}. {h.title or h.source}{score}", "", f"*{h.citation}*", "", h.text.strip(), ""]
    return "\n".join(lines)
