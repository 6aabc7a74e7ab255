"""Store and search on the real embedded PostgreSQL, with the hash profile (no model to load)."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from kbctl.chunk import chunk_document
from kbctl.embed import get_embedder
from kbctl.errors import ProfileMismatchError
from kbctl.store import ensure_namespace, write_documents
from kbctl.textutil.analyze import get_analyzer
from kbctl.types import Block, Document, EmbeddedChunk


def _doc(uri, title, paras, **meta):
    return Document.from_blocks(uri, title, [Block(p) for p in paras], "markdown", meta)


def _write(kb, ns_name, docs, profile="hash-384", vectors=None):
    conn = kb.connection()
    prof = kb.settings.profile(profile)
    ns = ensure_namespace(conn, ns_name, kb.tenant, prof)
    emb = get_embedder(prof)
    items = []
    for d in docs:
        chunks = chunk_document(d, prof)
        vecs = vectors(len(chunks)) if vectors else emb.embed_documents([c.embed_text for c in chunks])
        items.append((d, [EmbeddedChunk(c, tuple(map(float, v))) for c, v in zip(chunks, vecs)]))
    write_documents(conn, ns, items, get_analyzer("english"))
    return ns


MODES = ("lexical", "dense", "hybrid")


def _sources(kb, ns: str, flt: str, mode: str | None) -> set[str]:
    """The sources a search of ``ns`` filtered by ``flt`` keeps: "notes refunds" in ``mode``, or the
    metadata-only search (an empty query) when ``mode`` is None; at most 10 hits."""
    if mode is None:
        return {h.source for h in kb.search("", ns, filters=[flt], k=10).hits}
    return {h.source for h in kb.search("notes refunds", ns, mode=mode, filters=[flt], k=10).hits}


DOCS = [
    _doc(
        "mem://refunds",
        "Refunds",
        [
            "Refunds are processed within 5 to 10 business days after approval.",
            "A refund goes back to the original payment method.",
        ],
        tags=["billing", "refund"],
        year=2024,
        date="2024-08-14T10:00:00Z",
    ),
    _doc(
        "mem://invoices",
        "Invoices",
        [
            "Invoices are issued on the first day of each month.",
            "Error LMN-4012 means the invoice could not be generated.",
        ],
        tags=["billing"],
        year=2023,
        date="2023-12-31T23:30:00Z",
    ),
    _doc(
        "mem://sso",
        "SSO setup",
        ["Configure SAML single sign-on from the admin console."],
        tags=["auth"],
        year=2025,
        date="2025-01-02",
    ),
]


def _counts(conn, ns_id):
    return conn.execute(
        "SELECT (SELECT count(*) FROM kbctl.documents WHERE namespace_id = %s), (SELECT count(*) FROM kbctl.chunks WHERE namespace_id = %s)",
        (ns_id, ns_id),
    ).fetchone()


def test_pin_refuses_other_dimension_and_other_model(kb):
    ns = _write(kb, "pinned", DOCS)
    conn = kb.connection()
    before = _counts(conn, ns.id)
    assert before[0] == 3
    # 768-d vectors into a 384-d namespace: refused by kbctl before writing...
    with pytest.raises(ProfileMismatchError, match="768-d vector cannot be stored"):
        _write(kb, "pinned", [_doc("mem://new", "New", ["some text"])], vectors=lambda n: np.ones((n, 768)))
    # ...and by the schema itself when kbctl's check is bypassed.
    with pytest.raises(psycopg.errors.CheckViolation), conn.transaction():
        cid = conn.execute(
            "INSERT INTO kbctl.chunks (namespace_id, document_id, position, text, token_count, char_start, char_end,"
            " content_hash) SELECT namespace_id, document_id, 99, 'x', 1, 0, 1, 'h'"
            " FROM kbctl.chunks WHERE namespace_id = %s LIMIT 1 RETURNING id",
            (ns.id,),
        ).fetchone()[0]
        conn.execute(
            "INSERT INTO kbctl.vectors (namespace_id, chunk_id, generation_id, document_id, profile_id, dimension,"
            " storage, embedding) SELECT namespace_id, id, %s, document_id, %s, %s, 'vector', %s::vector"
            " FROM kbctl.chunks WHERE namespace_id = %s AND id = %s",
            (ns.generation_id, ns.profile_id, ns.dimension, "[" + ",".join(["0.1"] * 768) + "]", ns.id, cid),
        )
    # A profile of another model cannot query (or write) it.
    with pytest.raises(ProfileMismatchError, match="pinned to profile 'hash-384'"):
        kb.search("refunds", "pinned", profile="minilm")
    assert _counts(conn, ns.id) == before


def test_rebinding_a_namespace_with_vectors_is_refused(kb):
    from kbctl.store import rebind_namespace

    _write(kb, "rebind", DOCS[:1])
    with pytest.raises(ProfileMismatchError) as e:
        rebind_namespace(kb.connection(), "rebind", kb.tenant, kb.settings.profile("minilm"))
    # the way there is a re-embed, not a bind to the profile it already has ("use --profile hash-384")
    assert e.value.hint == "move its vectors to the profile: kbctl reembed rebind --profile minilm --swap"


def test_replace_document_keeps_one_version(kb):
    ns = _write(kb, "replace", DOCS)
    _write(kb, "replace", [_doc("mem://refunds", "Refunds", ["Refunds now take 3 days."])])
    conn = kb.connection()
    texts = [
        r[0]
        for r in conn.execute(
            "SELECT c.text FROM kbctl.chunks c JOIN kbctl.documents d ON d.namespace_id = c.namespace_id AND d.id = c.document_id"
            " WHERE d.namespace_id = %s AND d.uri = 'mem://refunds'",
            (ns.id,),
        )
    ]
    assert texts == ["Refunds now take 3 days."]
    assert _counts(conn, ns.id)[0] == 3
    # postings and vocabulary follow the replacement
    df = dict(conn.execute("SELECT term, df FROM kbctl.lexical_vocab WHERE namespace_id = %s", (ns.id,)).fetchall())
    assert df.get("busi", 0) == 0 and df["refund"] == 1  # a term at 0 goes when a run ends


def test_lexical_lane_finds_exact_identifier_first(kb):
    _write(kb, "lex", DOCS)
    r = kb.search("LMN-4012", "lex", mode="lexical")
    assert r.hits and r.hits[0].source == "mem://invoices"
    assert r.hits[0].lanes["lexical"]["rank"] == 1


def test_bm25_scores_match_the_formula(kb):
    ns = _write(kb, "bm25", DOCS)
    r = kb.search("refunds", "bm25", mode="lexical")
    conn = kb.connection()
    n, total = conn.execute(
        "SELECT chunk_count, total_length FROM kbctl.lexical_stats WHERE namespace_id = %s", (ns.id,)
    ).fetchone()
    tf, dl = conn.execute(
        "SELECT tf, dl FROM kbctl.lexical_postings WHERE namespace_id = %s AND term = 'refund' AND chunk_id = %s",
        (ns.id, r.hits[0].chunk_id),
    ).fetchone()
    df = conn.execute(
        "SELECT df FROM kbctl.lexical_vocab WHERE namespace_id = %s AND term = 'refund'", (ns.id,)
    ).fetchone()[0]
    k1, b = 0.9, 0.4
    idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
    expected = idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / (total / n)))
    assert r.hits[0].score == pytest.approx(expected, rel=1e-5)


def test_typo_is_corrected_and_reported(kb):
    _write(kb, "typo", DOCS)
    r = kb.search("refnds", "typo", mode="lexical")
    assert r.details.get("corrections") == {"refnd": "refund"}
    assert r.hits and r.hits[0].source == "mem://refunds"


def test_strategies(kb):
    _write(kb, "strat", DOCS)
    assert kb.search("", "strat").strategy == "no_match"
    assert kb.search("the and of", "strat").strategy == "no_match"
    assert kb.search("help", "strat").strategy == "needs_clarification"
    m = kb.search("", "strat", filters=["tags=billing"])
    assert m.strategy == "metadata" and all(h.score is None for h in m.hits)
    assert {h.source for h in m.hits} == {"mem://refunds", "mem://invoices"}
    assert kb.search("refund", "strat").strategy == "content"
    h = kb.search("refund", "strat", filters=["year>=2024"])
    assert h.strategy == "hybrid" and {x.source for x in h.hits} <= {"mem://refunds", "mem://sso"}


@pytest.mark.parametrize(
    "flt, expected",
    [
        ("tags=billing", {"mem://refunds", "mem://invoices"}),
        ("tags!=billing", {"mem://sso"}),
        ("year>=2024", {"mem://refunds", "mem://sso"}),
        ("year<2024", {"mem://invoices"}),
        ("uri~mem://re", {"mem://refunds"}),
        # a prefix of a list's item (tags, heading_path), never of the list's JSON text
        ("tags~bill", {"mem://refunds", "mem://invoices"}),
        ("tags~ref", {"mem://refunds"}),
        ('tags~["', set()),
        ("tags~[", set()),
        ("tags in auth,refund", {"mem://refunds", "mem://sso"}),
        ("title=SSO setup", {"mem://sso"}),
        # a bare date is the whole day; a datetime with an offset is compared in UTC
        ("date<=2024-08-14", {"mem://refunds", "mem://invoices"}),
        ("date>2024-08-14", {"mem://sso"}),
        ("date<2024-01-01", {"mem://invoices"}),
        ("date>=2024-01-01T00:30:00+01:00", {"mem://refunds", "mem://invoices", "mem://sso"}),
        ("date<2024-08-14T12:00:00+02:00", {"mem://invoices"}),
    ],
)
def test_filters_in_every_mode(kb, flt, expected):
    _write(kb, "filt", DOCS)
    for mode in ("lexical", "dense", "hybrid"):
        r = kb.search("refunds invoices sign-on", "filt", mode=mode, filters=[flt], k=10)
        assert {h.source for h in r.hits} == expected, (mode, flt)


AUTHORS = [
    _doc("mem://priya", "Priya", ["Notes on refunds by Priya."], author="Priya Raman"),
    _doc("mem://comma", "Comma", ["Notes on refunds, surname first."], author="Raman, Priya"),
    _doc("mem://quoted", "Quoted", ["Notes on refunds in quotes."], author='"Quoted"'),
    _doc("mem://empty", "Empty", ["Notes on refunds by nobody named."], author=""),
    _doc("mem://null", "Null", ["Notes on refunds by someone unknown."], author=None),
    _doc("mem://none", "None", ["Notes on refunds with no author field."]),
]
_ALL = {"mem://priya", "mem://comma", "mem://quoted", "mem://empty", "mem://null", "mem://none"}


@pytest.mark.parametrize(
    "flt, expected",
    [
        # the quotes an agent or a shell user writes around a value are its quoting
        ('author="Priya Raman"', {"mem://priya"}),
        ("author='Priya Raman'", {"mem://priya"}),
        ("author=Priya Raman", {"mem://priya"}),
        ('author~"Priya "', {"mem://priya"}),
        ('author="""Quoted"""', {"mem://quoted"}),
        ("author='\"Quoted\"'", {"mem://quoted"}),
        ('author in "Raman, Priya",Priya Raman', {"mem://comma", "mem://priya"}),
        # the empty value
        ('author=""', {"mem://empty"}),
        ('author!=""', _ALL - {"mem://empty"}),
        ('author in "","Raman, Priya"', {"mem://empty", "mem://comma"}),
        # a key with a value (the empty text is one), and a key with none (missing or null)
        ("author", _ALL - {"mem://null", "mem://none"}),
        ("!author", {"mem://null", "mem://none"}),
        # null is JSON null, as true and false are booleans
        ("author=null", {"mem://null"}),
        ("author!=null", _ALL - {"mem://null"}),
        ("author in null,Priya Raman", {"mem://null", "mem://priya"}),
        ("page=null", _ALL),  # none of these chunks is on a PDF page
        ("!page", _ALL),
        ("page", set()),
    ],
)
def test_quoted_empty_and_missing_values_in_every_mode(kb, flt, expected):
    _write(kb, "authors", AUTHORS)
    for mode in (*MODES, None):
        assert _sources(kb, "authors", flt, mode) == expected, (mode or "metadata", flt)


LISTS = [
    _doc("mem://scalar", "Scalar", ["Notes on refunds, one of each."], k=None, b=True, n=1, t="a"),
    _doc("mem://listed", "Listed", ["Notes on refunds, each in a list."], k=[None], b=[True], n=[1], t=["a"]),
    _doc("mem://mixed", "Mixed", ["Notes on refunds, a list with more."], k=["x", None], b=[False, True], n=[2, 1]),
    _doc("mem://other", "Other", ["Notes on refunds, other values."], k=["x"], b=[False], n=[2], t=["b"]),
    _doc("mem://bare", "Bare", ["Notes on refunds, no such keys."]),
]
_LISTED = {"mem://scalar", "mem://listed", "mem://mixed"}
_LISTS = _LISTED | {"mem://other", "mem://bare"}


@pytest.mark.parametrize(
    "flt, expected",
    [
        # a list matches when an item of it does: null as the booleans, numbers and texts
        ("b=true", _LISTED),
        ("n=1", _LISTED),
        ("t=a", {"mem://scalar", "mem://listed"}),
        ("k=null", _LISTED),
        ("k!=null", _LISTS - _LISTED),
        ("k in null,y", _LISTED),
        ("k in x", {"mem://mixed", "mem://other"}),
        ("b!=true", _LISTS - _LISTED),
        ("!k", {"mem://scalar", "mem://bare"}),  # has no value: missing or null, not a list holding null
    ],
)
def test_a_list_matches_null_as_it_matches_its_other_items(kb, flt, expected):
    _write(kb, "lists", LISTS)
    for mode in (*MODES, None):
        assert _sources(kb, "lists", flt, mode) == expected, (mode or "metadata", flt)


NUMBERS = [
    # front matter `year: "2024"`, an HTML meta or a document property: numbers written as text
    _doc("mem://text", "Text", ["Notes on refunds, numbers as text."], year="2024", price="9.50", v=" 7"),
    _doc("mem://json", "Json", ["Notes on refunds, numbers as numbers."], year=2023, price=12, v=8),
    _doc("mem://word", "Word", ["Notes on refunds, words."], year="last year", price="1e999999", v="0x10"),
]


@pytest.mark.parametrize(
    "flt, expected",
    [
        # a comparison with a number reads a text that is a number as that number (`=` always matched it)
        ("year>=2024", {"mem://text"}),
        ("year<2024.5", {"mem://text", "mem://json"}),
        ("year=2024", {"mem://text"}),
        ("price<10", {"mem://text"}),
        ("price>=9.5", {"mem://text", "mem://json"}),
        # a text that is not a decimal number (spaces, hex, an exponent numeric cannot hold) is not one
        ("v>=0", {"mem://json"}),
        ("price>1e6", set()),
    ],
)
def test_a_number_written_as_text_compares_as_a_number(kb, flt, expected):
    _write(kb, "numtext", NUMBERS)
    for mode in (*MODES, None):
        assert _sources(kb, "numtext", flt, mode) == expected, (mode or "metadata", flt)


EQUALS = [
    _doc(
        "mem://a",
        "A",
        ["Notes on refunds, the first."],
        rating=4.5,
        year=2024,
        reviewers=[1, 2],
        tags=["beta", "zeta"],
        active=True,
        label="True",
    ),
    # front matter, an HTML meta or a document property: numbers written as text, and a float year
    _doc("mem://b", "B", ["Notes on refunds, the second."], rating="4.50", year=2024.0, reviewers=["3"], active=False),
    _doc("mem://c", "C", ["Notes on refunds, the third."], rating=4.25, year="2023", reviewers=[], active="True"),
    _doc("mem://d", "D", ["Notes on refunds, the fourth."], rating="4.5 stars", year="MMXXIV", reviewers="two"),
]
_EQUALS = {"mem://a", "mem://b", "mem://c", "mem://d"}


@pytest.mark.parametrize(
    "flt, expected",
    [
        # a value that reads as a number equals numerically equal numbers and numeric texts
        ("rating=4.50", {"mem://a", "mem://b"}),
        ("rating=4.5", {"mem://a", "mem://b"}),
        ("rating=+4.500", {"mem://a", "mem://b"}),
        ("rating!=4.5", {"mem://c", "mem://d"}),
        ("rating in 1,4.50", {"mem://a", "mem://b"}),
        ("rating=4.5 stars", {"mem://d"}),  # a text still equals its text
        ("year=2024.0", {"mem://a", "mem://b"}),
        ("year=2024", {"mem://a", "mem://b"}),
        ("year in 2023.0,1999", {"mem://c"}),
        ("year!=2024.0", {"mem://c", "mem://d"}),
        ("reviewers=3.0", {"mem://b"}),
        ("reviewers!=1.0", {"mem://b", "mem://c", "mem://d"}),
        # a comparison matches a list when an item of it does, as = does
        ("reviewers>0", {"mem://a", "mem://b"}),
        ("reviewers>=3", {"mem://b"}),
        ("reviewers<2", {"mem://a"}),
        ("reviewers<0", set()),
        ("tags>y", {"mem://a"}),
        ("tags<c", {"mem://a"}),
        ("tags<a", set()),  # never the list's JSON text ('["beta", …' sorts before "a")
        # True, TRUE and False are the booleans as true and false are; a text still equals its text
        ("active=True", {"mem://a", "mem://c"}),
        ("active=TRUE", {"mem://a"}),
        ("active=true", {"mem://a"}),
        ("active=False", {"mem://b"}),
        ("active!=True", {"mem://b", "mem://d"}),
        ("active in FALSE,yes", {"mem://b"}),
        ("label=True", {"mem://a"}),
        ("label=true", set()),
    ],
)
def test_equality_reads_numbers_and_booleans_and_comparisons_read_lists(kb, flt, expected):
    _write(kb, "equals", EQUALS)
    for mode in (*MODES, None):
        assert _sources(kb, "equals", flt, mode) == expected, (mode or "metadata", flt)


def test_an_impossible_date_in_a_filter_is_a_usage_error(kb):
    from kbctl.errors import UsageError

    _write(kb, "baddate", DOCS)
    with pytest.raises(UsageError, match="not a valid date"):
        kb.search("refunds", "baddate", filters=["date>=2024-02-30"])


def test_namespace_isolation_in_every_mode(kb):
    _write(kb, "iso_a", DOCS[:2])
    _write(kb, "iso_b", DOCS[2:])
    for mode in ("lexical", "dense", "hybrid"):
        a = kb.search("refunds invoices single sign-on SAML", "iso_a", mode=mode)
        assert a.hits and all(h.namespace == "iso_a" for h in a.hits)
        assert "mem://sso" not in {h.source for h in a.hits}
    both = kb.search("SAML refunds", ["iso_a", "iso_b"], mode="hybrid")
    assert {h.namespace for h in both.hits} == {"iso_a", "iso_b"}


def test_retriever_is_bound_to_its_namespace(kb):
    from kbctl.errors import KbctlError

    _write(kb, "bound", DOCS)
    r = kb.retriever("bound")
    assert r.search("refunds").hits[0].namespace == "bound"
    with pytest.raises(KbctlError):
        r.search("refunds", namespace="other")


def test_split_lexical_lane_equals_the_single_query(kb, monkeypatch):
    """Scored in two halves of the chunk ids on two connections, the top k is the single query's."""
    from concurrent.futures import ThreadPoolExecutor

    import kbctl.search.lanes as lanes

    words = "refund invoice billing payment card account plan upgrade error limit".split()
    docs = [
        _doc(
            f"mem://d{i}",
            f"Doc {i}",
            [" ".join(words[(i * j) % len(words)] for j in range(1, 4 + i % 7)) + f" item{i}"],
        )
        for i in range(60)
    ]
    ns = _write(kb, "split", docs)
    conn, prof = kb.connection(), kb.settings.profile("hash-384")
    terms = {"refund": 1.0, "invoice": 1.0, "billing": 2.0, "limit": 1.0}
    single = lanes.lexical_lane(conn, [ns], terms, 25, (), prof)
    other = kb.db.connect()
    from kbctl.store import tenants

    tenants.enter(other, tenants.tenant_role(other, kb.tenant))  # the side connection acts as the tenant, as kb's do
    calls = []

    def helper(fn):
        calls.append(1)
        return pool.submit(fn, other)

    monkeypatch.setattr(lanes, "SPLIT_POSTINGS", 0)
    with ThreadPoolExecutor(1) as pool:
        split = lanes.lexical_lane(conn, [ns], terms, 25, (), prof, helper=helper)
    other.close()
    assert calls == [1]  # it really split
    assert len(single) == 25
    assert [(h.chunk_id, h.rank) for h in split] == [(h.chunk_id, h.rank) for h in single]
    assert [h.score for h in split] == pytest.approx([h.score for h in single], rel=1e-9)
    # the two halves hold chunks of both sides of the median
    mid = lanes._median_chunk(
        conn,
        [ns.id],
        conn.execute("SELECT chunk_count FROM kbctl.lexical_stats WHERE namespace_id = %s", (ns.id,)).fetchone()[0],
    )
    assert any(h.chunk_id <= mid for h in single) and any(h.chunk_id > mid for h in single)


