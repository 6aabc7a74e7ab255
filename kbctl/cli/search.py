"""``kbctl search``."""

from __future__ import annotations

import typer

from .render import hits_markdown, hits_table, print_json, print_jsonl, table
from .state import STATE, out, warn
from .terminal import printable


def register(app: typer.Typer) -> None:
    app.command("search")(search)


def search(
    query: str = typer.Argument("", help="What to look for (may be empty with --filter: a metadata query)."),
    namespace: list[str] = typer.Option(
        ..., "--namespace", "-n", help="Namespace to search (repeat to search several)."
    ),
    mode: str = typer.Option("auto", "--mode", "-m", help="auto | dense | lexical | hybrid."),
    k: int | None = typer.Option(None, "-k", "--top", help="Number of results (default: profile search.k)."),
    filter: list[str] = typer.Option(
        [], "--filter", "-f", help="Metadata filter: key=value, key!=v, key>=v, key<=v, key~prefix, 'key in a,b'."
    ),
    per_doc: int | None = typer.Option(None, "--per-doc", help="At most this many chunks per document."),
    fusion: str | None = typer.Option(None, "--fusion", help="rrf | convex (default: profile search.fusion)."),
    ef_search: int | None = typer.Option(
        None,
        "--ef-search",
        min=1,
        help="HNSW ef_search for this query (default: the profile's hnsw.ef_search); higher is slower and closer to exact.",
    ),
    rerank: bool | None = typer.Option(
        None, "--rerank/--no-rerank", help="Rerank fused candidates with the profile's reranker."
    ),
    prf: str | None = typer.Option(
        None,
        "--prf",
        help="Pseudo-relevance feedback: off | hybrid (default: profile search.prf; hybrid searches only).",
    ),
    explain: bool = typer.Option(False, "--explain", help="Show each hit's rank and score in every lane."),
    json_: bool = typer.Option(False, "--json", help="One JSON object on stdout."),
    jsonl: bool = typer.Option(False, "--jsonl", help="One JSON object per hit on stdout."),
    fmt: str = typer.Option("table", "--format", help="table | json | jsonl | markdown | context."),
    budget: int = typer.Option(2000, "--budget", help="Token budget for --format context."),
    as_: str | None = typer.Option(
        None,
        "--as",
        help="Search as this user (user:ID): hits they may not view are withheld. Without --as: anonymous, public documents only.",
    ),
    group: list[str] = typer.Option([], "--group", "-g", help="A group the principal belongs to (repeatable)."),
) -> None:
    """Search one namespace (or several, listed explicitly)."""
    kb = STATE.kb()
    result = kb.search_via_server(
        query,
        namespace,
        mode=mode,
        k=k,
        filters=filter,
        per_doc=per_doc,
        fusion=fusion,
        rerank=rerank,
        explain=explain,
        ef_search=ef_search,
        prf=prf,
        principal=kb.principal(as_, group),
    )
    for note in result.notes:
        warn(note) if result.degraded else (None if STATE.quiet else typer.echo(f"note: {printable(note)}", err=True))
    fmt = "json" if json_ else ("jsonl" if jsonl else fmt)
    if fmt == "json":
        print_json(result.to_json())
    elif fmt == "jsonl":
        print_jsonl(h.to_json() for h in result.hits)
    elif fmt == "markdown":
        out.print(hits_markdown(result), markup=False, highlight=False)
    elif fmt == "context":
        out.print(printable(kb.context(result, budget)), markup=False, highlight=False)
    else:
        typer.echo(
            f"strategy: {result.strategy}  mode: {result.mode}  namespaces: {', '.join(result.namespaces)}", err=True
        )
        if result.hits:
            hits_table(result)
        else:
            typer.echo("no results", err=True)
        if result.withheld:
            typer.echo(f"withheld: {result.withheld}", err=True)
        if explain:
            _explain(result)


def _explain(result) -> None:
    rows = []
    for h in result.hits:
        row = {"#": h.rank, "relevance": h.relevance, "fused": h.score}
        for lane, v in h.lanes.items():
            row[f"{lane} rank"] = v.get("rank")
            row[f"{lane} score"] = v.get("score")
        rows.append(row)
    table(rows, title="lanes")
    if result.details:
        typer.echo(f"details: {printable(result.details)}", err=True)
