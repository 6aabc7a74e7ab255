"""Profile lifecycle (docs/lifecycle.md): a namespace moves to another model with no downtime.

The acceptance tests run real processes against the session's server: one re-embeds a namespace
from a 384-d profile to a 768-d one while a second ingests changes into it and a third searches it
continuously; and a build killed with SIGKILL resumes embedding only what is missing. The 768-d
profile is the toy plugin of tests/fixtures/plugin_pkg, which logs every model call.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import kbctl
from kbctl.errors import CheckFailed, UsageError
from tests.cli.test_plugins import _install
from tests.conftest import ROOT

CONFIG = """
[profiles.toy-768]
embedder = "toy-letters"
model = "letters"
dimension = 768

[profiles.hash-768]
embedder = "hash"
model = "hash"
dimension = 768

[profiles.hash-768-small-chunks]
embedder = "hash"
model = "hash"
dimension = 768
chunk = { size = 50, overlap = 8 }
"""

TOPICS = ["garden tomato sun", "boat sail wind", "bread dough oven", "river bridge stone", "violin string bow"]


def _records(n: int, prefix: str = "doc", words: str = "") -> list[dict]:
    """``n`` small documents, each with text of its own (so chunks and texts are equal in number)."""
    return [
        {
            "id": f"{prefix}{i}",
            "title": f"{prefix} {i}",
            "text": f"{TOPICS[i % len(TOPICS)]} {words} number {prefix}{i} item {i * 7919 % 1000}.",
        }
        for i in range(n)
    ]


@pytest.fixture
def env(tmp_path, kb_home, tenant) -> dict[str, str]:
    """What a kbctl process needs here: the toy plugin installed, the config, the store, the tenant."""
    e = _install(tmp_path / "site")
    (tmp_path / "kbctl.toml").write_text(CONFIG)
    return {
        **os.environ,
        **e,
        "KBCTL_CONFIG": str(tmp_path / "kbctl.toml"),
        "KBCTL_HOME": str(kb_home),
        "KBCTL_TENANT": tenant,
        "TOY_PLUGIN_LOG": str(tmp_path / "calls.log"),
        "PYTHONWARNINGS": "ignore",
    }


@pytest.fixture
def gkb(env, monkeypatch):
    """A KnowledgeBase in this process with the same config (the toy plugin importable here too)."""
    import importlib.metadata

    for path in env["PYTHONPATH"].split(os.pathsep):
        monkeypatch.syspath_prepend(path)
    importlib.invalidate_caches()
    importlib.metadata.distributions.cache_clear() if hasattr(importlib.metadata.distributions, "cache_clear") else None
    monkeypatch.setenv("TOY_PLUGIN_LOG", env["TOY_PLUGIN_LOG"])
    k = kbctl.open(config=env["KBCTL_CONFIG"], home=env["KBCTL_HOME"], tenant=env["KBCTL_TENANT"], profile="hash-384")
    yield k
    k.close()


def _said_interrupted(code: int, err: str) -> None:
    """Exit 130, and on stderr 'interrupted' and the hint that running it again goes on."""
    assert (code, [line.split(":")[0] for line in err.splitlines() if line.strip()]) == (
        130,
        ["interrupted", "hint"],
    ), (
        code,
        err,
    )


def _model_texts(log: Path) -> int:
    """Texts the toy model embedded as documents, from its call log."""
    if not log.exists():
        return 0
    return sum(int(line.split()[2]) for line in log.read_text().splitlines() if " documents " in line)


def _dense(kb, q: str, ns: str) -> tuple[int, list[tuple[int, float]]]:
    r = kb.search(q, ns, mode="dense", k=5)
    return r.details["generations"][ns], [(h.chunk_id, h.score) for h in r.hits]


SEARCHER = """
import json, sys, time, pathlib, kbctl
stop, out = pathlib.Path(sys.argv[1]), open(sys.argv[2], "w")
kb = kbctl.open()
queries = json.loads(sys.argv[3])
n = 0
while not stop.exists() or n < 10:
    for q in queries:
        try:
            r = kb.search(q, "lc", mode="dense", k=3)
            out.write(json.dumps({"q": q, "gens": r.details["generations"],
                                  "hits": [[h.chunk_id, h.score] for h in r.hits]}) + "\\n")
        except Exception as e:
            out.write(json.dumps({"q": q, "error": repr(e)}) + "\\n")
        n += 1
    out.flush()
"""

INGESTER = """
import json, sys, kbctl
kb = kbctl.open()
for round in range(6):
    new = [{"id": f"new{round}_{i}", "title": "zebra", "text": f"zebra quartz lantern {round} {i} walrus"} for i in range(5)]
    changed = [{"id": f"chg{i}", "title": "zebra", "text": f"zebra version {round} of item {i} quartz"} for i in range(3)]
    kb.ingest_records(new + changed, "lc", verify=False)
