"""One bad item never costs the others: per-document isolation, identities by construction, clean text.

Small inputs generated in ``tmp_path``, ingested with the hash profile into the test's own tenant.
Every run is checked against the invariant: each item given is stored, or recorded as failed (with
its stage and reason), and whether a valid file is stored never depends on the other files.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbctl.sources.folder import file_uri
from tests.httpserve import serving


def _rss(*items: str, title: str = "Feed") -> str:
    return f'<?xml version="1.0"?><rss version="2.0"><channel><title>{title}</title>{"".join(items)}</channel></rss>'


def _item(guid: str | None, text: str, *, permalink: bool = True, link: str | None = None) -> str:
    g = (
        ""
        if guid is None
        else f"<guid{'' if permalink else ' isPermaLink=' + chr(34) + 'false' + chr(34)}>{guid}</guid>"
    )
    lk = f"<link>{link}</link>" if link else ""
    return f"<item>{g}{lk}<title>{text[:20]}</title><description>{text}</description></item>"


def _docs(kb, ns: str) -> dict[str, dict]:
    """Per stored document URI: its source URI, title and text (chunks joined)."""
    conn = kb.connection()
    nid = kb.namespace(ns).id
    rows = conn.execute(
        "SELECT d.uri, d.source_uri, d.title, string_agg(c.text, ' ' ORDER BY c.position), d.metadata"
        " FROM kbctl.documents d LEFT JOIN kbctl.chunks c ON c.namespace_id = d.namespace_id AND c.document_id = d.id"
        " WHERE d.namespace_id = %s GROUP BY d.uri, d.source_uri, d.title, d.metadata",
        (nid,),
    )
    return {u: {"source": s, "title": t, "text": x or "", "metadata": m} for u, s, t, x, m in rows}


def _invariant(report, given: dict[str, int]) -> None:
    """``given`` maps each source URI to the documents it holds: stored + failed = given, where a
    store failure is one document and an extract (or chunk) failure all of its source's."""
    d = report.documents
    stored = d["new"] + d["changed"] + d["unchanged"]
    failed = sum(1 if e.stage == "store" else given[e.source] for e in report.errors)
    assert stored + failed == sum(given.values()), report.to_json()
    assert d["failed"] == len(report.errors) and not any(e.is_warning for e in report.errors), report.to_json()


def _stored_of(kb, ns: str, source: str) -> set[str]:
    return {u for u, v in _docs(kb, ns).items() if v["source"] == source}


# -- a batch is not lost for one item ------------------------------------------------------------


def test_duplicate_guids_do_not_lose_the_batch(kb, tmp_path):
    d = tmp_path / "batch"
    d.mkdir()
    (d / "notes.md").write_text("# Notes\n\nThe valid file QX-4411 must land.\n")
    (d / "a.rss").write_text(_rss(_item("1", "alpha one"), _item("2", "alpha two")))
    (d / "b.rss").write_text(_rss(_item("1", "bravo one")))  # shares GUID 1 with a.rss
    (d / "c.rss").write_text(
        _rss(_item("x", "charlie first", permalink=False), _item("x", "charlie again", permalink=False))
    )
    report = kb.ingest([str(d)], namespace="dup", verify=False)
    docs = _docs(kb, "dup")
    a, b, c = (file_uri(d / n) for n in ("a.rss", "b.rss", "c.rss"))
    assert set(docs) == {file_uri(d / "notes.md"), f"{a}#1", f"{a}#2", f"{b}#1", f"{c}#x", f"{c}#x~2"}
    assert "charlie first" in docs[f"{c}#x"]["text"] and "charlie again" in docs[f"{c}#x~2"]["text"]
    assert report.errors == [] and report.documents["new"] == 6
    assert [(w.source, w.stage) for w in report.warnings] == [(c, "extract")]
    assert "x~2" in report.warnings[0].message
    _invariant(report, {file_uri(d / "notes.md"): 1, a: 2, b: 1, c: 2})
    ledger = kb.errors("dup")
    assert [(e["source"], e["error_class"]) for e in ledger] == [(c, "DuplicateIdWarning")]
    assert kb.runs("dup")[0]["status"] == "ok"

    # --plan says what the run did, the repeated GUID included
    plan = kb.ingest([str(d)], namespace="dup2", plan=True)
    assert plan.documents["new"] == 6 and [w.source for w in plan.warnings] == [c]


