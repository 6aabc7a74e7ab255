"""Equality filters through kbctl.metadata_values (migration 024), on real PostgreSQL as the tenant.

The index is a superset looked up first; the exact condition always follows, so a narrowed search
keeps exactly what a plain one keeps. ``kbctl.store.search.NARROWING`` forces either reading here
(``always`` / ``never``); ``auto`` narrows only what the plain probe does not find broad.
"""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

from kbctl.search import parse_filters
from kbctl.store import search as store_search
from tests.conftest import TEST_DSN, _create_tenant, write_folder
from tests.db.test_store import EQUALS, MODES, _doc, _sources, _write

# (filter, the sources it keeps) over test_store's EQUALS, plus lists' items and text values.
CASES = [
    ("rating=4.50", {"mem://a", "mem://b"}),
    ("rating=4.5", {"mem://a", "mem://b"}),
    ("rating=+4.500", {"mem://a", "mem://b"}),
    ("rating!=4.5", {"mem://c", "mem://d"}),
    ("rating in 1,4.50", {"mem://a", "mem://b"}),
    ("rating=4.5 stars", {"mem://d"}),
    ("year=2024.0", {"mem://a", "mem://b"}),
    ("year=2024", {"mem://a", "mem://b"}),
    ("year=2023", {"mem://c"}),  # a number written as text
    ("year in 2023.0,1999", {"mem://c"}),
    ("year=MMXXIV", {"mem://d"}),
    ("reviewers=3.0", {"mem://b"}),  # a list's item, a numeric text
    ("reviewers=1", {"mem://a"}),  # a list's item, a number
    ("reviewers=two", {"mem://d"}),
    ("reviewers!=1.0", {"mem://b", "mem://c", "mem://d"}),
    ("tags=beta", {"mem://a"}),
    ("tags in zeta,omega", {"mem://a"}),
    ("tags=bet", set()),
    ("active=True", {"mem://a", "mem://c"}),
    ("active=TRUE", {"mem://a"}),
    ("active=true", {"mem://a"}),
    ("active=False", {"mem://b"}),
    ("active!=True", {"mem://b", "mem://d"}),
    ("active in FALSE,yes", {"mem://b"}),
    ("label=True", {"mem://a"}),
    ("label=true", set()),
    ("nothing=here", set()),
]


def _entries_exact(conn, ns_id: int) -> tuple[int, int]:
    """(entries the chunks' metadata gives that the table lacks, rows the table has that no chunk gives)."""
    made = (
        "SELECT c.namespace_id, e.key, e.value, c.id FROM kbctl.chunks c"
        " CROSS JOIN LATERAL kbctl.metadata_entries(c.metadata) e WHERE c.namespace_id = %(ns)s"
    )
    kept = "SELECT namespace_id, key, value, chunk_id FROM kbctl.metadata_values WHERE namespace_id = %(ns)s"
    missing = conn.execute(f"SELECT count(*) FROM ({made} EXCEPT ALL {kept}) x", {"ns": ns_id}).fetchone()[0]
    extra = conn.execute(f"SELECT count(*) FROM ({kept} EXCEPT ALL {made}) x", {"ns": ns_id}).fetchone()[0]
    return missing, extra


@pytest.fixture(scope="module")
def narrow_kb(kb_home):
    """EQUALS written once in a tenant of this module's: the cases below only search it."""
    import kbctl

    tenant = "t_metadata_index_narrow"
    if TEST_DSN:
        _create_tenant(tenant)
    k = kbctl.open(home=kb_home, tenant=tenant, profile="hash-384")
    _write(k, "narrow", EQUALS)
    yield k
    k.close()


@pytest.mark.parametrize("flt, expected", CASES)
def test_narrowed_and_plain_searches_keep_the_same_chunks(narrow_kb, monkeypatch, flt, expected):
    for narrowing in ("never", "always", "auto"):
        monkeypatch.setattr(store_search, "NARROWING", narrowing)
        for mode in (*MODES, None):
            assert _sources(narrow_kb, "narrow", flt, mode) == expected, (narrowing, mode, flt)


