"""Verify checks the data, not the index's recall: a healthy namespace whose HNSW search misses
sampled chunks passes with a recall warning (exit 0, ledger ``ok``); a real data problem fails
(exit 3) and the run ledger says ``failed_verify``.

HNSW misses are forced, not waited for: the ``hash-384-sparse`` profile is ``hash-384``'s embedder
with the sparsest graph pgvector builds (m = 2, ef_construction = 4) searched with ef_search = 1
and max_scan_tuples = 1, and its documents are replaced a few times. Its own query prefix gives it
its own fingerprint, so its index is built with those settings.
"""

from __future__ import annotations

import json
import random

import pytest

import kbctl
from tests.conftest import main_in_process

SPARSE = """
[profiles.hash-384-sparse]
embedder = "hash"
model = "hash"
dimension = 384
query_prefix = "verify-honest: "

[profiles.hash-384-sparse.hnsw]
m = 2
ef_construction = 4
ef_search = 1
max_scan_tuples = 1
"""


@pytest.fixture
def config(tmp_path):
    p = tmp_path / "kbctl.toml"
    p.write_text(SPARSE)
    return p


@pytest.fixture
def sparse(kb_home, tenant, config):
    k = kbctl.open(home=kb_home, tenant=tenant, profile="hash-384-sparse", config=config)
    yield k
    k.close()


@pytest.fixture
def run_main(kb_home, tenant, config, capsys):
    def run(*args):
        options = ["--home", str(kb_home), "--tenant", tenant, "--config", str(config), "--profile", "hash-384-sparse"]
        return main_in_process(capsys, [*options, *args])

    return run


def _corpus(path, seed: int, n: int = 150):
    rnd = random.Random(seed)
    words = [f"w{i}" for i in range(300)]
    path.mkdir(exist_ok=True)
    for i in range(n):
        paras = "\n\n".join(" ".join(rnd.choice(words) for _ in range(20)) for _ in range(2))
        (path / f"d{i}.md").write_text(f"# Doc {i}\n\n{paras}\n")
    return path


@pytest.fixture
def replaced(sparse, tmp_path):
    """A namespace whose documents were all replaced twice; its HNSW search misses some sampled chunks."""
    corpus = tmp_path / "corpus"
    for seed in range(3):
        _corpus(corpus, seed)
        sparse.ingest([str(corpus)], namespace="rep", verify=False)
    return corpus


def _check(report: dict, name: str) -> dict:
    return next(c for c in report["checks"] if c["name"] == name)


def test_hnsw_misses_are_a_recall_warning_not_a_failure(sparse, replaced, run_main):
    (replaced / "d0.md").write_text("# Doc 0\n\nA replacement, verified on the way in.\n")
    report = sparse.ingest([str(replaced)], namespace="rep")
    v = report.verify
    assert v["ok"], v
    assert _check(v, "self-retrieval")["ok"], v
    recall = _check(v, "hnsw-recall")
    assert not recall["ok"] and recall["severity"] == "warning", v
    assert v["recall"]["hnsw"] < v["recall"]["threshold"] and v["recall"]["ef_search"] == 1, v
    assert sparse.runs("rep")[0]["status"] == "ok"

    code, out, err = run_main("verify", "-n", "rep", "--json")
    assert code == 0, err
    assert json.loads(out)["ok"] and "recall" in err

    code, out, err = run_main("ingest", str(replaced), "-n", "rep", "--json")
    assert code == 0, err
    assert json.loads(out)["verify"]["ok"], out  # its warning is said on stderr, as verify's is
    assert "hnsw-recall: " in err, err
    code, out, _ = run_main("runs", "-n", "rep", "--json")
    assert json.loads(out)[0]["status"] == "ok"


def _twin_chunk(kb, namespace: str) -> int:
    """A chunk whose content hash another chunk of the namespace shares (verify samples all of them here)."""
    ns = kb.namespace(namespace)
    return (
        kb.connection()
        .execute(
            "SELECT min(id) FROM kbctl.chunks WHERE namespace_id = %s GROUP BY content_hash HAVING count(*) > 1 LIMIT 1",
            (ns.id,),
        )
        .fetchone()[0]
    )