def test_nul_in_front_matter_is_cleaned_not_fatal(kb, tmp_path):
    d = tmp_path / "nul"
    d.mkdir()
    (d / "ok.md").write_text("# Fine\n\nA valid file beside the odd one.\n")
    (d / "toml.md").write_text(
        '+++\ntitle = "Bad\\u0000Title"\ntags = ["a\\u0000b"]\nscore = nan\n+++\n\nBody of the TOML file.\n'
    )
    (d / "yaml.md").write_text(
        '---\ntitle: "Yaml\\u0000Title\\udc80"\nwhen: 2024-13-45\n---\n\nBody of the YAML file.\n'
    )
    report = kb.ingest([str(d)], namespace="nul", verify=False)
    docs = _docs(kb, "nul")
    assert set(docs) == {file_uri(d / n) for n in ("ok.md", "toml.md", "yaml.md")}, report.to_json()
    toml = docs[file_uri(d / "toml.md")]
    assert toml["title"] == "BadTitle" and toml["metadata"]["tags"] == ["ab"] and "score" not in toml["metadata"]
    assert docs[file_uri(d / "yaml.md")]["title"] == "YamlTitle"
    assert report.errors == []
    notes = {w.source: w.message for w in report.warnings}
    assert set(notes) == {file_uri(d / "toml.md"), file_uri(d / "yaml.md")}
    assert "NUL" in notes[file_uri(d / "toml.md")] and "score" in notes[file_uri(d / "toml.md")]
    _invariant(report, {file_uri(d / n): 1 for n in ("ok.md", "toml.md", "yaml.md")})

    # a date TOML cannot read: the front matter is left out with a warning, the file goes in
    (d / "date.md").write_text("+++\nwhen = 1979-13-45T07:32:00Z\n+++\n\nBody with a bad date.\n")
    report = kb.ingest([str(d)], namespace="nul", verify=False)
    assert report.documents["new"] == 1 and report.documents["unchanged"] == 3 and report.errors == []
    assert [(w.source, w.error_class) for w in report.warnings] == [(file_uri(d / "date.md"), "MetadataWarning")]


def test_a_document_the_database_refuses_fails_alone(kb):
    """The store's own guard: values that reach it uncleaned (NDJSON from elsewhere) fail one item."""
    from kbctl.store import write_documents
    from kbctl.textutil.analyze import get_analyzer
    from kbctl.types import Block, Chunk, Document, EmbeddedChunk

    ns = kb.create_namespace("raw")
    good = Document.from_blocks("x:good", "Good", [Block("good text")], "text")
    bad = Document.from_blocks("x:bad", "Bad", [Block("bad text")], "text")
    object.__setattr__(bad, "title", "nul\x00title")  # as if built without the cleaning
    vec = [0.1] * ns.dimension
    items = [(doc, [EmbeddedChunk(Chunk(doc.uri, 0, doc.text, 2, 0, len(doc.text)), vec)]) for doc in (bad, good)]
    stats = write_documents(kb.connection(), ns, items, get_analyzer("english"))
    assert stats.documents == 1 and [u for u, _, _ in stats.failed] == ["x:bad"]
    assert set(_docs(kb, "raw")) == {"x:good"}


def test_a_uri_past_the_databases_index_row_limit_fails_alone(kb, tmp_path):
    """A feed entry whose GUID is 8,000 random characters: its uri's B-tree row is past PostgreSQL's
    2,704 bytes ("index row size … exceeds btree version 4 maximum", SQLSTATE 54000, which psycopg
    raises as an OperationalError), so the whole run failed and nothing of the folder was stored."""
    import random
    import string

    rnd = random.Random(7)
    guid = "".join(rnd.choice(string.ascii_letters + string.digits) for _ in range(8000))
    d = tmp_path / "feeds"
    d.mkdir()
    (d / "long.rss").write_text(_rss(_item(guid, "an entry with a very long guid"), _item("2", "a fine entry")))
    (d / "good.md").write_text("# Good\n\nA good file about nickel.\n")
    report = kb.ingest([str(d)], namespace="longuri", verify=False)
    (error,) = report.errors
    assert error.stage == "store" and "index row" in error.message, error
    _invariant(report, {file_uri(d / "long.rss"): 2, file_uri(d / "good.md"): 1})
    assert set(_docs(kb, "longuri")) == {file_uri(d / "good.md"), f"{file_uri(d / 'long.rss')}#2"}


# -- one document never silently replaces another ------------------------------------------------


