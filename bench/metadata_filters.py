"""Equality filters through kbctl.metadata_values (migration 024) against the plain scan, as the tenant.

A scratch home (embedded server, the ``hash-384`` profile: no model) gets three small documents,
then ``CHUNKS`` synthetic chunks inserted as the tenant with ``INSERT … SELECT`` (20 per document,
as the bench's loaders do; the triggers fill the index): ``source_type`` feed for 1%, file for 99%;
``tags`` a list (refund in 2%), ``year`` a number (2024 in 4%), ``rating`` 4.5 as a number or as
numeric text (10%), ``active`` a boolean (50%). Then ``VACUUM ANALYZE``, and per filter the median
of ``ROUNDS`` of: ``filtered_size`` at limit 1,001 (a search's), ``metadata_keys`` k=10 (the
metadata-only search), whole searches (``kb.search``: metadata-only, dense, hybrid), with
``kbctl.store.search.NARROWING = "never"`` (the plain reading, as before 024) and ``"auto"``
alternated round by round.

Then what migration 024's fill costs for the namespace (``fill_figures``), what the entries' cascade
costs its deletes (``delete_figures``), and ingest throughput: ``INGEST`` small records (hash profile) into fresh namespaces, runs
alternated with the insert trigger enabled and disabled (``ALTER TABLE … DISABLE TRIGGER``, as
the owner), chunks a second.

    .venv/bin/python bench/run.py --only filters       # part "filters": docs/benchmarks.md
    .venv/bin/python bench/metadata_filters.py [CHUNKS] [HOME]   # the same, figures as JSON lines
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import kbctl
from kbctl.search import parse_filters
from kbctl.store import search as store_search

ROUNDS = 9
INGEST = int(os.environ.get("KBCTL_BENCH_INGEST", "3000"))
FILTERS = ["source_type=feed", "tags=refund", "year=2024", "rating=4.5", "active=true", "source_type=file"]


def load(kb, n: int) -> int:
    kb.ingest_records(
        [
            {"id": f"seed{i}", "title": f"Seed {i}", "text": f"Notes on refunds and invoices, seed {i}."}
            for i in range(3)
        ],
        "metafilters",
    )
    conn = kb.connection()
    ns_id = conn.execute("SELECT id FROM kbctl.namespaces WHERE name = 'metafilters'").fetchone()[0]
    with conn.transaction():
        conn.execute(
            "INSERT INTO kbctl.documents (namespace_id, uri, source_uri, source_hash, title, source_type, content_hash,"
            " metadata, char_count, chunk_count)"
            " SELECT d.namespace_id, d.uri || '#' || g, d.source_uri || '#' || g, d.source_hash, d.title, d.source_type,"
            " d.content_hash, d.metadata, d.char_count, 20"
            " FROM (SELECT * FROM kbctl.documents WHERE namespace_id = %s ORDER BY id LIMIT 1) d"
            " CROSS JOIN generate_series(1, %s) g",
            (ns_id, n // 20),
        )
        conn.execute(
            "INSERT INTO kbctl.chunks (namespace_id, document_id, position, text, token_count, char_start, char_end,"
            " heading_path, page, content_hash, metadata, lex_length)"
            " SELECT s.namespace_id, d.id, p, s.text, s.token_count, s.char_start, s.char_end, s.heading_path, s.page,"
            " s.content_hash || ':' || d.id || ':' || p,"
            " s.metadata || jsonb_build_object("
            "   'source_type', CASE WHEN (d.id * 20 + p) %% 100 = 0 THEN 'feed' ELSE 'file' END,"
            "   'tags', CASE WHEN (d.id * 20 + p) %% 50 = 1 THEN '[\"refund\", \"billing\"]'::jsonb"
            '               ELSE \'["billing", "other"]\'::jsonb END,'
            "   'year', 2000 + (d.id * 20 + p) %% 25,"
            "   'rating', CASE (d.id * 20 + p) %% 20 WHEN 0 THEN to_jsonb(4.5) WHEN 1 THEN to_jsonb('4.50'::text)"
            "             ELSE to_jsonb(((d.id * 20 + p) %% 9)::numeric / 2 + 0.25) END,"
            "   'active', (d.id + p) %% 2 = 0)"
            " || CASE WHEN s.heading_path <> '{}' THEN '{}'::jsonb ELSE jsonb_build_object('heading_path', '[\"A\"]'::jsonb) END,"
            " s.lex_length"
            " FROM kbctl.documents d CROSS JOIN generate_series(0, 19) p"
            " CROSS JOIN (SELECT * FROM kbctl.chunks WHERE namespace_id = %s ORDER BY id LIMIT 1) s"
            " WHERE d.namespace_id = %s AND d.uri LIKE '%%#%%'",
            (ns_id, ns_id),
        )
        conn.execute(
            "UPDATE kbctl.lexical_stats SET chunk_count = (SELECT count(*) FROM kbctl.chunks WHERE namespace_id = %s)"
            " WHERE namespace_id = %s",
            (ns_id, ns_id),
        )
    kb.optimize()
    return ns_id


def filters_figures(kb, ns_id: int) -> list[dict]:
    """Per filter, the median of ``ROUNDS`` of each statement, plain and ``auto`` alternated."""
    conn = kb.connection()
    rows = []
    for flt in FILTERS:
        filters = parse_filters([flt])
        row: dict = {"filter": flt, "matches": store_search.filtered_size(conn, [ns_id], filters, 10**9)}
        runs = {
            "count": (store_search.filtered_size, conn, [ns_id], filters, 1001),
            "keys": (store_search.metadata_keys, conn, [ns_id], filters, 10),
            "metadata": (kb.search, "", "metafilters"),
            "dense": (kb.search, "refunds invoices", "metafilters"),
            "hybrid": (kb.search, "refunds invoices", "metafilters"),
        }
        ms: dict[str, list[float]] = {}
        for _ in range(ROUNDS + 1):  # the first round warms up
            for narrowing in ("never", "auto"):
                store_search.NARROWING = narrowing
                for name, (fn, *args) in runs.items():
                    # a bound method is a new object at each access: `is not` ran every search unfiltered
                    opts = {} if fn != kb.search else {"filters": [flt], "k": 10, "prf": "off"}
                    if name in ("dense", "hybrid"):
                        opts["mode"] = name
                    t0 = time.perf_counter()
                    fn(*args, **opts)
                    ms.setdefault(f"{name}_{narrowing}", []).append((time.perf_counter() - t0) * 1000)
        store_search.NARROWING = "auto"
        row.update({k: round(statistics.median(v[1:]), 1) for k, v in ms.items()})
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def ingest_figures(kb) -> list[dict]:
    from kbctl.store.db import Database

    owner = Database(kb.settings)
    out = []
    for i, enabled in enumerate((True, False, True, False)):
        with owner.connect() as c:
            c.execute(f"ALTER TABLE kbctl.chunks {'ENABLE' if enabled else 'DISABLE'} TRIGGER metadata_values_insert")
            c.commit()
        records = [
            {
                "id": f"r{i}-{j}",
                "title": f"Record {j}",
                "text": f"Record {j} of run {i}: refunds, invoices and accounts, line {j % 17}.",
                "metadata": {"team": ["red", "blue"][j % 2], "year": 2000 + j % 25, "tags": ["a", f"t{j % 7}"]},
            }
            for j in range(INGEST)
        ]
        t0 = time.perf_counter()
        kb.ingest_records(records, f"ingest{i}")
        s = time.perf_counter() - t0
        conn = kb.connection()
        n = conn.execute(
            "SELECT count(*) FROM kbctl.chunks c JOIN kbctl.namespaces n ON n.id = c.namespace_id WHERE n.name = %s",
            (f"ingest{i}",),
        ).fetchone()[0]
        row = {"triggers": enabled, "chunks": n, "seconds": round(s, 2), "chunks_per_s": round(n / s, 1)}
        out.append(row)
        print(json.dumps(row), flush=True)
    with owner.connect() as c:
        c.execute("ALTER TABLE kbctl.chunks ENABLE TRIGGER metadata_values_insert")
        c.commit()
    return out


def fill_figures(kb, ns_id: int) -> dict:
    """What migration 024's fill costs for the namespace: its entries made into a temporary table
    as the owner, then the table's two indexes (rolled back)."""
    from kbctl.store.db import Database

    with Database(kb.settings).connect() as c:
        t0 = time.perf_counter()
        c.execute(
            "CREATE TEMP TABLE fill AS SELECT c.namespace_id, e.key, e.value, c.id AS chunk_id FROM kbctl.chunks c"
            " CROSS JOIN LATERAL kbctl.metadata_entries(c.metadata) e WHERE c.namespace_id = %s",
            (ns_id,),
        )
        made = time.perf_counter() - t0
        c.execute("ALTER TABLE fill ADD PRIMARY KEY (namespace_id, key, value, chunk_id)")
        c.execute("CREATE INDEX ON fill (namespace_id, chunk_id)")
        row = {
            "entries": c.execute("SELECT count(*) FROM fill").fetchone()[0],
            "made_s": round(made, 1),
            "indexed_s": round(time.perf_counter() - t0 - made, 1),
            "table_mb": c.execute("SELECT pg_total_relation_size('kbctl.metadata_values') / 1e6").fetchone()[0],
            "chunks_mb": c.execute("SELECT pg_total_relation_size('kbctl.chunks') / 1e6").fetchone()[0],
        }
        c.rollback()
    print(json.dumps(row, default=float), flush=True)
    return row