print("done")
"""


def test_reembed_384_to_768_while_another_process_ingests_and_a_third_searches(gkb, env, tmp_path):
    gkb.ingest_records(_records(40), "lc", verify=False)
    gkb.ingest_records([{"id": f"chg{i}", "title": "zebra", "text": f"zebra first {i} quartz"} for i in range(3)], "lc")
    queries = ["garden tomato sun", "boat sail wind", "bread dough oven"]
    old = {q: _dense(gkb, q, "lc") for q in queries}
    gen1 = old[queries[0]][0]

    stop = tmp_path / "stop"
    searcher = subprocess.Popen(
        [sys.executable, "-c", SEARCHER, str(stop), str(tmp_path / "searches.jsonl"), json.dumps(queries)],
        env=env, cwd=ROOT, stderr=subprocess.PIPE,
    )  # fmt: skip
    ingester = subprocess.Popen(
        [sys.executable, "-c", INGESTER], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        report = gkb.reembed("lc", "toy-768", batch=8)
        assert report.embedded > 0 and report.state == "shadow", report
        assert "shadow" in {g["state"] for g in gkb.generations("lc")}, (gkb.generations("lc"), report)
        swapped = gkb.swap_generation("lc")  # under the namespace lock: waits for a running ingest
        _, err = ingester.communicate(timeout=300)
        assert ingester.returncode == 0, err.decode()
    finally:
        stop.write_text("")
        searcher.wait(timeout=120)
    assert searcher.returncode == 0, searcher.stderr.read().decode() if searcher.stderr else ""

    gen2 = swapped["active"]
    # every document, those ingested during the build and after the swap included, has its vector
    # in both generations (dual writes while the other one is kept)
    gens = {g["state"]: g for g in gkb.generations("lc")}
    chunks = gkb.verify("lc").checks
    assert next(c for c in chunks if c.name == "embeddings").ok
    total = next(n for n in gkb.namespaces() if n["name"] == "lc")["chunks"]
    assert gens["active"]["id"] == gen2 and gens["active"]["vectors"] == total and gens["active"]["dimension"] == 768
    assert gens["previous"]["id"] == gen1 and gens["previous"]["vectors"] == total

    # no search failed, each read one generation, and its scores are that generation's own
    new = {q: _dense(gkb, q, "lc") for q in queries}
    rows = [json.loads(line) for line in (tmp_path / "searches.jsonl").read_text().splitlines()]
    assert rows and not [r for r in rows if "error" in r]
    seen = {r["gens"]["lc"] for r in rows}
    assert seen <= {gen1, gen2}
    for r in rows:
        expect = old[r["q"]] if r["gens"]["lc"] == gen1 else new[r["q"]]
        assert r["hits"][0] == [expect[1][0][0], pytest.approx(expect[1][0][1], abs=1e-6)], r

    # rollback restores the old generation's results exactly
    before = {q: _dense(gkb, q, "lc") for q in queries}
    assert {g for g, _ in before.values()} == {gen2}
    gkb.rollback_generation("lc")
    after = {q: _dense(gkb, q, "lc") for q in queries}
    assert after == old
    gkb.rollback_generation("lc")  # a rollback of the rollback: the 768-d generation is active again
    assert {q: _dense(gkb, q, "lc") for q in queries} == before
    gkb.rollback_generation("lc")
    assert {q: _dense(gkb, q, "lc") for q in queries} == after


def test_a_killed_build_resumes_and_embeds_only_what_is_missing(gkb, env, tmp_path):
    n = 120
    gkb.ingest_records(_records(n), "kill", verify=False)
    log = Path(env["TOY_PLUGIN_LOG"])
    cmd = [sys.executable, "-m", "kbctl", "reembed", "kill", "-p", "toy-768", "--batch", "4", "--json"]
    p = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while _model_texts(log) < 12 and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.01)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)
    first = _model_texts(log)
    shadow = {g["state"]: g for g in gkb.generations("kill")}["shadow"]
    assert 0 < shadow["vectors"] < n, "the build was not killed half way"
    missing = n - shadow["vectors"]
    assert first >= shadow["vectors"]  # a batch embedded but not committed is lost, nothing else

    p = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    report = json.loads(p.stdout)
    assert report["complete"] and report["chunks"] == missing and report["embedded"] == missing
    assert _model_texts(log) - first == missing  # model calls: exactly the missing texts

    # once built, a rerun has nothing to embed; and the toy vectors serve any namespace of the tenant
    p = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, timeout=300)
    assert json.loads(p.stdout)["embedded"] == 0
    gkb.ingest_records(_records(n), "kill2", verify=False)
    before = _model_texts(log)
    report2 = gkb.reembed("kill2", "toy-768")
    assert report2.embedded == 0 and report2.reused == n and _model_texts(log) == before


def _terminated(cmd: list[str], env: dict[str, str], ready) -> tuple[int, str]:
    """Run ``cmd``, send it SIGTERM once ``ready()``; its exit code and stderr."""
    p = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not ready():
            assert p.poll() is None, (p.returncode, p.stderr.read().decode() if p.stderr else "")
            assert time.monotonic() < deadline, "the command never reached the point to signal"
            time.sleep(0.01)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, err.decode()


def test_sigterm_stops_a_build_and_a_swap_as_ctrl_c_does_and_the_next_run_finishes(gkb, env):
    """SIGTERM ended ``kbctl reembed`` with the default handler: exit 143 and nothing on stderr,
    where ``kbctl ingest`` (and Ctrl-C) says ``interrupted`` on one line and exits 130. A build and
    a swap's fill now answer SIGTERM as Ctrl-C: one line, exit 130, and what was committed kept, so
    the next run goes on from there and finishes."""
    n = 40
    gkb.ingest_records(_records(n), "term", verify=False)
    log = Path(env["TOY_PLUGIN_LOG"])
    slow = {**env, "TOY_PLUGIN_DELAY": "0.3"}
    code, err = _terminated(
        [sys.executable, "-m", "kbctl", "reembed", "term", "-p", "toy-768", "--batch", "4"],
        slow,
        lambda: _model_texts(log) >= 12,
    )
    _said_interrupted(code, err)
    gens = {g["state"]: g for g in gkb.generations("term")}
    assert 0 < gens["shadow"]["vectors"] < n, gens  # stopped half way, its committed batches kept
    active = gens["active"]["id"]

    # a swap fills what the shadow lacks under the namespace lock: SIGTERM while it embeds
    calls = log.read_text().count(" documents ")
    code, err = _terminated(
        [sys.executable, "-m", "kbctl", "reembed", "term", "--swap"],
        {**env, "TOY_PLUGIN_DELAY": "60"},
        lambda: log.read_text().count(" documents ") > calls,
    )
    _said_interrupted(code, err)
    gens = {g["state"]: g for g in gkb.generations("term")}
    assert gens["active"]["id"] == active and "shadow" in gens, gens  # nothing swapped

    missing = n - gens["shadow"]["vectors"]
    before = _model_texts(log)
    p = subprocess.run(
        [sys.executable, "-m", "kbctl", "reembed", "term", "--swap", "--json"],
        env=env, cwd=ROOT, capture_output=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr.decode()
    out = json.loads(p.stdout)
    assert out["swapped"] and out["filled"] == missing, out
    assert _model_texts(log) - before == missing  # only what the stopped runs had not committed
    gens = {g["state"]: g for g in gkb.generations("term")}
    assert gens["active"]["profile"] == "toy-768" and gens["active"]["vectors"] == n, gens
    assert gens["previous"]["id"] == active, gens


def test_going_back_to_a_profile_used_before_costs_no_model_call(gkb):
    gkb.ingest_records(_records(10), "back", verify=False)
    gkb.reembed("back", "hash-768")
    gkb.swap_generation("back")
    report = gkb.reembed("back", "hash-384")  # the previous generation's vectors are the cache
    assert report.embedded == 0 and report.reused == 10 and report.complete


def _chunks(kb, ns: str) -> int:
    return next(n for n in kb.namespaces() if n["name"] == ns)["chunks"]


def test_a_build_counts_only_the_vectors_it_kept_when_an_ingest_replaces_a_chunk_meanwhile(gkb, env, monkeypatch):
    """An ingest that replaces a document while a build embeds its chunk: the build's vector of the
    old chunk is dropped at the write (the chunk is gone; the ingest's dual writes gave the new chunk
    its own). The report counted it as given and embedded all the same (``kbctl reembed --json``
    said 6 chunks and 6 texts embedded where 5 were kept). It counts what it kept, and the vector it
    threw away as ``discarded``."""
    from kbctl.ingest import reembed

    gkb.ingest_records(_records(6), "honest", verify=False)
    other = kbctl.open(config=env["KBCTL_CONFIG"], home=env["KBCTL_HOME"], tenant=env["KBCTL_TENANT"])
    model: list[int] = []

    class ReplacedMeanwhile(reembed.Embedding):
        def embed(self, texts):
            out = super().embed(texts)
            model.append(len(texts))
            if len(model) == 1:  # the batch is embedded, not written: another process changes doc0
                doc0 = {**_records(1)[0], "text": "garden tomato sun, rewritten while the build embedded it"}
                other.ingest_records([doc0], "honest", verify=False)
            return out

    monkeypatch.setattr(reembed, "Embedding", ReplacedMeanwhile)
    try:
        report = gkb.reembed("honest", "hash-768", batch=6)
    finally:
        other.close()
    assert model == [6], model  # the model read the 6 texts once
    assert (report.chunks, report.embedded, report.reused) == (5, 5, 0), report
    assert report.discarded == 1 and report.to_json()["discarded"] == 1, report
    assert report.complete and report.embedded + report.reused <= report.chunks
    shadow = {g["state"]: g for g in gkb.generations("honest")}["shadow"]
    assert shadow["vectors"] == _chunks(gkb, "honest") == 6  # the new chunk's vector came with its ingest


def test_a_chunk_deleted_while_its_batch_is_written_costs_only_its_own_vector(gkb, env, monkeypatch):
    """A chunk deleted by a transaction that commits while the build's write waits for the chunk's
    row (the foreign key's check) fails the whole batch. The build dropped the batch and read it
    again: the model embedded its other chunks twice and the report counted both (11 texts
    embedded for 5 chunks). The batch is written again without the chunk gone; the other vectors
    are kept, once."""
    from kbctl.ingest import reembed
    from kbctl.store import generations as gstore

    gkb.ingest_records(_records(6), "race", verify=False)
    ns = gkb.namespace("race")
    other = kbctl.open(config=env["KBCTL_CONFIG"], home=env["KBCTL_HOME"], tenant=env["KBCTL_TENANT"])
    oconn = other.connection()
    victim = oconn.execute("SELECT min(id) FROM kbctl.chunks WHERE namespace_id = %s", (ns.id,)).fetchone()[0]
    me, them = gkb.connection().info.backend_pid, oconn.info.backend_pid
    real, writes, waited, model = gstore.write_vectors, [], [], []

    def commit_once_the_write_waits() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if oconn.execute("SELECT %s = ANY(pg_blocking_pids(%s))", (them, me)).fetchone()[0]:
                waited.append(True)
                break
            time.sleep(0.01)
        oconn.execute("COMMIT")

    def write_while_a_delete_commits(cur, ns_id, gen, rows):
        writes.append(len(rows))
        if len(writes) > 1:
            return real(cur, ns_id, gen, rows)
        oconn.execute("BEGIN")
        oconn.execute("DELETE FROM kbctl.chunks WHERE namespace_id = %s AND id = %s", (ns.id, victim))
        t = threading.Thread(target=commit_once_the_write_waits)
        t.start()
        try:
            return real(cur, ns_id, gen, rows)
        finally:
            t.join()

    class Counted(reembed.Embedding):
        def embed(self, texts):
            model.append(len(texts))
            return super().embed(texts)

    monkeypatch.setattr(gstore, "write_vectors", write_while_a_delete_commits)
    monkeypatch.setattr(reembed, "Embedding", Counted)
    try:
        report = gkb.reembed("race", "hash-768", batch=6)
    finally:
        other.close()
    assert waited, "the write never waited for the deleting transaction"
    assert (report.chunks, report.embedded, report.discarded) == (5, 5, 1), (report, writes)
    assert model == [6], model
    assert report.complete
    shadow = {g["state"]: g for g in gkb.generations("race")}["shadow"]
    assert shadow["vectors"] == _chunks(gkb, "race") == 5


def test_refusals(gkb):
    gkb.ingest_records(_records(5), "ref", verify=False)
    with pytest.raises(UsageError, match="already serves profile 'hash-384'"):
        gkb.reembed("ref", "hash-384")
    with pytest.raises(UsageError, match="chunks differently"):
        gkb.reembed("ref", "hash-768-small-chunks")
    with pytest.raises(UsageError, match="no shadow generation to swap to"):
        gkb.swap_generation("ref")
    with pytest.raises(UsageError, match="no previous generation"):
        gkb.rollback_generation("ref")
    with pytest.raises(UsageError, match="no previous generation"):
        gkb.drop_generation("ref", "previous")
    gkb.reembed("ref", "hash-768")
    with pytest.raises(UsageError, match="has a shadow generation of profile 'hash-768'"):
        gkb.reembed("ref", "toy-768")
    with pytest.raises(UsageError, match="--require needs --eval"):
        gkb.swap_generation("ref", require=["hybrid:ndcg@10>=active"])
    gkb.drop_generation("ref", "shadow")
    assert [g["state"] for g in gkb.generations("ref")] == ["active"]


def test_a_failing_gate_refuses_the_swap(gkb, tmp_path):
    gkb.ingest_records(_records(10), "gate", verify=False)
    qs = tmp_path / "golden.jsonl"
    qs.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "query": TOPICS[i % 5], "namespace": "gate", "relevant": {f"doc{i}": 1}}) + "\n"
            for i in range(5)
        )
    )
    gkb.reembed("gate", "hash-768")
    with pytest.raises(CheckFailed, match="swap refused"):
        gkb.swap_generation("gate", require=["dense:ndcg@10>=1.01"], dataset=qs)
    assert {g["state"]: g["profile"] for g in gkb.generations("gate")}["active"] == "hash-384"
    out = gkb.swap_generation("gate", require=["hybrid:ndcg@10>=active-1"], dataset=qs)
    assert out["eval"]["shadow"]["modes"]["hybrid"]["ndcg@10"] >= 0
    assert {g["state"]: g["profile"] for g in gkb.generations("gate")}["active"] == "hash-768"


def test_halfvec_generation_reuses_the_stored_vectors_and_searches_alike(gkb):
    gkb.ingest_records(_records(30), "half", verify=False)
    before = _dense(gkb, "boat sail wind", "half")
    report = gkb.reembed("half", "hash-384", storage="halfvec")
    assert report.embedded == 0 and report.reused == 30 and report.storage == "halfvec"
    gkb.swap_generation("half")
    gens = {g["state"]: g for g in gkb.generations("half")}
    assert gens["active"]["storage"] == "halfvec"
    assert gens["active"]["bytes"] < gens["previous"]["bytes"]
    after = _dense(gkb, "boat sail wind", "half")
    assert after[0] == gens["active"]["id"]
    # the same chunks at the same similarity, to halfvec's precision (near-ties may swap places)
    assert {c for c, _ in after[1]} == {c for c, _ in before[1]}
    assert sorted(s for _, s in after[1]) == pytest.approx(sorted(s for _, s in before[1]), abs=2e-3)
    assert gkb.verify("half").ok
    # and an ingest into a halfvec namespace writes halfvec vectors
    gkb.ingest_records(_records(3, prefix="more"), "half", verify=False)
    assert {g["state"]: g for g in gkb.generations("half")}["active"]["vectors"] == 33


def test_verify_claim_embeds_the_claim_with_the_generation_that_made_the_vectors(env, tmp_path, gkb):
    """A namespace declared in the config with its first profile, moved to a 768-d generation:
    the claim must be embedded by the active generation's profile (it was embedded by the declared
    384-d one, and the similarity of a 384-d claim with 768-d vectors failed)."""
    cfg = tmp_path / "declared.toml"
    cfg.write_text(CONFIG + '\n[namespaces.vcl]\nprofile = "hash-384"\n')
    kb = kbctl.open(config=str(cfg), home=env["KBCTL_HOME"], tenant=env["KBCTL_TENANT"])
    try:
        kb.ingest_records(_records(10), "vcl", verify=False)
        kb.reembed("vcl", "hash-768")
        kb.swap_generation("vcl")
        check = kb.verify_claim("boat sail wind", "vcl", k=3)
        sims = [s["dense_similarity"] for s in check.signals]
        assert len(sims) == len(check.result.hits) == 3 and all(isinstance(s, float) for s in sims)
        assert max(sims) > 0.5  # the claim's own words, by the model that made the vectors
    finally:
        kb.close()


def test_an_ingest_that_read_the_namespace_before_a_swap_writes_nothing(gkb, tmp_path, monkeypatch):
    """An ingest reads its namespace (and pin) before it waits for the namespace lock, which a swap
    holds: it then wrote the old model's vectors into the generation that had just become previous,
    and the active one never got them. Now the run sees the swap once it has the lock and writes
    nothing with the old generation: read again, the namespace's new pin refuses the old profile
    this run named (without one, the run goes on with the new profile: the test below)."""
    from kbctl.api import ingest as api_ingest
    from kbctl.errors import ProfileMismatchError

    gkb.ingest_records(_records(4), "moved", verify=False)
    stale = gkb.namespace("moved")  # what an ingest started during the swap had read
    gkb.reembed("moved", "hash-768")
    gkb.swap_generation("moved")
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "late.md").write_text("# Late\n\nA document that arrived during the swap.\n")
    monkeypatch.setattr(api_ingest, "ensure_namespace", lambda *a, **kw: stale)
    before = gkb.verify("moved")
    with pytest.raises(ProfileMismatchError, match="pinned to profile 'hash-768'"):
        gkb.ingest([str(tmp_path / "new")], "moved", profile="hash-384", verify=False)
    monkeypatch.undo()
    assert [c.detail for c in gkb.verify("moved").checks] == [c.detail for c in before.checks]
    report = gkb.ingest([str(tmp_path / "new")], "moved")  # the namespace's pin now: hash-768
    assert report.documents["new"] == 1 and report.verify["ok"]
    assert gkb.search("document arrived during the swap", "moved", mode="dense", k=1).hits


def test_a_build_whose_shadow_is_dropped_meanwhile_stops(gkb, env, monkeypatch):
    """``reembed`` holds no lock while it embeds; ``--drop-shadow`` (the documented way to abandon
    a build) deleted its generation, and every later batch failed its foreign key, was taken for
    a chunk deleted meanwhile and read again: the build looped for ever."""
    from kbctl.store import generations as gstore

    gkb.ingest_records(_records(6), "abandon", verify=False)
    real = gstore.write_vectors
    calls = []
    other = kbctl.open(config=env["KBCTL_CONFIG"], home=env["KBCTL_HOME"], tenant=env["KBCTL_TENANT"])

    def drop_then_write(cur, ns_id, gen, rows):
        calls.append(gen.id)
        if len(calls) == 1:
            other.drop_generation("abandon", "shadow")  # another process abandons the build
        if len(calls) > 50:
            raise RuntimeError("the build went on writing into a dropped generation")
        return real(cur, ns_id, gen, rows)

    monkeypatch.setattr(gstore, "write_vectors", drop_then_write)
    try:
        with pytest.raises(UsageError, match="dropped"):
            gkb.reembed("abandon", "hash-768", batch=2)
    finally:
        other.close()
    assert [g["state"] for g in gkb.generations("abandon")] == ["active"]


@pytest.mark.parametrize("gate", ["hybrid:ndcg@10>=0.6.5", "ndcg@10>=.", "ndcg@10>=active-."])
def test_a_malformed_swap_gate_is_a_usage_error(gate):
    from kbctl.ingest.reembed import check_gates

    side = {"shadow": {"modes": {"hybrid": {"ndcg@10": 0.7}}}, "active": {"modes": {"hybrid": {"ndcg@10": 0.7}}}}
    with pytest.raises(UsageError, match="gate"):
        check_gates(side, [gate])


def test_a_polling_worker_makes_its_context_again_after_a_swap(gkb):
    """A ``kbctl worker`` keeps each namespace's context (namespace, pinned profile) between runs;
    after a swap it went on embedding with the previous generation's profile, into it."""
    from kbctl.ingest.workers import WorkerContext, current_context

    gkb.ingest_records(_records(4), "polled", verify=False)
    made = []

    def context(ns_id):
        ns = gkb.namespace("polled")
        made.append(ns.generation_id)
        return WorkerContext(ns, gkb.namespaces.search_profile(ns))

    conn = gkb.connection()
    contexts: dict = {}
    ns_id = gkb.namespace("polled").id
    first = current_context(conn, contexts, ns_id, context)
    assert current_context(conn, contexts, ns_id, context) is first and len(made) == 1  # kept while nothing moves
    gkb.reembed("polled", "hash-768")
    gkb.swap_generation("polled")
    after = current_context(conn, contexts, ns_id, context)
    assert len(made) == 2 and after.namespace.generation_id != first.namespace.generation_id
    assert after.profile.name == "hash-768" and after.namespace.dimension == 768


