"""Acceptance of ingestion on the real embedded PostgreSQL, with the hash profile (no model to load).

Formats, incremental runs, the NDJSON pipe, a killed run, bad input, concurrent runs and the run
ledger. Library calls where that is enough; ``python -m kbctl`` subprocesses (same environment as
the ``cli`` fixture) where exit codes, pipes, signals or two processes are the point.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import numpy as np
import psycopg
import pytest

from kbctl.store.runs import LOCK_CLASS
from tests.conftest import ROOT, SAMPLE, run_kbctl
from tests.httpserve import serving

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "ingest"
BILLING = SAMPLE / "support" / "billing"


# -- helpers -------------------------------------------------------------------------------------


def _env(kb_home, tenant) -> dict:
    return dict(os.environ, KBCTL_HOME=str(kb_home), KBCTL_TENANT=tenant, PYTHONWARNINGS="ignore")


def _kbctl(*args: str) -> list[str]:
    return [sys.executable, "-m", "kbctl", *args]


def _run(env, *args: str, timeout: float = 300):
    return subprocess.run(_kbctl(*args), capture_output=True, env=env, cwd=ROOT, timeout=timeout)


def _here(env, *args: str):
    """``kbctl ARGS`` in this process (``run_kbctl``: the CLI's error boundary, its exit code, its
    stdout and stderr), for a command whose result is checked, not its process; ``env`` as for ``_run``."""
    return run_kbctl(args, env={k: env.get(k) for k in ("KBCTL_HOME", "KBCTL_TENANT", "KBCTL_CONFIG")})


def _json(p) -> dict | list:
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)


def _ns_id(conn, tenant: str, name: str) -> int | None:
    row = conn.execute("SELECT id FROM kbctl.namespaces WHERE tenant = %s AND name = %s", (tenant, name)).fetchone()
    return row[0] if row else None


def _counts(conn, tenant: str, name: str) -> tuple[int, int]:
    ns = _ns_id(conn, tenant, name)
    return conn.execute(
        "SELECT (SELECT count(*) FROM kbctl.documents WHERE namespace_id = %s),"
        " (SELECT count(*) FROM kbctl.chunks WHERE namespace_id = %s)",
        (ns, ns),
    ).fetchone()


def _snapshot(conn, tenant: str, name: str, vectors: bool = False) -> dict[str, dict]:
    """Per document URI: its hashes, parent, and its chunks (position, text, hash[, vector]) in order."""
    ns = _ns_id(conn, tenant, name)
    docs = {
        uri: {"content_hash": ch, "source_uri": su, "source_hash": sh, "parent_uri": pu, "chunk_count": n, "chunks": []}
        for uri, ch, su, sh, pu, n in conn.execute(
            "SELECT uri, content_hash, source_uri, source_hash, parent_uri, chunk_count FROM kbctl.documents WHERE namespace_id = %s",
            (ns,),
        )
    }
    rows = conn.execute(
        "SELECT d.uri, c.position, c.text, c.content_hash, c.id, v.embedding::real[] FROM kbctl.chunks c"
        " JOIN kbctl.documents d ON d.namespace_id = c.namespace_id AND d.id = c.document_id"
        " JOIN kbctl.generations g ON g.namespace_id = c.namespace_id AND g.state = 'active'"
        " LEFT JOIN kbctl.vectors v ON v.namespace_id = c.namespace_id AND v.chunk_id = c.id AND v.generation_id = g.id"
        " WHERE c.namespace_id = %s ORDER BY d.uri, c.position",
        (ns,),
    )
    for uri, pos, text, h, cid, emb in rows:
        docs[uri]["chunks"].append((pos, text, h, cid, np.asarray(emb, dtype=np.float32) if vectors else None))
    return docs


def _content(snap: dict[str, dict]) -> dict[str, tuple]:
    """What must match between two namespaces holding the same corpus (ids and vectors aside)."""
    return {
        u: (d["content_hash"], d["source_hash"], d["parent_uri"], [c[:3] for c in d["chunks"]]) for u, d in snap.items()
    }


def _write_corpus(root: Path, n: int) -> Path:
    """``n`` Markdown files of six paragraphs each (deterministic)."""
    root.mkdir(parents=True, exist_ok=True)
    words = (
        "lantern harbour ledger ferry quartz meadow signal copper orchard tunnel beacon canyon "
        "glacier violet ember summit prairie falcon nimbus anchor"
    ).split()
    for i in range(n):
        paras = [
            " ".join(words[(i * 7 + p * 13 + w * w) % len(words)] for w in range(70)) + f" doc{i}p{p}."
            for p in range(6)
        ]
        (root / f"doc{i:04d}.md").write_text(f"# Document {i}\n\n" + "\n\n".join(paras) + "\n")
    return root


# -- formats -------------------------------------------------------------------------------------


def test_every_format_in_the_sample_corpus_ingests(kb):
    report = kb.ingest([str(SAMPLE / "support"), str(SAMPLE / "engineering")], namespace="corpus")
    assert report.errors == [] and report.documents["failed"] == 0
    assert report.verify and report.verify["ok"], report.verify
    conn = kb.connection()
    ns = kb.namespace("corpus").id
    by_type = dict(
        conn.execute(
            "SELECT source_type, count(*) FROM kbctl.documents WHERE namespace_id = %s GROUP BY 1", (ns,)
        ).fetchall()
    )
    # 31 md; 8 txt + 1 .txt attachment; 4 html; 3 pdf + 1 .pdf attachment; 4 eml + 4 mbox messages; 8 rss + 4 atom entries
    assert by_type == {"markdown": 31, "text": 9, "html": 4, "pdf": 4, "email": 8, "feed": 12}
    assert report.documents["new"] == 68

    # PDF chunks carry their page; facts only on page 2 are found there.
    hit = kb.search("SKU-TEAM-ANNUAL-2024", "corpus", mode="lexical").hits[0]
    assert hit.source == "billing/pricing-and-plans.pdf" and hit.metadata["page"] == 2
    hit = kb.search("IP allowlisting private connectivity", "corpus", mode="lexical").hits[0]
    assert hit.source == "technical/connector-troubleshooting.pdf" and hit.metadata["page"] == 2
    on_page_2 = kb.search("SKU-TEAM-ANNUAL-2024", "corpus", filters=["page=2", "source_type=pdf"]).hits
    assert on_page_2 and all(h.metadata["page"] == 2 for h in on_page_2)
    pages = {
        p
        for (p,) in conn.execute(
            "SELECT DISTINCT c.page FROM kbctl.chunks c JOIN kbctl.documents d ON d.namespace_id = c.namespace_id"
            " AND d.id = c.document_id WHERE d.namespace_id = %s AND d.uri = %s",
            (ns, (BILLING / "pricing-and-plans.pdf").as_uri()),
        )
    }
    assert pages == {1, 2}

    # E-mail headers are metadata; attachments are child documents.
    docs = {
        u: (t, m, p)
        for u, t, m, p in conn.execute(
            "SELECT uri, title, metadata, parent_uri FROM kbctl.documents WHERE namespace_id = %s", (ns,)
        )
    }
    eml = (BILLING / "invoice-wire-transfer.eml").as_uri()
    title, meta, parent = docs[eml]
    assert parent is None and title == meta["subject"] == "Wire transfer details for invoice INV-2024-00817"
    assert meta["from"] == "Helena Brandt <billing@lumencloud.example>"
    assert meta["date"].startswith("2024-10-16") and meta["thread_id"] == "inv-2024-00817.wire.7f3a@lumencloud.example"
    children = {u: v for u, v in docs.items() if v[2] == eml}
    assert list(children) == [eml + "#attachment/wire-transfer-instructions.txt"]
    hit = kb.search("SWIFT", "corpus", mode="lexical").hits[0]
    assert hit.doc_id and hit.metadata["uri"] in children
    # the mbox thread: four messages sharing one thread id, each a document of its own
    mbox = (SAMPLE / "support/account/lost-2fa-device-thread.mbox").as_uri()
    thread = [v[1] for u, v in docs.items() if u.startswith(mbox + "#")]
    assert len(thread) == 4 and {m["thread_id"] for m in thread} == {"CAKx7Lq2-lost2fa-01@mail.brightpath.example"}
    assert mbox + "#T-58213.1.support@lumencloud.example" in docs
    pdf_child = (
        SAMPLE / "support/account/data-export-ready.eml"
    ).as_uri() + "#attachment/data-export-receipt-DSR-2024-11873.pdf"
    assert docs[pdf_child][2] == (SAMPLE / "support/account/data-export-ready.eml").as_uri()

    # HTML: the page title, the article without the site chrome around it.
    html = (BILLING / "dunning-schedule.html").as_uri()
    assert docs[html][0] == "Overdue invoices: reminder and suspension schedule"
    text = "\n".join(
        r[0]
        for r in conn.execute(
            "SELECT c.text FROM kbctl.chunks c JOIN kbctl.documents d ON d.namespace_id = c.namespace_id AND d.id = c.document_id"
            " WHERE d.namespace_id = %s AND d.uri = %s ORDER BY c.position",
            (ns, html),
        )
    )
    assert "suspen" in text.lower() and "Cookie settings" not in text and "Help Center" not in text

    # Feed entries are documents keyed by their feed and their guid (RSS) or id (Atom): <feed uri>#<guid>.
    rss = (SAMPLE / "engineering/releases/releases.rss").as_uri()
    title, meta, _ = docs[rss + "#lumencloud-changelog-sdk-3.14.2"]
    assert title.startswith("Python SDK v3.14.2") and meta["guid"] == "lumencloud-changelog-sdk-3.14.2"
    assert meta["feed_title"] == "Lumen Cloud Changelog"
    assert (
        SAMPLE / "engineering/releases/lumen-agent.atom"
    ).as_uri() + "#tag:lumencloud.example,2024:agent-1.9.1" in docs
    hit = kb.search("v3.14.2", "corpus", mode="lexical").hits[0]
    assert hit.source.endswith("releases.rss") and hit.metadata["uri"] == rss + "#lumencloud-changelog-sdk-3.14.2"


# -- incremental ---------------------------------------------------------------------------------


@pytest.fixture
def small_batches_kb(kb_home, tenant, tmp_path):
    """Like ``kb``, with the hash profile's model batches lowered from 64 chunks to 8 in this test's
    own config, so a group (``GROUP_BATCHES`` batches) is 256 chunks, four write batches, not 2048:
    the same crossings of the writer's thresholds with an eighth of the documents."""
    import kbctl

    cfg = tmp_path / "kbctl.toml"
    cfg.write_text("[profiles.hash-384]\nbatch_size = 8\n")
    k = kbctl.open(config=cfg, home=kb_home, tenant=tenant, profile="hash-384")
    yield k
    k.close()


