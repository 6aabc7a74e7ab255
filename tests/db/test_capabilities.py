"""The store probes what the server offers once per pool and adapts with a one-line note."""

from __future__ import annotations

import logging
import secrets

import psycopg
import pytest
from psycopg import sql

from kbctl.config import load_settings
from kbctl.errors import DatabaseError
from kbctl.store import capabilities, search, tenants
from kbctl.store.db import Database


def test_the_probe_reads_what_the_server_offers(kb):
    kb.connection()  # migrated: pgvector installed
    caps = kb.db.capabilities()
    assert caps.pgvector is not None and tuple(map(int, caps.pgvector.split(".")[:2])) >= (0, 8)
    assert caps.halfvec and caps.may_create_roles and caps.server_version >= 160000
    assert set(capabilities.USED_HNSW) <= caps.hnsw_settings
    assert caps.notes == []  # the embedded server (and make test-dsn's) lacks nothing kbctl uses


def test_a_setting_the_server_does_not_define_is_left_out_not_failed(kb):
    """An older pgvector (simulated: its probe lacks hnsw.iterative_scan) gets the query without it."""
    conn = kb.db.connect()
    settings = [
        sql.SQL("SET LOCAL hnsw.ef_search = 77"),
        sql.SQL("SET LOCAL hnsw.iterative_scan = relaxed_order"),
    ]
    probe = sql.SQL("SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')")
    assert search.dense_rows(conn, (probe, [], settings)) == [("77", "relaxed_order")]
    full = capabilities.of(conn)
    old = capabilities.Capabilities(full.server_version, "0.7.4", True, frozenset({"hnsw.ef_search"}), True, full.login)
    capabilities.remember(conn, old)
    assert search.dense_rows(conn, (probe, [], settings)) == [("77", "off")]
    assert old.notes == [
        "pgvector 0.7.4 does not define hnsw.iterative_scan, hnsw.max_scan_tuples: HNSW searches run without"
        " (a filtered one may return fewer than k; upgrade to pgvector 0.8+)"
    ]
    conn.close()


@pytest.fixture
def login_without_createrole(kb):
    """A login role on the same server that may connect and read kbctl's schema but not create roles."""
    name, pw = f"kbctl_nocreate_{secrets.token_hex(4)}", secrets.token_hex(12)
    admin = kb.db.connect(register=False)
    admin.execute(
        sql.SQL("CREATE ROLE {} LOGIN NOCREATEROLE PASSWORD {}").format(sql.Identifier(name), sql.Literal(pw))
    )
    admin.execute(sql.SQL("GRANT USAGE ON SCHEMA kbctl TO {}").format(sql.Identifier(name)))
    admin.execute(sql.SQL("GRANT SELECT ON kbctl.tenants TO {}").format(sql.Identifier(name)))
    info = psycopg.conninfo.conninfo_to_dict(kb.dsn())
    info.update(user=name, password=pw)
    yield psycopg.conninfo.make_conninfo(**{k: v for k, v in info.items() if v is not None})
    admin.execute(sql.SQL("REVOKE ALL ON kbctl.tenants FROM {}").format(sql.Identifier(name)))
    admin.execute(sql.SQL("REVOKE ALL ON SCHEMA kbctl FROM {}").format(sql.Identifier(name)))
    admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))
    admin.close()


def test_a_login_that_may_not_create_roles_gets_one_line_not_a_failure_mid_query(login_without_createrole, caplog):
    db = Database(load_settings(overrides={"database.dsn": login_without_createrole}))
    with caplog.at_level(logging.WARNING, logger="kbctl.store.db"):
        conn = db.connect()
        db.connect().close()  # a second connection of the pool: probed once, noted once
    caps = db.capabilities()
    assert not caps.may_create_roles
    notes = [r.getMessage() for r in caplog.records if "may not create roles" in r.getMessage()]
    assert len(notes) == 1 and "\n" not in notes[0] and caps.login in notes[0]
    with pytest.raises(DatabaseError) as e:
        tenants.create_tenant(conn, "t_cannot_be_made")
    assert "may not create roles" in str(e.value) and "\n" not in str(e.value)
    assert e.value.hint and "CREATEROLE" in e.value.hint
    conn.close()
