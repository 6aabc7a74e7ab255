"""``kbctl db``: the database server and schema."""

from __future__ import annotations

import typer

from .render import human_size, print_json, table
from .state import STATE, info

app = typer.Typer(help="The database: migrate, status, optimize, start, stop, url.", no_args_is_help=True)


@app.command("migrate")
def migrate() -> None:
    """Apply pending schema migrations."""
    applied = STATE.kb().migrate()
    info(
        f"applied {len(applied)} migration(s)"
        + (": " + ", ".join(f"{m.version:03d}-{m.name}" for m in applied) if applied else "")
    )


@app.command("status")
def status(json_: bool = typer.Option(False, "--json", help="JSON on stdout.")) -> None:
    """Server, schema version and migration checksums; exit 3 (and one line naming it) when an applied
    migration's file changed since."""
    st = STATE.kb().db_status()
    if json_:
        print_json(st.to_json())
    else:
        info(
            f"{'embedded server in ' + str(st.pgdata) if st.embedded else 'server from DSN'}; PostgreSQL {st.server_version}, pgvector {st.pgvector}"
        )
        table(st.migrations, ["version", "name", "applied_at", "checksum_ok"])
    problem = st.problem()
    if problem is not None:  # after the report: exit 3 and one line, --json or not
        raise problem


@app.command("optimize")
def optimize(
    reindex: bool = typer.Option(
        False, "--reindex", help="Also rebuild the B-tree indexes (concurrently: searches go on)."
    ),
    full: bool = typer.Option(
        False, "--full", help="Rewrite every table and index (a full vacuum): exclusive locks, searches wait."
    ),
    json_: bool = typer.Option(False, "--json", help="JSON on stdout."),
) -> None:
    """Vacuum and analyze kbctl's tables; with --reindex, compact their B-tree indexes (run it from cron)."""
    kb = STATE.kb()
    packed = kb.repack()
    rows = kb.optimize(reindex=reindex, full=full, repack=False)
    if json_:
        print_json({"reindex": reindex, "full": full, "packed": packed, "tables": rows})
        return
    for p in packed:
        info(f"packed {p['namespace']}: {p['chunks']:,} chunks, {p['postings']:,} postings in one segment")
    table(
        [
            {
                "table": r["table"],
                "size before": human_size(r["bytes_before"]),
                "size after": human_size(r["bytes_after"]),
            }
            for r in rows
        ],
        ["table", "size before", "size after"],
    )
    saved = sum(r["bytes_before"] - r["bytes_after"] for r in rows)
    done = "rewrote" if full else ("vacuumed, analyzed and reindexed" if reindex else "vacuumed and analyzed")
    info(
        f"{done} {len(rows)} tables; " + (f"{human_size(saved)} freed" if saved >= 0 else f"grew {human_size(-saved)}")
    )


@app.command("start")
def start() -> None:
    """Start the embedded server (it stays up until `kbctl db stop`)."""
    pgdata = STATE.kb().start_server()
    info(
        f"embedded PostgreSQL running in {pgdata}"
        if pgdata
        else "a DSN is configured: there is no embedded server to start"
    )


@app.command("stop")
def stop() -> None:
    """Stop the embedded server."""
    stopped = STATE.kb().stop_server()
    info(
        "a DSN is configured: there is no embedded server to stop"
        if stopped is None
        else ("stopped" if stopped else "not running")
    )


@app.command("url")
def url() -> None:
    """Print the connection URL (starting the embedded server if needed)."""
    typer.echo(STATE.kb().dsn())