def test_the_model_reads_whole_groups_of_batches_and_the_report_names_its_backend(small_batches_kb, monkeypatch):
    """The writer hands the model GROUP_BATCHES batches of chunks per call (the model sorts one call's
    texts by length before cutting batches, so a bigger call pads less), not each few documents'
    chunks; the run's report names the backend that embedded them, and a run that embeds nothing, none."""
    kb = small_batches_kb
    from kbctl.embed import GROUP_BATCHES
    from kbctl.embed.hashing import HashEmbedder

    calls: list[int] = []
    embed = HashEmbedder.embed_documents
    monkeypatch.setattr(
        HashEmbedder, "embed_documents", lambda self, texts: calls.append(len(texts)) or embed(self, texts)
    )
    group = GROUP_BATCHES * kb.profile_for("groups").batch_size
    batch = 64  # IngestOptions.batch_documents: the first write batch goes alone, then whole groups
    n = batch + group + 37
    records = [{"id": f"d{i}", "title": f"note {i}", "text": f"entry {i} of the ledger"} for i in range(n)]

    report = kb.ingest_records(records, "groups")
    assert report.documents["new"] == n and report.chunks["embedded"] == n
    assert calls == [batch, group, 37]  # one chunk a record; the rest at the end
    assert report.embedder == "hash" and report.to_json()["embedder"] == "hash"

    calls.clear()
    again = kb.ingest_records(records, "groups")  # unchanged: nothing read by the model
    assert calls == [] and again.embedder is None and "embedder" not in again.to_json()


def test_the_model_reads_the_next_group_while_the_last_one_is_written(small_batches_kb, monkeypatch):
    """A full group's model call runs on a thread while the group before it is written, so the
    model is not idle during the writes (docs/benchmarks.md, ingest). Shown by a model call that
    waits for a write of the group before it: done in turn, the run would wait for ever. The model
    still reads one group at a time: the next group's call starts once the last one's ends."""
    kb = small_batches_kb

    from kbctl.embed import GROUP_BATCHES
    from kbctl.embed.hashing import HashEmbedder
    from kbctl.ingest import writer as writer_mod

    group = GROUP_BATCHES * kb.profile_for("overlap").batch_size
    batch = 64
    n = batch + 3 * group + 37
    written, calls, overlapped = threading.Event(), [], []
    running, most = [0], [0]  # model calls under way, and the most at once
    embed, write = HashEmbedder.embed_documents, writer_mod.write_documents

    def embed_documents(self, texts):
        calls.append(len(texts))
        running[0] += 1
        most[0] = max(most[0], running[0])
        try:
            if len(calls) == 3:  # the second group: the first group's writes must run meanwhile
                overlapped.append(written.wait(30))
            time.sleep(0.2)  # long enough for a second call to start, were one let
            return embed(self, texts)
        finally:
            running[0] -= 1

    def write_documents(conn, ns, payload, *args, **kwargs):
        if len(calls) >= 3:  # a write while the second group's call is under way
            written.set()
        return write(conn, ns, payload, *args, **kwargs)

    monkeypatch.setattr(HashEmbedder, "embed_documents", embed_documents)
    monkeypatch.setattr(writer_mod, "write_documents", write_documents)
    records = [{"id": f"d{i}", "title": f"note {i}", "text": f"entry {i} of the ledger"} for i in range(n)]
    report = kb.ingest_records(records, "overlap")
    assert calls == [batch, group, group, group, 37]
    assert overlapped == [True]
    assert most == [1]  # never two model calls at once: they would share the cores
    assert report.documents["new"] == n and report.chunks["embedded"] == n
    conn = kb.connection()
    ns = kb.namespace("overlap")
    assert conn.execute("SELECT count(*) FROM kbctl.documents WHERE namespace_id = %s", (ns.id,)).fetchone()[0] == n