def test_hybrid_runs_the_dense_lane_on_its_own_connection(kb):
    _write(kb, "parallel", DOCS)
    r = kb.search("refund to the original payment method", "parallel", mode="hybrid")
    assert r.hits and r.hits[0].source == "mem://refunds"
    assert set(r.hits[0].lanes) == {"lexical", "dense"}
    assert "dense" in kb.session.sides  # the dense lane ran on the side connection
    kb.close()
    assert kb.session.sides == {}


@pytest.mark.parametrize("exact", [False, True])
def test_dense_path_reported_is_the_plan_that_runs(kb, exact):
    """ "hnsw" orders by the profile's HNSW index, "exact" scans the namespace's rows and sorts them.

    The namespace is tiny, so on cost alone the planner would sort it for the hnsw path too: the
    statement's own settings must keep the index.
    """
    from kbctl.search import parse_filters
    from kbctl.search.lanes import dense_lane, dense_statement

    ns = _write(kb, "plans", DOCS)
    conn, prof = kb.connection(), kb.profile_for("plans")
    qvec = get_embedder(prof).embed_query("refund")
    q, params, settings = dense_statement([ns], qvec, 100, parse_filters([]), prof, exact=exact)
    with conn.transaction():
        for stmt in settings:
            conn.execute(stmt)
        plan = "\n".join(r[0] for r in conn.execute(psycopg.sql.SQL("EXPLAIN ") + q, params))
    index = f"vectors_hnsw_g{ns.generation_id}"
    if exact:
        assert index not in plan and "Sort" in plan
    else:
        assert index in plan and "Sort" not in plan
    hits, path = dense_lane(conn, [ns], qvec, 100, parse_filters([]), prof, exact_threshold=10**9 if exact else 0)
    assert path == ("exact" if exact else "hnsw") and len(hits) == _counts(conn, ns.id)[1]