def test_a_narrowed_search_reads_the_index(kb, monkeypatch):
    """Without its entries a narrowed filter finds nothing, a plain one still finds its chunks: the
    narrowed statements (the count, the dense exact path, the metadata-only search) do read it."""
    ns = _write(kb, "reads", EQUALS)
    conn = kb.connection()
    assert _entries_exact(conn, ns.id) == (0, 0)
    with conn.transaction():
        conn.execute("DELETE FROM kbctl.metadata_values WHERE namespace_id = %s AND key = 'tags'", (ns.id,))
    monkeypatch.setattr(store_search, "NARROWING", "always")
    for mode in ("dense", None):
        assert _sources(kb, "reads", "tags=beta", mode) == set(), mode
    assert _sources(kb, "reads", "year=2023", None) == {"mem://c"}
    monkeypatch.setattr(store_search, "NARROWING", "never")
    for mode in ("dense", None):
        assert _sources(kb, "reads", "tags=beta", mode) == {"mem://a"}, mode


def _synthetic(conn, ns_id: int, n: int, every: int, *, analyze: bool = True) -> None:
    """``n`` chunks more, copies of the namespace's first chunk: source_type feed for one in
    ``every``, file for the others (as the tenant, as the bench's loaders insert them); then
    ANALYZE unless ``analyze`` is false."""
    with conn.transaction():
        conn.execute(
            "INSERT INTO kbctl.chunks (namespace_id, document_id, position, text, token_count, char_start, char_end,"
            " heading_path, page, content_hash, metadata, lex_length)"
            " SELECT s.namespace_id, s.document_id, 1000 + g, s.text, s.token_count, s.char_start, s.char_end,"
            " s.heading_path, s.page, s.content_hash || ':' || g,"
            " s.metadata || jsonb_build_object('source_type', CASE WHEN g %% %s = 0 THEN 'feed' ELSE 'file' END,"
            "   'serial', g),"
            " s.lex_length"
            " FROM (SELECT * FROM kbctl.chunks WHERE namespace_id = %s ORDER BY id LIMIT 1) s"
            " CROSS JOIN generate_series(1, %s) g",
            (every, ns_id, n),
        )
        conn.execute(
            "UPDATE kbctl.lexical_stats SET chunk_count = (SELECT count(*) FROM kbctl.chunks WHERE namespace_id = %s)"
            " WHERE namespace_id = %s",
            (ns_id, ns_id),
        )
    if analyze:
        _analyze(conn)


def _analyze(conn) -> None:
    """The planner's figures of the chunks and the entries (their owner's: the login's, not the tenant's)."""
    role = conn.execute("SELECT current_user").fetchone()[0]
    conn.execute("RESET ROLE")
    try:
        conn.execute("ANALYZE kbctl.chunks, kbctl.metadata_values")
    finally:
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))


def test_a_selective_filter_is_looked_up_by_metadata_values_pkey_as_the_tenant(kb, monkeypatch):
    ns = _write(kb, "plan", EQUALS)
    conn = kb.connection()
    assert not conn.execute("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user").fetchone()[0]
    _synthetic(conn, ns.id, 6000, 200)  # 30 feeds among 6,000
    assert _entries_exact(conn, ns.id) == (0, 0)
    feed = parse_filters(["source_type=feed"])
    fsql, fparams = store_search.filter_sql(feed, narrow=0)
    q = store_search.template("search/filtered_size", f=fsql)
    plan = "\n".join(r[0] for r in conn.execute(sql.SQL("EXPLAIN ") + q, [[ns.id], *fparams, 1001]))
    assert "metadata_values_pkey" in plan, plan
    plain = store_search.template("search/filtered_size", f=store_search.filter_sql(feed)[0])
    assert "metadata_values" not in "\n".join(
        r[0] for r in conn.execute(sql.SQL("EXPLAIN ") + plain, [[ns.id], *store_search.filter_sql(feed)[1], 1001])
    )
    # auto: the rare filter is counted through the index, the broad one by the probe alone
    assert store_search.filtered_count(conn, [ns.id], feed, 1001) == (30, 0)
    assert store_search.filtered_count(conn, [ns.id], parse_filters(["source_type=file"]), 1001) == (1001, None)
    assert store_search.filtered_count(conn, [ns.id], parse_filters(["source_type=file"]), 10_000) == (5970, 0)
    # of two filters, the one with the fewer entries
    both = parse_filters(["source_type=file", "serial in 7,400,401"])
    assert store_search.filtered_count(conn, [ns.id], both, 1001) == (2, 1)
    for narrowing in ("never", "always", "auto"):
        monkeypatch.setattr(store_search, "NARROWING", narrowing)
        assert store_search.filtered_size(conn, [ns.id], feed, 1001) == 30
        assert len(store_search.metadata_keys(conn, [ns.id], feed, 100)) == 30
        assert len(store_search.metadata_keys(conn, [ns.id], parse_filters(["source_type=file"]), 10)) == 10


