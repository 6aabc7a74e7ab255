"""Hostile input on the ingest side (issue 26): a file name that is not UTF-8, a YAML anchor bomb,
feeds in UTF-16/32 or that the parser only recovers, and SIGTERM while an item is parsed. Each case
is one recorded item at most; the rest of the folder is stored, and a rerun converges."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT
from tests.fixtures import adversarial as A

BAD = b"bad\xffname.md"  # not UTF-8: Linux allows any bytes in a name but "/" and NUL


def _folder(tmp_path: Path) -> Path:
    root = tmp_path / "names"
    root.mkdir()
    (root / "good.md").write_text("# Good\n\nA good file about copper.\n")
    (root / "other.txt").write_text("Another good file, about brass.\n")
    with open(os.path.join(os.fsencode(root), BAD), "wb") as f:
        f.write(b"# Bad name\n\nA file whose name is not UTF-8, about tin.\n")
    return root


def _stored(kb, ns: str) -> dict[str, tuple[str, dict]]:
    rows = (
        kb.connection()
        .execute(
            "SELECT source_uri, title, metadata FROM kbctl.documents WHERE namespace_id = %s", (kb.namespace(ns).id,)
        )
        .fetchall()
    )
    return {u: (t, m) for u, t, m in rows}


def test_a_file_name_that_is_not_utf8_is_stored_with_the_rest_of_its_folder(kb, tmp_path):
    """UnicodeEncodeError in the store before: the run failed, nothing stored, every rerun the same."""
    root = _folder(tmp_path)
    report = kb.ingest([str(root)], namespace="names")
    assert report.documents["new"] == 3 and not report.errors, report.to_json()
    stored = _stored(kb, "names")
    bad_uri = "file://" + os.path.abspath(root).replace("%", "%25") + "/bad%FFname.md"
    assert bad_uri in stored, sorted(stored)
    title, meta = stored[bad_uri]
    assert title == "Bad name" and meta["path"] == "bad\\xffname.md" and meta["name_not_utf8"] is True, meta
    assert kb.search("tin", "names", mode="lexical").hits

    # the uri is the exact bytes: it names the file again
    from kbctl.sources.folder import file_path

    assert os.fsencode(file_path(bad_uri)) == os.path.join(os.fsencode(root), BAD)

    again = kb.ingest([str(root)], namespace="names")
    assert again.documents["unchanged"] == 3 and again.chunks["embedded"] == 0, again.to_json()

    os.remove(os.path.join(os.fsencode(root), BAD))
    synced = kb.ingest([str(root)], namespace="names", sync=True)
    assert synced.documents["removed"] == 1 and bad_uri not in _stored(kb, "names"), synced.to_json()


def test_a_file_named_alone_and_an_error_about_it_are_stored_too(kb, tmp_path):
    root = _folder(tmp_path)
    bad = os.path.join(os.fsdecode(root), os.fsdecode(BAD))
    assert not kb.ingest([bad], namespace="alone").errors
    with open(os.path.join(os.fsencode(root), b"empty\xfe.md"), "wb"):
        pass
    report = kb.ingest([str(root)], namespace="alone")
    (err,) = report.errors
    assert err.source.endswith("/empty%FE.md"), err  # and the ledger took it: the run closed


def _kbctl(kb_home, tenant, *args, **kw):
    env = dict(os.environ, KBCTL_HOME=str(kb_home), KBCTL_TENANT=tenant, PYTHONWARNINGS="ignore")
    return subprocess.Popen(
        [sys.executable, "-m", "kbctl", "-p", "hash-384", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
        **kw,
    )


def _limit_memory():  # runs in the child: an expansion past this is a MemoryError, not a host brought down
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def test_the_ten_level_anchor_file_is_refused_and_its_folder_is_stored(kb, kb_home, tenant, tmp_path):
    """Drove ``kbctl ingest`` past 15 GB before (here: a MemoryError under a 3 GB address-space limit)."""
    root = tmp_path / "anchors"
    root.mkdir()
    (root / "bomb.md").write_text(A.anchor_bomb(10))
    (root / "fine.md").write_text("# Fine\n\nA fine file next to the bomb, about zinc.\n")
    kb.connection()  # the server up before the child starts
    p = _kbctl(kb_home, tenant, "ingest", str(root), "-n", "anchors", "--json", preexec_fn=_limit_memory)
    try:
        out, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 0 and b"Traceback" not in err, err.decode()
    report = json.loads(out)
    assert report["documents"]["new"] == 1 and report["documents"]["failed"] == 1, report
    (error,) = report["errors"]
    assert error["source"].endswith("/bomb.md") and "front matter refused" in error["message"], error
    stored = _stored(kb, "anchors")
    assert len(stored) == 1 and all(len(json.dumps(m)) < 1 << 20 for _, m in stored.values())


def _runs(kb, ns: str) -> list[str]:
    try:
        ns_id = kb.namespace(ns).id
    except Exception:
        return []
    rows = kb.connection().execute("SELECT status FROM kbctl.runs WHERE namespace_id = %s ORDER BY id", (ns_id,))
    return [r[0] for r in rows.fetchall()]


def test_sigterm_stops_an_ingest_parsing_a_hostile_item(kb, kb_home, tenant, tmp_path):
    """A front matter line of 200k spaces: the subset parser's pattern took minutes in C, holding the
    interpreter's lock, so the signal handler never ran and SIGTERM did not stop the ingest."""
    root = tmp_path / "slow"
    root.mkdir()
    for i in range(40):
        (root / f"slow{i:02}.md").write_text(A.long_line_front_matter(200_000) + f"\nslow file {i} about nickel\n")
    (root / "fine.md").write_text("# Fine\n\nA fine file about cobalt.\n")
    kb.connection()  # the server up before the child starts, so the two do not race to start it
    p = _kbctl(kb_home, tenant, "ingest", str(root), "-n", "slow")
    try:
        for _ in range(600):  # until the run is open (and its items are being read)
            if "running" in _runs(kb, "slow") or p.poll() is not None:
                break
            time.sleep(0.1)
        time.sleep(1.0)  # and the producer thread into the slow items
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=20)  # before: still parsing minutes later
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert b"Traceback" not in err, err.decode()
    if p.returncode != 0:  # stopped: the run is closed as interrupted
        assert _runs(kb, "slow")[-1:] == ["interrupted"], (p.returncode, err.decode(), _runs(kb, "slow"))
    again = _kbctl(kb_home, tenant, "ingest", str(root), "-n", "slow", "--json")
    try:
        out, err = again.communicate(timeout=300)
    finally:
        if again.poll() is None:
            again.kill()
            again.communicate()
    assert again.returncode == 0, err.decode()
    report = json.loads(out)
    docs = report["documents"]
    assert docs["new"] + docs["changed"] + docs["unchanged"] == 41 and docs["failed"] == 0, report
    assert kb.search("cobalt", "slow", mode="lexical").hits