def test_an_ingest_that_waited_for_a_swap_goes_on_with_the_new_generation(gkb, env, monkeypatch):
    """An ingest reads its namespace (and so its profile) before it takes the namespace lock; when a
    swap held that lock meanwhile, the run refused ("moved to another generation") and the writer's
    batch was lost: downtime for writers during a model move (CI caught it once in the three-process
    test above). The run now reads the namespace again, with its new generation and profile, and
    goes on; nothing had been written with the old one."""
    from kbctl.ingest import pipeline

    gkb.ingest_records(_records(4), "waited", verify=False)
    gkb.reembed("waited", "hash-768")
    other = kbctl.open(config=env["KBCTL_CONFIG"], home=env["KBCTL_HOME"], tenant=env["KBCTL_TENANT"])
    real, swapped = pipeline._with_retried, []

    def swap_in_between(conn, req):  # after the run read the namespace, before it takes the lock
        if not swapped:
            swapped.append(other.swap_generation("waited"))
        return real(conn, req)

    monkeypatch.setattr(pipeline, "_with_retried", swap_in_between)
    try:
        report = gkb.ingest_records([{"id": "late", "title": "late", "text": "violin string bow late"}], "waited")
    finally:
        other.close()
    assert swapped and report.documents["new"] == 1, report
    ns = gkb.namespace("waited")
    assert ns.profile_name == "hash-768" and ns.generation_id == swapped[0]["active"]
    assert gkb.verify("waited").ok
    hits = gkb.search("violin string bow late", "waited", mode="dense", k=1)
    assert hits.details["generations"]["waited"] == ns.generation_id and hits.hits[0].title == "late"