def test_rewritten_metadata_is_found_by_its_new_value_and_not_the_old(kb, tmp_path, monkeypatch):
    folder = write_folder(
        tmp_path, "notes", {"a.md": "---\nstatus: draft\ntags: [x, y]\n---\n# A\n\nNotes on refunds.\n"}
    )
    kb.ingest([folder], namespace="reingest")
    (tmp_path / "notes" / "a.md").write_text("---\nstatus: final\ntags: [y, z]\n---\n# A\n\nNotes on refunds.\n")
    kb.ingest([folder], namespace="reingest")
    monkeypatch.setattr(store_search, "NARROWING", "always")
    for mode in (*MODES, None):
        assert _sources(kb, "reingest", "status=final", mode), mode
        assert _sources(kb, "reingest", "tags=z", mode), mode
        assert not _sources(kb, "reingest", "status=draft", mode), mode
        assert not _sources(kb, "reingest", "tags=x", mode), mode
    conn = kb.connection()
    ns_id = conn.execute("SELECT id FROM kbctl.namespaces WHERE name = 'reingest'").fetchone()[0]
    assert _entries_exact(conn, ns_id) == (0, 0)


def test_an_update_of_the_chunks_metadata_replaces_their_entries(kb, monkeypatch):
    ns = _write(kb, "updated", EQUALS)
    conn = kb.connection()
    with conn.transaction():
        conn.execute(
            "UPDATE kbctl.chunks SET metadata = metadata - 'tags' || '{\"tags\": [\"omega\"]}'"
            " WHERE namespace_id = %s AND metadata ? 'tags'",
            (ns.id,),
        )
        conn.execute("UPDATE kbctl.chunks SET position = position WHERE namespace_id = %s", (ns.id,))
    assert _entries_exact(conn, ns.id) == (0, 0)
    monkeypatch.setattr(store_search, "NARROWING", "always")
    assert _sources(kb, "updated", "tags=omega", None) == {"mem://a"}
    assert _sources(kb, "updated", "tags=beta", None) == set()


def test_documents_removed_by_sync_leave_no_entries(kb, tmp_path):
    folder = write_folder(
        tmp_path,
        "synced",
        {
            "a.md": "---\nteam: red\n---\n# A\n\nNotes on refunds.\n",
            "b.md": "---\nteam: blue\n---\n# B\n\nNotes on invoices.\n",
        },
    )
    kb.ingest([folder], namespace="synced")
    conn = kb.connection()
    ns_id = conn.execute("SELECT id FROM kbctl.namespaces WHERE name = 'synced'").fetchone()[0]
    count = "SELECT count(*) FROM kbctl.metadata_values WHERE namespace_id = %s AND key = 'team' AND value = %s"
    assert conn.execute(count, (ns_id, "blue")).fetchone()[0] >= 1
    (tmp_path / "synced" / "b.md").unlink()
    kb.ingest([folder], namespace="synced", sync=True)
    assert conn.execute(count, (ns_id, "blue")).fetchone()[0] == 0
    assert conn.execute(count, (ns_id, "red")).fetchone()[0] >= 1
    assert _entries_exact(conn, ns_id) == (0, 0)


def _entries_of(conn, ns_ids: list[int]) -> int:
    return conn.execute(
        "SELECT count(*) FROM kbctl.metadata_values WHERE namespace_id = ANY(%s)", (ns_ids,)
    ).fetchone()[0]


def _deleted_entries(conn) -> int:
    """The rows of kbctl.metadata_values this transaction deleted, its cascades' too (by any role)."""
    return conn.execute(
        "SELECT coalesce(sum(n_tup_del), 0)::bigint FROM pg_stat_xact_user_tables WHERE relid = 'kbctl.metadata_values'::regclass"
    ).fetchone()[0]


def test_a_deleted_namespace_leaves_no_entries_and_the_others_keep_theirs(kb):
    """Every whole-namespace delete (``kbctl namespaces delete``, a tenant's delete, an ingest's
    new namespace left empty) is ``remove_namespace``: as the tenant, in its transaction, it deletes
    exactly the namespace's entries (counted in the transaction: afterwards no role held to the
    policies sees a gone namespace's rows, and by DSN the login is one)."""
    from kbctl.store.generations import drop_generation_indexes
    from kbctl.store.namespaces import remove_namespace

    gone, kept = _write(kb, "gone", EQUALS), _write(kb, "kept", EQUALS)
    conn = kb.connection()
    entries = _entries_of(conn, [gone.id])
    assert entries == _entries_of(conn, [kept.id]) > 0
    with conn.transaction():
        removed, gens = remove_namespace(conn, "gone", kb.tenant)
        assert (removed, _deleted_entries(conn)) == (len(EQUALS), entries)
    drop_generation_indexes(conn, gens)
    assert _entries_of(conn, [kept.id]) == entries
    assert _entries_exact(conn, kept.id) == (0, 0)