def delete_figures(kb, ns_id: int, rounds: int) -> dict:
    """What the cascade to the namespace's entries costs its deletes, as the tenant: every document
    (``kbctl namespaces delete``'s statement) and the document of the most chunks (a replacement's),
    with the foreign key of kbctl.metadata_values (the entries cascade, one index scan of
    metadata_values_chunk a chunk) and with it dropped in the same transaction (as before 024),
    alternated, each rolled back; the entries deleted alone; and the entries deleted by namespace in
    one statement before every document (``namespace_first``: the foreign key's per-chunk statement
    then finds rows this transaction deleted). Medians, ms."""
    from psycopg import sql

    conn = kb.connection()
    role = conn.execute("SELECT current_user").fetchone()[0]
    fk = conn.execute(
        "SELECT conname FROM pg_constraint WHERE conrelid = 'kbctl.metadata_values'::regclass AND contype = 'f'"
    ).fetchone()[0]
    doc, doc_chunks = conn.execute(
        "SELECT document_id, count(*) FROM kbctl.chunks WHERE namespace_id = %s GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 1",
        (ns_id,),
    ).fetchone()
    documents = ("DELETE FROM kbctl.documents WHERE namespace_id = %s", (ns_id,))
    entries = ("DELETE FROM kbctl.metadata_values WHERE namespace_id = %s", (ns_id,))
    cases = {
        "namespace": [documents],
        "document": [("DELETE FROM kbctl.documents WHERE namespace_id = %s AND id = %s", (ns_id, doc))],
        "entries": [entries],
        "namespace_first": [entries, documents],
    }
    ms: dict[str, list[float]] = {}
    for r in range(rounds + 1):  # the first round warms up
        for case, stmts in cases.items():
            for cascade in (True,) if case in ("entries", "namespace_first") else (True, False):
                with conn.transaction(force_rollback=True):
                    if not cascade:
                        conn.execute("RESET ROLE")  # the table's owner drops its key
                        conn.execute(
                            sql.SQL("ALTER TABLE kbctl.metadata_values DROP CONSTRAINT {}").format(sql.Identifier(fk))
                        )
                        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
                    t0 = time.perf_counter()
                    for stmt, params in stmts:
                        conn.execute(stmt, params)
                    if r:
                        ms.setdefault(f"{case}_{'with' if cascade else 'without'}", []).append(
                            (time.perf_counter() - t0) * 1000
                        )
    row = {"doc_chunks": doc_chunks, **{k: round(statistics.median(v), 1) for k, v in ms.items()}}
    print(json.dumps(row), flush=True)
    return row