def test_two_feeds_with_guid_1_never_replace_each_other(kb, tmp_path):
    d = tmp_path / "feeds"
    d.mkdir()
    a, b = d / "a.rss", d / "b.rss"
    a.write_text(_rss(_item("1", "apples from feed A")))
    b.write_text(_rss(_item("1", "bananas from feed B")))
    for n in range(2):  # alternate runs
        for f, word in ((a, "apples"), (b, "bananas")):
            f.write_text(_rss(_item("1", f"{word} from feed {f.stem.upper()} run {n}")))
            report = kb.ingest([str(f)], namespace="alt", verify=False)
            assert report.errors == [] and report.documents["new"] + report.documents["changed"] == 1
            _invariant(report, {file_uri(f): 1})
    docs = _docs(kb, "alt")
    assert set(docs) == {f"{file_uri(a)}#1", f"{file_uri(b)}#1"}
    assert "apples" in docs[f"{file_uri(a)}#1"]["text"] and "bananas" in docs[f"{file_uri(b)}#1"]["text"]
    # both in one batch too
    report = kb.ingest([str(d)], namespace="both", verify=False)
    assert report.errors == [] and len(_docs(kb, "both")) == 2


def test_entry_whose_guid_is_a_page_uri_never_replaces_the_page(kb, tmp_path):
    d = tmp_path / "site"
    d.mkdir()
    page = d / "page.md"
    page.write_text("# The page\n\nThe page's own words PAGE-7.\n")
    feed = d / "news.rss"
    feed.write_text(_rss(_item(file_uri(page), "the entry's words ENTRY-9")))
    for targets in ([page], [feed], [page], [d]):
        report = kb.ingest([str(t) for t in targets], namespace="page", verify=False)
        assert report.errors == [], report.to_json()
        docs = _docs(kb, "page")
        assert "PAGE-7" in docs[file_uri(page)]["text"] and docs[file_uri(page)]["source"] == file_uri(page)
    (entry,) = set(docs) - {file_uri(page)}  # feedparser writes file:/// ids its own way; under the feed all the same
    assert entry.startswith(f"{file_uri(feed)}#file:") and "ENTRY-9" in docs[entry]["text"]


class _Site(BaseHTTPRequestHandler):
    pages: ClassVar[dict[str, tuple[str, str]]] = {}

    def do_GET(self):
        ctype, body = self.pages.get(self.path, ("text/plain", ""))
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body.encode())))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def site():
    with serving(_Site) as url:
        yield url


def test_follow_links_with_guid_equal_to_the_link(kb_home, tenant, tmp_path, site):
    import kbctl

    cfg = tmp_path / "kbctl.toml"
    cfg.write_text('[fetch]\nallow_hosts = ["127.0.0.1"]\n')
    page = f"{site}/post.html"
    _Site.pages = {
        "/post.html": (
            "text/html",
            "<html><head><title>Post</title></head><body><article><p>"
            + "The full post text. " * 20
            + "</p></article></body></html>",
        ),
        "/feed.rss": ("application/rss+xml", _rss(_item(page, "summary only", link=page))),
    }
    with kbctl.open(config=cfg, home=kb_home, tenant=tenant, profile="hash-384") as k:
        report = k.ingest([f"{site}/feed.rss"], namespace="links", follow_links=True, verify=False)
        assert report.errors == [], report.to_json()
        docs = _docs(k, "links")
        feed_uri = f"{site}/feed.rss"
        assert set(docs) == {page, f"{feed_uri}#{page}"}, set(docs)
        assert docs[page]["source"] == page and "full post text" in docs[page]["text"]


# -- canonical identities -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url, canonical",
    [
        ("HTTP://Example.COM:80/a/b?x=1#frag", "http://example.com/a/b?x=1"),
        ("https://example.com:443/", "https://example.com/"),
        ("https://example.com:8443/p", "https://example.com:8443/p"),
        ("https://EXAMPLE.com", "https://example.com/"),
    ],
)
def test_canonical_urls(url, canonical):
    from kbctl.sources.url import canonical_url

    assert canonical_url(url) == canonical