def test_a_deleted_tenant_leaves_no_entries_and_other_tenants_keep_theirs(kb_home, kb, tenant):
    """Read as the login where it reads past the policies (embedded: a superuser); by DSN it does
    not, and only the other tenant's entries are checked (the previous test counts the rows)."""
    import kbctl

    other = tenant + "_gone"
    if TEST_DSN:
        _create_tenant(other)
    kept = _write(kb, "kept", EQUALS)
    entries = _entries_of(kb.connection(), [kept.id])
    with kbctl.open(home=kb_home, tenant=other, profile="hash-384") as k:
        ids = [_write(k, name, EQUALS).id for name in ("one", "two")]
        assert _entries_of(k.connection(), ids) == 2 * entries > 0
    with psycopg.connect(kb.dsn(), autocommit=True) as login:
        every_row = login.execute(
            "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user"
        ).fetchone()[0]
        assert not every_row or _entries_of(login, ids) == 2 * entries
        assert kb.delete_tenant(other)["namespaces"] == 2
        assert not every_row or _entries_of(login, ids) == 0
    assert _entries_of(kb.connection(), [kept.id]) == entries
    assert _entries_exact(kb.connection(), kept.id) == (0, 0)


def test_long_values_are_cut_and_still_found_exactly(kb, monkeypatch):
    """Entries are cut at 200 characters (keys too, though a filter's key is 64 at most): a lookup
    finds both long values, and the exact condition keeps the one written."""
    long_a, long_b = "x" * 300 + "a", "x" * 300 + "b"
    _write(
        kb,
        "long",
        [
            _doc("mem://a", "A", ["Notes on refunds, the first."], **{"k": long_a, "big": 10**300, "q" * 300: 1}),
            _doc("mem://b", "B", ["Notes on refunds, the second."], **{"k": long_b, "big": "1e300"}),
        ],
    )
    for narrowing in ("never", "always"):
        monkeypatch.setattr(store_search, "NARROWING", narrowing)
        for mode in (*MODES, None):
            assert _sources(kb, "long", f"k={long_a}", mode) == {"mem://a"}, (narrowing, mode)
            assert _sources(kb, "long", "big=1e300", mode) == {"mem://a", "mem://b"}, (narrowing, mode)


# -- the migration on a store that holds data -------------------------------------------------------

from tests.db.test_migrations import _db, fresh_dsn  # noqa: E402,F401  (the fixture)

INDEX = 24  # the migration that made kbctl.metadata_values


def test_the_migration_fills_the_index_from_the_chunks_stored_before_it(fresh_dsn, tmp_path, monkeypatch):  # noqa: F811
    import kbctl
    from kbctl.api.kb import KnowledgeBase
    from kbctl.config import load_settings

    _db(fresh_dsn).migrate(target=INDEX - 1)
    folder = write_folder(
        tmp_path,
        "before",
        {
            "a.md": "---\nstatus: draft\ntags: [x, y]\nrating: 4.50\nyear: '2024'\nactive: true\n---\n# A\n\nNotes on refunds.\n",
            "b.md": "---\nstatus: final\ntags: [z]\nrating: 3\nyear: 2023\nactive: false\n---\n# B\n\nNotes on refunds too.\n",
        },
    )
    kb = KnowledgeBase(load_settings(overrides={"database.dsn": fresh_dsn, "database.auto_migrate": False}))
    try:
        kb.ingest([folder], namespace="before")
    finally:
        kb.close()
    with psycopg.connect(fresh_dsn) as c:
        assert c.execute("SELECT to_regclass('kbctl.metadata_values')").fetchone()[0] is None
    assert [m.version for m in _db(fresh_dsn).migrate()] == [INDEX]
    expected = {
        "status=draft": {"a.md"},
        "tags=z": {"b.md"},
        "rating=4.5": {"a.md"},
        "year=2024": {"a.md"},
        "year in 2023,1": {"b.md"},
        "active=true": {"a.md"},
        "status!=draft": {"b.md"},
    }
    kb = kbctl.open(dsn=fresh_dsn)
    try:
        conn = kb.connection()
        ns_id = conn.execute("SELECT id FROM kbctl.namespaces WHERE name = 'before'").fetchone()[0]
        assert _entries_exact(conn, ns_id) == (0, 0)
        assert conn.execute("SELECT count(*) FROM kbctl.metadata_values").fetchone()[0] > 0
        assert kb.verify("before").ok
        for narrowing in ("never", "always"):
            monkeypatch.setattr(store_search, "NARROWING", narrowing)
            for flt, want in expected.items():
                for mode in (*MODES, None):
                    got = _sources(kb, "before", flt, mode)
                    assert {s.rsplit("/", 1)[-1] for s in got} == want, (narrowing, flt, mode)
    finally:
        kb.close()


