"""Ingest from a web server that behaves as real ones do: feeds polled with ETags, feeds served
with the wrong media type, pages that answer 404 or 410 once stored. A local server, allowed
through ``[fetch] allow_hosts``."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from typing import ClassVar

import pytest

import kbctl
from tests.httpserve import serving


class _Server(BaseHTTPRequestHandler):
    """``pages``: path → (status, Content-Type, body: text, or bytes as they are); a 200 carries an
    ETag of its body and answers a matching If-None-Match with 304."""

    pages: ClassVar[dict[str, tuple[int, str, str | bytes]]] = {}
    asked: ClassVar[list[tuple[str, str | None]]] = []

    def do_GET(self):
        status, ctype, text = self.pages.get(self.path, (404, "text/plain", "not here"))
        body = text if isinstance(text, bytes) else text.encode()
        etag = f'"{hash(body) & 0xFFFFFFFF:x}"'
        self.asked.append((self.path, self.headers.get("If-None-Match")))
        if status == 200 and self.headers.get("If-None-Match") == etag:
            self.send_response(304)
            self.send_header("ETag", etag)
            self.end_headers()
            return
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if status == 200:
            self.send_header("ETag", etag)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def site():
    _Server.pages, _Server.asked = {}, []
    with serving(_Server) as url:
        yield url


@pytest.fixture
def web_kb(kb_home, tenant, tmp_path):
    cfg = tmp_path / "kbctl.toml"
    cfg.write_text('[fetch]\nallow_hosts = ["127.0.0.1"]\nretries = 0\n')
    with kbctl.open(config=cfg, home=kb_home, tenant=tenant, profile="hash-384") as k:
        yield k


def _rss(items: list[int]) -> str:
    entries = "".join(
        f"<item><guid>entry-{n}</guid><title>Release {n}</title>"
        f"<description>Release {n} brings the quaffle{n} switch.</description></item>"
        for n in items
    )
    return f'<?xml version="1.0"?><rss version="2.0"><channel><title>Releases</title>{entries}</channel></rss>'


def _uris(k, name: str) -> set[str]:
    ns = k.namespace(name)
    rows = k.connection().execute("SELECT uri FROM kbctl.documents WHERE namespace_id = %s", (ns.id,))
    return {u for (u,) in rows}


def test_sync_removes_the_entries_that_left_a_feed_that_answers_304(web_kb, site):
    """A cron job polls a feed without --sync (an entry left it: kept, as documented) and runs
    --sync later: the feed has not changed since, answers 304, and the entry that left it stayed
    for ever, whatever the number of --sync runs."""
    feed = f"{site}/feed.rss"
    _Server.pages["/feed.rss"] = (200, "application/rss+xml", _rss([1, 2, 3]))
    assert web_kb.ingest([feed], "news", verify=False).documents["new"] == 3
    _Server.pages["/feed.rss"] = (200, "application/rss+xml", _rss([2, 3, 4]))
    polled = web_kb.ingest([feed], "news", verify=False)
    assert polled.documents == {"new": 1, "changed": 0, "unchanged": 2, "removed": 0, "failed": 0}
    assert f"{feed}#entry-1" in _uris(web_kb, "news")  # kept until --sync

    plan = web_kb.ingest([feed], "news", sync=True, plan=True, verify=False)
    synced = web_kb.ingest([feed], "news", sync=True, verify=False)
    assert synced.documents["removed"] == plan.documents["removed"] == 1, (synced.to_json(), plan.to_json())
    assert _uris(web_kb, "news") == {f"{feed}#entry-{n}" for n in (2, 3, 4)}
    assert synced.documents["unchanged"] == 3 and synced.chunks["embedded"] == 0, synced.to_json()

    # once in step, a poll is one conditional request again, and --sync removes nothing more
    _Server.asked.clear()
    again = web_kb.ingest([feed], "news", verify=False)
    assert again.documents["removed"] == 0 and _Server.asked[0][1] is not None, _Server.asked
    _Server.asked.clear()
    assert web_kb.ingest([feed], "news", sync=True, verify=False).documents["removed"] == 0
    # and a --sync poll of a feed whose stored entries are all of its last fetch asks conditionally
    # too (a cron job polling with --sync every few minutes is not sent the whole feed each time)
    assert [h is not None for _, h in _Server.asked] == [True], _Server.asked


@pytest.mark.parametrize("ctype", ["text/html", "text/html; charset=utf-8", "application/xhtml+xml", "text/plain"])
def test_a_feed_served_as_html_is_read_as_a_feed(web_kb, site, ctype):
    """Servers label feeds text/html often enough (feed validators warn of it): the feed was read as
    one HTML page, its entries' text run together ("Releases entry-1 Release 1 …"), no entry of its
    own, no ETag kept (so no 304), no link followed."""
    feed = f"{site}/news"
    _Server.pages["/news"] = (200, ctype, _rss([1, 2]))
    report = web_kb.ingest([feed], "news", verify=False)
    assert report.documents["new"] == 2 and not report.errors, report.to_json()
    assert _uris(web_kb, "news") == {f"{feed}#entry-1", f"{feed}#entry-2"}
    _Server.asked.clear()
    again = web_kb.ingest([feed], "news", verify=False)
    assert again.documents["new"] == 0 and _Server.asked[0][1] is not None, _Server.asked  # a conditional poll


def test_an_html_page_that_starts_like_xml_is_still_a_page(web_kb, site):
    _Server.pages["/page"] = (
        200,
        "text/html",
        '<?xml version="1.0" encoding="utf-8"?><!DOCTYPE html><html xmlns="http://www.w3.org/1999/xhtml">'
        "<head><title>Xhtml</title></head><body><p>An XHTML page about the zorbulator.</p></body></html>",
    )
    report = web_kb.ingest([f"{site}/page"], "pages", verify=False)
    assert report.documents["new"] == 1 and _uris(web_kb, "pages") == {f"{site}/page"}, report.to_json()


def test_a_gzipped_feed_a_windows_1252_text_and_an_oversize_page_by_url(web_kb, site, kb_home, tenant, tmp_path):
    """A feed gzipped without Content-Encoding (application/gzip, a .gz URL) was refused as a binary
    file; plain text in windows-1252 without a charset was refused with a hint to iconv a file; a
    page over max_bytes failed without saying how to raise it."""
    import gzip

    _Server.pages["/feed.xml.gz"] = (200, "application/gzip", gzip.compress(_rss([1, 2]).encode()))
    _Server.pages["/menu.txt"] = (
        200,
        "text/plain",
        "Menu\n\n\u201cCr\xe8me br\xfbl\xe9e\u201d \u2014 4 \u20ac".encode("cp1252"),
    )
    report = web_kb.ingest([f"{site}/feed.xml.gz", f"{site}/menu.txt"], "web", verify=False)
    assert report.documents["new"] == 3 and not report.errors, report.to_json()
    feed = f"{site}/feed.xml.gz"
    assert _uris(web_kb, "web") == {f"{feed}#entry-1", f"{feed}#entry-2", f"{site}/menu.txt"}
    hit = web_kb.search("crème brûlée", "web", mode="lexical").hits[0]
    assert hit.source == f"{site}/menu.txt" and "“Crème brûlée” — 4 €" in hit.text, hit

    cfg = tmp_path / "small.toml"
    cfg.write_text('[fetch]\nallow_hosts = ["127.0.0.1"]\nretries = 0\nmax_bytes = 1024\n')
    _Server.pages["/big"] = (200, "text/html", "<p>" + "words " * 1000 + "</p>")
    with kbctl.open(config=cfg, home=kb_home, tenant=tenant, profile="hash-384") as small:
        failed = small.ingest([f"{site}/big"], "web", verify=False)
        (err,) = failed.errors
        assert err.message == (
            f"{site}/big is 5.87 KB, larger than the 1 KB limit (max_bytes);"
            " raise max_bytes (in bytes) in the [fetch] table of kbctl.toml"
        ), err
        assert failed.to_json()["errors"][0]["message"] == err.message
        assert [e["message"] for e in small.admin.errors("web")] == [err.message]


def _row_versions(k, name: str) -> tuple[dict[int, str], dict[int, str]]:
    """The namespace's chunk rows and document rows: per row id, the transaction that wrote its
    current version (``xmin``)."""
    ns = k.namespace(name)
    conn = k.connection()
    chunks = conn.execute("SELECT id, xmin::text FROM kbctl.chunks WHERE namespace_id = %s", (ns.id,)).fetchall()
    docs = conn.execute("SELECT id, xmin::text FROM kbctl.documents WHERE namespace_id = %s", (ns.id,)).fetchall()
    return {int(i): x for i, x in chunks}, {int(i): x for i, x in docs}


def _written(now: dict[int, str], before: dict[int, str]) -> int:
    """Rows written since ``before``: new ones and those whose version changed."""
    return sum(1 for i, x in now.items() if before.get(i) != x)


def _etag(text: str) -> str:
    return f'"{hash(text.encode()) & 0xFFFFFFFF:x}"'  # as _Server sends it


def test_a_polled_feed_that_gained_an_entry_writes_the_chunk_rows_of_that_entry_only(web_kb, site):
    """A feed polled by cron gains one entry. Every entry carries its feed's fetch facts (the
    response's ``fetched_at``, ``etag``, ``sha256``, ``size``, the feed's count of ``entries``), all of
    which change with the feed's bytes, and they were copied into every chunk's metadata: each such
    poll rewrote every chunk row of every kept entry (no embedding, but N entries' chunk rows written
    to add one). The facts now live on the document row, which a kept entry writes anyway (the
    feed's new hash); hits show and filters read them from there. An entry whose text changed is
    written again as before."""
    n = 12
    feed = f"{site}/feed.rss"
    _Server.pages["/feed.rss"] = (200, "application/rss+xml", _rss(list(range(1, n + 1))))
    assert web_kb.ingest([feed], "news", verify=False).documents["new"] == n
    chunks, docs = _row_versions(web_kb, "news")
    assert len(chunks) == n  # one chunk an entry

    body = _rss(list(range(1, n + 2)))
    _Server.pages["/feed.rss"] = (200, "application/rss+xml", body)
    polled = web_kb.ingest([feed], "news", verify=False)
    assert polled.documents == {"new": 1, "changed": 0, "unchanged": n, "removed": 0, "failed": 0}, polled.to_json()
    assert polled.chunks == {"embedded": 1, "reused": n, "deleted": 0}, polled.to_json()
    chunks2, docs2 = _row_versions(web_kb, "news")
    assert (len(chunks2), _written(chunks2, chunks)) == (n + 1, 1)  # the new entry's chunk row, no other
    assert _written(docs2, docs) == n + 1  # one row a document: the kept ones take the feed's new hash

    # what a hit carries and a filter reads: the facts of the latest fetch, for kept entries too
    hits = web_kb.search("quaffle switch", "news", k=50, mode="lexical").hits
    assert len(hits) == n + 1, [h.source for h in hits]
    assert {(h.metadata["entries"], h.metadata["etag"]) for h in hits} == {(n + 1, _etag(body))}
    assert len({h.metadata["fetched_at"] for h in hits}) == 1
    assert all(h.metadata["source_type"] == "feed" and h.metadata["feed_title"] == "Releases" for h in hits)
    assert len(web_kb.search("", "news", k=50, filters=[f"entries={n + 1}"]).hits) == n + 1
    assert not web_kb.search("", "news", k=50, filters=[f"entries={n}"]).hits
    assert len(web_kb.search("quaffle5", "news", k=50, mode="lexical", filters=[f"etag='{_etag(body)}'"]).hits) == 1
    assert len(web_kb.search("", "news", k=50, filters=["!fetched_at"]).hits) == 0
    assert len(web_kb.search("", "news", k=50, filters=["entries>=13", "title~Release 1"]).hits) == 5

    # an entry whose text changed is written again, its chunk with it, and no other chunk row
    edited = body.replace("quaffle3 switch", "quaffleZ switch")
    _Server.pages["/feed.rss"] = (200, "application/rss+xml", edited)
    again = web_kb.ingest([feed], "news", verify=False)
    assert again.documents == {"new": 0, "changed": 1, "unchanged": n, "removed": 0, "failed": 0}, again.to_json()
    chunks3, _ = _row_versions(web_kb, "news")
    assert _written(chunks3, chunks2) == 1 and len(chunks3) == n + 1
    (hit,) = web_kb.search("quaffleZ", "news", k=5, mode="lexical").hits
    assert hit.source == f"{feed}#entry-3" and hit.metadata["etag"] == _etag(edited), hit.metadata
    assert web_kb.verify("news").ok