def test_a_file_named_like_an_entry_is_its_own_document(kb, tmp_path):
    d = tmp_path / "names"
    d.mkdir()
    (d / "f.rss").write_text(_rss(_item("1.txt", "the feed entry", permalink=False)))
    (d / "f.rss#1.txt").write_text("a file whose name looks like an entry\n")
    report = kb.ingest([str(d)], namespace="names", verify=False)
    assert report.errors == [] and report.documents["new"] == 2, report.to_json()
    docs = _docs(kb, "names")
    assert len(docs) == 2 and docs[file_uri(d / "f.rss#1.txt")]["metadata"]["abs_path"] == str(d / "f.rss#1.txt")
    assert f"{file_uri(d / 'f.rss')}#1.txt" in docs


# -- collisions -------------------------------------------------------------------------------------


def test_plan_predicts_collisions_and_the_run_resolves_them(kb, tmp_path):
    """Two sources producing one document URI in a run: the first (in stream order) is kept, the
    second recorded; a URI owned by another source is never taken over; --plan says so first."""
    ns = "coll"
    records = [
        {"id": "doc-1", "title": "One", "text": "first record"},
        {"id": "doc-2", "title": "Two", "text": "second record"},
    ]
    first = kb.ingest_records(records, ns, verify=False)
    assert first.documents["new"] == 2
    d = tmp_path / "coll"
    d.mkdir()
    (d / "a.md").write_text("# A\n\nplain file\n")
    feed = d / "f.rss"
    feed.write_text(_rss(_item("1", "entry one")))
    # an NDJSON store whose items claim documents of other sources
    from kbctl.ingest.pipeline import Item
    from kbctl.types import Block, Chunk, Document

    def item(source: str, uri: str, text: str) -> Item:
        doc = Document.from_blocks(uri, "T", [Block(text)], "text")
        return Item(source, "h-" + source, "file", ((doc, (Chunk(uri, 0, doc.text, 2, 0, len(doc.text)),)),))

    items = [
        item("src:a", "doc-1", "steals doc-1"),
        item("src:b", "new-x", "x from b"),
        item("src:c", "new-x", "x from c"),
    ]
    report = kb.store(items, ns, verify=False)
    assert report.documents["new"] == 1 and report.documents["failed"] == 2
    assert sorted((e.source, e.stage, e.error_class) for e in report.errors) == [
        ("src:a", "store", "UriCollision"),
        ("src:c", "store", "UriCollision"),
    ]
    docs = _docs(kb, ns)
    assert docs["doc-1"]["text"] == "first record" and docs["new-x"]["source"] == "src:b"
    _invariant(report, {"src:a": 1, "src:b": 1, "src:c": 1})

    # --plan predicts both kinds: a URI another source owns (a record keyed like the feed's entry),
    # and the same file given twice in one run; the run then does exactly that.
    entry = f"{file_uri(feed)}#1"
    kb.ingest_records([{"id": entry, "title": "R", "text": "a record keyed like an entry"}], "coll2", verify=False)
    plan = kb.ingest([str(d), str(d / "a.md")], namespace="coll2", plan=True)
    run = kb.ingest([str(d), str(d / "a.md")], namespace="coll2", verify=False)
    assert plan.documents == run.documents == dict(new=1, changed=0, unchanged=0, removed=0, failed=1)
    assert [e.to_json() for e in plan.errors] == [e.to_json() for e in run.errors]
    assert [(e.source, e.stage, e.error_class) for e in run.errors] == [(file_uri(feed), "store", "UriCollision")]
    assert entry in run.errors[0].message and "records" not in run.errors[0].message
    assert [w.to_json() for w in plan.warnings] == [w.to_json() for w in run.warnings]
    assert [(w.source, w.error_class) for w in run.warnings] == [(file_uri(d / "a.md"), "DuplicateSourceWarning")]
    assert _docs(kb, "coll2")[entry]["text"] == "a record keyed like an entry"
    _invariant(run, {file_uri(d / "a.md"): 1, file_uri(feed): 1})


# -- property: no traceback, the invariant, whatever the input -------------------------------------

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
_any_text = st.text(max_size=30)  # lone surrogates, NUL and all
_name = st.text(
    st.characters(codec="utf-8", exclude_characters="/\x00", exclude_categories=("Cs",)), min_size=1, max_size=12
)