def test_optimize_compacts_the_postings_index_after_a_mass_delete(kb):
    from kbctl.store.admin import optimize
    from kbctl.store.namespaces import delete_namespace

    rng = np.random.default_rng(7)
    words = [f"w{i:05d}x" for i in range(3000)]
    docs = [_doc(f"mem://bulk/{i}", f"Bulk {i}", [" ".join(rng.choice(words, 60))]) for i in range(400)]
    _write(kb, "bulk", docs)
    conn = kb.connection()
    index_size = "SELECT pg_relation_size('kbctl.lexical_postings_pkey')"
    grown = conn.execute(index_size).fetchone()[0]
    delete_namespace(conn, "bulk", kb.tenant)
    admin = kb.db.connect()  # the login (owner, superuser embedded): a tenant's role may not VACUUM
    rows = {r["table"]: r for r in optimize(admin, reindex=True)}
    assert {"chunks", "documents", "lexical_postings", "lexical_vocab"} <= set(rows)
    assert "schema_migrations" not in rows
    assert conn.execute(index_size).fetchone()[0] < grown  # the pages the namespace held are given back
    assert rows["lexical_postings"]["bytes_after"] < rows["lexical_postings"]["bytes_before"]
    with admin.transaction(), pytest.raises(Exception, match="autocommit"):
        optimize(admin)