def test_incremental_reingest_sync_and_plan(kb, tmp_path):
    corpus = tmp_path / "billing"
    shutil.copytree(BILLING, corpus)
    conn, t = kb.connection(), kb.tenant
    first = kb.ingest([str(corpus)], namespace="inc", verify=False)
    assert first.documents["new"] == 15
    assert (
        first.chunks["embedded"] + first.chunks["reused"] == _counts(conn, t, "inc")[1] > 0
    )  # reused: cached by chunk hash

    # Unchanged: nothing is extracted or embedded.
    again = kb.ingest([str(corpus)], namespace="inc", verify=False)
    assert again.documents == dict(new=0, changed=0, unchanged=15, removed=0, failed=0)
    assert again.chunks["embedded"] == 0

    # One long document gets a paragraph more: only its changed chunks are embedded.
    before = _snapshot(conn, t, "inc")
    target = corpus / "plan-changes.md"
    uri = target.as_uri()
    n_before = before[uri]["chunk_count"]
    assert n_before >= 10
    target.write_text(
        target.read_text() + "\n\nAppendix: plan changes requested by phone are confirmed by e-mail within one hour.\n"
    )
    edit = kb.ingest([str(corpus)], namespace="inc", verify=False)
    assert edit.documents == dict(new=0, changed=1, unchanged=14, removed=0, failed=0)
    assert 0 < edit.chunks["embedded"] < n_before
    after = _snapshot(conn, t, "inc")
    assert edit.chunks["embedded"] + edit.chunks["reused"] == after[uri]["chunk_count"] >= n_before
    assert after[uri]["content_hash"] != before[uri]["content_hash"]
    assert any("confirmed by e-mail within one hour" in c[1] for c in after[uri]["chunks"])
    others = set(before) - {uri}
    assert set(after) == set(before)
    assert {u: (after[u]["content_hash"], [c[3] for c in after[u]["chunks"]]) for u in others} == {
        u: (before[u]["content_hash"], [c[3] for c in before[u]["chunks"]]) for u in others
    }  # not even rewritten

    # --plan writes nothing and reports what would happen.
    (corpus / "refunds.md").write_text(
        (corpus / "refunds.md").read_text() + "\n\nRefunds to gift cards are not possible.\n"
    )
    (corpus / "currency.md").unlink()
    runs_before = len(kb.runs("inc", limit=100))
    plan = kb.ingest([str(corpus)], namespace="inc", sync=True, plan=True)
    assert plan.plan and plan.run_id is None and plan.verify is None
    assert plan.documents == dict(new=0, changed=1, unchanged=13, removed=1, failed=0)
    assert plan.chunks["embedded"] > 0 and plan.tokens_to_embed > 0
    assert plan.chunks["deleted"] == after[(corpus / "currency.md").as_uri()]["chunk_count"]
    assert plan.to_json()["plan"] is True
    assert _snapshot(conn, t, "inc") == after  # same rows, same ids
    assert len(kb.runs("inc", limit=100)) == runs_before

    # Deleting a file then --sync removes exactly its document and its chunks.
    (corpus / "refunds.md").write_text((BILLING / "refunds.md").read_text())
    gone = (corpus / "currency.md").as_uri()
    docs_before, chunks_before = _counts(conn, t, "inc")
    sync = kb.ingest([str(corpus)], namespace="inc", sync=True)
    assert sync.documents["removed"] == 1 and sync.chunks["deleted"] == after[gone]["chunk_count"] > 0
    assert _counts(conn, t, "inc") == (docs_before - 1, chunks_before - after[gone]["chunk_count"])
    final = _snapshot(conn, t, "inc")
    assert set(final) == set(after) - {gone}
    assert (
        final[(corpus / "refunds.md").as_uri()]["content_hash"]
        == after[(corpus / "refunds.md").as_uri()]["content_hash"]
    )
    assert sync.verify["ok"], sync.verify
    # without --sync a missing file is left alone
    (corpus / "proration.md").unlink()
    kept = kb.ingest([str(corpus)], namespace="inc", verify=False)
    assert kept.documents["removed"] == 0 and (corpus / "proration.md").as_uri() in _snapshot(conn, t, "inc")


def test_a_plan_into_a_new_namespace_counts_the_vectors_the_embed_cache_holds_as_the_run_does(kb):
    """A plan for a namespace not created yet looked chunk hashes up under no profile (its
    placeholder's id -1), so it reported every chunk embedded (tokens to embed and all) while the
    run itself reuses the vectors the tenant's embed cache holds for the profile."""
    kb.ingest([str(BILLING)], namespace="first", verify=False)
    plan = kb.ingest([str(BILLING)], namespace="second", plan=True)
    assert "second" not in {n["name"] for n in kb.namespaces()}  # a plan creates nothing
    run = kb.ingest([str(BILLING)], namespace="second", verify=False)
    assert run.chunks["embedded"] == 0 and run.chunks["reused"] > 0, run.to_json()
    assert plan.chunks == run.chunks and plan.tokens_to_embed == 0, (plan.to_json(), run.to_json())