def test_a_write_that_comes_after_a_swap_refuses_though_its_run_checked_before(gkb, tmp_path, monkeypatch):
    """The run checks the generation once it has the namespace lock; a dead run's orphaned worker
    (or any writer whose check came before a swap committed) then wrote its batch with the old
    generation's profile. Each write transaction now checks, under the namespace's write lock
    (which the swap's flip takes too), that the generation it writes for still answers."""
    from kbctl.api import ingest as api_ingest
    from kbctl.errors import ProfileMismatchError
    from kbctl.ingest import pipeline

    gkb.ingest_records(_records(4), "late", verify=False)
    stale = gkb.namespace("late")
    gkb.reembed("late", "hash-768")
    gkb.swap_generation("late")
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "late.md").write_text("# Late\n\nA document written after the swap.\n")
    monkeypatch.setattr(api_ingest, "ensure_namespace", lambda *a, **kw: stale)
    monkeypatch.setattr(pipeline, "_same_generation", lambda conn, ns: None)  # its check came first
    before = gkb.verify("late")
    with pytest.raises(ProfileMismatchError, match="generation"):
        gkb.ingest([str(tmp_path / "new")], "late", profile="hash-384", verify=False)
    monkeypatch.undo()
    assert [c.detail for c in gkb.verify("late").checks] == [c.detail for c in before.checks]
    assert gkb.verify("late").ok


