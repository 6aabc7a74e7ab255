"""Migrations on real PostgreSQL: checksums hold, concurrent runs apply each once, every old version upgrades.

Each test gets its own database (CREATE DATABASE on the session's embedded server), so the session's
schema is never touched.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
import pytest

import kbctl.store.db
from kbctl.config import load_settings
from kbctl.errors import MigrationError
from kbctl.store.db import MIGRATION_LOCK, Database, migrations

ROOT = Path(__file__).resolve().parents[2]
LATEST = len(migrations())
TABLES = ("profiles", "namespaces", "documents", "chunks", "lexical_postings", "lexical_vocab", "lexical_stats", "runs")


@pytest.fixture
def fresh_dsn(kb_home):
    """The DSN of a new, empty database on the session's server (dropped afterwards)."""
    server = Database(load_settings(overrides={"database.home": str(kb_home)}))
    admin_dsn = server.dsn()
    name = f"kbctl_mig_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield psycopg.conninfo.make_conninfo(admin_dsn, dbname=name)
    # A backend may outlive its client for a moment, or an autovacuum worker (the bootstrap
    # superuser's, which a login that is not a superuser may not terminate) may be at work on the
    # new database: retry for a while rather than fail the test in its teardown.
    deadline = time.monotonic() + 30
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        while True:
            try:
                admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
                break
            except (psycopg.errors.InsufficientPrivilege, psycopg.errors.ObjectInUse):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


def _db(dsn: str) -> Database:
    return Database(load_settings(overrides={"database.dsn": dsn}))


def _ledger(dsn: str) -> list[int]:
    with psycopg.connect(dsn) as c:
        return [v for (v,) in c.execute("SELECT version FROM kbctl.schema_migrations ORDER BY version")]


def test_migrate_up_to_a_target_version(fresh_dsn):
    applied = _db(fresh_dsn).migrate(target=2)
    assert [m.version for m in applied] == [1, 2]
    assert _ledger(fresh_dsn) == [1, 2]
    assert [m.version for m in _db(fresh_dsn).migrate()] == list(range(3, LATEST + 1))
    assert _db(fresh_dsn).migrate() == []


def test_an_edited_applied_migration_is_refused(fresh_dsn, monkeypatch):
    _db(fresh_dsn).migrate(target=2)
    shipped = migrations()
    edited = [
        dataclasses.replace(m, sql=m.sql + "\n-- edited after release\n") if m.version == 2 else m for m in shipped
    ]
    monkeypatch.setattr(kbctl.store.db, "migrations", lambda: edited)
    db = _db(fresh_dsn)
    with pytest.raises(MigrationError, match=r"migration 002-postings-covering was changed after it was applied") as e:
        db.migrate()
    assert "new numbered migration" in (e.value.hint or "")
    assert _ledger(fresh_dsn) == [1, 2]  # nothing after the edited one was applied
    with psycopg.connect(fresh_dsn) as c:
        rows = db.status(c)
    assert [r["checksum_ok"] for r in rows] == [True, False] + [None] * (LATEST - 2)


def test_concurrent_migrate_applies_each_migration_once(fresh_dsn):
    """Several `kbctl db migrate` at once: all succeed, the ledger has each version once, each applied once."""
    n = 3
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    with psycopg.connect(fresh_dsn, autocommit=True) as gate:
        gate.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))  # hold them all at the first migration
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "kbctl", "--dsn", fresh_dsn, "db", "migrate"],
                env=env,
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(n)
        ]
        deadline = time.monotonic() + 60
        waiting = 0
        while waiting < n and time.monotonic() < deadline and all(p.poll() is None for p in procs):
            time.sleep(0.1)
            waiting = gate.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            ).fetchone()[0]
        gate.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
    outs = [p.communicate(timeout=120) for p in procs]
    assert waiting == n, f"the processes did not all wait on the migration lock: {outs}"
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert "Traceback" not in err
    assert _ledger(fresh_dsn) == list(range(1, LATEST + 1))
    counts = [int(err.split("applied ")[1].split()[0]) for _, err in outs]
    assert sum(counts) == LATEST, outs  # each migration applied by exactly one of them


