"""Tenants in PostgreSQL (migration 009): row-level security holds a tenant's role to its own rows.

Two tenants fill every kbctl table (namespaces, documents, chunks, postings, lexical statistics and
vocabulary, runs, run errors, feed state, search audit, agent tokens, query log and feedback). Then
raw SQL, on a connection acting as one tenant's role, reads every table (listed from the catalog,
so a new table without a policy fails here), and tries to write into the other tenant's rows.
"""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

import kbctl
from kbctl.store import lexical
from kbctl.types import Principal

# Tables that hold no tenant's data: shared profiles, the migration ledger, the tenant registry
# (enabled, its own row only; checked below), the names of deleted tenants (the owner's alone).
SHARED = {"profiles", "schema_migrations", "tenants", "deleted_tenants"}
# How each table finds its tenant: through its namespace, or a tenant column.
TENANT_COLUMN = {"namespaces", "search_audit", "agent_tokens", "query_log"}


def _fill(kb: kbctl.KnowledgeBase, tmp_path, tag: str) -> None:
    """One namespace with documents, chunks, postings (packed too), a run with an error and a queued item, feed state, an audited
    search, an agent token, a logged query and its feedback."""
    d = tmp_path / tag
    d.mkdir()
    (d / "a.md").write_text(f"# Refunds {tag}\n\nRefunds of {tag} take five days.\n")
    (d / "bad.pdf").write_bytes(b"not a pdf")
    kb.ingest([str(d)], "docs")
    conn = kb.connection()
    ns = kb.namespace("docs")
    conn.execute(
        "INSERT INTO kbctl.feed_state (namespace_id, url, etag) VALUES (%s, %s, 'x')", (ns.id, f"https://{tag}/feed")
    )
    run_id = kb.runs("docs")[0]["run_id"]  # an item of a run's work queue (kbctl ingest --workers)
    conn.execute(
        "INSERT INTO kbctl.run_items (namespace_id, run_id, item, target) VALUES (%s, %s, 0, %s)",
        (ns.id, run_id, str(d / "a.md")),
    )
    lexical.pack(conn, ns.id, tenant=ns.tenant)  # packed postings (a real namespace has PACK_MIN chunks)
    kb.settings = kb.settings.with_overrides({"audit.enabled": True, "agents.bot": {}})
    result = kb.search("refunds", "docs", principal=Principal.parse("user:u1", ()))
    kb.create_agent_token("bot")
    qid = kb.log_query("bot", "search", result)
    kb.record_feedback("bot", qid, result.hits[0].doc_id, True)


@pytest.fixture
def two_tenants(kb_home, tenant, tmp_path):
    mine = kbctl.open(home=kb_home, tenant=tenant, profile="hash-384")
    other = kbctl.open(home=kb_home, tenant=tenant + "_x", profile="hash-384")
    _fill(mine, tmp_path, "mine")
    _fill(other, tmp_path, "other")
    yield mine, other
    mine.close()
    other.delete_tenant(other.tenant)
    other.close()


def _tables(conn) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = 'kbctl'::regnamespace AND relkind = 'r' ORDER BY relname"
        )
    ]


def _as_role(kb: kbctl.KnowledgeBase) -> psycopg.Connection:
    """A raw connection of the server's login, then SET ROLE to the tenant's role, as kbctl does."""
    conn = psycopg.connect(kb.dsn(), autocommit=True)
    role = conn.execute("SELECT role FROM kbctl.tenants WHERE name = %s", (kb.tenant,)).fetchone()[0]
    conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
    return conn


def _tenant_of(conn, table: str):
    col = "tenant" if table in TENANT_COLUMN else "(SELECT tenant FROM kbctl.namespaces n WHERE n.id = t.namespace_id)"
    return sql.SQL("SELECT DISTINCT {} FROM {} t").format(sql.SQL(col), sql.Identifier("kbctl", table))