def test_a_swap_fills_what_was_written_without_the_shadows_vectors_before_it_flips(gkb, monkeypatch):
    """A batch written after the swap's last fill but before its flip, without the shadow's vectors
    (a worker whose batch began before the shadow existed): the new active generation lacked them.
    The flip now checks, under the write lock, that the shadow lacks nothing, and fills it first."""
    from kbctl.ingest import reembed

    gkb.ingest_records(_records(5), "flip", verify=False)
    gkb.reembed("flip", "hash-768")
    real = reembed.build
    conn = gkb.connection()
    lost = []

    def build_then_lose_one(c, ns, gen, profile, **kw):
        report = real(c, ns, gen, profile, **kw)
        if gen.state == "shadow" and not lost:  # the swap's last fill is done: a chunk arrives without its vector
            lost.append(gen.id)
            conn.execute(
                "DELETE FROM kbctl.vectors WHERE generation_id = %s"
                " AND chunk_id = (SELECT min(chunk_id) FROM kbctl.vectors WHERE generation_id = %s)",
                (gen.id, gen.id),
            )
        return report

    monkeypatch.setattr(reembed, "build", build_then_lose_one)
    gkb.swap_generation("flip")
    monkeypatch.undo()
    report = gkb.verify("flip")
    assert report.ok, [c for c in report.checks if not c.ok]


def test_a_plan_is_refused_as_the_build_it_plans(gkb):
    """``kbctl reembed NS --profile P --plan`` says what the build would say: a plan of what the
    namespace already serves, of a second shadow, or of a profile that chunks differently is the
    same usage error, not a plan of chunks to embed; the shadow being built is planned (resumed)."""
    gkb.ingest_records(_records(5), "planref", verify=False)
    with pytest.raises(UsageError, match="already serves profile 'hash-384'"):
        gkb.reembed("planref", "hash-384", plan=True)
    with pytest.raises(UsageError, match="chunks differently"):
        gkb.reembed("planref", "hash-768-small-chunks", plan=True)
    gkb.reembed("planref", "hash-768")
    assert gkb.reembed("planref", "hash-768", plan=True).to_embed == 0
    with pytest.raises(UsageError, match="has a shadow generation of profile 'hash-768'"):
        gkb.reembed("planref", "toy-768", plan=True)
    assert [g["state"] for g in gkb.generations("planref")] == ["active", "shadow"]