def _fill(conn, version: int = 1) -> None:
    """A little data through plain SQL, valid from migration 001 on: profile, namespace, document, chunks, postings.

    From ``GENERATIONS`` on, the vectors go to the namespace's active generation, not the chunks."""
    pid = conn.execute(
        "INSERT INTO kbctl.profiles (name, fingerprint, embedder, model, dimension, distance, normalize, max_tokens)"
        " VALUES ('tiny', 'fp-tiny', 'hash', 'hash', 3, 'cosine', true, 256) RETURNING id"
    ).fetchone()[0]
    ns = conn.execute(
        "INSERT INTO kbctl.namespaces (tenant, name, profile_id, dimension) VALUES ('t', 'docs', %s, 3) RETURNING id",
        (pid,),
    ).fetchone()[0]
    doc = conn.execute(
        "INSERT INTO kbctl.documents (namespace_id, uri, title, source_type, content_hash, char_count, chunk_count)"
        " VALUES (%s, 'mem://refunds', 'Refunds', 'markdown', 'h1', 40, 2) RETURNING id",
        (ns,),
    ).fetchone()[0]
    inline = version < GENERATIONS
    gen = None
    if not inline:
        gen = conn.execute(
            "INSERT INTO kbctl.generations (namespace_id, profile_id, dimension, storage, state)"
            " VALUES (%s, %s, 3, 'vector', 'active') RETURNING id",
            (ns, pid),
        ).fetchone()[0]
    for pos, (text, vec) in enumerate(
        [("refunds take five days", "[1,0,0]"), ("refunds go to the card", "[0,0.6,0.8]")]
    ):
        if inline:
            cid = conn.execute(
                "INSERT INTO kbctl.chunks (namespace_id, document_id, position, text, token_count, char_start,"
                " char_end, content_hash, profile_id, dimension, embedding, lex_length)"
                " VALUES (%s, %s, %s, %s, 4, 0, %s, %s, %s, 3, %s::vector, 4) RETURNING id",
                (ns, doc, pos, text, len(text), f"c{pos}", pid, vec),
            ).fetchone()[0]
        else:
            cid = conn.execute(
                "INSERT INTO kbctl.chunks (namespace_id, document_id, position, text, token_count, char_start,"
                " char_end, content_hash, lex_length) VALUES (%s, %s, %s, %s, 4, 0, %s, %s, 4) RETURNING id",
                (ns, doc, pos, text, len(text), f"c{pos}"),
            ).fetchone()[0]
            conn.execute(
                "INSERT INTO kbctl.vectors (namespace_id, chunk_id, generation_id, document_id, profile_id,"
                " dimension, storage, embedding) VALUES (%s, %s, %s, %s, %s, 3, 'vector', %s::vector)",
                (ns, cid, gen, doc, pid, vec),
            )
        for term in ("refund", f"term{pos}"):
            conn.execute(
                "INSERT INTO kbctl.lexical_postings (namespace_id, term, chunk_id, tf, dl) VALUES (%s, %s, %s, 1, 4)",
                (ns, term, cid),
            )
    conn.execute(
        "INSERT INTO kbctl.lexical_vocab (namespace_id, term, df) VALUES (%s, 'refund', 2), (%s, 'term0', 1), (%s, 'term1', 1)",
        (ns, ns, ns),
    )
    conn.execute("INSERT INTO kbctl.lexical_stats (namespace_id, chunk_count, total_length) VALUES (%s, 2, 8)", (ns,))
    conn.execute(
        "INSERT INTO kbctl.runs (namespace_id, status, counts) VALUES (%s, 'done', '{\"documents\": 1}')", (ns,)
    )


def _columns(conn) -> dict[str, list[str]]:
    """Each table's columns now (a later migration may add columns: the rows' old ones must stay intact)."""
    q = "SELECT column_name FROM information_schema.columns WHERE table_schema = 'kbctl' AND table_name = %s ORDER BY ordinal_position"
    return {t: [r[0] for r in conn.execute(q, (t,))] for t in TABLES}


def _snapshot(conn, columns: dict[str, list[str]]) -> dict[str, list[str]]:
    return {
        t: conn.execute(
            f"SELECT coalesce(array_agg(r ORDER BY r), '{{}}') FROM (SELECT ROW({', '.join('x.' + c for c in columns[t])})::text AS r"
            f" FROM kbctl.{t} x) s"
        ).fetchone()[0]
        for t in TABLES
    }


GENERATIONS = 11  # the migration that moved chunks' vectors into generations (kbctl.vectors)
MOVED = ("profile_id", "dimension", "embedding")  # the chunk columns it moved