# -- a store whose chunks the planner has no figures of ---------------------------------------------


def test_without_statistics_of_the_chunks_filters_are_read_plainly_with_the_same_answers(fresh_dsn, monkeypatch):  # noqa: F811
    """Right after a bulk load into a new database (kbctl.chunks never analyzed, no autovacuum round
    yet) the planner would look each entry's chunk up through chunks_document, reading the namespace
    once per entry, so the rule reads plainly (``search/narrowing_figures``): the plain statements'
    answers, by the plain statements; once the chunks have statistics the rare filter is looked up."""
    from kbctl.api.kb import KnowledgeBase
    from kbctl.config import load_settings

    _db(fresh_dsn).migrate()
    with psycopg.connect(fresh_dsn, autocommit=True) as owner:  # no autovacuum analyzes them meanwhile
        for table in ("chunks", "metadata_values"):
            owner.execute(
                sql.SQL("ALTER TABLE kbctl.{} SET (autovacuum_enabled = false)").format(sql.Identifier(table))
            )
    kb = KnowledgeBase(load_settings(overrides={"database.dsn": fresh_dsn, "database.auto_migrate": False}))
    try:
        ns = _write(kb, "fresh", EQUALS)
        conn = kb.connection()
        _synthetic(conn, ns.id, 6000, 200, analyze=False)
        total, planned = conn.execute(store_search.query("search/narrowing_figures"), ([ns.id],)).fetchone()
        assert total == 6004 and planned <= 0  # never analyzed: 0 or -1
        feed, file = parse_filters(["source_type=feed"]), parse_filters(["source_type=file"])
        both = parse_filters(["tags=zeta", "source_type=feed"])  # the copies are all of mem://a

        def answers() -> list:
            return [
                store_search.filtered_size(conn, [ns.id], feed, 1001),
                store_search.filtered_size(conn, [ns.id], file, 1001),
                store_search.filtered_size(conn, [ns.id], file, 10_000),
                store_search.filtered_size(conn, [ns.id], both, 1001),
                store_search.metadata_keys(conn, [ns.id], feed, 100),
                store_search.metadata_keys(conn, [ns.id], both, 10),
                [h.chunk_id for h in kb.search("", "fresh", filters=["source_type=feed"], k=50).hits],
                [h.chunk_id for h in kb.search("refunds", "fresh", mode="dense", filters=["source_type=feed"]).hits],
            ]

        monkeypatch.setattr(store_search, "NARROWING", "never")
        plain = answers()
        assert plain[:4] == [30, 1001, 5970, 30] and len(plain[4]) == 30 and len(plain[6]) == 30
        monkeypatch.setattr(store_search, "NARROWING", "auto")
        assert answers() == plain
        # which statement "auto" ran: with the feeds' entries gone a lookup finds none of them
        assert store_search.filtered_count(conn, [ns.id], feed, 1001) == (30, None)  # the dense lane's too
        with conn.transaction(force_rollback=True):
            conn.execute("DELETE FROM kbctl.metadata_values WHERE namespace_id = %s AND value = 'feed'", (ns.id,))
            assert store_search.filtered_size(conn, [ns.id], feed, 1001) == 30
            assert len(store_search.metadata_keys(conn, [ns.id], feed, 100)) == 30
        _analyze(conn)  # the chunks' statistics: the same rare filter is looked up now, answers unchanged
        assert store_search.filtered_count(conn, [ns.id], feed, 1001) == (30, 0)
        assert answers() == plain
        with conn.transaction(force_rollback=True):
            conn.execute("DELETE FROM kbctl.metadata_values WHERE namespace_id = %s AND value = 'feed'", (ns.id,))
            assert store_search.filtered_size(conn, [ns.id], feed, 1001) == 0
            assert store_search.metadata_keys(conn, [ns.id], feed, 100) == []
    finally:
        kb.close()