def test_db_optimize_checks_the_migrations_once(kb, monkeypatch):
    """``kb.admin.optimize()`` repacks and vacuums on one admin connection: the migration check (a
    lock and a read of the ledger) runs once, not once per step."""
    _write(kb, "opt_once", DOCS)
    db = kb.session.db
    calls: list[int] = []
    migrate = db.migrate

    def counted(*a, **k):
        calls.append(1)
        return migrate(*a, **k)

    monkeypatch.setattr(db, "migrate", counted)
    rows = kb.admin.optimize()
    assert rows and len(calls) == 1


def test_a_small_filtered_slice_of_an_index_still_gets_k_rows(kb):
    """An iterative HNSW scan that stops early (max_scan_tuples) is finished by an exact scan: a
    filter keeps a small slice of a generation's index, far from the query."""
    import dataclasses

    from kbctl.search import parse_filters
    from kbctl.search.lanes import dense_lane

    rng = np.random.default_rng(3)
    words = [f"v{i:04d}q" for i in range(2000)]
    others = [f"s{i:04d}z" for i in range(2000)]  # far from the query: its first index candidates are all "big"
    # 1000 "big" documents (3000 took 6 s; 1000 still end the stingy scan early: "hnsw+exact")
    docs = [_doc(f"mem://big/{i}", f"Big {i}", [" ".join(rng.choice(words, 8))], part="big") for i in range(1000)]
    docs += [
        _doc(f"mem://small/{i}", f"Small {i}", [" ".join(rng.choice(others, 40))], part="small") for i in range(30)
    ]
    ns = _write(kb, "sliced", docs)
    conn, prof = kb.connection(), kb.profile_for("sliced")
    kb.db.connect().execute("ANALYZE kbctl.chunks, kbctl.vectors")  # the same statistics in any order of tests
    small = parse_filters(["part=small"])
    n_small = conn.execute(
        "SELECT count(*) FROM kbctl.chunks WHERE namespace_id = %s AND metadata->>'part' = 'small'", (ns.id,)
    ).fetchone()[0]
    qvec = get_embedder(prof).embed_query("v0001q v0002q")
    stingy = dataclasses.replace(prof, hnsw=dataclasses.replace(prof.hnsw, max_scan_tuples=1, ef_search=10))
    assert n_small >= 20
    # a threshold below the slice's size (the filtered size is counted up to threshold + 1)
    hits, path = dense_lane(conn, [ns], qvec, 10, small, stingy, exact_threshold=20)
    # which path finishes depends on how far the stingy scan got before stopping (the plan); either
    # way k rows come back, and the same as an exact scan's
    assert path in ("hnsw+exact", "hnsw") and len(hits) == 10
    exact, _ = dense_lane(conn, [ns], qvec, 10, small, stingy, exact_threshold=10**9)
    assert [h.chunk_id for h in hits] == [h.chunk_id for h in exact]
    # with room to scan, the index alone fills k
    hits, path = dense_lane(conn, [ns], qvec, 10, small, prof, exact_threshold=20)
    assert path == "hnsw" and len(hits) == 10


