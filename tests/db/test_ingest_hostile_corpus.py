"""The adversarial corpus (``tests/fixtures/adversarial.py``) through the real CLI, in a subprocess.

One ``kbctl ingest`` of the whole folder plus a feed served over HTTP whose summary-only entries link
to a private address (directly and through a redirect), with ``--follow-links``. The run must hold:
documents stored + items recorded as failed or skipped = items given; exit 0 with warnings, 1 with
``--strict``; every error one line, no traceback; nothing from outside the folder and nothing from a
private address searchable; and each valid file stored as when it is ingested alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from tests.conftest import ROOT, run_kbctl
from tests.fixtures import adversarial as A

NS = "adv"
_FEED_WORDS = "a summary only"


def file_uri(path) -> str:
    """A file's identity as the README states it: ``file://`` + its absolute path, only ``%`` and ``#`` encoded."""
    return "file://" + os.path.abspath(path).replace("%", "%25").replace("#", "%23")


def _page(marker: str) -> bytes:
    return (
        f"<html><head><title>Private</title></head><body><article><p>{marker} "
        + "private words behind the firewall " * 20
        + "</p></article></body></html>"
    ).encode()


class _Handler(BaseHTTPRequestHandler):
    routes: ClassVar[dict] = {}

    def do_GET(self):
        status, headers, body = self.routes.get((self.server.server_address[0], self.path), (404, {}, b""))
        self.send_response(status)
        for k, v in {"Content-Length": str(len(body)), **headers}.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _serve(host: str) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer((host, 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def web():
    """A public-by-configuration site (127.0.0.1, allowed) whose feed links to a private one (127.0.0.2)."""
    try:
        private = _serve("127.0.0.2")
    except OSError as e:
        pytest.skip(f"cannot listen on 127.0.0.2: {e}")
    public = _serve("127.0.0.1")
    pub, priv = (f"http://{h}:{s.server_address[1]}" for h, s in (("127.0.0.1", public), ("127.0.0.2", private)))
    secret = f"{priv}/secret.html"
    hop = f"{pub}/hop"
    _Handler.routes = {
        ("127.0.0.2", "/secret.html"): (200, {"Content-Type": "text/html"}, _page(A.PRIVATE_MARKER)),
        ("127.0.0.1", "/hop"): (302, {"Location": secret}, b""),
        ("127.0.0.1", "/feed.rss"): (
            200,
            {"Content-Type": "application/rss+xml"},
            A.rss(A.item("p1", _FEED_WORDS, link=secret), A.item("p2", _FEED_WORDS + " again", link=hop)).encode(),
        ),
    }
    yield {"feed": f"{pub}/feed.rss", "secret": secret, "hop": hop}
    for s in (public, private):
        s.shutdown()
        s.server_close()


def _kbctl(kb_home, tenant, cfg, *args):
    env = dict(os.environ, KBCTL_HOME=str(kb_home), KBCTL_TENANT=tenant, PYTHONWARNINGS="ignore")
    return subprocess.run(
        [sys.executable, "-m", "kbctl", "-c", str(cfg), "-p", "hash-384", *args],
        capture_output=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )


def _kbctl_here(kb_home, tenant, cfg, *args):
    """``kbctl`` in this process, for the commands whose output is read, not their process."""
    return run_kbctl(
        ["-c", str(cfg), "-p", "hash-384", *args], env={"KBCTL_HOME": str(kb_home), "KBCTL_TENANT": tenant}
    )


def _documents(kb, ns: str) -> dict[str, set[tuple[str, str, str]]]:
    """Per source URI: the (document URI, title, text of its chunks) stored for it.

    Not the content hash: it covers the metadata, where a file's path relative to the folder walked
    differs between a walk and a file named alone."""
    rows = (
        kb.connection()
        .execute(
            "SELECT d.source_uri, d.uri, coalesce(d.title, ''), coalesce(string_agg(c.text, ' ' ORDER BY c.position), '')"
            " FROM kbctl.documents d LEFT JOIN kbctl.chunks c ON c.namespace_id = d.namespace_id AND c.document_id = d.id"
            " WHERE d.namespace_id = %s GROUP BY 1, 2, 3",
            (kb.namespace(ns).id,),
        )
        .fetchall()
    )
    out: dict[str, set[tuple[str, str, str]]] = {}
    for s, u, t, x in rows:
        out.setdefault(s, set()).add((u, t, x))
    return out


def test_the_adversarial_corpus_through_the_cli(kb, kb_home, tenant, tmp_path, web):
    c = A.build(tmp_path / "root", tmp_path / "outside")
    cfg = tmp_path / "kbctl.toml"
    cfg.write_text('[fetch]\nallow_hosts = ["127.0.0.1"]\n')

    p = _kbctl(kb_home, tenant, cfg, "ingest", str(c.root), web["feed"], "-n", NS, "--json", "--follow-links")
    err = p.stderr.decode()
    assert p.returncode == 0, err
    assert "Traceback" not in err, err
    report = json.loads(p.stdout)
    docs = report["documents"]
    stored = docs["new"] + docs["changed"] + docs["unchanged"]

    # the feed: two entries stored from their summaries; each link to the private site refused and recorded
    given = c.given() + 2 + 2
    assert stored + docs["failed"] == given, (given, report)
    assert docs["failed"] == len(report["errors"])
    ledger = json.loads(_kbctl_here(kb_home, tenant, cfg, "errors", "-n", NS, "--json").stdout)
    key = lambda e: (e["stage"], e["source"], e["error_class"], e["message"])  # noqa: E731
    assert sorted(map(key, ledger)) == sorted(map(key, report["errors"] + report["warnings"]))
    for e in ledger:  # one line each
        assert "\n" not in e["message"] and "Traceback" not in e["message"], e

    by_source = _documents(kb, NS)
    failed = {e["source"] for e in report["errors"]}
    for rel, expect in c.expect.items():
        uri = file_uri(c.root / rel)
        if expect in (A.FAIL, A.SKIP):
            assert uri in failed and uri not in by_source, rel
        else:
            assert len(by_source.get(uri, ())) == expect and uri not in failed, (rel, report["errors"])
    assert len(by_source[web["feed"]]) == 2
    refused = {
        e["source"]: e["message"] for e in report["errors"] if e["stage"] == "fetch" and "://127.0.0.2" in e["message"]
    }
    assert len(refused) == 2 and all("private" in m or "loopback" in m for m in refused.values()), report["errors"]
    skipped = {e["source"] for e in report["errors"] if "symlink" in e["message"] or "FIFO" in e["message"]}
    assert skipped == {file_uri(c.root / r) for r, x in c.expect.items() if x == A.SKIP}

    # nothing from outside the root, nothing from the private site
    roots = (file_uri(c.root) + "/", web["feed"])
    assert all(s.startswith(roots) for s in by_source), sorted(by_source)
    lexical = json.loads(
        _kbctl_here(kb_home, tenant, cfg, "search", A.OUTSIDE_MARKER, "-n", NS, "-m", "lexical", "--json").stdout
    )
    assert lexical["hits"] == [], lexical["hits"]
    for marker in (A.OUTSIDE_MARKER, A.PRIVATE_MARKER, "nologin"):
        assert not kb.search(marker, NS, mode="lexical").hits, marker
        hybrid = kb.search(marker, NS).hits  # the dense lane always answers: never with the marker
        assert not any(marker in h.text for h in hybrid), marker
        n = (
            kb.connection()
            .execute(
                "SELECT count(*) FROM kbctl.chunks WHERE namespace_id = %s AND text ILIKE %s",
                (kb.namespace(NS).id, f"%{marker}%"),
            )
            .fetchone()[0]
        )
        assert n == 0, marker
    assert kb.search("quartz", NS, mode="lexical").hits

    # --strict: the same failures (retried, still failing) exit 1, still one line each
    p = _kbctl(
        kb_home,
        tenant,
        cfg,
        "ingest",
        str(c.root),
        web["feed"],
        "-n",
        NS,
        "--json",
        "--follow-links",
        "--strict",
        "--no-verify",
    )
    assert p.returncode == 1 and b"Traceback" not in p.stderr, p.stderr.decode()
    again = json.loads(p.stdout)["documents"]
    assert again["unchanged"] == stored and again["new"] == again["changed"] == 0 and again["failed"] == docs["failed"]

    # whether a valid file is stored never depends on the others: each alone, in another namespace
    for rel in c.valid():
        r = kb.ingest([str(c.root / rel)], namespace="alone", verify=False)
        assert r.documents["failed"] == 0, (rel, r.to_json())
    alone = _documents(kb, "alone")
    batch = {s: d for s, d in by_source.items() if s != web["feed"]}
    assert alone == batch


def test_records_with_nul_and_control_characters(kb):
    """Records (``kb.ingest_records``, the BEIR/JSONL path): cleaned, never a batch lost."""
    records = [
        {"id": "r-ok", "title": "Fine", "text": "a plain record about copper"},
        {"id": "r-nul", "title": "nul\x00title", "text": "text\x00with NUL and bell\x07", "tags": ["a\x00b"]},
        {"id": "r-sur", "title": "lone \ud800 surrogate", "text": "a surrogate \udc80 in the text"},
        {"id": "r-empty", "title": "empty", "text": ""},
        {"id": "r-ok", "title": "again", "text": "the same id twice in one import"},
    ]
    report = kb.ingest_records(records, "records", verify=False)
    d = report.documents
    skipped = [w for w in report.warnings if w.error_class == "DuplicateSourceWarning"]
    assert [w.source for w in skipped] == ["r-ok"]  # the id given twice: the first kept, the second a recorded skip
    assert d["new"] + d["failed"] + len(skipped) == len(records), report.to_json()
    assert d["failed"] == len(report.errors)
    stored = {u: x for s in _documents(kb, "records").values() for u, _, x in s}
    assert {"r-ok", "r-nul", "r-sur"} <= set(stored) and "copper" in stored["r-ok"]
    assert "\x00" not in stored["r-nul"] and "\ud800" not in stored["r-sur"]
    rows = (
        kb.connection()
        .execute(
            "SELECT title FROM kbctl.documents WHERE namespace_id = %s AND uri = 'r-nul'", (kb.namespace("records").id,)
        )
        .fetchone()
    )
    assert rows[0] == "nultitle"
