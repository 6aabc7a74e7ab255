"""An HNSW build gets the profile's memory (``hnsw.build_memory_mb``) and the session gets its own back.

pgvector builds the graph in ``maintenance_work_mem`` and, past it, writes the rest to disk as it
goes, several times slower: with the server's default (64 MB) a million vectors build for much
longer than they need to. The setting must reach the build (which may run outside a transaction,
``CONCURRENTLY``) and must not outlive it on a pooled connection.
"""

from __future__ import annotations

import dataclasses

import kbctl
from kbctl.store.generations import create_generation, ensure_index, generations, hnsw_index_name


def _watch(conn):
    """Record (maintenance_work_mem, statement) for each statement the connection runs."""
    seen: list[tuple[str, str]] = []
    real = conn.execute

    def execute(q, *a, **kw):
        text = q.as_string(conn) if hasattr(q, "as_string") else str(q)
        mem = real("SHOW maintenance_work_mem").fetchone()[0]
        seen.append((mem, text))
        return real(q, *a, **kw)

    conn.execute = execute
    return seen, lambda: setattr(conn, "execute", real)


def test_an_index_build_runs_with_the_profiles_memory_and_the_session_gets_its_own_back(
    kb: kbctl.KnowledgeBase, tmp_path
):
    (tmp_path / "a.md").write_text("# A\n\nSomething to index.\n")
    kb.ingest([str(tmp_path)], "mem", verify=False)
    conn = kb.connection()
    ns = kb.namespace("mem")
    prof = kb.profile_for("mem")
    prof = dataclasses.replace(prof, hnsw=dataclasses.replace(prof.hnsw, build_memory_mb=321))
    before = conn.execute("SHOW maintenance_work_mem").fetchone()[0]
    gid = create_generation(conn, ns.id, ns.profile_id, prof, "halfvec", "shadow", index=False)
    gen = next(g for g in generations(conn, ns.id) if g.id == gid)
    seen, stop = _watch(conn)
    try:
        assert ensure_index(conn, gen, prof)
    finally:
        stop()
    builds = [mem for mem, text in seen if "CREATE INDEX" in text and hnsw_index_name(gid) in text]
    assert builds == ["321MB"], seen
    assert conn.execute("SHOW maintenance_work_mem").fetchone()[0] == before != "321MB"
    valid = conn.execute(
        "SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)", (f"kbctl.{hnsw_index_name(gid)}",)
    ).fetchone()
    assert valid == (True,)
