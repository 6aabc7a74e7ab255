"""The operator's commands as a shell user and a cron job meet them (``runs``, ``errors``,
``progress``, ``db``, ``namespaces``/``tenants delete``, ``agents token``, ``show``): a bad input
or a name that does not exist is one line and a hint with its documented exit code, ``--json``
agrees with the exit code, and no database error or silence stands in for an answer."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import kbctl.store.db


def _json(p):
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)


def _one_line_error(p, code: int) -> list[str]:
    """Exit ``code``, nothing on stdout, an ``error:`` line and a ``hint:`` line on stderr."""
    err = p.stderr.decode()
    assert p.returncode == code, (p.returncode, err)
    assert p.stdout == b"" and "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), err
    return lines


@pytest.fixture
def docs(cli, tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "refunds.md").write_text("# Refunds\n\nRefunds are processed within five business days.\n")
    return _json(cli("-p", "hash-384", "ingest", str(d), "-n", "docs", "--no-verify", "--json"))["run_id"]


@pytest.mark.parametrize("command", ["runs", "errors"])
def test_a_limit_past_any_ledger_is_all_of_it_not_a_database_error(docs, cli, command):
    """``--limit 99999999999999999999`` (past PostgreSQL's bigint) was "database error: bigint out of
    range", exit 1: a cron job asking for everything got a runtime failure."""
    rows = _json(cli(command, "-n", "docs", "--limit", "9" * 20, "--json"))
    assert rows == _json(cli(command, "-n", "docs", "--json"))
    assert (command == "errors") or [r["run_id"] for r in rows] == [docs]


def test_the_progress_of_a_run_that_does_not_exist_is_a_not_found_error(docs, cli):
    """``kbctl progress --run 999`` printed "(none)" and exited 0, where ``errors --run`` and
    ``worker --run`` say the run does not exist (exit 2)."""
    lines = _one_line_error(cli("progress", "--run", "987654321"), 2)
    assert "no run 987654321" in lines[0] and "kbctl runs" in lines[1], lines
    lines = _one_line_error(cli("progress", "--run", "9" * 20, "--json"), 2)
    assert "no run " + "9" * 20 in lines[0], lines
    cli("-p", "hash-384", "namespaces", "create", "other", check=True)
    lines = _one_line_error(cli("progress", "--run", str(docs), "-n", "other"), 2)  # not a run of that namespace
    assert f"no run {docs}" in lines[0] and "other" in lines[0], lines
    assert _json(cli("progress", "--run", str(docs), "--json")) == []  # a run without a work queue: still 0


def test_db_status_json_says_whether_the_checksums_hold_and_exits_as_the_table_does(cli, monkeypatch):
    """``kbctl db status`` exits 3 when an applied migration's file changed; with ``--json`` it
    exited 0 and its JSON had no field saying so (nor the data directory the table names)."""
    status = _json(cli("db", "status", "--json"))
    assert status["checksums_ok"] is True
    if status["embedded"]:
        assert status["pgdata"] == str(Path(status["home"]) / "pgdata"), status
    else:  # a server by DSN (KBCTL_TEST_DSN): kbctl keeps no data directory
        assert status["pgdata"] is None and status["home"] is None, status
    shipped = kbctl.store.db.migrations()
    edited = [dataclasses.replace(m, sql=m.sql + "\n-- edited\n") if m.version == 2 else m for m in shipped]
    monkeypatch.setattr(kbctl.store.db, "migrations", lambda: edited)
    for args in (("db", "status"), ("db", "status", "--json")):
        p = cli(*args)
        assert p.returncode == 3, p.stderr.decode()
        assert "migration 002" in p.stderr.decode() and "Traceback" not in p.stderr.decode()
    status = json.loads(cli("db", "status", "--json").stdout)
    assert status["checksums_ok"] is False
    assert [m["checksum_ok"] for m in status["migrations"]][:2] == [True, False]


def test_db_stop_with_a_dsn_says_there_is_no_embedded_server(cli):
    """``kbctl db stop`` with a DSN said "not running", as if an embedded server could be."""
    p = cli("--dsn", "postgresql://nobody@127.0.0.1:1/x", "db", "stop")
    assert p.returncode == 0 and p.stdout == b"", p.stderr.decode()
    assert p.stderr.decode().strip() == "a DSN is configured: there is no embedded server to stop"


@pytest.mark.parametrize("dsn", ["not a dsn", "postgresql://x@/db?bogus_option=1"])
def test_a_dsn_that_is_not_one_is_a_configuration_error(cli, dsn):
    """``--dsn "not a dsn"`` was "database error: missing "=" after "not" …" with the hint
    "PostgreSQL error ProgrammingError", exit 1: nothing reached a database."""
    lines = _one_line_error(cli("--dsn", dsn, "db", "status"), 2)
    assert lines[0].startswith("error: the DSN is not a PostgreSQL connection string"), lines
    assert "--dsn" in lines[1] and "KBCTL_DSN" in lines[1], lines
    assert "ProgrammingError" not in " ".join(lines)


@pytest.mark.parametrize("group", ["namespaces", "tenants"])
def test_a_delete_that_was_not_confirmed_says_so(docs, cli, tenant, group):
    """Answering no (``echo n | kbctl namespaces delete NS``) exited 1 with nothing on stderr:
    a cron job's log showed a failure and no reason."""
    name = "docs" if group == "namespaces" else tenant
    p = cli(group, "delete", name, input=b"n\n")
    assert p.returncode == 1 and p.stdout == b"", p.stderr.decode()
    lines = p.stderr.decode().splitlines()
    assert lines == [
        f"error: {group[:-1]} {name!r} was not deleted: the answer was not yes",
        "hint: pass --yes to delete without asking",
    ]
    assert [n["name"] for n in _json(cli("namespaces", "--json"))] == ["docs"]


def test_revoking_the_tokens_of_an_agent_that_is_neither_configured_nor_has_tokens_is_an_error(cli, tmp_path):
    """``kbctl agents token revoke writter`` (a typo) said "revoked 0 token(s)" and exited 0: an
    incident response believed the agent's tokens gone."""
    cfg = tmp_path / "kbctl.toml"
    cfg.write_text('[agents.writer]\nnamespaces = ["docs"]\n')
    lines = _one_line_error(cli("--config", str(cfg), "agents", "token", "revoke", "writter"), 2)
    assert "writter" in lines[0] and "writer" in lines[1], lines  # the configured agents are named
    assert cli("--config", str(cfg), "agents", "token", "revoke", "writer").returncode == 0  # configured, no token: 0
    token = cli("--config", str(cfg), "agents", "token", "create", "writer", check=True).stdout.decode().strip()
    assert token.startswith("kb_")
    # removed from the config while its token lives: its tokens can still be revoked
    p = cli("agents", "token", "revoke", "writer")
    assert p.returncode == 0 and "revoked 1 token(s)" in p.stderr.decode(), p.stderr.decode()


def test_revoking_a_pinned_agents_tokens_from_another_tenant_names_the_tenant_they_are_in(
    cli, kb_home, tenant, tmp_path
):
    """``[agents.acme] tenant = "acme"``: ``kbctl agents token create acme`` from another tenant is
    refused with the command to run there, but ``kbctl agents token revoke acme`` from it said
    "revoked 0 token(s) of 'acme'" and exited 0 while the agent's token in tenant acme kept working:
    an incident response believed it revoked. It is refused the same way (exit 2) and nothing changes."""
    from tests.conftest import TEST_DSN, _create_tenant

    pinned = tenant + "_p"
    _create_tenant(pinned, None if TEST_DSN else kb_home)
    cfg = tmp_path / "kbctl.toml"
    cfg.write_text(f'[agents.acme]\ntenant = "{pinned}"\n')
    cli("--config", str(cfg), "agents", "token", "create", "acme", tenant_override=pinned, check=True)
    lines = _one_line_error(cli("--config", str(cfg), "agents", "token", "revoke", "acme"), 2)
    assert pinned in lines[0] and f"kbctl --tenant {pinned} agents token revoke acme" in lines[1], lines
    rows = _json(cli("--config", str(cfg), "agents", "list", "--json"))
    assert [(r["agent"], r["tenant"], r["tokens"]) for r in rows] == [("acme", pinned, 1)]
    p = cli("--config", str(cfg), "agents", "token", "revoke", "acme", tenant_override=pinned)
    assert p.returncode == 0 and "revoked 1 token(s)" in p.stderr.decode(), p.stderr.decode()


def test_a_namespace_declared_for_another_tenant_is_not_written_from_this_one(cli, tenant, tmp_path):
    """``[namespaces.NAME] tenant`` is documented to bind a namespace to a tenant, but nothing read
    it: ``kbctl ingest DIR -n NAME`` made NAME in whatever tenant the command ran as. A write of it
    from another tenant is refused (exit 2, the command to run as its tenant) and nothing is made;
    from its own tenant it is written as before."""
    d = tmp_path / "docs"
    d.mkdir()
    (d / "a.md").write_text("# Refunds\n\nRefunds take five days.\n")
    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text(f'[namespaces.docs]\ntenant = "{tenant}_p"\nprofile = "hash-384"\n')
    for args in (["ingest", str(d), "-n", "docs", "--no-verify"], ["namespaces", "create", "docs"]):
        lines = _one_line_error(cli("--config", str(elsewhere), *args), 2)
        assert f"'{tenant}_p'" in lines[0] and "[namespaces.docs] tenant" in lines[0], lines
        assert f"kbctl --tenant {tenant}_p" in lines[1], lines
    assert _json(cli("namespaces", "--json")) == []
    own = tmp_path / "own.toml"
    own.write_text(f'[namespaces.docs]\ntenant = "{tenant}"\nprofile = "hash-384"\n')
    cli("--config", str(own), "ingest", str(d), "-n", "docs", "--no-verify", check=True)
    assert [n["name"] for n in _json(cli("namespaces", "--json"))] == ["docs"]


def test_show_of_a_chunk_not_in_the_namespaces_says_where_to_find_one(docs, cli):
    """``kbctl show 999 -n docs`` said "chunk 999 is not available" and nothing else: no hint."""
    lines = _one_line_error(cli("show", "987654321", "-n", "docs"), 2)
    assert lines[0] == "error: chunk 987654321 is not available", lines
    assert "not in namespace 'docs'" in lines[1], lines
    assert "chunk_id" in lines[1] and "kbctl search" in lines[1], lines


def test_agents_list_names_each_agent_with_its_tenant_scopes_and_live_tokens(cli, tenant, tmp_path):
    """``kbctl agents`` had no ``list``: who may reach the store, and with how many live tokens,
    was in no output (``config show`` has the agents, not their tokens). An agent removed from the
    config while a token of it lives is listed too (``configured`` false): its token still opens."""
    cfg = tmp_path / "kbctl.toml"
    pinned = tenant + "_p"
    cfg.write_text(
        '[agents.writer]\nnamespaces = ["docs"]\ntools = ["search_knowledge"]\n'
        f'[agents.reader]\n[agents.elsewhere]\ntenant = "{pinned}"\n'
    )
    for _ in range(2):
        cli("--config", str(cfg), "agents", "token", "create", "writer", check=True)
    cli("--config", str(cfg), "agents", "token", "create", "reader", check=True)
    cli("--config", str(cfg), "agents", "token", "revoke", "reader", check=True)
    cli("--config", str(cfg), "agents", "token", "create", "reader", check=True)
    (tmp_path / "gone.toml").write_text("[agents.gone]\n")
    cli("--config", str(tmp_path / "gone.toml"), "agents", "token", "create", "gone", check=True)
    rows = _json(cli("--config", str(cfg), "agents", "list", "--json"))
    assert rows == [
        {"agent": "elsewhere", "tenant": pinned, "namespaces": [], "tools": [], "tokens": 0, "configured": True},
        {"agent": "reader", "tenant": tenant, "namespaces": [], "tools": [], "tokens": 1, "configured": True},
        {
            "agent": "writer",
            "tenant": tenant,
            "namespaces": ["docs"],
            "tools": ["search_knowledge"],
            "tokens": 2,
            "configured": True,
        },
        {"agent": "gone", "tenant": tenant, "namespaces": [], "tools": [], "tokens": 1, "configured": False},
    ]
    table = cli("--config", str(cfg), "agents", "list")
    assert table.returncode == 0, table.stderr
    cells = [
        [c.strip() for c in ln.strip("┃│ ").replace("┃", "│").split("│")] for ln in table.stdout.decode().splitlines()
    ]
    cells = [r for r in cells if len(r) == 6]
    assert cells[0] == ["agent", "tenant", "namespaces", "tools", "tokens", "configured"]
    assert cells[1:] == [
        ["elsewhere", pinned, "(all)", "(all)", "0", "yes"],
        ["reader", tenant, "(all)", "(all)", "1", "yes"],
        ["writer", tenant, "docs", "search_knowledge", "2", "yes"],
        ["gone", tenant, "(all)", "(all)", "1", "no"],
    ]


@pytest.mark.parametrize("group", ["namespaces", "tenants"])
def test_deleting_a_name_that_does_not_exist_says_so_before_asking(docs, cli, tenant, group):
    """``kbctl namespaces delete dcos`` (a typo) asked "delete namespace dcos and all its
    documents?" and only after a yes said there was none (from a cron job, without --yes: "no
    answer: stdin is not a terminal"). The name is looked up first: one line, the known names, exit 2."""
    typo = "dcos" if group == "namespaces" else "x" + tenant
    for stdin in (b"y\n", b""):
        lines = _one_line_error(cli(group, "delete", typo, input=stdin), 2)
        assert lines[0].startswith(f"error: {group[:-1]} {typo!r} does not exist"), lines
        assert "docs" in lines[1] if group == "namespaces" else tenant in lines[1] or "…" in lines[1], lines
        assert "?" not in lines[0] + lines[1], lines  # nothing was asked
    assert [n["name"] for n in _json(cli("namespaces", "--json"))] == ["docs"]


def test_a_verify_that_fails_says_why_in_one_line_on_stderr(docs, cli, kb):
    """A failed ``kbctl verify`` printed its report and exited 3 with nothing on stderr: a cron
    job's log said it failed, never why. The report stays on stdout as it was (table or JSON); one
    ``error:`` line names the checks that failed, and a hint where their detail is."""
    conn = kb.connection()
    with conn.transaction():  # a document now declares a chunk it does not have
        conn.execute("UPDATE kbctl.documents SET chunk_count = chunk_count + 1")
    for json_ in ([], ["--json"]):
        p = cli("verify", "-n", "docs", *json_)
        err = p.stderr.decode()
        assert p.returncode == 3, err
        assert [ln for ln in err.splitlines() if ln.startswith("error: ")] == [
            "error: verify of namespace 'docs' failed: counts"
        ], err
        assert err.splitlines()[-1].startswith("hint: "), err
        if json_:
            assert json.loads(p.stdout)["ok"] is False
        else:
            assert "FAIL" in p.stdout.decode() and "error" not in p.stdout.decode()


def test_runs_shows_the_counts_in_the_order_every_other_output_has(docs, cli):
    """``kbctl runs`` printed a run's counts in the order PostgreSQL's jsonb keeps keys (shortest
    first: ``new failed changed removed unchanged``) where ``ingest`` and ``worker`` say new,
    changed, unchanged, removed, failed; the table and ``--json`` now keep that order."""
    table = cli("runs", "-n", "docs").stdout.decode()
    assert "new=1 changed=0 unchanged=0 removed=0 failed=0" in table, table
    assert "embedded=1 reused=0 deleted=0" in table, table
    counts = _json(cli("runs", "-n", "docs", "--json"))[0]["counts"]
    assert list(counts["documents"]) == ["new", "changed", "unchanged", "removed", "failed"]
    assert list(counts["chunks"]) == ["embedded", "reused", "deleted"]


def test_an_ingest_whose_verify_fails_says_why_as_kbctl_verify_does(docs, cli, kb, tmp_path):
    """An ingest whose verify stage failed ended with ``verify failed: counts`` on stderr and exit
    3: no ``error:`` line (README: "one `error:` line on stderr says which checks failed"), so a
    cron job's log grepped for errors missed it. It now ends as ``kbctl verify`` does: its summary
    on stdout, then the same ``error:`` line and hint."""
    conn = kb.connection()
    with conn.transaction():  # a document now declares a chunk it does not have
        conn.execute("UPDATE kbctl.documents SET chunk_count = chunk_count + 1")
    more = tmp_path / "more"
    more.mkdir()
    (more / "billing.md").write_text("# Billing\n\nInvoices are sent on the first of the month.\n")
    p = cli("ingest", str(more), "-n", "docs", "--json")
    err = p.stderr.decode()
    assert p.returncode == 3 and "Traceback" not in err, err
    assert json.loads(p.stdout)["verify"]["ok"] is False  # the summary stays on stdout
    assert [ln for ln in err.splitlines() if ln.startswith("error: ")] == [
        "error: verify of namespace 'docs' failed: counts"
    ], err
    assert err.splitlines()[-1].startswith("hint: "), err
    assert _json(cli("runs", "-n", "docs", "--json"))[0]["status"] == "failed_verify"
    # `kbctl store` at the end of the pipe exited 3 with nothing said at all
    (more / "billing.md").write_text("# Billing\n\nInvoices are sent on the second of the month.\n")
    records = cli("fetch", str(more), check=True).stdout
    for stage in (("extract",), ("chunk", "-n", "docs"), ("embed", "-n", "docs")):
        records = cli(*stage, input=records, check=True).stdout
    p = cli("store", "-n", "docs", input=records)
    err = p.stderr.decode()
    assert p.returncode == 3 and json.loads(p.stdout)["verify"]["ok"] is False, err
    assert [ln for ln in err.splitlines() if ln.startswith("error: ")] == [
        "error: verify of namespace 'docs' failed: counts"
    ], err
