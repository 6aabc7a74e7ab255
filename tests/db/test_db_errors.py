"""Database errors at the boundary: every psycopg error leaves kbctl as one line (and a hint), never a traceback.

The server-gone cases run against their own embedded server in a separate KBCTL_HOME (stopped mid-
operation from a hook in a subprocess running the CLI's ``main()``); the others inject real psycopg
errors at the store boundary (a patched ``Connection.execute``) or cause real ones (a lock timeout,
a statement timeout, an out-of-range ``hnsw.ef_search``) on the session's server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import psycopg
import psycopg.errors as pe
import pytest

from kbctl import errors as E

from ..conftest import ROOT, main_in_process

DOCS = {
    "refunds.md": "# Refunds\n\nRefunds take five business days to reach the card.\n",
    "invoices.md": "# Invoices\n\nInvoices are sent on the first day of the month by email.\n",
    "plans.md": "# Plans\n\nThe team plan costs ten dollars per seat and month.\n",
}


def _corpus(folder, docs=DOCS):
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        (folder / name).write_text(text)
    return folder


def assert_one_error(code, stderr, exit_code, *needles):
    """Exit code as given; stderr is `error: …` and at most one `hint: …`, and no traceback."""
    assert "Traceback" not in stderr, stderr
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert code == exit_code, stderr
    assert lines and lines[0].startswith("error: "), stderr
    assert len(lines) <= 2 and all(ln.startswith("hint: ") for ln in lines[1:]), stderr
    for n in needles:
        assert n in lines[0], stderr
    return lines


# -- the mapping ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "exc, cls, code, needle",
    [
        (psycopg.OperationalError("server closed the connection unexpectedly"), "DatabaseUnavailable", 1, "went away"),
        (
            pe.AdminShutdown("terminating connection due to administrator command"),
            "DatabaseUnavailable",
            1,
            "went away",
        ),
        (pe.CannotConnectNow("the database system is shutting down"), "DatabaseUnavailable", 1, "went away"),
        (pe.DiskFull("could not extend file"), "ResourceExhausted", 1, "disk"),
        (pe.OutOfMemory("out of memory"), "ResourceExhausted", 1, "memory"),
        (
            pe.UniqueViolation('duplicate key value violates unique constraint "documents_pkey"'),
            "IntegrityViolation",
            1,
            "documents_pkey",
        ),
        (
            pe.ForeignKeyViolation(
                'insert or update on table "chunks" violates foreign key constraint "chunks_ns_fkey"'
            ),
            "IntegrityViolation",
            1,
            "chunks_ns_fkey",
        ),
        (
            pe.NotNullViolation('null value in column "uri" of relation "documents" violates not-null constraint'),
            "IntegrityViolation",
            1,
            "uri",
        ),
        (
            pe.CheckViolation('new row for relation "namespaces" violates check constraint "namespaces_name_check"'),
            "IntegrityViolation",
            1,
            "namespaces_name_check",
        ),
        (
            pe.InvalidParameterValue('5000 is outside the valid range for parameter "hnsw.ef_search" (1 .. 1000)'),
            "ParameterError",
            2,
            "hnsw.ef_search",
        ),
        (pe.LockNotAvailable("canceling statement due to lock timeout"), "LockTimeout", 1, "lock"),
        (pe.QueryCanceled("canceling statement due to statement timeout"), "StatementTimeout", 1, "statement timeout"),
        (
            pe.SerializationFailure("could not serialize access due to concurrent update"),
            "TransactionConflict",
            1,
            "serialize",
        ),
        (pe.DeadlockDetected("deadlock detected"), "TransactionConflict", 1, "deadlock"),
        (pe.SyntaxError('syntax error at or near "SELEC"\nLINE 1: SELEC 1'), "DatabaseError", 1, "syntax error"),
    ],
)
def test_from_psycopg_maps_each_class(exc, cls, code, needle):
    from kbctl.errors import from_psycopg

    e = from_psycopg(exc)
    assert type(e).__name__ == cls and isinstance(e, E.KbctlError)
    assert e.exit_code == code
    assert needle in e.message and "\n" not in e.message
    assert e.hint


def test_a_cleanup_error_does_not_hide_the_first_one():
    """An unlock failing on a dead connection chains to the error that killed it; the first one is reported."""
    try:
        try:
            raise pe.DiskFull("could not extend file")
        finally:
            raise psycopg.OperationalError("the connection is closed")
    except psycopg.Error as e:
        from kbctl.errors import from_psycopg

        assert type(from_psycopg(e)).__name__ == "ResourceExhausted"


# -- server gone (own embedded server) ------------------------------------------------------------

_STOPPING_MAIN = r"""
import importlib, sys
import kbctl.api, kbctl.ingest.pipeline
from kbctl.config import load_settings
from kbctl.store.db import Database