@pytest.mark.embedded_only  # fills and reads every tenant's rows through the login: only a superuser bypasses the forced policies
@pytest.mark.parametrize("version", range(1, LATEST))
def test_every_earlier_version_migrates_to_the_latest_with_data_intact(fresh_dsn, version):
    db = _db(fresh_dsn)
    assert [m.version for m in db.migrate(target=version)] == list(range(1, version + 1))
    with psycopg.connect(fresh_dsn, autocommit=True) as c:
        _fill(c, version)
        columns = _columns(c)
        if version < GENERATIONS:  # those columns moved to kbctl.vectors: compared there below
            columns["chunks"] = [col for col in columns["chunks"] if col not in MOVED]
            moved = _inline_vectors(c)
        before = _snapshot(c, columns)
    assert all(before[t] for t in TABLES)
    assert [m.version for m in _db(fresh_dsn).migrate()] == list(range(version + 1, LATEST + 1))
    with psycopg.connect(fresh_dsn, autocommit=True) as c:
        assert _snapshot(c, columns) == before
        if version < GENERATIONS:
            assert _generation_vectors(c) == moved
        assert [r["checksum_ok"] for r in db.status(c)] == [True] * LATEST
        pkey = c.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = 'kbctl' AND indexname = 'lexical_postings_pkey'"
        ).fetchone()[0]
        assert "INCLUDE (tf, dl)" in pkey  # 002 rebuilt the key over the rows already there
        near = c.execute(
            "SELECT c.text FROM kbctl.vectors v JOIN kbctl.chunks c ON c.namespace_id = v.namespace_id"
            " AND c.id = v.chunk_id ORDER BY v.embedding::vector(3) <=> '[0,0.6,0.8]'::vector(3) LIMIT 1"
        ).fetchone()[0]
        assert near == "refunds go to the card"
    assert _ledger(fresh_dsn) == list(range(1, LATEST + 1))


def _inline_vectors(conn) -> list[tuple]:
    """(namespace, chunk, profile, dimension, vector) as the chunks held them before generations."""
    return conn.execute(
        "SELECT namespace_id, id, profile_id, dimension, embedding::text FROM kbctl.chunks ORDER BY namespace_id, id"
    ).fetchall()


def _generation_vectors(conn) -> list[tuple]:
    """The same from the active generations, checking each namespace has exactly one."""
    return conn.execute(
        "SELECT v.namespace_id, v.chunk_id, v.profile_id, v.dimension, v.embedding::text FROM kbctl.vectors v"
        " JOIN kbctl.generations g ON g.id = v.generation_id AND g.namespace_id = v.namespace_id"
        " WHERE g.state = 'active' AND v.storage = 'vector' ORDER BY 1, 2"
    ).fetchall()


@pytest.mark.embedded_only  # fills every tenant's rows through the login: only a superuser bypasses the forced policies
def test_generations_migration_gives_each_namespace_an_active_generation_with_its_index(fresh_dsn):
    """011 on a filled store: generation 1 per namespace holds every vector, the HNSW index of the
    generation exists and is used (literal generation id), and the inline column is gone."""
    _db(fresh_dsn).migrate(target=GENERATIONS - 1)
    with psycopg.connect(fresh_dsn, autocommit=True) as c:
        _fill(c)
    _db(fresh_dsn).migrate()
    with psycopg.connect(fresh_dsn, autocommit=True) as c:
        gens = c.execute(
            "SELECT id, namespace_id, profile_id, dimension, storage, state FROM kbctl.generations"
        ).fetchall()
        assert len(gens) == 1 and gens[0][3:] == (3, "vector", "active")
        gid = gens[0][0]
        assert c.execute("SELECT count(*) FROM kbctl.vectors WHERE generation_id = %s", (gid,)).fetchone()[0] == 2
        idx = c.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = 'kbctl' AND indexname = %s", (f"vectors_hnsw_g{gid}",)
        ).fetchone()
        assert idx and "hnsw" in idx[0] and f"generation_id = {gid}" in idx[0]
        cols = {
            r[0] for r in c.execute("SELECT column_name FROM information_schema.columns WHERE table_name = 'chunks'")
        }
        assert not cols & set(MOVED)
        with c.transaction():
            c.execute("SET LOCAL enable_seqscan = off")
            plan = "\n".join(
                r[0]
                for r in c.execute(
                    f"EXPLAIN SELECT chunk_id FROM kbctl.vectors WHERE generation_id = {gid}"
                    " ORDER BY embedding::vector(3) <=> '[1,0,0]'::vector(3) LIMIT 1"
                )
            )
        assert f"vectors_hnsw_g{gid}" in plan
        with pytest.raises(psycopg.errors.CheckViolation):  # a vector's size is its generation's
            c.execute(
                "INSERT INTO kbctl.vectors (namespace_id, chunk_id, generation_id, document_id, profile_id, dimension,"
                " storage, embedding) SELECT namespace_id, id, %s, document_id, %s, 3, 'vector', '[1,2]'"
                " FROM kbctl.chunks LIMIT 1",
                (gid, gens[0][2]),
            )


ANALYZER = 19  # the migration that records each namespace's lexical analyzer version