def test_every_table_of_tenant_data_is_forced_under_row_level_security(two_tenants):
    mine, _ = two_tenants
    conn = mine.connection()
    rows = dict(
        conn.execute(
            "SELECT relname, relrowsecurity AND relforcerowsecurity FROM pg_class"
            " WHERE relnamespace = 'kbctl'::regnamespace AND relkind = 'r'"
        ).fetchall()
    )
    unforced = sorted(t for t, forced in rows.items() if not forced and t not in SHARED | {"agent_tokens"})
    assert not unforced, f"tables of tenant data without forced row-level security: {unforced}"
    assert (
        conn.execute("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user").fetchone()[0]
        is False
    )


@pytest.mark.embedded_only  # reads every tenant's rows through the login: only a superuser bypasses the forced policies
def test_a_tenants_role_sees_only_its_own_rows_in_every_table(two_tenants):
    mine, other = two_tenants
    owner = psycopg.connect(mine.dsn(), autocommit=True)  # the embedded login: a superuser, RLS bypassed
    with _as_role(mine) as conn:
        for table in _tables(conn):
            if table in SHARED:
                continue
            everyone = {r[0] for r in owner.execute(_tenant_of(owner, table))}
            assert {mine.tenant, other.tenant} <= everyone, f"{table}: the fixture did not fill it for both tenants"
            seen = (
                {
                    r[0]
                    for r in conn.execute(sql.SQL("SELECT namespace_id FROM {}").format(sql.Identifier("kbctl", table)))
                }
                if table not in TENANT_COLUMN
                else None
            )
            visible = (
                {r[0] for r in conn.execute(_tenant_of(conn, table))}
                if table in TENANT_COLUMN
                else {
                    r[0]
                    for r in owner.execute(
                        "SELECT tenant FROM kbctl.namespaces WHERE id = ANY(%s)", (list(seen or ()),)
                    )
                }
            )
            assert visible == {mine.tenant}, f"{table}: tenant {mine.tenant}'s role sees rows of {visible}"
        assert [r[0] for r in conn.execute("SELECT name FROM kbctl.tenants")] == [mine.tenant]
    owner.close()


@pytest.mark.embedded_only  # reads every tenant's rows through the login: only a superuser bypasses the forced policies
def test_a_tenants_role_cannot_write_into_another_tenants_rows(two_tenants):
    mine, other = two_tenants
    theirs = psycopg.connect(other.dsn(), autocommit=True)
    ns = theirs.execute(
        "SELECT id, profile_id, dimension FROM kbctl.namespaces WHERE tenant = %s", (other.tenant,)
    ).fetchone()
    before = theirs.execute("SELECT count(*) FROM kbctl.documents WHERE namespace_id = %s", (ns[0],)).fetchone()[0]
    with _as_role(mine) as conn:
        refused = [
            (
                "INSERT INTO kbctl.documents (namespace_id, uri, source_type, content_hash) VALUES (%s, 'x', 'text', 'h')",
                (ns[0],),
            ),
            (
                "INSERT INTO kbctl.namespaces (tenant, name, profile_id, dimension) VALUES (%s, 'stolen', %s, %s)",
                (other.tenant, ns[1], ns[2]),
            ),
            ("INSERT INTO kbctl.feed_state (namespace_id, url) VALUES (%s, 'https://x/')", (ns[0],)),
            ("INSERT INTO kbctl.lexical_vocab (namespace_id, term, df) VALUES (%s, 'zz', 1)", (ns[0],)),
            (
                "INSERT INTO kbctl.search_audit (tenant, namespace_ids, principal, query_hash, strategy, returned, withheld)"
                " VALUES (%s, '{}', 'x', 'h', 's', 0, 0)",
                (other.tenant,),
            ),
            ("UPDATE kbctl.documents SET namespace_id = %s", (ns[0],)),
        ]
        for stmt, args in refused:
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
                conn.execute(stmt, args)
        # UPDATE and DELETE of the other tenant's rows find none: they touch nothing
        for table in ("documents", "chunks", "lexical_postings", "runs", "run_errors", "run_items", "query_feedback"):
            q = sql.SQL("DELETE FROM {} WHERE namespace_id = %s").format(sql.Identifier("kbctl", table))
            assert conn.execute(q, (ns[0],)).rowcount == 0
        assert (
            conn.execute("UPDATE kbctl.namespaces SET description = 'x' WHERE tenant = %s", (other.tenant,)).rowcount
            == 0
        )
        assert conn.execute("DELETE FROM kbctl.query_log WHERE tenant = %s", (other.tenant,)).rowcount == 0
        assert conn.execute("DELETE FROM kbctl.agent_tokens WHERE tenant = %s", (other.tenant,)).rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("ALTER TABLE kbctl.documents DISABLE ROW LEVEL SECURITY")
    assert (
        theirs.execute("SELECT count(*) FROM kbctl.documents WHERE namespace_id = %s", (ns[0],)).fetchone()[0] == before
    )
    assert other.search("refunds", "docs").hits  # and the other tenant still finds its own
    theirs.close()


