"""The schema rules a distributed PostgreSQL (Citus) needs, checked on the migrated catalog.

docs/scale-out.md is the design: ``namespace_id`` is the distribution column; the corpus tables
are distributed and co-located on it; the small shared tables are reference tables; the per-tenant
audit and agent tables stay on the coordinator. Citus cannot be installed here, so this test holds
the schema to what ``create_distributed_table`` would require:

- every primary, unique and foreign key of a distributed table includes ``namespace_id`` (but a
  foreign key into a reference table, which every node holds whole);
- a foreign key between two distributed tables joins ``namespace_id`` to ``namespace_id`` (no key
  crosses namespaces, so a row and what it references are always on one shard);
- no reference or coordinator table references a distributed one;
- no statement kbctl sends depends on a session setting a worker would not see (a session-level
  ``SET`` or ``set_config(…, false)``): a setting must be ``SET LOCAL`` in the statement's transaction.

A rule today's schema breaks is an entry of ``ALLOWED``, with the reason and the fix.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

DISTRIBUTION_COLUMN = "namespace_id"
DISTRIBUTED = {
    "documents",
    "chunks",
    "lexical_postings",
    "lexical_vocab",
    "lexical_stats",
    "lexical_segments",
    "lexical_terms",
    "lexical_docs",
    "lexical_forward",
    "runs",
    "run_errors",
    "run_items",
    "feed_state",
    "generations",
    "vectors",
    "metadata_values",
}
REFERENCE = {"profiles", "namespaces", "tenants", "deleted_tenants", "schema_migrations"}
COORDINATOR = {"search_audit", "agent_tokens", "query_log", "query_feedback"}

#: Rule breaks kept on purpose: (table or file, constraint or statement) -> why, and the way out.
ALLOWED = {
    ("sql/queries/tenants/set_role.sql", "SET ROLE"): (
        "row-level security keys on current_user. Citus opens a worker connection as the current"
        " user, so the role does reach the workers, but a tenant's role is NOLOGIN: on Citus it needs"
        " LOGIN on the workers (pg_hba limited to the coordinator) or the policies move to a"
        " SET LOCAL kbctl.tenant (docs/scale-out.md)"
    ),
    ("sql/queries/tenants/reset_role.sql", "RESET ROLE"): "the way back from set_role.sql (same reason)",
    ("sql/queries/generations/build_memory.sql", "set_config('maintenance_work_mem', %s, false)"): (
        "an HNSW build's memory (hnsw.build_memory_mb): CREATE INDEX CONCURRENTLY cannot run inside a"
        " transaction, so SET LOCAL cannot reach it. It sizes the build on the node that runs it; on"
        " Citus the index is built by each worker for its shards, whose maintenance_work_mem is set"
        " on the workers (ALTER SYSTEM) or is the default there (docs/scale-out.md)"
    ),
    ("sql/queries/generations/build_memory_reset.sql", "RESET MAINTENANCE_WORK_MEM"): (
        "the way back from build_memory.sql (same reason)"
    ),
}


@pytest.fixture(scope="module")
def catalog(kb_home):
    import kbctl

    with kbctl.open(home=kb_home, tenant="t_schema_rules", profile="hash-384") as kb:
        kb.connection()  # migrated
        conn = kb.db.connect(register=False)
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT relname FROM pg_class WHERE relnamespace = 'kbctl'::regnamespace AND relkind IN ('r', 'p')"
            )
        }
        keys = conn.execute(
            """
            SELECT c.conrelid::regclass::text, c.conname, c.contype, c.confrelid::regclass::text,
                   ARRAY(SELECT attname FROM unnest(c.conkey) WITH ORDINALITY k(n, o)
                         JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.o),
                   ARRAY(SELECT attname FROM unnest(c.confkey) WITH ORDINALITY k(n, o)
                         JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.o)
            FROM pg_constraint c
            WHERE c.connamespace = 'kbctl'::regnamespace AND c.contype IN ('p', 'u', 'f')
            ORDER BY 1, 2
            """
        ).fetchall()
        conn.close()
    bare = [
        (t.removeprefix("kbctl."), n, ty, (f or "").removeprefix("kbctl."), list(c), list(fc or []))
        for t, n, ty, f, c, fc in keys
    ]
    return tables, bare


def test_every_table_is_classified(catalog):
    tables, _ = catalog
    assert not DISTRIBUTED & REFERENCE and not DISTRIBUTED & COORDINATOR and not REFERENCE & COORDINATOR
    unclassified = tables - DISTRIBUTED - REFERENCE - COORDINATOR
    assert not unclassified, f"say in docs/scale-out.md and here how these distribute: {sorted(unclassified)}"
    assert tables >= DISTRIBUTED | REFERENCE | COORDINATOR


def test_every_key_of_a_distributed_table_includes_the_distribution_column(catalog):
    _, keys = catalog
    broken = [
        (t, name)
        for t, name, kind, ref, cols, _ in keys
        if t in DISTRIBUTED
        and DISTRIBUTION_COLUMN not in cols
        and not (kind == "f" and ref in REFERENCE)  # a key into a reference table: every node has it
        and (t, name) not in ALLOWED
    ]
    assert not broken, f"keys without {DISTRIBUTION_COLUMN} (a distributed table needs it in each): {broken}"


def test_no_key_crosses_namespaces(catalog):
    _, keys = catalog
    crossing, inward = [], []
    for t, name, kind, ref, cols, refcols in keys:
        if kind != "f":
            continue
        if t in DISTRIBUTED and ref in DISTRIBUTED:
            pairs = dict(zip(cols, refcols))
            if pairs.get(DISTRIBUTION_COLUMN) != DISTRIBUTION_COLUMN:
                crossing.append((t, name, ref))
        if t not in DISTRIBUTED and ref in DISTRIBUTED:
            inward.append((t, name, ref))
    assert not crossing, f"foreign keys that do not join {DISTRIBUTION_COLUMN} to itself: {crossing}"
    assert not inward, f"a reference or coordinator table references a distributed one: {inward}"


def test_the_allowed_exceptions_are_still_needed(catalog):
    """An exception that no longer applies is removed from ALLOWED (and from docs/scale-out.md)."""
    _, keys = catalog
    present = {(t, n) for t, n, *_ in keys}
    for where, what in ALLOWED:
        if where.startswith("sql/"):
            assert what.upper() in _strip_sql((ROOT / where).read_text()).upper(), where
        else:
            assert (where, what) in present, (where, what)


_SQL_COMMENT = re.compile(r"--[^\n]*")
#: A statement that sets a session-level setting: SET / RESET / SET SESSION (not SET LOCAL), at the
#: start of a statement (UPDATE … SET and ON CONFLICT … DO UPDATE SET are not settings).
_SESSION_SET = re.compile(r"(?:^|;)\s*(RESET\s+\w+|SET\s+(?!LOCAL\b)(?:SESSION\s+)?\w+)", re.IGNORECASE)
_SET_CONFIG_SESSION = re.compile(r"set_config\s*\([^)]*,\s*false\s*\)", re.IGNORECASE)
#: In Python: a string literal that starts with such a statement.
_PY_SESSION_SET = re.compile(r"""(?:["'])\s*(RESET\s+\w+|SET\s+(?!LOCAL\b)(?:SESSION\s+)?\w+)""")


def _strip_sql(text: str) -> str:
    return _SQL_COMMENT.sub("", text)


def _session_settings() -> list[tuple[str, str]]:
    found = []
    for p in sorted((ROOT / "sql" / "queries").rglob("*.sql")):
        text = _strip_sql(p.read_text())
        rel = str(p.relative_to(ROOT))
        found += [(rel, " ".join(m.group(1).upper().split()[:2])) for m in _SESSION_SET.finditer(text)]
        found += [(rel, m.group(0)) for m in _SET_CONFIG_SESSION.finditer(text)]
    for p in sorted((ROOT / "kbctl" / "store").rglob("*.py")):
        text = p.read_text()
        rel = str(p.relative_to(ROOT))
        found += [(rel, " ".join(m.group(1).upper().split()[:2])) for m in _PY_SESSION_SET.finditer(text)]
        found += [(rel, m.group(0)) for m in _SET_CONFIG_SESSION.finditer(text)]
    return found


def test_no_statement_depends_on_a_session_setting_a_worker_would_not_see():
    found = _session_settings()
    assert ("sql/queries/tenants/set_role.sql", "SET ROLE") in found  # the scan sees what it looks for
    unexplained = [f for f in found if f not in ALLOWED]
    assert not unexplained, f"session-level settings (use SET LOCAL in the statement's transaction): {unexplained}"


def test_the_scan_finds_a_session_set_and_a_session_set_config(tmp_path: Path):
    """The patterns are live: they catch what the rule forbids and pass what it allows."""
    bad = ["SET hnsw.ef_search = 40", "x; set work_mem TO '64MB'", "SET SESSION enable_sort = off", "RESET ROLE"]
    good = [
        "SET LOCAL hnsw.ef_search = 40",
        "UPDATE kbctl.runs SET status = 'x'",
        "ON CONFLICT (a) DO UPDATE SET b = 1",
    ]
    assert all(_SESSION_SET.search(s) for s in bad)
    assert not any(_SESSION_SET.search(s) for s in good)
    assert _SET_CONFIG_SESSION.search("SELECT set_config('kbctl.tenant', %s, false)")
    assert not _SET_CONFIG_SESSION.search("SELECT set_config('kbctl.tenant', %s, true)")
