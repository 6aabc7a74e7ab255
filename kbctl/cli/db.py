"""``kbctl db``: the database server and schema."""

from __future__ import annotations

import typer

from .render import print_json, table
from .state import STATE, info

app = typer.Typer(help="The database: migrate, status, optimize, start, stop, url.", no_args_is_help=True)


@app.command("migrate")
def migrate() -> None:
    """Apply pending schema migrations."""
    from ..db import Database

    applied = Database(STATE.settings()).migrate()
    info(f"applied {len(applied)} migration(s)" + (": " + ", ".join(f"{m.version:03d}-{m.name}" for m in applied) if applied else ""))


@app.command("status")
def status(json_: bool = typer.Option(False, "--json", help="JSON on stdout.")) -> None:
    """Server, schema version and migration checksums."""
    from ..db import Database
    from ..store.admin import server_versions

    db = Database(STATE.settings())
    conn = db.connect(register=False)
    try:
        rows = db.status(conn)
        version, pgvector = server_versions(conn)
    finally:
        conn.close()
    data = {"embedded": db.embedded, "home": str(db.settings.home) if db.embedded else None, "server_version": version,
            "pgvector": pgvector, "migrations": rows}
    if json_:
        print_json(data)
        return
    info(f"{'embedded server in ' + str(db.pgdata) if db.embedded else 'server from DSN'}; PostgreSQL {version}, pgvector {data['pgvector']}")
    table(rows, ["version", "name", "applied_at", "checksum_ok"])
    if any(r["checksum_ok"] is False for r in rows):
        raise typer.Exit(3)


@app.command("optimize")
def optimize(
    reindex: bool = typer.Option(False, "--reindex", help="Also rebuild the B-tree indexes (concurrently: searches go on)."),
    full: bool = typer.Option(False, "--full", help="Rewrite every table and index (a full vacuum): exclusive locks, searches wait."),
    json_: bool = typer.Option(False, "--json", help="JSON on stdout."),
) -> None:
    """Vacuum and analyze kbctl's tables; with --reindex, compact their B-tree indexes (run it from cron)."""
    from ..db import Database
    from ..store.admin import optimize as optimize_store

    conn = Database(STATE.settings()).connect(register=False)
    try:
        rows = optimize_store(conn, reindex=reindex, full=full)
    finally:
        conn.close()
    if json_:
        print_json({"reindex": reindex, "full": full, "tables": rows})
        return
    mb = lambda b: f"{b / 2**20:,.1f}"  # noqa: E731
    table([{"table": r["table"], "MB before": mb(r["bytes_before"]), "MB after": mb(r["bytes_after"])} for r in rows],
          ["table", "MB before", "MB after"])
    saved = sum(r["bytes_before"] - r["bytes_after"] for r in rows)
    done = "rewrote" if full else ("vacuumed, analyzed and reindexed" if reindex else "vacuumed and analyzed")
    info(f"{done} {len(rows)} tables; {saved / 2**20:,.1f} MB freed")


@app.command("start")
def start() -> None:
    """Start the embedded server (it stays up until `kbctl db stop`)."""
    from ..db import Database

    db = Database(STATE.settings())
    if not db.embedded:
        info("a DSN is configured: there is no embedded server to start")
        return
    db.dsn()
    info(f"embedded PostgreSQL running in {db.pgdata}")


@app.command("stop")
def stop() -> None:
    """Stop the embedded server."""
    from ..db import Database

    db = Database(STATE.settings())
    info("stopped" if db.stop() else "not running")


@app.command("url")
def url() -> None:
    """Print the connection URL (starting the embedded server if needed)."""
    from ..db import Database

    typer.echo(Database(STATE.settings()).dsn())