def test_vectors_stay_in_the_row_when_the_text_is_long(kb):
    """Migrations 005 and 011: a chunk's vector is stored inline in its row of kbctl.vectors (MAIN,
    never TOAST), so the exact path and the HNSW path's distances read no TOAST pages; the long
    text is compressed or moved out of the chunk's row."""
    rng = np.random.default_rng(11)
    long_text = " ".join(f"word{i}" for i in rng.integers(0, 10**6, 400))  # ~4.5 kB, well past the 2 kB threshold
    ns = _write(kb, "inline", [_doc("mem://long", "Long", [long_text])])
    conn = kb.connection()
    rows = conn.execute(
        "SELECT pg_column_toast_chunk_id(v.embedding) IS NULL, pg_column_size(v.embedding),"
        " pg_column_size(c.text) < length(c.text), octet_length(c.text)"
        " FROM kbctl.chunks c JOIN kbctl.vectors v ON v.namespace_id = c.namespace_id AND v.chunk_id = c.id"
        " WHERE c.namespace_id = %s",
        (ns.id,),
    ).fetchall()
    # every vector inline, whatever its text
    assert rows and all(inline and size >= 384 * 4 for inline, size, _, _ in rows)
    # a chunk's text past the 2 kB threshold is compressed or moved out (the chunker may leave a
    # short last piece of the long line, which PostgreSQL has no reason to squeeze)
    long_rows = [squeezed for _, _, squeezed, n in rows if n > 2048]
    assert long_rows and all(long_rows), rows


