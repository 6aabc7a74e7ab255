"""``kbctl db``: the database server and schema."""

from __future__ import annotations

import typer

from .render import print_json, table
from .state import STATE, info

app = typer.Typer(help="The database: migrate, status, start, stop, url.", no_args_is_help=True)


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

    db = Database(STATE.settings())
    conn = db.connect(register=False)
    try:
        rows = db.status(conn)
        version = conn.execute("SELECT current_setting('server_version')").fetchone()[0]
        ext = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    finally:
        conn.close()
    data = {"embedded": db.embedded, "home": str(db.settings.home) if db.embedded else None, "server_version": version,
            "pgvector": ext[0] if ext else None, "migrations": rows}
    if json_:
        print_json(data)
        return
    info(f"{'embedded server in ' + str(db.pgdata) if db.embedded else 'server from DSN'}; PostgreSQL {version}, pgvector {data['pgvector']}")
    table(rows, ["version", "name", "applied_at", "checksum_ok"])
    if any(r["checksum_ok"] is False for r in rows):
        raise typer.Exit(3)


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
