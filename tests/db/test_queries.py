"""The named queries in ``sql/queries``: each loads, and each static one is valid SQL for the schema.

A static query is PREPAREd (parsed, analysed and planned against the real tables, without running);
a COPY is opened and closed with no rows in a rolled-back transaction. Templates are composed by
the store's own builders and EXPLAINed with the plans the lanes rely on.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from psycopg import sql

from kbctl.search import parse_filters
from kbctl.store import search as store_search
from kbctl.store.queries import load_query, sql_dir

QUERIES = sql_dir() / "queries"
NAMES = sorted(p.relative_to(QUERIES).with_suffix("").as_posix() for p in QUERIES.rglob("*.sql"))
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _body(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--")).strip()


def test_queries_ship_with_kbctl():
    assert len(NAMES) > 50 and "search/lexical_lane" in NAMES and "runs/start_run" in NAMES
    assert all(re.fullmatch(r"[a-z]+/[a-z0-9_]+", n) for n in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_each_query_loads_and_is_valid_sql(kb, name):
    text = load_query(name)
    assert load_query(name) is text  # read once
    body = _body(text)
    assert body and ";" not in body and "%" not in re.sub(r"%s|%%", "", body)  # placeholders only
    conn = kb.connection()
    if name.startswith(("migrations/", "tenants/")):  # the login's statements (the owner's), not a tenant role's
        conn = kb.db.connect()
    holes = set(_PLACEHOLDER.findall(text))
    if holes:  # a template: its dynamic parts are composed by the store (EXPLAINed below)
        composed = sql.SQL(text).format(**{h: sql.SQL("NULL") for h in holes}).as_string(conn)
        assert not _PLACEHOLDER.search(composed)
        return
    if body.startswith("ANALYZE "):  # maintenance cannot be PREPAREd: run it as the owner, who may
        kb.db.connect().execute(text)
        return
    if body.startswith(("RESET ", "SET ")):  # a setting (SET LOCAL, RESET ROLE): run it in a transaction
        with conn.transaction():
            conn.execute(text)
        return
    stage = re.match(r"documents/(?:copy|insert|clear_stage)_(\w+)$", name)
    if stage:  # a bulk load goes through the transaction's stage table: create it first
        with pytest.raises(_Rollback), conn.transaction():
            conn.execute(load_query(f"documents/stage_{stage.group(1)}"))
            if body.startswith("COPY "):
                with conn.cursor() as cur, cur.copy(text):
                    pass
            else:
                conn.execute(text)
            raise _Rollback
        return
    if body.startswith("COPY "):
        with pytest.raises(_Rollback), conn.transaction():
            with conn.cursor() as cur, cur.copy(text):
                pass
            raise _Rollback
        return
    if body.startswith("CREATE "):  # DDL cannot be PREPAREd: run it (IF NOT EXISTS) and roll it back
        assert "IF NOT EXISTS" in body
        with pytest.raises(_Rollback), conn.transaction():
            conn.execute(text)
            raise _Rollback
        return
    n = 0

    def number(_m):
        nonlocal n
        n += 1
        return f"${n}"

    prepared = re.sub(r"%s", number, text).replace("%%", "%")
    try:
        conn.execute(f"PREPARE kbctl_query_check AS {prepared}")
    finally:
        conn.execute("DEALLOCATE ALL")


class _Rollback(Exception):
    pass


@pytest.fixture
def ns(kb):
    from kbctl.chunk import chunk_document
    from kbctl.embed import get_embedder
    from kbctl.store import ensure_namespace, write_documents
    from kbctl.textutil.analyze import get_analyzer
    from kbctl.types import Block, Document, EmbeddedChunk

    conn, prof = kb.connection(), kb.settings.profile("hash-384")
    space = ensure_namespace(conn, "queries", kb.tenant, prof)
    doc = Document.from_blocks(
        "mem://q",
        "Q",
        [Block("Refunds take ten days."), Block("Invoices monthly.")],
        "markdown",
        {"tags": ["billing"], "year": 2024, "date": "2024-05-01"},
    )
    chunks = chunk_document(doc, prof)
    vecs = get_embedder(prof).embed_documents([c.embed_text for c in chunks])
    write_documents(
        conn,
        space,
        [(doc, [EmbeddedChunk(c, tuple(map(float, v))) for c, v in zip(chunks, vecs)])],
        get_analyzer("english"),
    )
    return space


FILTERS = ["", "tags=billing", "year>=2020", "date<=2024-12-31", "tags in billing,auth", "title~Q", "year!=1"]


@pytest.mark.parametrize("flt", FILTERS)
def test_dynamic_search_statements_explain(kb, ns, flt):
    conn = kb.connection()
    filters = parse_filters([flt] if flt else [])
    qvec = np.ones(ns.dimension, dtype=np.float32)
    for exact in (True, False):
        q, params, settings = store_search.dense_statement(
            [ns], qvec, 10, filters, ns.distance, exact=exact, ef_search=40, max_scan_tuples=20000
        )
        with conn.transaction():
            for s in settings:
                conn.execute(s)
            plan = "\n".join(r[0] for r in conn.execute(sql.SQL("EXPLAIN ") + q, params))
        assert (f"vectors_hnsw_g{ns.generation_id}" in plan) is (not exact)
    q, fparams = store_search.bm25_statement(filters)
    params = [
        2.2,
        1.2,
        0.75,
        0.75,
        10.0,
        ["refund"],
        [1.0],
        [ns.id],
        store_search.MIN_ID,
        store_search.MAX_ID,
        *fparams,
        10,
    ]
    assert "lexical_postings" in "\n".join(r[0] for r in conn.execute(sql.SQL("EXPLAIN ") + q, params))
    assert store_search.bm25_rows(conn, (q, fparams), [ns.id], ["refund"], [1.0], k1=1.2, b=0.75, avgdl=10.0, k=10)
    if filters:
        assert store_search.filtered_size(conn, [ns.id], filters, 100) >= 1
        assert store_search.metadata_keys(conn, [ns.id], filters, 10)