class _Recording:
    """A connection that records the statements (and parameters) that touch the vocabulary."""

    def __init__(self, conn):
        self._conn, self.vocab = conn, []

    def execute(self, sql, params=None, **kw):
        if "lexical_vocab" in str(sql):
            self.vocab.append((sql, params))
        return self._conn.execute(sql, params, **kw)

    def __getattr__(self, name):
        return getattr(self._conn, name)


def _vocab_rows_read(conn, statements) -> int:
    """Rows of ``lexical_vocab`` the statements read (scans, and rows a join or filter threw away),
    each run with EXPLAIN ANALYZE in a transaction that is rolled back."""

    def walk(node):
        n = 0
        if node.get("Relation Name") == "lexical_vocab" and "Scan" in node["Node Type"]:
            n += (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node["Actual Loops"]
        n += node.get("Rows Removed by Join Filter", 0) * node.get("Actual Loops", 1)
        return n + sum(walk(child) for child in node.get("Plans", []))

    total = 0
    with conn.transaction(force_rollback=True):
        for sql, params in statements:
            (plan,) = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params).fetchone()[0]
            total += walk(plan["Plan"])
    return total


def test_replacing_documents_reads_only_their_terms_of_the_vocabulary(kb):
    """Replacing documents updates the vocabulary rows of their terms: the work follows the batch,
    not the namespace's vocabulary, whatever the planner's statistics say. (A re-import of a large
    namespace replaces every document, batch by batch; a plan that read the whole vocabulary for
    each batch held one write for over 10 minutes in CI.)"""
    from kbctl.store import documents

    docs = [
        _doc(f"mem://many/{i}", f"Doc {i}", [f"alpha{i}x beta{i}x gamma{i}x delta{i}x shared words"])
        for i in range(600)
    ]
    ns = _write(kb, "vocab", docs)
    conn = kb.connection()
    vocabulary = conn.execute("SELECT count(*) FROM kbctl.lexical_vocab WHERE namespace_id = %s", (ns.id,)).fetchone()[
        0
    ]
    assert vocabulary > 2000
    rec = _Recording(conn)
    with conn.transaction(force_rollback=True):
        documents._delete(rec, ns, ["mem://many/1", "mem://many/2"])
    assert rec.vocab, "replacing documents must update the vocabulary"
    read = _vocab_rows_read(conn, rec.vocab)
    assert read <= 50, f"{read} vocabulary rows read to replace 2 documents of ~8 terms each"
    # the counts are right after a real replacement; a term no document holds is at 0 until the
    # run ends, and no reader sees it meanwhile
    _write(kb, "vocab", [_doc("mem://many/1", "Doc 1", ["alpha1x refreshed"])])
    df = dict(conn.execute("SELECT term, df FROM kbctl.lexical_vocab WHERE namespace_id = %s", (ns.id,)).fetchall())
    assert df["beta1x"] == 0 and df["alpha1x"] == 1 and df["refresh"] == 1 and df["share"] == 599
    assert not kb.search("beta1x", "vocab", mode="lexical").hits
    assert "beta1x" not in kb.search("beta1xx", "vocab", mode="lexical").details.get("corrections", {}).values()
    assert documents.drop_unused_vocabulary(conn, ns) == 3  # beta1x, gamma1x, delta1x
    left = dict(conn.execute("SELECT term, df FROM kbctl.lexical_vocab WHERE namespace_id = %s", (ns.id,)).fetchall())
    assert not {"beta1x", "gamma1x", "delta1x"} & set(left) and min(left.values()) > 0