def test_a_message_nested_too_deeply_is_one_line(kb, tmp_path, caplog):
    """MIME parts nested 3000 deep: RecursionError out of the e-mail package, logged with a traceback."""
    root = tmp_path / "mail"
    root.mkdir()
    (root / "deep.eml").write_bytes(A.deep_multipart(3000))
    (root / "fine.md").write_text("# Fine\n\nA fine file about cobalt.\n")
    report = kb.ingest([str(root)], namespace="mail")
    (err,) = report.errors
    assert err.source.endswith("/deep.eml") and "nested too deeply" in err.message, err
    assert report.documents["new"] == 1
    assert not [r.getMessage() for r in caplog.records if r.exc_info], "a traceback was logged"


def test_a_word_longer_than_an_index_row_is_searchable_and_its_folder_is_stored(kb, cli, tmp_path):
    """A run of 1 MB of letters, or of Chinese without punctuation, was one BM25 term: PostgreSQL
    refused its index row ("index row requires 11488 bytes, maximum size is 8191") and the whole
    run failed, exit 1, nothing of the folder stored. Terms are capped (``MAX_TERM_CHARS``), the
    same at query time, so the word is still found."""
    root = tmp_path / "long"
    root.mkdir()
    (root / "good.md").write_text("# Good\n\nA good file about pewter.\n")
    word = "q" * 1_000_000
    (root / "oneword.txt").write_text(word)
    (root / "cjk.txt").write_text("这是一个很长的中文句子没有空格" * 2000)
    p = cli("-p", "hash-384", "ingest", str(root), "-n", "long", "--json")
    assert p.returncode == 0, p.stderr.decode()
    report = json.loads(p.stdout)
    assert report["documents"]["new"] == 3 and report["errors"] == [] and report["verify"]["ok"], report
    from kbctl.textutil.analyze import MAX_TERM_CHARS, get_analyzer

    assert all(len(t) <= MAX_TERM_CHARS for t in get_analyzer().terms(word + " " + "字" * 5000))
    hits = kb.search(word[:5000], "long", mode="lexical").hits
    assert hits and hits[0].source == "oneword.txt"
    assert kb.search("pewter", "long", mode="lexical").hits[0].source == "good.md"