def test_reembed_with_a_profile_and_swap_builds_then_swaps(gkb, env):
    """``kbctl reembed NS --profile P --swap`` (what the pin-mismatch hint and README say) builds
    the shadow of P, then swaps to it; it never swaps a shadow of another profile instead, and a
    plan swaps nothing."""
    gkb.ingest_records(_records(4), "onego", verify=False)

    def reembed(*args: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "kbctl", "reembed", *args]
        return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, timeout=300)

    p = reembed("onego", "--profile", "hash-768", "--swap", "--json")
    assert p.returncode == 0, p.stderr.decode()
    assert json.loads(p.stdout)["active"] != json.loads(p.stdout)["previous"]
    states = {g["state"]: g["profile"] for g in gkb.generations("onego")}
    assert states == {"active": "hash-768", "previous": "hash-384"}

    gkb.ingest_records(_records(4), "other", verify=False)
    gkb.reembed("other", "hash-768")  # a shadow of hash-768 being built
    p = reembed("other", "--profile", "toy-768", "--swap")
    assert p.returncode == 2 and "has a shadow generation of profile 'hash-768'" in p.stderr.decode()
    p = reembed("other", "--profile", "hash-768", "--plan", "--swap")
    assert p.returncode == 2, p.stderr.decode()
    states = {g["state"]: g["profile"] for g in gkb.generations("other")}
    assert states == {"active": "hash-384", "shadow": "hash-768"}


def test_a_gate_that_cannot_be_read_is_refused_before_a_swap_builds_its_shadow(gkb, tmp_path):
    """``kbctl reembed NS --profile P --swap --eval D --require G`` with a gate that cannot be read
    built P's whole shadow first (every chunk embedded), then refused the gate (exit 2): a typo cost
    the build. The gates are read before anything is made."""
    gkb.ingest_records(_records(4), "typo", verify=False)
    with pytest.raises(UsageError):
        gkb.swap_generation("typo", profile="hash-768", dataset=tmp_path / "golden.jsonl", require=["ndcg@10>=."])
    assert [g["state"] for g in gkb.generations("typo")] == ["active"]


def _mixed_golden(path: Path, mine: str, other: str) -> Path:
    """A golden set with three queries of ``mine`` and two of ``other`` (as sample_corpus/eval's,
    which names five namespaces)."""
    rows = [(f"m{i}", mine, f"doc{i}") for i in range(3)] + [(f"o{i}", other, f"doc{i}") for i in range(2)]
    path.write_text(
        "".join(
            json.dumps({"id": q, "query": TOPICS[i % 5], "namespace": ns, "relevant": {d: 1}}) + "\n"
            for i, (q, ns, d) in enumerate(rows)
        )
    )
    return path


def test_eval_of_a_namespace_scores_only_its_queries_of_a_mixed_golden_set(gkb, env, tmp_path):
    """``kbctl reembed NS --eval`` (and ``eval run -n NS``) on a golden set that also holds other
    namespaces' queries evaluates NS's only and says how many it left out; it used to search each
    query's own namespace and stop at the first without a shadow generation."""
    gkb.ingest_records(_records(5), "mixmine", verify=False)
    gkb.ingest_records(_records(5), "mixother", verify=False)
    qs = _mixed_golden(tmp_path / "mixed.jsonl", "mixmine", "mixother")
    gkb.reembed("mixmine", "hash-768")
    side = gkb.compare_generations("mixmine", qs)
    assert any("left out 2 queries of other namespaces (mixother)" in n for n in side["notes"])
    run = gkb.evaluate(qs, namespace="mixmine", modes=["lexical"])
    assert sorted(run.report.queries) == ["m0", "m1", "m2"]
    assert any("left out 2 queries" in n for n in run.notes)
    assert sorted(gkb.evaluate(qs, modes=["lexical"]).report.queries) == ["m0", "m1", "m2", "o0", "o1"]
    swept = gkb.sweep(qs, namespace="mixmine", grid={"fusion": ["rrf"], "rrf_k": [60], "candidates": [50]})
    assert any("left out 2 queries" in n for n in swept.notes)
    gkb.ingest_records(_records(2), "mixnone", verify=False)
    with pytest.raises(UsageError, match="has no query for namespace 'mixnone'"):
        gkb.evaluate(qs, namespace="mixnone", modes=["lexical"])

    def kbctl_(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "kbctl", *args], env=env, cwd=ROOT, capture_output=True, timeout=300
        )

    p = kbctl_("reembed", "mixmine", "--eval", str(qs), "--json")
    assert p.returncode == 0, p.stderr.decode()
    assert "left out 2 queries" in p.stderr.decode()
    assert any("left out 2 queries" in n for n in json.loads(p.stdout)["notes"])
    p = kbctl_("reembed", "mixother", "--eval", str(qs))
    assert p.returncode == 2 and "has no shadow generation" in p.stderr.decode()
    p = kbctl_("eval", "run", str(qs), "-n", "mixnone", "--modes", "lexical")
    assert p.returncode == 2
    assert "has no query for namespace 'mixnone'" in p.stderr.decode()
    assert len(p.stderr.decode().strip().splitlines()) <= 2  # one line and its hint, no traceback


def test_a_storage_change_without_a_profile_builds_a_shadow_of_the_namespaces_own_profile(gkb, env):
    """``kbctl reembed NS --storage halfvec`` with no ``--profile`` asks for NS's vectors stored as
    halfvec: a shadow of the profile NS serves, stored so (it used to be read as "resume the shadow"
    and say NS has none). Run again, it resumes that shadow; the storage NS already has, or a shadow
    of another profile being built, is refused as a build with ``--profile`` is."""
    gkb.ingest_records(_records(6), "store", verify=False)
    plan = gkb.reembed("store", storage="halfvec", plan=True)
    assert (plan.profile, plan.storage, plan.chunks) == ("hash-384", "halfvec", 6)
    with pytest.raises(UsageError, match="already serves profile 'hash-384' .* as vector"):
        gkb.reembed("store", storage="vector")
    report = gkb.reembed("store", storage="halfvec")
    assert (report.profile, report.storage, report.embedded, report.reused) == ("hash-384", "halfvec", 0, 6)
    again = gkb.reembed("store", storage="halfvec")
    assert again.generation == report.generation and again.complete
    gens = {g["state"]: g for g in gkb.generations("store")}
    assert (gens["shadow"]["profile"], gens["shadow"]["storage"]) == ("hash-384", "halfvec")

    gkb.ingest_records(_records(3), "storeother", verify=False)
    with pytest.raises(UsageError, match="no shadow generation") as e:
        gkb.reembed("storeother")
    assert "--storage halfvec" in (e.value.hint or "")
    gkb.reembed("storeother", "hash-768")
    with pytest.raises(UsageError, match="has a shadow generation of profile 'hash-768'"):
        gkb.reembed("storeother", storage="halfvec")

    gkb.ingest_records(_records(3), "storecli", verify=False)
    cmd = [sys.executable, "-m", "kbctl", "reembed", "storecli", "--storage", "halfvec", "--swap", "--json"]
    p = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    assert json.loads(p.stdout)["build"]["storage"] == "halfvec"
    gens = {g["state"]: g for g in gkb.generations("storecli")}
    assert (gens["active"]["profile"], gens["active"]["storage"]) == ("hash-384", "halfvec")
    assert (gens["previous"]["profile"], gens["previous"]["storage"]) == ("hash-384", "vector")