def test_an_ingest_run_leaves_no_unused_terms(kb, tmp_path):
    """Terms a re-import leaves at 0 are dropped when the run ends."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nOrchids bloom in spring.\n")
    (folder / "b.md").write_text("# B\n\nCacti bloom rarely.\n")
    kb.ingest([str(folder)], namespace="unused")
    (folder / "a.md").write_text("# A\n\nTulips bloom in spring.\n")
    (folder / "b.md").unlink()
    kb.ingest([str(folder)], namespace="unused", sync=True)
    ns = kb.namespace("unused")
    df = dict(
        kb.connection().execute("SELECT term, df FROM kbctl.lexical_vocab WHERE namespace_id = %s", (ns.id,)).fetchall()
    )
    assert "orchid" not in df and "cacti" not in df and df["tulip"] == 1 and df["bloom"] == 1, df
    assert min(df.values()) > 0


def test_a_search_of_namespaces_of_two_profiles_says_so(kb):
    """Namespaces pinned to different profiles are searched apart and merged by rank (session 47:
    tests/db/test_mixed_profiles.py); with one profile named, no profile can rank them all, so the
    refusal names each namespace's profile and says to leave the profile out."""
    _write(kb, "one", DOCS[:1])
    kb.create_namespace("other", profile="minilm")
    result = kb.search("refunds", ["one", "other"], mode="lexical")
    assert result.hits and {h.namespace for h in result.hits} == {"one"}
    assert "namespaces of 2 profiles searched apart, merged by rank" in result.notes
    with pytest.raises(ProfileMismatchError, match=r"'one' \(hash-384\) and 'other' \(minilm\)") as e:
        kb.search("refunds", ["one", "other"], mode="lexical", profile="hash-384")
    assert "leave out the profile" in (e.value.hint or "")