def test_the_policy_is_an_initplan_evaluated_once_not_per_posting(two_tenants):
    mine, _ = two_tenants
    with _as_role(mine) as conn:
        plan = "\n".join(
            r[0]
            for r in conn.execute(
                "EXPLAIN (ANALYZE, COSTS OFF) SELECT count(*) FROM kbctl.lexical_postings WHERE namespace_id = %s",
                (mine.namespace("docs").id,),
            )
        )
    assert "InitPlan" in plan and "tenant_namespace_ids" not in plan.split("InitPlan")[0], plan
    assert plan.count("loops=1") >= 2, plan


def test_tenants_create_list_delete(kb, cli):
    made = kb.create_tenant(kb.tenant + "_new")
    assert made["role"].startswith("kbctl_t_")
    assert kb.create_tenant(kb.tenant + "_new") == made  # idempotent
    assert made["tenant"] in {t["name"] for t in kb.tenants()}
    p = cli("tenants", "--json", check=True)
    assert made["tenant"] in p.stdout.decode()
    assert cli("tenants", "delete", made["tenant"], "--yes", check=True).returncode == 0
    assert made["tenant"] not in {t["name"] for t in kb.tenants()}
    with psycopg.connect(kb.dsn()) as c:
        assert c.execute("SELECT count(*) FROM pg_roles WHERE rolname = %s", (made["role"],)).fetchone()[0] == 0


def test_a_long_tenant_name_gets_a_role_within_postgresqls_63_bytes(kb_home):
    name = "t_" + "x" * 120
    with kbctl.open(home=kb_home, tenant=name, profile="hash-384") as k:
        k.create_namespace("docs")
        role = next(t["role"] for t in k.tenants() if t["name"] == name)
        assert len(role.encode()) <= 63
        assert [n["name"] for n in k.namespaces()] == ["docs"]
        k.delete_tenant(name)


@pytest.mark.embedded_only  # embedded only: with a DSN a tenant is not created on first use
def test_a_new_tenant_first_used_by_several_processes_at_once_gets_one_role(kb_home, tenant):
    """The stages of a pipe (or two cron jobs) may be a tenant's first use at the same moment: each
    process creates the role if missing, serialized, so none fails on a duplicate role. (A write
    makes a tenant on first use; a read of a name never made is refused.)"""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    env = dict(os.environ, KBCTL_HOME=str(kb_home), KBCTL_TENANT=tenant + "_race", PYTHONWARNINGS="ignore")
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "kbctl", "-p", "hash-384", "namespaces", "create", "docs"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(6)
    ]
    results = [(p.wait(timeout=300), p.stderr.read().decode()) for p in procs]
    assert all(rc == 0 for rc, _ in results), results
    with kbctl.open(home=kb_home, tenant=tenant + "_race") as k:
        assert [t["name"] for t in k.tenants() if t["name"] == tenant + "_race"] == [tenant + "_race"]