def test_a_plan_and_a_run_over_many_files_run_no_statement_once_per_file(kb, tmp_path, monkeypatch):
    """The writer asked the store for each source's stored documents (to find those it no longer
    produces) one statement per source: 5,000 round trips in a plan over 5,000 files, a third of its
    time. It asks once per write batch."""
    from collections import Counter

    import psycopg

    n = 150
    corpus = tmp_path / "many"
    corpus.mkdir()
    for i in range(n):
        (corpus / f"note{i}.md").write_text(f"# Note {i}\n\nThe zorblat{i} setting.\n")
    kb.ingest([str(corpus / "note0.md")], "many", verify=False)  # the namespace exists, one file stored
    run = psycopg.Cursor.execute
    statements: Counter[str] = Counter()

    def counted(self, q, *args, **kwargs):
        statements[q if isinstance(q, str) else q.as_string(self)] += 1
        return run(self, q, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", counted)
    for plan in (True, False):
        statements.clear()
        report = kb.ingest([str(corpus)], "many", plan=plan, verify=False)
        assert report.documents["new"] == n - 1, report.to_json()
        top, times = statements.most_common(1)[0]
        assert times < n // 2, (plan, times, top)


# -- the NDJSON pipe ----------------------------------------------------------------------------


def test_a_plan_with_another_profile_than_the_pin_is_refused_as_the_run_is(kb):
    """``--plan`` is the dry run a CI job gates on: with a profile other than the namespace's pin it
    reported the chunks it would embed and exited 0, while the run itself refuses (exit 2)."""
    from kbctl.errors import ProfileMismatchError

    kb.ingest([str(BILLING / "refunds.md")], namespace="pinned", verify=False)  # pinned to hash-384
    for plan in (True, False):
        with pytest.raises(ProfileMismatchError, match="pinned to profile 'hash-384'"):
            kb.ingest([str(BILLING)], namespace="pinned", profile="minilm", plan=plan, verify=False)
    assert kb.namespaces()[0]["documents"] == 1


def test_ndjson_pipe_builds_the_same_store_as_ingest(kb, kb_home, tenant):
    env = _env(kb_home, tenant)
    conn = kb.connection()  # the server is up before the pipe's processes start (alone, they race to start it)
    dirs = ["sample_corpus/support/billing", "sample_corpus/support/account"]  # pdf, eml + attachments, mbox
    k = f"{sys.executable} -m kbctl"
    pipe = (
        f"set -o pipefail; {k} fetch {' '.join(dirs)} | {k} extract | {k} chunk -n piped -p hash-384"
        f" | {k} embed -n piped -p hash-384 | {k} store -n piped -p hash-384"
    )
    p = subprocess.run(["bash", "-c", pipe], capture_output=True, env=env, cwd=ROOT, timeout=300)
    stored = _json(p)
    assert stored["errors"] == [] and stored["documents"]["new"] == 15 + 17 and stored["verify"]["ok"]
    direct = _json(_here(env, "-p", "hash-384", "ingest", *dirs, "-n", "direct", "--json", "--no-verify"))
    assert direct["documents"]["new"] == 32 and direct["errors"] == []

    a, b = _snapshot(conn, tenant, "piped", vectors=True), _snapshot(conn, tenant, "direct", vectors=True)
    assert set(a) == set(b) and len(a) == 32
    n_chunks = sum(len(d["chunks"]) for d in a.values())
    assert stored["chunks"]["embedded"] + stored["chunks"]["reused"] == n_chunks == sum(direct["chunks"].values())
    assert _content(a) == _content(b)
    for uri in a:
        for ca, cb in zip(a[uri]["chunks"], b[uri]["chunks"]):
            assert np.allclose(ca[4], cb[4], atol=1e-6), (uri, ca[0])

    # Piping the same folders again stores nothing new: unchanged sources are skipped.
    again = _json(subprocess.run(["bash", "-c", pipe], capture_output=True, env=env, cwd=ROOT, timeout=300))
    assert again["documents"]["new"] == again["documents"]["changed"] == 0 and again["chunks"]["embedded"] == 0


# -- a killed run ---------------------------------------------------------------------------------


def test_killed_ingest_converges_on_rerun(kb, kb_home, tenant, tmp_path):
    env = _env(kb_home, tenant)
    corpus = _write_corpus(tmp_path / "many", 400)
    conn = kb.connection()
    proc = subprocess.Popen(
        _kbctl("-p", "hash-384", "ingest", str(corpus), "-n", "killed", "--json"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    try:
        deadline, stored = time.monotonic() + 120, 0
        while time.monotonic() < deadline and proc.poll() is None:
            if _ns_id(conn, tenant, "killed") is not None:
                stored = _counts(conn, tenant, "killed")[0]
                if stored:
                    break
            time.sleep(0.02)
        assert proc.poll() is None, f"ingest ended before it could be killed: {proc.stderr.read().decode()}"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(30)
    docs_at_kill, chunks_at_kill = _counts(conn, tenant, "killed")
    assert 0 < docs_at_kill < 400
    declared = conn.execute(
        "SELECT sum(chunk_count) FROM kbctl.documents WHERE namespace_id = %s", (_ns_id(conn, tenant, "killed"),)
    ).fetchone()[0]
    assert chunks_at_kill == declared > 0  # whole documents only

    rerun = _json(_here(env, "ingest", str(corpus), "-n", "killed", "--json", "--no-verify"))
    assert rerun["errors"] == []
    assert (rerun["documents"]["new"], rerun["documents"]["unchanged"]) == (400 - docs_at_kill, docs_at_kill)
    clean = _json(_here(env, "-p", "hash-384", "ingest", str(corpus), "-n", "clean", "--json", "--no-verify"))
    assert clean["documents"]["new"] == 400

    assert (
        _counts(conn, tenant, "killed")
        == _counts(conn, tenant, "clean")
        == (400, clean["chunks"]["embedded"] + clean["chunks"]["reused"])
    )
    assert _content(_snapshot(conn, tenant, "killed")) == _content(_snapshot(conn, tenant, "clean"))
    ns = _ns_id(conn, tenant, "killed")
    assert (
        conn.execute(
            "SELECT count(*) - count(DISTINCT uri) FROM kbctl.documents WHERE namespace_id = %s", (ns,)
        ).fetchone()[0]
        == 0
    )
    verify = _here(env, "verify", "-n", "killed", "--json")
    assert verify.returncode == 0 and json.loads(verify.stdout)["ok"], verify.stdout.decode()
    statuses = [r["status"] for r in _json(_here(env, "runs", "-n", "killed", "--json"))]
    assert statuses == ["ok", "interrupted"]  # newest first: the killed run is marked when the next one starts


def test_a_signal_while_the_run_is_opened_is_held_to_the_first_safe_point(kb, monkeypatch):
    """Ctrl-C (or SIGTERM) arriving just after the run row is written, before the stream defers
    signals, raised there: the run stayed 'running' with its lock until the next run marked it. It is
    now held back like one during the stream, and the run is closed as interrupted on the way out."""
    from kbctl.ingest import pipeline

    opened = pipeline.runs_store.start_run

    def start_then_signal(*args, **kwargs):
        run_id = opened(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)  # delivered at once, to this (the main) thread
        return run_id

    monkeypatch.setattr(pipeline.runs_store, "start_run", start_then_signal)
    with pytest.raises(KeyboardInterrupt):
        kb.ingest([str(BILLING)], namespace="opened")
    (run,) = kb.runs("opened")
    assert run["status"] == "interrupted"
    monkeypatch.undo()
    again = kb.ingest([str(BILLING)], namespace="opened")
    assert again.errors == [] and [r["status"] for r in kb.runs("opened")] == ["ok", "interrupted"]


def test_an_interrupted_run_stops_its_extract_thread_before_closing_its_connection(kb, monkeypatch):
    """Ctrl-C while the producer thread ran a statement on its own connection: the run's end closed
    that connection under the statement, and the process died of a segmentation fault in libpq
    (seen once in CI, on the test above) instead of closing the run ``interrupted``. The thread is
    stopped (its statement cancelled) and waited for first."""

    from kbctl.ingest import pipeline, producer

    looked_up = producer.source_versions
    in_statement = threading.Event()

    def slow_lookup(conn, *args, **kwargs):
        in_statement.set()
        # the run stops just before the statement reaches the server (a cancel sent then is lost:
        # CI under load once waited the whole statement out), then while it runs
        time.sleep(1.0)
        conn.execute("SELECT pg_sleep(20)")  # a statement still running when the run stops
        return looked_up(conn, *args, **kwargs)

    def consume_then_interrupt(conn, req, items, report, **kwargs):
        assert in_statement.wait(30)  # the producer is inside its statement
        raise KeyboardInterrupt("interrupted")

    made = kb.session.tenant_connection
    closed_while_producing: list[bool] = []

    def tracked():  # the run's lookup connection: is the extract thread alive when it is closed?
        c = made()
        close = c.close

        def closing():
            closed_while_producing.append(any(t.name == "kbctl-extract" for t in threading.enumerate()))
            close()

        c.close = closing
        return c

    monkeypatch.setattr(kb.session, "tenant_connection", tracked)
    monkeypatch.setattr(producer, "source_versions", slow_lookup)
    monkeypatch.setattr(pipeline, "consume", consume_then_interrupt)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        kb.ingest([str(BILLING)], namespace="halted")
    assert closed_while_producing == [False], "the connection was closed under the extract thread"
    assert not [t for t in threading.enumerate() if t.name == "kbctl-extract"], "the extract thread outlived its run"
    assert time.monotonic() - started < 15  # its statement was cancelled, not waited out
    monkeypatch.undo()
    assert [r["status"] for r in kb.runs("halted")] == ["interrupted"]
    assert kb.ingest([str(BILLING)], namespace="halted").errors == []


# -- bad input -----------------------------------------------------------------------------------


class _Quiet404(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_error(404, "Not Found")

    def log_message(self, *args):
        pass


@pytest.fixture
def http_404():
    with serving(_Quiet404) as url:
        yield f"{url}/missing.html"


def _closed_port_url() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/page.html"


BAD = {"corrupt.pdf": "extract", "binary.txt": "extract", "latin1.txt": "extract", "malformed.rss": "extract"}


def test_bad_inputs_are_recorded_and_the_batch_goes_on(kb, kb_home, tenant, tmp_path, http_404):
    env = _env(kb_home, tenant)
    (tmp_path / "kbctl.toml").write_text('[fetch]\nallow_hosts = ["127.0.0.1"]\n')  # loopback is refused by default
    env["KBCTL_CONFIG"] = str(tmp_path / "kbctl.toml")
    batch = tmp_path / "batch"
    shutil.copytree(FIXTURES, batch)
    unreachable = _closed_port_url()
    p = _run(env, "-p", "hash-384", "ingest", str(batch), http_404, unreachable, "-n", "bad", "--json")
    assert p.returncode == 0, p.stderr.decode()
    report = json.loads(p.stdout)
    err = p.stderr.decode()
    assert "warning:" in err and "6 item(s) failed" in err and "Traceback" not in err
    assert report["documents"]["new"] == 2 and report["documents"]["failed"] == 6

    # The good files are stored and searchable.
    conn = kb.connection()
    uris = set(_snapshot(conn, tenant, "bad"))
    assert uris == {(batch / "good.md").as_uri(), (batch / "good.txt").as_uri()}
    assert kb.search("QM-7781", "bad", mode="lexical").hits[0].source == "good.md"

    # Each bad item is one row of the ledger: stage, source, class, message.
    errors = _json(_here(env, "errors", "-n", "bad", "--json"))
    assert len(errors) == 6 and {e["run_id"] for e in errors} == {report["run_id"]}
    by_source = {e["source"]: e for e in errors}
    expected = {(batch / name).as_uri(): stage for name, stage in BAD.items()} | {
        http_404: "fetch",
        unreachable: "fetch",
    }
    assert {s: e["stage"] for s, e in by_source.items()} == expected
    for e in errors:
        assert e["error_class"] and e["message"] and "\n" not in e["message"] and e["retried"] is False
    assert by_source[(batch / "corrupt.pdf").as_uri()]["error_class"] == "ExtractError"
    assert "PDF" in by_source[(batch / "corrupt.pdf").as_uri()]["message"]
    assert "UTF-8" in by_source[(batch / "latin1.txt").as_uri()]["message"]
    assert "binary" in by_source[(batch / "binary.txt").as_uri()]["message"]
    assert "404" in by_source[http_404]["message"]
    assert by_source[unreachable]["error_class"] == "SourceError"

    # --strict turns failed items into exit 1 (the good file still goes in).
    p = _run(
        env,
        "ingest",
        str(batch / "good.md"),
        str(batch / "corrupt.pdf"),
        str(batch / "latin1.txt"),
        "-n",
        "bad",
        "--strict",
    )
    assert p.returncode == 1 and b"Traceback" not in p.stderr and b"2 item(s) failed" in p.stderr

    # `kbctl runs` shows both runs with their counts.
    runs = _json(_here(env, "runs", "-n", "bad", "--json"))
    assert [(r["status"], r["errors"]) for r in runs] == [("partial", 2), ("partial", 6)]
    assert runs[1]["counts"]["documents"]["new"] == 2 and runs[1]["counts"]["documents"]["failed"] == 6
    assert runs[0]["counts"]["documents"]["unchanged"] == 1 and runs[0]["counts"]["documents"]["failed"] == 2

    # Fix one file; --retry-failed with no paths re-attempts the last run's failures only.
    (batch / "latin1.txt").write_text((batch / "latin1.txt").read_bytes().decode("latin-1"), encoding="utf-8")
    p = _here(env, "ingest", "-n", "bad", "--retry-failed", "--json")
    assert p.returncode == 0, p.stderr.decode()
    retry = json.loads(p.stdout)
    assert retry["documents"]["new"] == 1 and retry["documents"]["failed"] == 1
    assert [e["source"] for e in retry["errors"]] == [(batch / "corrupt.pdf").as_uri()]
    assert (batch / "latin1.txt").as_uri() in _snapshot(conn, tenant, "bad")
    assert kb.search("réception", "bad", mode="lexical").hits[0].source == "latin1.txt"
    ledger = _json(_here(env, "errors", "-n", "bad", "--json"))
    again = {(batch / "latin1.txt").as_uri(), (batch / "corrupt.pdf").as_uri()}
    assert len(ledger) == 6 + 2 + 1
    for e in ledger:  # earlier failures of the re-attempted sources are marked; the new one is not
        assert e["retried"] is (e["source"] in again and e["run_id"] != retry["run_id"]), e


def test_retry_failed_fetches_again_only_what_can_be_fetched_again(cli, tmp_path):
    """A failed stdin item cannot be fetched again: read as a path, ``--retry-failed`` recorded a
    new error about ``file://<cwd>/stdin:…``, a file that never existed."""
    p = cli("-p", "hash-384", "ingest", "-", "-n", "retry", "--json", "--no-verify", input=b"\x00\x01\xff binary")
    first = json.loads(p.stdout)
    assert len(first["errors"]) == 1 and first["errors"][0]["source"].startswith("stdin:")
    good = tmp_path / "good.md"
    good.write_text("# Good\n\nA good file beside the retry.\n")
    p = cli("ingest", str(good), "-n", "retry", "--retry-failed", "--json", "--no-verify")
    assert p.returncode == 0, p.stderr.decode()
    report = json.loads(p.stdout)
    assert report["documents"]["new"] == 1 and report["errors"] == [], report["errors"]


# -- concurrency ---------------------------------------------------------------------------------


def test_concurrent_ingests_into_one_namespace(kb, kb_home, tenant):
    env = _env(kb_home, tenant)
    conn = kb.connection()  # the server is up before the two processes race
    args = _kbctl("-p", "hash-384", "ingest", str(BILLING), "-n", "shared", "--json", "--no-verify")
    procs = [
        subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT) for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e.decode() for _, e in outs]
    reports = [json.loads(o) for o, _ in outs]
    assert sum(r["documents"]["new"] for r in reports) == 15  # the second waited, then found them unchanged
    assert sorted(r["documents"]["unchanged"] for r in reports) == [0, 15]

    single = _json(_run(env, "-p", "hash-384", "ingest", str(BILLING), "-n", "single", "--json", "--no-verify"))
    assert single["documents"]["new"] == 15
    assert _counts(conn, tenant, "shared") == _counts(conn, tenant, "single")
    assert _content(_snapshot(conn, tenant, "shared")) == _content(_snapshot(conn, tenant, "single"))
    ns = _ns_id(conn, tenant, "shared")
    assert (
        conn.execute(
            "SELECT count(*) FROM (SELECT uri FROM kbctl.documents WHERE namespace_id = %s"
            " GROUP BY uri HAVING count(*) > 1) d",
            (ns,),
        ).fetchone()[0]
        == 0
    )


def test_no_wait_fails_at_once_while_another_ingest_holds_the_lock(kb, kb_home, tenant):
    env = _env(kb_home, tenant)
    ns = kb.create_namespace("locked", "hash-384")
    holder = psycopg.connect(kb.db.dsn(), autocommit=True)
    try:
        holder.execute("SELECT pg_advisory_lock(%s, %s)", (LOCK_CLASS, ns.id))
        assert LOCK_CLASS == 27490
        t0 = time.monotonic()
        p = _run(env, "ingest", str(BILLING), "-n", "locked", "--no-wait")
        assert time.monotonic() - t0 < 30
        err = p.stderr.decode()
        assert p.returncode == 1 and p.stdout == b"" and "Traceback" not in err
        assert "error: another ingest into namespace 'locked' is running" in err and "hint:" in err
        assert _counts(kb.connection(), tenant, "locked") == (0, 0)
        assert kb.runs("locked") == []
    finally:
        holder.close()
    # once the lock is free, the same command goes through
    assert _run(env, "ingest", str(BILLING), "-n", "locked", "--no-wait", "--no-verify").returncode == 0
    assert _counts(kb.connection(), tenant, "locked")[0] == 15


def test_sync_removes_only_files_that_are_gone_not_those_a_filter_leaves_out(kb, tmp_path):
    """``--sync`` removes documents whose files are gone. A file still on disk that --include or
    --exclude (or an unfollowed symlink) leaves out of this walk is not gone: a narrowed re-ingest
    with --sync removed every document outside the filter (data loss)."""
    corpus = tmp_path / "c"
    (corpus / "sub").mkdir(parents=True)
    (corpus / "a.md").write_text("# Alpha\n\nAlpha paragraph about refunds.\n")
    (corpus / "b.txt").write_text("Beta text about invoices.\n")
    (corpus / "sub" / "c.md").write_text("# Gamma\n\nGamma paragraph about payments.\n")
    first = kb.ingest([str(corpus)], namespace="syncf", verify=False)
    assert first.documents["new"] == 3

    narrowed = kb.ingest([str(corpus)], namespace="syncf", include=["*.md"], sync=True, verify=False)
    assert narrowed.documents["removed"] == 0
    excluded = kb.ingest([str(corpus)], namespace="syncf", exclude=["sub/*"], sync=True, plan=True)
    assert excluded.documents["removed"] == 0
    assert len(_snapshot(kb.connection(), kb.tenant, "syncf")) == 3

    (corpus / "b.txt").unlink()  # gone, though the filter would not have walked it either
    (corpus / "a.md").unlink()
    gone = kb.ingest([str(corpus)], namespace="syncf", include=["*.md"], sync=True, verify=False)
    assert gone.documents["removed"] == 2
    assert set(_snapshot(kb.connection(), kb.tenant, "syncf")) == {(corpus / "sub" / "c.md").as_uri()}


def test_sync_keeps_the_documents_of_a_folder_that_cannot_be_read(kb, tmp_path, monkeypatch):
    """A folder made unreadable (``chmod 000`` for a user who is not root, a mount that answers
    EIO): its walk is one recorded error, and ``os.path.exists`` says False for every file in it,
    so ``--sync`` took them for gone and removed their documents, though they are still on disk.
    Only a file the system says is not there (ENOENT, ENOTDIR) is gone. (Root reads a chmod 000
    folder, so the test makes the walk and the stat fail as they do for another user.)"""
    corpus = tmp_path / "c"
    (corpus / "locked").mkdir(parents=True)
    (corpus / "a.md").write_text("# Alpha\n\nAlpha paragraph about refunds.\n")
    (corpus / "locked" / "b.md").write_text("# Beta\n\nBeta paragraph about invoices.\n")
    first = kb.ingest([str(corpus)], namespace="synclocked", verify=False)
    assert first.documents["new"] == 2

    locked = str(corpus / "locked")
    real_scandir, real_stat = os.scandir, os.stat

    def denied(path):
        p = os.fsdecode(path) if not isinstance(path, int) else ""
        if p == locked or p.startswith(locked + "/"):
            raise PermissionError(13, "Permission denied", p)

    monkeypatch.setattr(os, "scandir", lambda path=".": denied(path) or real_scandir(path))
    monkeypatch.setattr(os, "stat", lambda path, *a, **k: denied(path) or real_stat(path, *a, **k))
    report = kb.ingest([str(corpus)], namespace="synclocked", sync=True, verify=False)
    assert [e.source for e in report.errors] == [(corpus / "locked").as_uri()], report.errors
    assert report.documents["removed"] == 0, report.to_json()
    monkeypatch.undo()
    assert len(_snapshot(kb.connection(), kb.tenant, "synclocked")) == 2


def test_chunks_repeated_within_a_batch_are_counted(kb, tmp_path):
    """embedded + reused accounts for every chunk written, whatever the batch boundaries: ten
    identical paragraphs are one vector embedded and nine reused (the nine were counted nowhere)."""
    folder = tmp_path / "rep"
    folder.mkdir()
    paragraph = ("quokka marsupial island " * 150).strip()
    (folder / "r.txt").write_text("\n\n".join([paragraph] * 10))
    report = kb.ingest([str(folder)], namespace="repeats", verify=False)
    written = _counts(kb.connection(), kb.tenant, "repeats")[1]
    assert written >= 10
    assert report.chunks["embedded"] + report.chunks["reused"] == written, report.chunks
    assert report.chunks["embedded"] < written  # one vector for the identical chunks


def test_an_ingest_whose_model_fails_before_anything_is_written_leaves_no_namespace(kb, tmp_path, monkeypatch):
    """A profile whose model makes vectors of another dimension than it says fails as the model is
    made ready, before any run starts; the namespace the call had created stayed, empty and pinned
    to that profile, and once the profile was mended the next ingest was refused for mixing two
    models. A call that fails before it wrote anything leaves no namespace it made; one that
    existed before stays."""
    from kbctl import embed
    from kbctl.errors import EmbeddingError

    (tmp_path / "one.md").write_text("# One\n\nA document.\n")

    def mismatched(profile, **kw):
        raise EmbeddingError(
            f"model {profile.model!r} makes 384-d vectors but profile {profile.name!r} says 256",
            hint="fix `dimension` in the profile",
        )

    monkeypatch.setattr(embed, "prepare", mismatched)
    with pytest.raises(EmbeddingError, match="384-d"):
        kb.ingest([str(tmp_path)], "fresh-model", verify=False)
    assert "fresh-model" not in kb.namespace_names()
    kb.create_namespace("kept-model", "hash-384")
    with pytest.raises(EmbeddingError, match="384-d"):
        kb.ingest([str(tmp_path)], "kept-model", verify=False)
    assert "kept-model" in kb.namespace_names()
    monkeypatch.undo()
    report = kb.ingest([str(tmp_path)], "fresh-model", verify=False)
    assert report.documents["new"] == 1


def _message(n: int, subject: str | None = None, message_id: bool = False) -> str:
    return (
        f"From sender{n}@example.org Mon Oct 21 08:0{n}:00 2024\n"
        + (f"Message-ID: <m{n}@example.org>\n" if message_id else "")
        + f"From: Sender {n} <sender{n}@example.org>\nSubject: {subject or f'Question {n}'}\n"
        f"Date: Mon, 21 Oct 2024 08:0{n}:00 +0000\n\nThe body of message {n}: about the zorblat{n} setting.\n\n"
    )


def test_mbox_messages_without_a_message_id_keep_their_keys_when_one_is_inserted_before_them(kb, tmp_path):
    """Messages without a Message-ID were keyed by their position (``#message-<n>``): a message
    added at the front of the mbox shifted every later one's key, so all were replaced (changed)
    and the last one stored anew. They are keyed by a hash of their date, sender, subject and body;
    an exact copy of a message gets ``~2``, as a repeated Message-ID does."""
    box = tmp_path / "mail"
    box.mkdir()
    mbox = box / "inbox.mbox"
    mbox.write_text("".join(_message(n) for n in (1, 2, 3)))
    first = kb.ingest([str(box)], "mail", verify=False)
    assert first.documents["new"] == 3, first.to_json()
    mbox.write_text(_message(4, "A new first message") + "".join(_message(n) for n in (1, 2, 3)))
    again = kb.ingest([str(box)], "mail", verify=False)
    assert again.documents == {"new": 1, "changed": 0, "unchanged": 3, "removed": 0, "failed": 0}, again.to_json()
    assert again.chunks["embedded"] == 1, again.to_json()  # the new message's one chunk, no other
    mbox.write_text(_message(4, "A new first message") + "".join(_message(n) for n in (1, 2, 3, 3)))
    copy = kb.ingest([str(box)], "mail", verify=False)
    assert copy.documents["new"] == 1 and copy.documents["unchanged"] == 4, copy.to_json()
    assert [w.error_class for w in copy.warnings] == ["DuplicateIdWarning"], copy.warnings


def test_mbox_messages_stay_unchanged_when_a_message_is_added_to_their_mbox(kb, tmp_path):
    """Each message of an mbox carried the mbox file's ``size`` and ``mtime`` in its metadata, so a
    message added anywhere changed every other message's content hash: all were replaced. A
    message now carries its own size and not the file's mtime."""
    box = tmp_path / "mail"
    box.mkdir()
    mbox = box / "inbox.mbox"
    mbox.write_text("".join(_message(n, message_id=True) for n in (1, 2, 3)))
    assert kb.ingest([str(box)], "mail", verify=False).documents["new"] == 3
    mbox.write_text("".join(_message(n, message_id=True) for n in (1, 2, 3, 4)))
    again = kb.ingest([str(box)], "mail", verify=False)
    assert again.documents == {"new": 1, "changed": 0, "unchanged": 3, "removed": 0, "failed": 0}, again.to_json()
    hits = kb.search("zorblat2", "mail", k=1).hits
    assert hits and "mtime" not in hits[0].metadata and hits[0].metadata["size"] < mbox.stat().st_size


def test_a_message_gone_from_its_mbox_is_removed_with_its_chunks_counted_in_a_plan_as_in_the_run(kb, tmp_path):
    """A message that left its mbox leaves the store when the mbox is read again, and the run said
    ``removed: 1`` but ``deleted: 0`` chunks, and its ``--plan`` said ``removed: 0``: what a plan
    and a run report of a source's documents that it no longer produces now agree, chunks included."""
    box = tmp_path / "mail"
    box.mkdir()
    mbox = box / "inbox.mbox"
    mbox.write_text("".join(_message(n, message_id=True) for n in (1, 2, 3)))
    assert kb.ingest([str(box)], "mail", verify=False).documents["new"] == 3
    mbox.write_text("".join(_message(n, message_id=True) for n in (1, 3)))
    plan = kb.ingest([str(box)], "mail", verify=False, plan=True)
    run = kb.ingest([str(box)], "mail", verify=False)
    assert run.documents == {"new": 0, "changed": 0, "unchanged": 2, "removed": 1, "failed": 0}, run.to_json()
    assert run.chunks["deleted"] == 1, run.to_json()
    assert (plan.documents, plan.chunks["deleted"]) == (run.documents, 1), plan.to_json()
    assert not kb.search("zorblat2", "mail", k=3, mode="lexical").hits


def test_an_entry_gone_from_a_feed_file_stays_until_sync(kb, tmp_path):
    """Feed entries leave the store only with --sync (a feed drops old entries routinely), but that
    held only for a feed fetched by URL: a feed file in a folder lost its entry at the next run."""
    feeds, feed = _feed(tmp_path)
    assert kb.ingest([str(feeds)], "news", verify=False).documents["new"] == 3
    feed.write_text(_rss([2, 3, 4]))
    again = kb.ingest([str(feeds)], "news", verify=False)
    assert again.documents == {"new": 1, "changed": 0, "unchanged": 2, "removed": 0, "failed": 0}, again.to_json()
    assert kb.search("quaffle1", "news", k=3, mode="lexical").hits
    plan = kb.ingest([str(feeds)], "news", verify=False, sync=True, plan=True)
    synced = kb.ingest([str(feeds)], "news", verify=False, sync=True)
    assert synced.documents["removed"] == plan.documents["removed"] == 1, (synced.to_json(), plan.to_json())
    assert synced.chunks["deleted"] == plan.chunks["deleted"] == 1
    assert not kb.search("quaffle1", "news", k=3, mode="lexical").hits


def _rss(items: list[int]) -> str:
    entries = "".join(
        f"<item><guid>entry-{n}</guid><title>Release {n}</title><link>https://example.org/r/{n}</link>"
        f"<description>Release {n} brings the quaffle{n} switch.</description></item>"
        for n in items
    )
    return f'<?xml version="1.0"?><rss version="2.0"><channel><title>Releases</title>{entries}</channel></rss>'


def _feed(tmp_path) -> tuple[Path, Path]:
    """A folder ``feeds`` holding ``releases.rss``, a feed of entries 1, 2 and 3: (folder, feed)."""
    feeds = tmp_path / "feeds"
    feeds.mkdir()
    feed = feeds / "releases.rss"
    feed.write_text(_rss([1, 2, 3]))
    return feeds, feed


def test_feed_entries_stay_unchanged_when_an_entry_is_added_to_their_feed(kb, tmp_path):
    """Each entry of a feed carried its feed's fetch facts (the feed's ``size``, ``sha256``,
    ``mtime``, ``fetched_at`` and its count of ``entries``) in its metadata, and a document's content
    hash covers its metadata: a feed that gained one entry changed every other entry's hash, so a
    cron job polling a feed was told every entry changed each time one was added."""
    feeds, feed = _feed(tmp_path)
    assert kb.ingest([str(feeds)], "news", verify=False).documents["new"] == 3
    feed.write_text(_rss([4, 1, 2, 3]))
    again = kb.ingest([str(feeds)], "news", verify=False)
    assert again.documents == {"new": 1, "changed": 0, "unchanged": 3, "removed": 0, "failed": 0}, again.to_json()
    # an entry whose own text changed is still changed
    feed.write_text(_rss([4, 1, 2, 3]).replace("quaffle2 switch", "quaffle2 switch, renamed"))
    third = kb.ingest([str(feeds)], "news", verify=False)
    assert third.documents == {"new": 0, "changed": 1, "unchanged": 3, "removed": 0, "failed": 0}, third.to_json()


def _ingest_rewritten(kb, tmp_path, name: str, first: str, second: str):
    """Ingest a folder of one page ``name`` holding ``first`` (one new document) into ``pages``,
    rewrite the page as ``second`` and ingest it again: the second run's report."""
    docs = tmp_path / "docs"
    docs.mkdir()
    page = docs / name
    page.write_text(first)
    assert kb.ingest([str(docs)], "pages", verify=False).documents["new"] == 1
    page.write_text(second)
    return kb.ingest([str(docs)], "pages", verify=False)


def test_a_file_touched_or_rewritten_with_the_same_text_is_unchanged(kb, tmp_path):
    """A file whose bytes changed but whose document did not (a line ending, a trailing blank) was
    reported changed because its metadata held the file's ``size``: the document is the same text,
    title and metadata of its own, so it is unchanged (and embeds nothing)."""
    text = "# Page\n\nThe frobnitz dial turns left.\n"
    again = _ingest_rewritten(kb, tmp_path, "page.md", text, text + "\n\n")
    assert again.documents["unchanged"] == 1 and again.documents["changed"] == 0, again.to_json()


def test_a_documents_own_metadata_named_like_a_fetch_fact_is_part_of_its_version(kb, tmp_path):
    """Only the fetch facts of the source (its file's ``size``, a response's ``sha256``…) are left
    out of a document's content hash. Front matter or a record's metadata of the same names is the
    document's own: an edit of it (``sha256:`` of a release, ``size:`` of a product) was not stored,
    the document was found unchanged and kept its old value."""
    release = "---\nsha256: {}\nsize: XL\n---\n# Release\n\nThe frobnitz release notes.\n"
    again = _ingest_rewritten(kb, tmp_path, "release.md", release.format("aaaa"), release.format("bbbb"))
    assert again.documents["changed"] == 1, again.to_json()
    assert kb.search("frobnitz", "pages", k=1).hits[0].metadata["sha256"] == "bbbb"
    # a record's metadata is all its own
    rec = {"id": "sku-1", "title": "Shirt", "text": "A frobnitz shirt.", "metadata": {"size": "XL"}}
    assert kb.ingest_records([rec], "records", verify=False).documents["new"] == 1
    changed = kb.ingest_records([{**rec, "metadata": {"size": "L"}}], "records", verify=False)
    assert changed.documents["changed"] == 1, changed.to_json()
    assert kb.search("frobnitz", "records", k=1).hits[0].metadata["size"] == "L"


def test_gzipped_files_in_a_folder_are_ingested_and_skipped_when_unchanged(kb, tmp_path):
    """A folder's ``notes.md.gz`` was never taken, and one named directly was refused as binary:
    it is read as the Markdown it holds under its own uri, skipped on the next run while its bytes
    are the same (the source hash is of what it holds), read again once they change; a corrupt one
    is recorded with its reason while the rest of the batch goes in."""
    import gzip

    docs = tmp_path / "docs"
    docs.mkdir()
    notes = docs / "notes.md.gz"
    notes.write_bytes(gzip.compress(b"# Notes\n\nThe frobnitz dial turns left.\n"))
    (docs / "page.html.gz").write_bytes(gzip.compress(b"<title>Page</title><p>A zorblax lever.</p>"))
    (docs / "broken.txt.gz").write_bytes(gzip.compress(b"cut " * 100)[:25])
    first = kb.ingest([str(docs)], "packed", verify=False)
    assert first.documents["new"] == 2 and first.documents["failed"] == 1, first.to_json()
    (err,) = first.errors
    assert err.source == (docs / "broken.txt.gz").as_uri() and "corrupt gzip file (cut short)" in err.message
    hit = kb.search("frobnitz", "packed", k=1).hits[0]
    assert hit.metadata["abs_path"] == str(notes) and hit.title == "Notes"
    assert hit.metadata["source_type"] == "markdown" and hit.metadata["path"] == "notes.md.gz"
    assert kb.search("zorblax", "packed", k=1).hits[0].title == "Page"
    again = kb.ingest([str(docs)], "packed", verify=False)
    assert again.documents["unchanged"] == 2 and again.chunks["embedded"] == again.chunks["reused"] == 0, (
        again.to_json()
    )
    notes.write_bytes(gzip.compress(b"# Notes\n\nThe frobnitz dial turns right.\n"))
    edit = kb.ingest([str(docs)], "packed", verify=False)
    assert edit.documents["changed"] == 1 and edit.documents["unchanged"] == 1, edit.to_json()
    assert "turns right" in kb.search("frobnitz", "packed", k=1).hits[0].text


def test_bzip2_and_xz_files_in_a_folder_are_ingested_and_skipped_when_unchanged(kb, tmp_path):
    """As gzipped files are: a folder's ``notes.md.bz2`` and ``page.html.xz`` were never taken (and,
    named, refused as binary); read as what they hold, skipped while unchanged, a cut one recorded."""
    import bz2
    import lzma

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md.bz2").write_bytes(bz2.compress(b"# Notes\n\nThe frobnitz dial turns left.\n"))
    (docs / "page.html.xz").write_bytes(lzma.compress(b"<title>Page</title><p>A zorblax lever.</p>"))
    (docs / "broken.txt.xz").write_bytes(lzma.compress(b"cut " * 100)[:30])
    first = kb.ingest([str(docs)], "packed", verify=False)
    assert first.documents["new"] == 2 and first.documents["failed"] == 1, first.to_json()
    (err,) = first.errors
    assert err.source == (docs / "broken.txt.xz").as_uri() and "corrupt xz file (cut short)" in err.message
    assert "xz -t" in err.message, err.message
    hit = kb.search("frobnitz", "packed", k=1).hits[0]
    assert hit.title == "Notes" and hit.metadata["source_type"] == "markdown", hit.metadata
    assert hit.metadata["path"] == "notes.md.bz2"
    assert kb.search("zorblax", "packed", k=1).hits[0].title == "Page"
    again = kb.ingest([str(docs)], "packed", verify=False)
    assert again.documents["unchanged"] == 2, again.to_json()