def test_a_gate_is_shown_and_checked_with_or_without_a_swap_and_bad_options_touch_nothing(cli, kb, tmp_path):
    """``kbctl reembed NS --swap --eval D --require G`` whose gate failed exited 3 with nothing on
    stdout (table or ``--json``): the comparison it had run was lost; ``--eval D --require G``
    without ``--swap`` ignored the gate (exit 0 whatever the metrics); ``--batch 0`` made a shadow
    and gave it nothing (exit 0), ``--batch -1`` made one and failed with a database error (exit 1);
    ``--limit``/``--require`` without ``--eval`` were ignored."""
    kb.ingest_records(_records(10), "gate", verify=False)
    qs = tmp_path / "golden.jsonl"
    qs.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "query": TOPICS[i % 5], "namespace": "gate", "relevant": {f"doc{i}": 1}}) + "\n"
            for i in range(5)
        )
    )

    def states() -> list[str]:
        return [g["state"] for g in kb.generations("gate")]

    for args in (["--batch", "0"], ["--batch", "-1"], ["--limit", "3"], ["--require", "dense:ndcg@10>=active"]):
        p = cli("reembed", "gate", "--storage", "halfvec", *args)
        assert p.returncode == 2 and p.stderr.decode().startswith("error: "), (args, p.stderr.decode())
        assert states() == ["active"], args  # refused before anything was made
    assert cli("reembed", "gate", "--storage", "halfvec").returncode == 0
    failing = ["--eval", str(qs), "--require", "dense:ndcg@10>=1.01"]
    p = cli("reembed", "gate", *failing, "--json")
    assert p.returncode == 3, p.stderr.decode()
    side = json.loads(p.stdout)
    assert side["shadow"]["modes"]["dense"]["ndcg@10"] <= 1 and side["gates"]["failures"], side.get("gates")
    assert "dense:ndcg@10>=1.01" in p.stderr.decode()
    p = cli("reembed", "gate", "--swap", *failing, "--json")
    assert p.returncode == 3, p.stderr.decode()
    out = json.loads(p.stdout)
    assert out["swapped"] is False and out["eval"]["gates"]["failures"] and out["eval"]["active"]["modes"]
    p = cli("reembed", "gate", "--swap", *failing)
    assert p.returncode == 3 and "shadow" in p.stdout.decode() and "ndcg@10" in p.stdout.decode()
    assert "swap refused" in p.stderr.decode()
    assert sorted(states()) == ["active", "shadow"]  # nothing swapped
    passing = ["--eval", str(qs), "--require", "hybrid:ndcg@10>=active-1"]
    p = cli("reembed", "gate", *passing, "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["gates"]["failures"] == [], p.stderr.decode()
    p = cli("reembed", "gate", "--swap", *passing, "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["swapped"] is True, p.stderr.decode()
    assert sorted(states()) == ["active", "previous"]


def _golden(path: Path, namespace: str, n: int = 5) -> Path:
    path.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "query": TOPICS[i % 5], "namespace": namespace, "relevant": {f"doc{i}": 1}})
            + "\n"
            for i in range(n)
        )
    )
    return path


def test_an_eval_dataset_that_cannot_be_read_is_refused_before_a_swap_builds_its_shadow(gkb, tmp_path):
    """``kbctl reembed NS --profile P --swap --eval D`` found a missing or unreadable D only after
    the build (hours, on a real corpus); without ``--require`` it swapped and never read D. Every
    variant now reads D (and its ``--limit``) before anything is made."""
    from kbctl.errors import ConfigError

    gkb.ingest_records(_records(4), "early", verify=False)
    not_beir = tmp_path / "not-beir"
    not_beir.mkdir()
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text('{"id": "q0", "query": "boat", "namespace": "early", "relevant": {"doc1": 1}}\n{not json\n')
    others = _golden(tmp_path / "others.jsonl", "someone_else")
    good = _golden(tmp_path / "good.jsonl", "early")
    gate = ["hybrid:ndcg@10>=active-1"]
    cases = [
        (ConfigError, dict(dataset=tmp_path / "missing.jsonl", require=gate)),
        (ConfigError, dict(dataset=tmp_path / "missing.jsonl")),
        (ConfigError, dict(dataset=not_beir)),
        (ConfigError, dict(dataset=bad_json, require=gate)),
        (UsageError, dict(dataset=others)),  # none of NS's queries
        (UsageError, dict(dataset=good, limit=0)),
    ]
    for build in (dict(profile="hash-768"), dict(storage="halfvec")):
        for error, kwargs in cases:
            with pytest.raises(error):
                gkb.swap_generation("early", **build, **kwargs)
            assert [g["state"] for g in gkb.generations("early")] == ["active"], (build, kwargs)
    gkb.reembed("early", "hash-768")  # a shadow built before: the swap alone refuses as early
    with pytest.raises(ConfigError):
        gkb.swap_generation("early", dataset=tmp_path / "missing.jsonl")
    assert sorted(g["state"] for g in gkb.generations("early")) == ["active", "shadow"]