DAMAGE = {
    "postings": "DELETE FROM kbctl.lexical_postings WHERE namespace_id = %(ns)s AND chunk_id = %(id)s",
    "zero vector": "UPDATE kbctl.vectors SET embedding = array_fill(0, ARRAY[384])::vector"
    " WHERE namespace_id = %(ns)s AND chunk_id = %(id)s",
    "another vector": "UPDATE kbctl.vectors SET embedding = (SELECT v.embedding FROM kbctl.vectors v JOIN kbctl.chunks c"
    " ON c.namespace_id = v.namespace_id AND c.id = v.chunk_id WHERE v.namespace_id = %(ns)s"
    " AND c.content_hash <> (SELECT content_hash FROM kbctl.chunks WHERE namespace_id = %(ns)s AND id = %(id)s)"
    " LIMIT 1) WHERE namespace_id = %(ns)s AND chunk_id = %(id)s",
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_real_data_problem_fails_and_the_ledger_says_so(sparse, tmp_path, run_main, damage):
    name = "bad_" + damage.replace(" ", "_")  # the parameters share a tenant (its name is cut at 40 characters)
    corpus = _corpus(tmp_path / "c", 7, n=12)
    (corpus / "twin.md").write_text((corpus / "d0.md").read_text())  # d0's chunk, stored twice
    sparse.ingest([str(corpus)], namespace=name, verify=False)
    code, out, err = run_main("verify", "-n", name, "--json")
    assert code == 0, out
    ns = sparse.namespace(name)
    sparse.connection().execute(DAMAGE[damage], {"ns": ns.id, "id": _twin_chunk(sparse, name)})

    code, out, err = run_main("verify", "-n", name, "--json", "--sample", "1000")
    assert code == 3, (out, err)
    assert not _check(json.loads(out), "self-retrieval")["ok"], out

    (corpus / "new.md").write_text("# New\n\nOne more document.\n")
    code, out, err = run_main("ingest", str(corpus), "-n", name, "--json")
    assert code == 3, err
    code, out, _ = run_main("runs", "-n", name, "--json")
    latest = json.loads(out)[0]
    assert latest["status"] == "failed_verify" and latest["counts"]["verify"]["ok"] is False, latest


def test_a_damaged_vector_does_not_spread_through_the_embed_cache(sparse, tmp_path, run_main):
    """A zero vector in one namespace (damage: kbctl never writes one) is not reused for the same text
    in another namespace of the tenant (it was: the cache handed it on, and the second namespace's
    verify failed on data it never had)."""
    corpus = _corpus(tmp_path / "c", 11, n=4)
    sparse.ingest([str(corpus)], namespace="cache_src", verify=False)
    ns = sparse.namespace("cache_src")
    sparse.connection().execute(
        "UPDATE kbctl.vectors SET embedding = array_fill(0, ARRAY[384])::vector WHERE namespace_id = %s", (ns.id,)
    )
    plan = sparse.ingest([str(corpus)], namespace="cache_dst", plan=True)  # asks which exist, no vector read
    report = sparse.ingest([str(corpus)], namespace="cache_dst", verify=False)
    assert report.chunks["embedded"] > 0 and report.chunks["reused"] == 0
    assert plan.chunks == report.chunks, (plan.to_json(), report.to_json())
    code, out, _ = run_main("verify", "-n", "cache_dst", "--json")
    assert code == 0, out


def test_the_exact_lookup_reads_each_vector_by_its_key_on_a_corpus_of_one_repeated_text(kb):
    """Right after a bulk ingest the planner takes the tables for empty; the lookup's count of a
    sampled chunk's copies (chunks with its hash and another vector) then scanned the whole
    generation once per copy: 2,000 copies of one text cost 1.5 s a sampled chunk. Counted in
    pages read (the plan's buffers), not timed: each copy's vector is now read by its whole key."""
    from psycopg import sql

    from kbctl.store import checks
    from kbctl.store.queries import template

    n = 600
    text = "One and the same sentence, repeated in every document of this corpus."
    kb.ingest_records([{"id": f"r{i}", "title": "same", "text": text} for i in range(n)], "repeated", verify=False)
    conn = kb.connection()
    ns = kb.namespace("repeated")
    ids = [r[0] for r in checks.sample_chunks(conn, ns, 2)]
    q = template("checks/sample_lookup", op=sql.SQL("<=>"), col=sql.Identifier("embedding"))
    (plan,) = conn.execute(
        sql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ") + q, (ns.generation_id, ns.id, ids)
    ).fetchone()
    pages = plan[0]["Plan"]["Shared Hit Blocks"] + plan[0]["Plan"].get("Shared Read Blocks", 0)
    assert pages < 20 * n, pages  # linear in the copies (a few pages each), not n pages each
    found = checks.sample_lookup(conn, ns, ids)
    assert sorted(found) == sorted(ids) and all(row[2] == 0 for row in found.values())  # copies share the vector
