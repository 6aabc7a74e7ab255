"""One orchestrator: ``kb.ingest`` and the NDJSON pipe build the same store and the same run ledger.

The one-shot call runs in this test's tenant; the pipe (``kbctl fetch | extract | chunk | embed |
store``, real subprocesses) in a tenant of its own, into a namespace of the same name. Stores are
compared by content (documents, chunk hashes, BM25 postings, lexical statistics), ledgers by run
status, counts and recorded errors: a run that crashed, was terminated or was killed included.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kbctl
from tests.conftest import ROOT, SAMPLE, run_kbctl

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "ingest"
NS = "orch"


# -- helpers -------------------------------------------------------------------------------------


def _env(kb_home, tenant: str) -> dict:
    return dict(os.environ, KBCTL_HOME=str(kb_home), KBCTL_TENANT=tenant, PYTHONWARNINGS="ignore")


def _kbctl(*args: str) -> list[str]:
    return [sys.executable, "-m", "kbctl", "-p", "hash-384", *args]


def _here(kb_home, tenant: str, *args: str, input: bytes | None = None):
    """``kbctl -p hash-384 ARGS`` in this process (``run_kbctl``: the CLI's error boundary and exit
    code), for a run whose result is checked, not its process."""
    return run_kbctl(["-p", "hash-384", *args], input=input, env={"KBCTL_HOME": str(kb_home), "KBCTL_TENANT": tenant})


def _upstream(corpus: Path) -> str:
    """The pipe up to (not including) ``store``."""
    k = " ".join(_kbctl())
    return f"set -o pipefail; {k} fetch {corpus} | {k} extract | {k} chunk -n {NS} | {k} embed -n {NS}"


def _pipe(env: dict, corpus: Path) -> subprocess.CompletedProcess:
    k = " ".join(_kbctl())
    return subprocess.run(
        ["bash", "-c", f"{_upstream(corpus)} | {k} store -n {NS}"], capture_output=True, env=env, cwd=ROOT, timeout=300
    )


def _embedded_records(env: dict, corpus: Path) -> list[bytes]:
    p = subprocess.run(["bash", "-c", _upstream(corpus)], capture_output=True, env=env, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    return p.stdout.splitlines(keepends=True)


def _corpus(root: Path, n: int = 0) -> Path:
    """The billing folder (md, pdf, html, eml with attachments), two bad files, and ``n`` generated notes."""
    shutil.copytree(SAMPLE / "support" / "billing", root)
    for bad in ("corrupt.pdf", "binary.txt"):
        shutil.copy(FIXTURES / bad, root / bad)
    words = "lantern harbour ledger ferry quartz meadow signal copper orchard tunnel beacon canyon glacier".split()
    for i in range(n):
        paras = [
            " ".join(words[(i * 7 + p * 5 + w * w) % len(words)] for w in range(60)) + f" note{i}p{p}."
            for p in range(4)
        ]
        (root / f"note{i:04d}.md").write_text(f"# Note {i}\n\n" + "\n\n".join(paras) + "\n")
    return root


def _ns_id(conn, tenant: str) -> int:
    return conn.execute("SELECT id FROM kbctl.namespaces WHERE tenant = %s AND name = %s", (tenant, NS)).fetchone()[0]


def _store(conn, tenant: str) -> dict:
    """What the namespace holds, without ids: documents, chunks, postings and lexical statistics."""
    ns = _ns_id(conn, tenant)
    q = lambda sql: conn.execute(sql, (ns,)).fetchall()  # noqa: E731
    return {
        "documents": dict(q("SELECT uri, content_hash FROM kbctl.documents WHERE namespace_id = %s")),
        "chunks": q(
            "SELECT d.uri, c.position, c.content_hash FROM kbctl.chunks c JOIN kbctl.documents d"
            " ON d.namespace_id = c.namespace_id AND d.id = c.document_id WHERE c.namespace_id = %s ORDER BY 1, 2"
        ),
        "postings": sorted(
            q(
                "SELECT c.content_hash, p.term, p.tf, p.dl FROM kbctl.lexical_postings p JOIN kbctl.chunks c"
                " ON c.namespace_id = p.namespace_id AND c.id = p.chunk_id WHERE p.namespace_id = %s"
            )
        ),
        "vocab": dict(q("SELECT term, df FROM kbctl.lexical_vocab WHERE namespace_id = %s")),
        "stats": q("SELECT chunk_count, total_length FROM kbctl.lexical_stats WHERE namespace_id = %s"),
    }


def _ledger(conn, tenant: str) -> list[tuple]:
    """Runs, oldest first: status, document and chunk counts, and the errors recorded."""
    ns = _ns_id(conn, tenant)
    runs = conn.execute(
        "SELECT id, status, counts FROM kbctl.runs WHERE namespace_id = %s ORDER BY id", (ns,)
    ).fetchall()
    out = []
    for run_id, status, counts in runs:
        errors = sorted(
            conn.execute(
                "SELECT stage, source, error_class, message FROM kbctl.run_errors WHERE namespace_id = %s AND run_id = %s",
                (ns, run_id),
            ).fetchall()
        )
        out.append((status, counts.get("documents"), counts.get("chunks"), errors))
    return out


def _assert_same(conn, a: str, b: str) -> None:
    sa, sb = _store(conn, a), _store(conn, b)
    assert sa["documents"] and sa["postings"]
    for key in sa:
        assert sa[key] == sb[key], key
    assert _ledger(conn, a) == _ledger(conn, b)


def _wait_for_documents(conn, tenant: str, proc: subprocess.Popen, timeout: float = 120) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        row = conn.execute(
            "SELECT count(*) FROM kbctl.documents d JOIN kbctl.namespaces n ON n.id = d.namespace_id"
            " WHERE n.tenant = %s AND n.name = %s",
            (tenant, NS),
        ).fetchone()
        if row[0]:
            return row[0]
        time.sleep(0.02)
    raise AssertionError(f"nothing stored before the process ended (exit {proc.poll()})")


def _status(conn, tenant: str) -> list[str]:
    return [r[0] for r in _ledger(conn, tenant)]


# -- the same store, the same ledger --------------------------------------------------------------


@pytest.mark.embedded_only  # reads both tenants' rows through the login (a superuser embedded)
def test_ingest_and_the_pipe_build_the_same_store_and_ledger(kb, kb_home, tenant, tmp_path):
    corpus = _corpus(tmp_path / "corpus")
    piped = tenant + "_pipe"
    kb.connection()  # migrated
    conn = kb.db.connect()  # the login, not the tenant's role: it reads both tenants' rows
    # Stored vectors are shared by every namespace of a profile within a tenant (row-level security
    # keeps each tenant to its own), so the second of two runs would reuse what the first embedded:
    # a third namespace in each tenant embeds the corpus, and both runs reuse it all.
    kb.ingest([str(corpus)], namespace="warm", verify=False)
    with kbctl.open(home=kb_home, tenant=piped, profile="hash-384") as other:
        other.ingest([str(corpus)], namespace="warm", verify=False)
    for _attempt in range(2):  # a first run, then an incremental one (unchanged sources, the same failures)
        report = kb.ingest([str(corpus)], namespace=NS)
        assert report.documents["failed"] == 2 and report.verify["ok"]
        p = _pipe(_env(kb_home, piped), corpus)
        assert p.returncode == 0, p.stderr.decode()
        stored = json.loads(p.stdout)
        assert stored["documents"] == report.documents and stored["chunks"] == report.chunks
        assert stored["errors"] == [e.to_json() for e in report.errors] and stored["verify"]["ok"]
        _assert_same(conn, tenant, piped)
    assert [(s, d["unchanged"]) for s, d, _, _ in _ledger(conn, tenant)] == [("partial", 0), ("partial", 15)]
    assert {e[:3] for e in _ledger(conn, tenant)[0][3]} == {
        ("extract", (corpus / "corrupt.pdf").as_uri(), "ExtractError"),
        ("extract", (corpus / "binary.txt").as_uri(), "ExtractError"),
    }


# -- runs that do not finish ----------------------------------------------------------------------


@pytest.mark.embedded_only  # reads both tenants' rows through the login (a superuser embedded)
def test_a_crashed_run_is_marked_failed_on_both_paths_and_a_rerun_converges(kb, kb_home, tenant, tmp_path):
    corpus = _corpus(tmp_path / "corpus", n=150)
    piped = tenant + "_pipe"
    env = _env(kb_home, piped)
    kb.connection()  # migrated
    conn = kb.db.connect()  # the login, not the tenant's role: it reads both tenants' rows

    class Boom(RuntimeError):
        pass

    def explode(event, data):  # an exception in the middle of consuming, after a first batch is stored
        if event == "stored":
            raise Boom("injected")

    with pytest.raises(Boom):
        kb.ingest([str(corpus)], namespace=NS, progress=explode)

    records = _embedded_records(env, corpus)
    half = records[: len(records) // 2] + [b"this is not a stage record\n"]
    p = subprocess.run(
        _kbctl("store", "-n", NS), input=b"".join(half), capture_output=True, env=env, cwd=ROOT, timeout=300
    )
    assert p.returncode == 2 and b"not JSON" in p.stderr and b"Traceback" not in p.stderr

    assert _status(conn, tenant) == _status(conn, piped) == ["failed"]
    for t in (tenant, piped):
        assert _store(conn, t)["documents"], "the crash came after a first batch was stored"

    kb.ingest([str(corpus)], namespace=NS)
    p = _here(kb_home, piped, "store", "-n", NS, input=b"".join(records))
    assert p.returncode == 0, p.stderr.decode()
    assert _status(conn, tenant) == _status(conn, piped) == ["failed", "partial"]
    sa, sb = _store(conn, tenant), _store(conn, piped)
    assert sa == sb and len(sa["documents"]) == 15 + 150


@pytest.mark.embedded_only  # reads both tenants' rows through the login (a superuser embedded)
def test_sigterm_marks_the_run_interrupted_on_both_paths_and_a_rerun_converges(kb, kb_home, tenant, tmp_path):
    _kill_mid_way_and_rerun(kb, kb_home, tenant, tmp_path, signal.SIGTERM)


@pytest.mark.embedded_only  # reads both tenants' rows through the login (a superuser embedded)
def test_sigkill_leaves_the_run_to_the_next_one_on_both_paths_and_a_rerun_converges(kb, kb_home, tenant, tmp_path):
    _kill_mid_way_and_rerun(kb, kb_home, tenant, tmp_path, signal.SIGKILL)


def _kill_mid_way_and_rerun(kb, kb_home, tenant: str, tmp_path: Path, sig: int) -> None:
    corpus = _corpus(tmp_path / "corpus", n=400)
    piped = tenant + "_pipe"
    kb.connection()  # migrated
    conn = kb.db.connect()  # the login, not the tenant's role: it reads both tenants' rows
    records = _embedded_records(_env(kb_home, piped), corpus)

    ingest = subprocess.Popen(
        _kbctl("ingest", str(corpus), "-n", NS, "--json"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_env(kb_home, tenant),
        cwd=ROOT,
    )
    store = subprocess.Popen(
        _kbctl("store", "-n", NS),
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_env(kb_home, piped),
        cwd=ROOT,
    )
    try:
        store.stdin.write(b"".join(records[: len(records) // 2]))  # stdin stays open: store waits for more
        store.stdin.flush()
        for proc, t in ((ingest, tenant), (store, piped)):
            _wait_for_documents(conn, t, proc)
            assert proc.poll() is None, proc.stderr.read().decode()
            proc.send_signal(sig)
    finally:
        for proc in (ingest, store):
            proc.wait(60)
    errs = [proc.stderr.read().decode() for proc in (ingest, store)]
    assert not any("Traceback" in e or "could not mark" in e for e in errs), errs
    # SIGTERM: marked on the way out; SIGKILL: left 'running', marked when the next run starts.
    marked = "interrupted" if sig == signal.SIGTERM else "running"
    assert _status(conn, tenant) == _status(conn, piped) == [marked]
    for t in (tenant, piped):
        assert 0 < len(_store(conn, t)["documents"]) < 15 + 400

    # The next runs (in this process: what they find and leave is checked, not their process).
    p = _here(kb_home, tenant, "ingest", str(corpus), "-n", NS, "--no-verify")
    assert p.returncode == 0, p.stderr.decode()
    p = _here(kb_home, piped, "store", "-n", NS, "--no-verify", input=b"".join(records))
    assert p.returncode == 0, p.stderr.decode()
    assert _status(conn, tenant) == _status(conn, piped) == ["interrupted", "partial"]
    sa, sb = _store(conn, tenant), _store(conn, piped)
    assert sa == sb and len(sa["documents"]) == 15 + 400


# -- chunk errors ---------------------------------------------------------------------------------


def test_a_chunk_error_is_an_item_error_on_both_paths(kb, monkeypatch, tmp_path):
    """``kbctl ingest`` and ``kbctl chunk`` both call ``steps.chunk_source``: a chunker bug is one ItemError."""
    import kbctl.ingest.steps
    from kbctl.ingest import stages
    from kbctl.ingest.fetch import fetch

    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "ok.md").write_text("# Fine\n\nA document that chunks.\n")
    (corpus / "bad.md").write_text("# Broken\n\nThe chunker fails on this one: KABOOM.\n")
    real = kbctl.ingest.steps.chunk_document

    def chunker(doc, *a, **k):
        if "KABOOM" in doc.text:
            raise ValueError("chunker failed")
        return real(doc, *a, **k)

    monkeypatch.setattr(kbctl.ingest.steps, "chunk_document", chunker)
    report = kb.ingest([str(corpus)], namespace=NS, verify=False)
    expected = {
        "stage": "chunk",
        "source": (corpus / "bad.md").as_uri(),
        "error_class": "ValueError",
        "message": "chunker failed",
    }
    assert [e.to_json() for e in report.errors] == [expected]

    recs = stages.chunk_records(stages.extract_records(stages.source_records(fetch([str(corpus)]))), kb.profile_for(NS))
    errors = [r["error"] for r in recs if r["type"] == "error"]
    assert errors == [expected]