def run(env) -> str:
    """Part ``filters`` of ``bench/run.py``: the table for docs/benchmarks.md (100,000 chunks; a
    smoke pass 2,000, two rounds, 100 records an ingest run)."""
    from common import fresh_home, md_table
    from common import kbctl as kbctl_cli

    global ROUNDS, INGEST
    ROUNDS, INGEST = env.pick(ROUNDS, 2), env.pick(INGEST, 100)
    home = fresh_home(env, "-filters")
    load_before = os.getloadavg()
    kb = kbctl.open(home=home, profile="hash-384")
    try:
        ns_id = load(kb, env.pick(100_000, 2_000))
        rows = filters_figures(kb, ns_id)
        fill = fill_figures(kb, ns_id)
        deletes = delete_figures(kb, ns_id, env.pick(3, 1))
        ingest = ingest_figures(kb)
    finally:
        kb.close()
        kbctl_cli(env, "db", "stop", home=home, check=False)
    load_after = os.getloadavg()
    columns = ["filter", "matches"]
    for name in ("count", "keys", "metadata", "dense", "hybrid"):
        columns += [f"{name}_never", f"{name}_auto"]
    on = [r["chunks_per_s"] for r in ingest if r["triggers"]]
    off = [r["chunks_per_s"] for r in ingest if not r["triggers"]]
    return (
        md_table(rows, columns, digits=1)
        + f"\nms, medians of {ROUNDS} rounds; `never`: the plain reading (as before migration 024), `auto`:"
        " through `kbctl.metadata_values` where the rule chooses it. `count`: `filtered_size` at limit 1,001;"
        " `keys`: the metadata-only search's statement (k = 10); `metadata`, `dense`, `hybrid`: whole"
        " `kb.search` calls with the filter.\n\n"
        f"Migration 024's fill of this namespace: {fill['entries']:,} entries made in {fill['made_s']} s,"
        f" indexed in {fill['indexed_s']} s; `metadata_values` {float(fill['table_mb']):.0f} MB against"
        f" {float(fill['chunks_mb']):.0f} MB of chunks. Deletes, with the entries' cascade against without it"
        f" (the key dropped in the same transaction, as before 024; medians of {env.pick(3, 1)}, ms): every"
        f" document of the namespace (`kbctl namespaces delete`) {deletes['namespace_with']:,.0f} against"
        f" {deletes['namespace_without']:,.0f} (its entries deleted alone: {deletes['entries_with']:,.0f}; the"
        f" entries by namespace in one statement, then every document: {deletes['namespace_first_with']:,.0f}); one"
        f" document of {deletes['doc_chunks']} chunks (a replacement's delete) {deletes['document_with']} against"
        f" {deletes['document_without']}. Ingest of {INGEST:,} small records (hash profile),"
        f" runs alternated: {' / '.join(f'{x:.0f}' for x in on)} chunks/s with the insert trigger,"
        f" {' / '.join(f'{x:.0f}' for x in off)} without.\n\n"
        f"Load average (1, 5, 15 min) {', '.join(f'{x:.2f}' for x in load_before)} before the part,"
        f" {', '.join(f'{x:.2f}' for x in load_after)} after: the machine's {os.cpu_count()} cores"
        " may be shared, so compare `never` with `auto` in a row, measured alternately, rather than with"
        " another day's figures.\n"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("chunks", nargs="?", type=int, default=100_000, help="synthetic chunks (default 100000)")
    ap.add_argument("home", nargs="?", default=None, help="KBCTL_HOME (default a new temporary folder)")
    args = ap.parse_args()
    home = args.home or tempfile.mkdtemp(prefix="kbctl-metafilters-")
    kb = kbctl.open(home=home, profile="hash-384")
    try:
        t0 = time.perf_counter()
        ns_id = load(kb, args.chunks)
        print(json.dumps({"loaded_s": round(time.perf_counter() - t0, 1)}), flush=True)
        filters_figures(kb, ns_id)
        fill_figures(kb, ns_id)
        delete_figures(kb, ns_id, 3)
        ingest_figures(kb)
    finally:
        kb.close()


if __name__ == "__main__":
    main()
