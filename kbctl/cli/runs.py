"""``kbctl runs``, ``kbctl errors`` and ``kbctl verify``."""

from __future__ import annotations

import typer

from .render import dead_runs, print_json, table
from .state import STATE, warn


def register(app: typer.Typer) -> None:
    app.command("runs")(runs)
    app.command("errors")(errors)
    app.command("verify")(verify)


def runs(
    namespace: str | None = typer.Option(None, "--namespace", "-n", help="Only this namespace."),
    limit: int = typer.Option(20, "--limit", help="How many runs."),
    json_: bool = typer.Option(False, "--json", help="JSON on stdout."),
) -> None:
    """Recent ingest runs with their counts."""
    rows = STATE.kb().runs(namespace, limit)
    if json_:
        print_json(rows)
        return
    for r in rows:
        c = r.get("counts") or {}
        r["documents"] = " ".join(f"{k}={v}" for k, v in (c.get("documents") or {}).items())
        r["chunks"] = " ".join(f"{k}={v}" for k, v in (c.get("chunks") or {}).items())
    notes = dead_runs(rows)
    table(rows, ["run_id", "namespace", "status", "started_at", "documents", "chunks", "errors"])
    for note in notes:
        warn(note)


def errors(
    namespace: str | None = typer.Option(None, "--namespace", "-n", help="Only this namespace."),
    run: int | None = typer.Option(None, "--run", help="Only this run id."),
    limit: int = typer.Option(100, "--limit", help="How many rows."),
    json_: bool = typer.Option(False, "--json", help="JSON on stdout."),
) -> None:
    """Items that failed a stage, with the reason."""
    rows = STATE.kb().errors(namespace, run, limit)
    if json_:
        print_json(rows)
    else:
        table(rows, ["run_id", "namespace", "stage", "source", "error_class", "message", "retried"])


def verify(
    namespace: str = typer.Option(..., "--namespace", "-n", help="Namespace to check."),
    sample: int = typer.Option(20, "--sample", help="Chunks to check for self-retrieval (and HNSW recall)."),
    json_: bool = typer.Option(False, "--json", help="JSON on stdout."),
) -> None:
    """Check a namespace: counts, orphans, vectors, pin, indexes, self-retrieval; HNSW recall warns. Exit 3 on failure."""
    report = STATE.kb().verify(namespace, sample)
    if json_:
        print_json(report.to_json())
    else:
        table(
            [
                {
                    "check": c.name,
                    "ok": "ok" if c.ok else ("WARN" if c.severity == "warning" else "FAIL"),
                    "detail": c.detail,
                }
                for c in report.checks
            ],
            title=f"verify {namespace}",
        )
    for c in report.warnings:
        warn(f"{c.name}: {c.detail}")
    problem = report.problem()
    if problem is not None:  # after the report: exit 3 and one line saying which checks failed
        raise problem