@pytest.mark.embedded_only  # fills a tenant's rows through the login: only a superuser bypasses the forced policies
def test_a_namespace_made_before_the_analyzer_migration_keeps_analyzer_version_1(fresh_dsn):
    """Its postings were made with whole CJK runs: it must go on being written and searched so
    (kbctl.textutil.analyze); only a namespace kbctl creates afterwards records the current version."""
    _db(fresh_dsn).migrate(target=ANALYZER - 1)
    with psycopg.connect(fresh_dsn, autocommit=True) as c:
        _fill(c, ANALYZER - 1)
    _db(fresh_dsn).migrate()
    with psycopg.connect(fresh_dsn, autocommit=True) as c:
        assert c.execute("SELECT name, analyzer FROM kbctl.namespaces").fetchall() == [("docs", 1)]


@pytest.mark.parametrize("command", ["repack", "optimize"])
def test_db_optimize_applies_pending_migrations_first(fresh_dsn, command):
    # After upgrading kbctl, `kbctl db optimize` may be the first command run: with auto_migrate it
    # must bring the schema up to date before it repacks and vacuums, as every other command does
    # (it once repacked against the old schema: "column … does not exist").
    import kbctl

    _db(fresh_dsn).migrate(target=LATEST - 1)
    kb = kbctl.open(dsn=fresh_dsn)
    try:
        getattr(kb.admin, command)()
    finally:
        kb.close()
    assert _ledger(fresh_dsn) == list(range(1, LATEST + 1))


TOKEN_INSTANCES = 21  # the migration that links each bearer token to the tenant it was made for


def test_the_token_migration_links_each_token_to_the_tenant_it_was_made_for(fresh_dsn):
    """A token made while its tenant's delete ran could outlive the delete (before session 41) and
    reach the tenant made again under its name. 021 links each token to its tenant's row where that
    is known, and the lookup refuses the rest: a token made at or after its tenant's registration is
    that tenant's; so is one older than the registry (009 registered its tenant from it); one older
    than its tenant's registration otherwise was made for a tenant of the name deleted since."""
    from kbctl.store.agents import token_hash

    _db(fresh_dsn).migrate(target=8)  # agent tokens, no registry yet
    with psycopg.connect(fresh_dsn, autocommit=True) as c:
        c.execute(
            "INSERT INTO kbctl.agent_tokens (tenant, agent, token_hash) VALUES ('old', 'bot', %s)", (token_hash("pre"),)
        )
    _db(fresh_dsn).migrate(target=TOKEN_INSTANCES - 1)
    with psycopg.connect(fresh_dsn, autocommit=True) as c:
        assert c.execute("SELECT count(*) FROM kbctl.tenants WHERE name = 'old'").fetchone()[0] == 1  # by 009
        c.execute(  # slipped through the old delete race: older than the tenant of its name
            "INSERT INTO kbctl.agent_tokens (tenant, agent, token_hash, created_at)"
            " VALUES ('again', 'bot', %s, now() - interval '1 hour')",
            (token_hash("slipped"),),
        )
        c.execute("INSERT INTO kbctl.tenants (name, role) VALUES ('again', 'kbctl_t_again_mig')")
        c.execute(
            "INSERT INTO kbctl.agent_tokens (tenant, agent, token_hash) VALUES ('again', 'bot', %s)",
            (token_hash("after"),),
        )
        c.execute(
            "INSERT INTO kbctl.agent_tokens (tenant, agent, token_hash) VALUES ('nobody', 'bot', %s)",
            (token_hash("none"),),
        )
    _db(fresh_dsn).migrate()
    with psycopg.connect(fresh_dsn, autocommit=True) as c:
        linked = dict(
            c.execute(
                "SELECT a.token_hash, t.name FROM kbctl.agent_tokens a LEFT JOIN kbctl.tenants t ON t.instance = a.tenant_instance"
            ).fetchall()
        )
        assert linked == {
            token_hash("pre"): "old",
            token_hash("after"): "again",
            token_hash("slipped"): None,
            token_hash("none"): None,
        }
        found = {
            t: c.execute("SELECT tenant FROM kbctl.agent_of_token(%s)", (token_hash(t),)).fetchall()
            for t in ("pre", "after", "slipped", "none")
        }
        assert found == {"pre": [("old",)], "after": [("again",)], "slipped": [], "none": []}
        c.execute("DELETE FROM kbctl.tenants WHERE name = 'again'")  # its tokens go with the tenant they were made for
        assert (
            c.execute(
                "SELECT count(*) FROM kbctl.agent_tokens WHERE tenant = 'again' AND tenant_instance IS NOT NULL"
            ).fetchone()[0]
            == 0
        )