def test_a_swap_with_an_eval_and_no_gate_shows_the_comparison_before_it_swaps(gkb, tmp_path):
    """``--swap --eval D`` without ``--require`` ignored D: no comparison, nothing read."""
    gkb.ingest_records(_records(5), "shown", verify=False)
    out = gkb.swap_generation("shown", profile="hash-768", dataset=_golden(tmp_path / "g.jsonl", "shown"))
    assert out["swapped"] is True and "gates" not in out["eval"]
    assert out["eval"]["shadow"]["generation"]["profile"] == "hash-768", out["eval"]
    assert set(out["eval"]["active"]["modes"]) == {"lexical", "dense", "hybrid"}


def test_every_reembed_eval_variant_refuses_a_bad_dataset_at_once_on_one_line(cli, kb, tmp_path):
    """The CLI's paths that take ``--eval``: with ``--swap`` and a build (``--storage``), with
    ``--swap`` alone, with ``--require``, and the side-by-side alone; and a build option given
    with ``--eval`` but no ``--swap``, which compared whatever shadow there was and built nothing."""
    kb.ingest_records(_records(5), "cliev", verify=False)
    missing = str(tmp_path / "missing.jsonl")
    gate = ["--require", "hybrid:ndcg@10>=active-1"]

    def states() -> list[str]:
        return sorted(g["state"] for g in kb.generations("cliev"))

    for args in (
        ["--storage", "halfvec", "--swap", "--eval", missing],
        ["--storage", "halfvec", "--swap", "--eval", missing, *gate],
        ["--storage", "halfvec", "--swap", "--eval", missing, "--limit", "2", "--json"],
    ):
        p = cli("reembed", "cliev", *args)
        err = p.stderr.decode()
        assert p.returncode == 2 and err.startswith("error: ") and "missing.jsonl" in err, (args, err)
        assert [line.split(":")[0] for line in err.splitlines()] == ["error", "hint"], err
        assert "Traceback" not in err and p.stdout == b"", (args, err)
        assert states() == ["active"], args  # nothing built
    good = str(_golden(tmp_path / "good.jsonl", "cliev"))
    p = cli("reembed", "cliev", "--storage", "halfvec", "--eval", good)
    assert p.returncode == 2 and "--swap" in p.stderr.decode(), p.stderr.decode()
    assert states() == ["active"]
    assert cli("reembed", "cliev", "--storage", "halfvec").returncode == 0
    for args in (["--swap", "--eval", missing], ["--swap", "--eval", missing, *gate], ["--eval", missing, *gate]):
        p = cli("reembed", "cliev", *args)
        assert p.returncode == 2 and p.stderr.decode().startswith("error: "), (args, p.stderr.decode())
        assert states() == ["active", "shadow"], args  # nothing swapped
    p = cli("reembed", "cliev", "--profile", "hash-384", "--eval", good)  # a shadow there: not what it compared
    assert p.returncode == 2 and "--swap" in p.stderr.decode(), p.stderr.decode()
    p = cli("reembed", "cliev", "--swap", "--eval", good)
    assert p.returncode == 0 and "shadow" in p.stdout.decode() and "ndcg@10" in p.stdout.decode(), p.stderr.decode()
    assert states() == ["active", "previous"]


def test_reembed_shows_sizes_in_a_human_unit_and_its_json_keeps_the_bytes(cli, cli_process, kb, tmp_path):
    """``reembed --status`` printed a column of raw bytes (``bytes 172032``) and the side-by-side
    table of ``--eval`` megabytes rounded to 0.1, so a small namespace's generations read ``0.0``
    and ``0.2``; ``kbctl namespaces`` likewise (``(0.0 MB)``). Sizes are shown in a unit that
    suits them (B, kB, MB, GB: SI, three significant figures); ``--json`` keeps exact bytes."""
    from kbctl.cli.render import human_size

    assert [human_size(n) for n in (0, 999, 1000, 12_345, 172_032, 999_499, 999_500, 5_300_000, 2**31, 10**13)] == [
        "0 B",
        "999 B",
        "1 kB",
        "12.3 kB",
        "172 kB",
        "999 kB",
        "1 MB",
        "5.3 MB",
        "2.15 GB",
        "10000 GB",
    ]
    kb.ingest_records(_records(10), "sizes", verify=False)
    assert cli("reembed", "sizes", "--storage", "halfvec").returncode == 0
    p = cli("reembed", "sizes", "--status", "--json")
    assert p.returncode == 0, p.stderr.decode()
    rows = json.loads(p.stdout)
    for g in rows:
        assert isinstance(g["bytes"], int) and g["bytes"] == g["vector_bytes"] + g["index_bytes"] > 0, g
    p = cli("reembed", "sizes", "--status")
    table = p.stdout.decode()
    assert p.returncode == 0 and "size" in table and "bytes" not in table, table
    for g in rows:
        assert human_size(g["bytes"]) in table and str(g["bytes"]) not in table, (g, table)

    qs = _golden(tmp_path / "golden.jsonl", "sizes")
    p = cli("reembed", "sizes", "--eval", str(qs), "--json")
    assert p.returncode == 0, p.stderr.decode()
    side = json.loads(p.stdout)
    sizes = {state: side[state]["generation"]["bytes"] for state in ("active", "shadow")}
    assert all(isinstance(b, int) and b > 0 for b in sizes.values()), sizes
    p = cli("reembed", "sizes", "--eval", str(qs))
    table = p.stdout.decode()
    assert p.returncode == 0 and "MB" not in table.splitlines()[1], table  # the column is "size", not "MB"
    for b in sizes.values():
        assert human_size(b) in table, (b, table)

    p = cli("namespaces", "--json")
    (ns,) = [r for r in json.loads(p.stdout) if r["name"] == "sizes"]
    # a process of its own, 400 columns wide: off a terminal the table is 200 wide, and the test
    # tenant's long name made the generations cell wrap inside "(48.2" / "kB)" (CI)
    listed = " ".join(cli_process("namespaces", env={"COLUMNS": "400"}).stdout.decode().split())
    # two calls, two measurements: autovacuum may add a table's visibility map in between (CI saw
    # 32.3 kB in --json and more in the table), so each size is matched within a page or two
    unit = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}
    shown = [float(n) * unit[u] for n, u in re.findall(r"\((\d+(?:\.\d+)?) (B|kB|MB|GB)\)", listed)]
    assert len(shown) == len(ns["generations"]), (shown, listed)
    for g in ns["generations"]:
        assert any(abs(b - g["bytes"]) <= max(24_576, 0.1 * g["bytes"]) for b in shown), (g, listed)