home, module, name, argv = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
orig = getattr(importlib.import_module(module), name)

def stopping(*a, **k):  # the server stops in the middle of the command, then the command goes on
    Database(load_settings(overrides={"database.home": home})).stop()
    return orig(*a, **k)

for m in list(sys.modules.values()):
    if getattr(m, "__name__", "").startswith("kbctl") and getattr(m, name, None) is orig:
        setattr(m, name, stopping)
from kbctl.cli.main import main
main(argv)
"""


@pytest.fixture(scope="module")
def own_home(tmp_path_factory):
    """A separate KBCTL_HOME with its own embedded server (the session's server is never stopped)."""
    home = tmp_path_factory.mktemp("kbctl-own-server")
    yield home
    from kbctl.config import load_settings
    from kbctl.store.db import Database

    Database(load_settings(overrides={"database.home": str(home)})).stop()


def _own(home, *args, hook=None):
    env = dict(os.environ, KBCTL_HOME=str(home), KBCTL_TENANT="gone", PYTHONWARNINGS="ignore")
    base = ["--home", str(home), "--tenant", "gone", "--profile", "hash-384", *args]
    cmd = (
        [sys.executable, "-c", _STOPPING_MAIN, str(home), *hook, *base]
        if hook
        else [sys.executable, "-m", "kbctl", *base]
    )
    p = subprocess.run(cmd, capture_output=True, env=env, cwd=ROOT, timeout=300)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


@pytest.mark.embedded_only  # stops the embedded server mid-command
def test_server_gone_mid_search(own_home, tmp_path):
    code, _, err = _own(own_home, "ingest", str(_corpus(tmp_path / "c")), "-n", "docs")
    assert code == 0, err
    code, _, err = _own(own_home, "search", "refunds", "-n", "docs", hook=("kbctl.search", "run_search"))
    lines = assert_one_error(code, err, 1)
    assert "went away" in lines[0] or "cannot connect" in lines[0], err


@pytest.mark.embedded_only  # stops the embedded server mid-command
def test_server_gone_mid_ingest(own_home, tmp_path):
    code, _, err = _own(own_home, "ingest", str(_corpus(tmp_path / "c")), "-n", "mid")
    assert code == 0, err
    more = _corpus(
        tmp_path / "more", {f"n{i}.md": f"# Note {i}\n\nNote number {i} about shipping.\n" for i in range(3)}
    )
    code, _, err = _own(own_home, "ingest", str(more), "-n", "mid", hook=("kbctl.store.documents", "write_documents"))
    assert_one_error(code, err, 1, "went away")
    # The run could not be marked while the server was gone; the next run marks it interrupted.
    code, out, err = _own(own_home, "runs", "-n", "mid", "--json")
    assert code == 0, err
    assert json.loads(out)[0]["status"] == "running"
    code, _, err = _own(own_home, "ingest", str(more), "-n", "mid")
    assert code == 0, err
    code, out, err = _own(own_home, "runs", "-n", "mid", "--json")
    assert [r["status"] for r in json.loads(out)][:3] == ["ok", "interrupted", "ok"]


@pytest.mark.embedded_only  # stops the embedded server under an open handle
def test_an_open_handle_outlives_the_embedded_server_stopped_under_it(own_home, tmp_path):
    import kbctl
    from kbctl.config import load_settings
    from kbctl.store.db import Database

    kb = kbctl.open(home=own_home, tenant="handle", profile="hash-384")
    try:
        kb.ingest([str(_corpus(tmp_path / "c"))], "docs", verify=False)
        hits = kb.search("refunds", "docs").hits
        assert hits
        assert kb.admin.stop_server() is True
        with pytest.raises(E.DatabaseUnavailable, match="went away"):  # the connection the server ended
            kb.search("refunds", "docs")
        # the next call starts the embedded server again, as opening the knowledge base would
        assert kb.search("refunds", "docs").hits == hits
        # and stopped and started again in one process, it runs (pgserver keeps one handle per
        # data directory: given back stopped, it was never started again)
        assert kb.admin.stop_server() is True and kb.admin.start_server() == own_home / "pgdata"
        assert Database(load_settings(overrides={"database.home": str(own_home)}))._postmaster(strict=False)
        with pytest.raises(E.DatabaseUnavailable):
            kb.search("refunds", "docs")
        assert kb.search("refunds", "docs").hits == hits
    finally:
        kb.close()


# -- injected and real errors on the session's server ---------------------------------------------


@pytest.fixture
def run_main(kb_home, tenant, capsys):
    """The CLI's main() in this process (so monkeypatches apply): returns (exit code, stdout, stderr)."""

    def run(*args):
        return main_in_process(capsys, ["--home", str(kb_home), "--tenant", tenant, "--profile", "hash-384", *args])

    return run


@pytest.fixture
def filled(run_main, tmp_path):
    code, _, err = run_main("ingest", str(_corpus(tmp_path / "c")), "-n", "docs")
    assert code == 0, err
    return tmp_path


def inject(monkeypatch, fragment: str, raise_, times: int | None = None) -> list[str]:
    """Statements containing ``fragment`` call ``raise_(conn, orig)`` (the first ``times`` of them)."""
    orig = psycopg.Connection.execute
    hits: list[str] = []

    def execute(self, query, params=None, **kw):
        text = query if isinstance(query, str) else query.as_string(self) if hasattr(query, "as_string") else str(query)
        if fragment in text and (times is None or len(hits) < times):
            hits.append(text)
            raise_(self, orig)
        return orig(self, query, params, **kw)

    monkeypatch.setattr(psycopg.Connection, "execute", execute)
    return hits


def _raise(exc_type, msg):
    def r(conn, orig):
        raise exc_type(msg)

    return r


def _statuses(kb_home, tenant, namespace):
    import kbctl

    with kbctl.open(home=kb_home, tenant=tenant) as kb:
        return [r["status"] for r in kb.runs(namespace)]


WRITE = "INSERT INTO kbctl.lexical_stats"  # inside the document transaction, after the COPYs


def test_disk_full_mid_ingest_stops_the_run(run_main, filled, monkeypatch, kb_home, tenant):
    """A resource error is not one item's fault: the run stops with one line and is marked failed."""
    more = _corpus(filled / "more", {"late.md": "# Late\n\nA late note about the refund policy.\n"})
    hits = inject(
        monkeypatch, WRITE, _raise(pe.DiskFull, 'could not extend file "base/5/1234": No space left on device')
    )
    rc, _, err = run_main("ingest", str(more), "-n", "docs")
    assert hits, "the injected statement never ran"
    assert_one_error(rc, err, 1, "disk")
    monkeypatch.undo()
    assert _statuses(kb_home, tenant, "docs")[0] == "failed"  # the ledger could still be written


@pytest.mark.parametrize(
    "exc_type, msg, needle",
    [
        (pe.UniqueViolation, 'duplicate key value violates unique constraint "documents_pkey"', "documents_pkey"),
        (
            pe.ForeignKeyViolation,
            'insert or update on table "chunks" violates foreign key constraint "chunks_document_fkey"',
            "chunks_document_fkey",
        ),
    ],
)
def test_integrity_errors_mid_ingest_are_recorded_per_item(
    run_main, filled, monkeypatch, kb_home, tenant, exc_type, msg, needle
):
    """A constraint refusing one document is that item's error (per-item isolation): recorded with the
    constraint's name, the run is partial, exit 0 with a one-line warning (1 with --strict)."""
    more = _corpus(filled / "more", {"late.md": "# Late\n\nA late note about the refund policy.\n"})
    hits = inject(monkeypatch, WRITE, _raise(exc_type, msg))
    rc, _, err = run_main("ingest", str(more), "-n", "docs")
    assert hits, "the injected statement never ran"
    assert rc == 0 and "Traceback" not in err and "failed" in err, (rc, err)
    rc_strict, _, err_strict = run_main("ingest", str(more), "-n", "docs", "--strict")
    assert rc_strict == 1 and "Traceback" not in err_strict, (rc_strict, err_strict)
    monkeypatch.undo()
    assert _statuses(kb_home, tenant, "docs")[0] == "partial"
    rc, out, _ = run_main("errors", "-n", "docs", "--json")
    assert rc == 0 and needle in out


def test_library_raises_kbctl_errors(kb, filled, monkeypatch, tenant):
    """The library boundary converts too (not only the CLI's): a notebook sees a KbctlError."""
    inject(monkeypatch, WRITE, _raise(pe.DiskFull, "could not extend file"))
    more = _corpus(filled / "lib", {"lib.md": "# Lib\n\nWritten from the library.\n"})
    with pytest.raises(Exception) as ex:
        kb.ingest([str(more)], "docs")
    assert isinstance(ex.value, E.DatabaseError) and not isinstance(ex.value, psycopg.Error)
    assert isinstance(ex.value.__cause__, pe.DiskFull)


@pytest.mark.embedded_only  # preloads pgvector with PGOPTIONS, which only a superuser may set
def test_invalid_parameter_is_a_usage_error(run_main, filled, tmp_path, monkeypatch):
    """A real 22023: an ef_search outside pgvector's range reaches the server (exit 2, names the parameter).

    pgvector is preloaded (as on many servers): before its library is loaded in a session, PostgreSQL
    takes ``SET hnsw.ef_search`` as a placeholder and drops a bad value with a warning.
    """
    monkeypatch.setenv("PGOPTIONS", "-c session_preload_libraries=vector")
    cfg = tmp_path / "kbctl.toml"
    cfg.write_text("[profiles.hash-384.hnsw]\nexact_threshold = 0\n")  # take the HNSW path on a tiny namespace
    args = ("--config", str(cfg), "search", "refunds", "-n", "docs", "--mode", "dense", "--ef-search", "5000")
    rc, _, err = run_main(*args)
    assert_one_error(rc, err, 2, "--ef-search")  # SearchOptions refuses it before any server sees it
    from kbctl.search import engine

    monkeypatch.setattr(engine, "_RANGES", tuple(r for r in engine._RANGES if r[0] != "ef_search"))
    rc, _, err = run_main(*args)
    assert_one_error(rc, err, 2, "hnsw.ef_search")


def test_lock_timeout(run_main, filled, monkeypatch, kb, tenant):
    """A real 55P03: another session holds the namespace's ingest lock and lock_timeout runs out."""
    from kbctl.store.runs import LOCK_CLASS

    ns = kb.namespace("docs")
    holder = kb.db.connect()
    try:
        holder.execute("SELECT pg_advisory_lock(%s, %s)", (LOCK_CLASS, ns.id))
        monkeypatch.setenv("PGOPTIONS", "-c lock_timeout=200")
        rc, _, err = run_main("ingest", str(filled / "c"), "-n", "docs")
    finally:
        holder.close()
    assert_one_error(rc, err, 1, "lock")


def test_statement_timeout(run_main, filled, monkeypatch):
    """A real 57014: the search's connection gets statement_timeout = 1 ms and a slow statement."""

    def slow(conn, orig):
        orig(conn, "SET statement_timeout = 1")
        orig(conn, "SELECT pg_sleep(1)")

    hits = inject(monkeypatch, "lexical_postings", slow, times=1)
    rc, _, err = run_main("search", "refunds", "-n", "docs", "--mode", "lexical")
    assert hits
    assert_one_error(rc, err, 1, "statement timeout")


def test_serialization_failure_in_search_is_retried(run_main, filled, monkeypatch):
    hits = inject(
        monkeypatch, "lexical_postings", _raise(pe.SerializationFailure, "could not serialize access"), times=1
    )
    rc, out, err = run_main("search", "refunds", "-n", "docs", "--mode", "lexical", "--json")
    assert rc == 0 and "Traceback" not in err, err
    assert len(hits) == 1
    assert json.loads(out)["hits"] and "refunds.md" in out


def test_serialization_failure_that_persists(run_main, filled, monkeypatch):
    hits = inject(monkeypatch, "lexical_postings", _raise(pe.DeadlockDetected, "deadlock detected"))
    rc, _, err = run_main("search", "refunds", "-n", "docs", "--mode", "lexical")
    assert len(hits) >= 2  # retried before giving up
    assert_one_error(rc, err, 1, "deadlock")


def test_stray_psycopg_error_in_a_cli_command(run_main, filled, monkeypatch):
    """Belt and braces: a command that calls the store directly (kbctl verify) is converted by main()."""
    inject(monkeypatch, "kbctl.chunks", _raise(pe.DiskFull, "could not write to file: No space left on device"))
    rc, _, err = run_main("verify", "-n", "docs")
    assert_one_error(rc, err, 1, "disk")