@st.composite
def _corpus(draw):
    files: dict[str, bytes] = {}
    for _ in range(draw(st.integers(1, 4))):
        name = draw(_name).strip(".") or "x"
        kind = draw(st.sampled_from(["md-toml", "md-yaml", "rss", "txt"]))
        if kind == "md-toml":
            title, tag = draw(_text), draw(_text)
            number = draw(st.sampled_from(["1", "nan", "inf", "-inf", "1.5", "1979-05-27T07:32:00Z", "1979-13-40"]))
            body = draw(_text)
            content = f"+++\ntitle = {json.dumps(title)}\ntags = [{json.dumps(tag)}]\nn = {number}\n+++\n\n# H\n\n{body} words\n"
            files[name + ".md"] = content.encode("utf-8", "surrogatepass")
        elif kind == "md-yaml":
            title = draw(_text)
            content = f"---\ntitle: {json.dumps(title)}\ndate: {draw(_text)!s}\n---\n\nBody {draw(_text)} words\n"
            files[name + ".md"] = content.encode("utf-8", "surrogatepass")
        elif kind == "rss":
            guids = draw(
                st.lists(st.sampled_from(["1", "2", "a b", "http://x.example/p", "urn:x", ""]), min_size=1, max_size=4)
            )
            from xml.sax.saxutils import escape

            items = "".join(_item(escape(g) or None, escape(draw(_text)) + " entry words") for g in guids)
            files[name + ".rss"] = _rss(items).encode()
        else:
            files[name + ".txt"] = (draw(_any_text) + " text words").encode("utf-8", "surrogatepass")
    return files


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(corpus=_corpus())
def test_property_no_traceback_and_the_invariant(kb, tmp_path_factory, corpus):
    from kbctl.store import delete_documents, stored_uris

    d = tmp_path_factory.mktemp("prop")
    for name, data in corpus.items():
        (d / name).write_bytes(data)
    alone = {}
    for name in corpus:  # each file on its own (a plan): the reference the batch must not change
        r = kb.ingest([str(d / name)], namespace="prop-alone", plan=True)
        assert r.documents["failed"] == len(r.errors), r.to_json()
        alone[file_uri(d / name)] = (r.documents["new"], sorted(e.error_class for e in r.errors))
    report = kb.ingest([str(d)], namespace="prop", verify=False)  # the first property: no exception
    assert report.documents["failed"] == len(report.errors), report.to_json()
    assert report.documents["new"] == sum(n for n, _ in alone.values()), (alone, report.to_json())
    for uri, (n, errors) in alone.items():  # stored + failed = given, file by file, as when alone
        assert len(_stored_of(kb, "prop", uri)) == n, (uri, report.to_json())
        assert sorted(e.error_class for e in report.errors if e.source == uri) == errors, (uri, report.to_json())
    ns = kb.namespace("prop")
    delete_documents(kb.connection(), ns, list(stored_uris(kb.connection(), ns)))


def test_clean_text_and_metadata_unit():
    from kbctl.textutil.clean import clean_metadata, clean_text

    assert clean_text("a\x00b\ud800c") == ("abc", 2)
    meta, notes = clean_metadata({"t": "x\x00", "n": float("nan"), "k\x00": [1.5, float("inf")], "ok": 1})
    assert meta == {"t": "x", "k": [1.5], "ok": 1}
    assert len(notes) == 4 and any("NaN" in n for n in notes) and any("infinity" in n for n in notes)


def test_document_built_with_bad_characters_is_clean(tmp_path: Path):
    from kbctl.types import Block, Document

    doc = Document.from_blocks("u", "ti\x00tle", [Block("one\x00 two"), Block("three\ud800")], "text", {"a": "b\x00"})
    assert doc.title == "title" and doc.text == "one two\n\nthree" and doc.metadata["a"] == "b"
    assert [doc.text[b.start : b.start + len(b.text)] for b in doc.blocks] == [b.text for b in doc.blocks]
    assert doc.notes[0] == (
        "CleanedWarning",
        "removed 2 character(s) PostgreSQL cannot store (NUL or invalid Unicode) from the text",
    )
    assert len(doc.notes) == 3
    # built directly (NDJSON from elsewhere): the blocks move with the text
    raw = dict(
        doc.to_json(),
        title="t",
        text="a\x00b\n\nc",
        blocks=[{"text": "a\x00b", "start": 0}, {"text": "c", "start": 5}],
        content_hash="upstream",
        notes=[],
    )
    again = Document.from_json(raw)
    assert again.text == "ab\n\nc" and [(b.text, b.start) for b in again.blocks] == [("ab", 0), ("c", 4)]
    assert again.content_hash != "upstream" and len(again.notes) == 1
    assert "notes" not in Document.from_blocks("u", "t", [Block("x")], "text").to_json()