def test_a_profile_changed_under_its_own_name_gets_a_hint_that_can_work(kb, tmp_path):
    """A namespace pinned to profile P refused P once P's settings changed (another dimension, say):
    the hint said "use --profile P", the profile already in use. It now says P changed and how to
    move the namespace to P's new settings."""
    import kbctl

    _write(kb, "changed", DOCS)
    cfg = tmp_path / "kbctl.toml"
    cfg.write_text('[profiles.hash-384]\nembedder = "hash"\nmodel = "hash"\ndimension = 256\n')
    changed = kbctl.open(home=kb.settings.database.home, tenant=kb.tenant, config=cfg)
    try:
        with pytest.raises(ProfileMismatchError) as e:
            changed.search("refunds", "changed", profile="hash-384")
    finally:
        changed.close()
    assert "changed since" in str(e.value)
    assert e.value.hint is not None and "use --profile hash-384" not in e.value.hint
    assert "kbctl reembed changed --profile hash-384" in e.value.hint


@pytest.mark.parametrize(
    "setting,said",
    [
        ('query_prefix = "query: "', "query_prefix '' -> 'query: '"),
        ("dimension = 256", "dimension 384 -> 256"),
        ('revision = "3"\nmax_tokens = 512', "revision '2' -> '3', max_tokens 256 -> 512"),
    ],
)
def test_a_pinned_profile_changed_in_the_config_names_what_changed_and_ingest_writes_nothing(
    kb, tmp_path, setting, said
):
    """The refusal showed model, dimension and two fingerprints: a changed query prefix read
    '(hash, 384-d, fingerprint a) … (hash, 384-d, fingerprint b)', which says nothing of what to
    restore. It now names each setting of the pin that changed, old and new."""
    import kbctl

    _write(kb, "pinned", DOCS)
    runs = kb.runs("pinned")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nSomething new about refunds.\n")
    cfg = tmp_path / "kbctl.toml"
    cfg.write_text(f"[profiles.hash-384]\n{setting}\n")
    changed = kbctl.open(home=kb.settings.database.home, tenant=kb.tenant, config=cfg, profile="hash-384")
    try:
        with pytest.raises(ProfileMismatchError) as e:
            changed.ingest([str(folder)], "pinned", verify=False)
        assert said in str(e.value), str(e.value)
        assert "kbctl reembed pinned --profile hash-384" in (e.value.hint or "")
        assert changed.search("refunds", "pinned", mode="lexical").hits  # search still answers
    finally:
        changed.close()
    info = next(n for n in kb.namespaces() if n["name"] == "pinned")
    assert kb.runs("pinned") == runs and info["documents"] == len(DOCS)
