"""A source stored before its extractor changed (``kbctl.extract.REVISIONS``, part of its source hash)
is read again on the next ingest, not skipped as unchanged: the PDF, HTML and mail fixes of session
43 reach the files already stored. Its documents go through the usual comparison (a chunk whose text
did not change keeps its vector); a source of a format whose extractor did not change (plain
text; Markdown moved in session 45) is still skipped, and one stored under an earlier sentence
splitter is restamped only when its extractor did not change either."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import kbctl
from kbctl import chunk
from kbctl import extract as extract_pkg
from kbctl.extract import html
from kbctl.ingest import producer
from tests.conftest import write_folder
from tests.pdfmake import table_items, text_pdf

FIXTURES = Path(__file__).parents[1] / "fixtures" / "extract"
PROSE = " ".join(
    f"Rule {i} says the invoices of region {i} are settled within {i + 2} business days." for i in range(30)
)
PAGE = (
    "<html><head><title>Setup</title></head><body><article><h1>Setup</h1>"
    + "".join(f"<p>{s}.</p>" for s in PROSE.split(". "))
    + "<pre># configure the server\nport = 8080\n\n# limits\n[limits]\nburst = 20\n</pre>"
    + "<p>Closing words of the article, long enough to be kept by the extractor along with the rest of it.</p>"
    + "</article></body></html>"
)
MAIL = (
    "From: a@example.com\nSubject: Hosts\nMIME-Version: 1.0\n"
    'Content-Type: text/html; charset="utf-8"\n\n'
    "<html><body><p>State of the hosts:</p><table><tr><th>Host</th><th>State</th></tr>"
    "<tr><td>db1</td><td>down</td></tr></table></body></html>\n"
)
FILES = {"notes.txt": PROSE + "\n", "guide.md": "# Guide\n\n" + PROSE + "\n", "page.html": PAGE, "hosts.eml": MAIL}
NEVER = re.compile(r"(?!)(a)(b)(c)")  # never matches: a <pre> stays bare


def _folder(tmp_path: Path, name: str) -> str:
    folder = write_folder(tmp_path, name, FILES)
    shutil.copy(FIXTURES / "report.pdf", Path(folder) / "report.pdf")
    return folder


def _read(monkeypatch) -> list[str]:
    """The file names the producer extracts from now on."""
    names: list[str] = []
    real = producer.extract_source

    def spy(source, options=None):
        names.append(source.uri.rsplit("/", 1)[-1])
        return real(source, options)

    monkeypatch.setattr(producer, "extract_source", spy)
    return names


def _hashes(kb, name: str) -> dict[str, str]:
    ns = kb.namespace(name)
    return {
        uri.rsplit("/", 1)[-1]: sh
        for uri, sh in kb.connection().execute(
            "SELECT uri, source_hash FROM kbctl.documents WHERE namespace_id = %s AND parent_uri IS NULL", (ns.id,)
        )
    }


def test_a_source_whose_extractor_moved_is_read_again_and_its_unchanged_chunks_keep_their_vectors(
    kb, tmp_path, monkeypatch
):
    folder = _folder(tmp_path, "moved")
    with monkeypatch.context() as m:  # stored by the extractors before their revision was in the hash
        m.setattr(extract_pkg, "REVISIONS", {}, raising=False)
        first = kb.ingest([folder], "moved", verify=False)
    assert first.documents["new"] == 5 and first.documents["failed"] == 0, first.to_json()
    stored = first.chunks["embedded"]
    before = _hashes(kb, "moved")

    read = _read(monkeypatch)
    again = kb.ingest([folder], "moved")
    assert again.verify is not None and again.verify["ok"], again.to_json()
    # read again: the Markdown, the PDF, the page and the mail (an HTML body); not the text
    assert sorted(read) == ["guide.md", "hosts.eml", "page.html", "report.pdf"], read
    assert again.documents["unchanged"] == 5 and again.documents["changed"] == 0, again.to_json()
    # their text is what it was: every chunk keeps its vector, none is embedded again
    assert again.chunks["embedded"] == 0 and 0 < again.chunks["reused"] < stored, again.to_json()
    after = _hashes(kb, "moved")
    assert {n for n in after if after[n] != before[n]} == {"guide.md", "hosts.eml", "page.html", "report.pdf"}

    read.clear()
    third = kb.ingest([folder], "moved", verify=False)
    assert read == [] and third.documents["unchanged"] == 5 and third.chunks["reused"] == 0, third.to_json()


def test_the_old_text_of_a_page_is_replaced_and_a_plan_calls_it_changed(kb, tmp_path, monkeypatch):
    folder = write_folder(tmp_path, "page", {"page.html": PAGE})
    with monkeypatch.context() as m:  # the HTML extractor before session 43: a bare <pre> unfenced
        m.setattr(extract_pkg, "REVISIONS", {}, raising=False)
        m.setattr(html, "_BARE_PRE", NEVER)
        first = kb.ingest([folder], "page", verify=False)
    assert first.documents["new"] == 1, first.to_json()
    ns = kb.namespace("page")
    texts = "SELECT string_agg(text, ' ' ORDER BY position) FROM kbctl.chunks WHERE namespace_id = %s"
    assert "```" not in kb.connection().execute(texts, (ns.id,)).fetchone()[0]

    plan = kb.ingest([folder], "page", plan=True)
    assert plan.documents["changed"] == 1 and plan.documents["unchanged"] == 0, plan.to_json()

    again = kb.ingest([folder], "page")
    assert again.verify is not None and again.verify["ok"], again.to_json()
    assert again.documents["changed"] == 1, again.to_json()
    assert "```" in kb.connection().execute(texts, (ns.id,)).fetchone()[0]  # the <pre> is a code block now
    # the chunks before the <pre> are as they were: kept, not embedded again
    assert again.chunks["embedded"] > 0 and again.chunks["reused"] > 0, again.to_json()


def test_a_pdf_stored_under_an_earlier_splitter_is_read_again_not_restamped(kb, tmp_path, monkeypatch):
    folder = _folder(tmp_path, "older")
    with monkeypatch.context() as m:  # session 42's splitter revision, the extractors before theirs
        m.setattr(chunk, "SENTENCE_ENDS", "sentences-2")
        m.setattr(extract_pkg, "REVISIONS", {}, raising=False)
        first = kb.ingest([folder], "older", verify=False)
    assert first.documents["new"] == 5, first.to_json()
    before = _hashes(kb, "older")

    read = _read(monkeypatch)
    again = kb.ingest([folder], "older")
    assert again.verify is not None and again.verify["ok"], again.to_json()
    # the text: restamped (its extractor did not move); the others read again
    assert sorted(read) == ["guide.md", "hosts.eml", "page.html", "report.pdf"], read
    after = _hashes(kb, "older")
    assert all(after[n] != before[n] for n in after), (before, after)
    assert again.chunks["embedded"] == 0, again.to_json()

    read.clear()
    third = kb.ingest([folder], "older", verify=False)
    assert read == [] and third.documents["unchanged"] == 5, third.to_json()


def _piped(kb, folder: str, name: str, *, revision: bool) -> None:
    """``kbctl fetch | extract | chunk | embed | store`` of ``folder``; ``revision``: whether the document
    records carry the extractor's revision (an earlier kbctl's do not)."""
    from kbctl.ingest.fetch import fetch
    from kbctl.ingest.stages import chunk_records, embed_records, extract_records, source_records, store_items

    prof = kb.settings.profile("hash-384")
    records = list(extract_records(source_records(fetch([folder]))))
    assert any(r.get("extract_revision") for r in records)  # the Markdown's, PDF's, page's, mail's
    if not revision:
        records = [{k: v for k, v in r.items() if k != "extract_revision"} for r in records]
    report = kb.store(store_items(embed_records(chunk_records(records, prof), prof), prof), name, verify=False)
    assert report.documents["new"] == 5, report.to_json()


def test_records_of_this_extractor_are_stored_under_its_revision_and_older_ones_are_read_again(
    kb, tmp_path, monkeypatch
):
    folder = _folder(tmp_path, "piped")
    _piped(kb, folder, "piped", revision=True)
    read = _read(monkeypatch)
    same = kb.ingest([folder], "piped", verify=False)
    assert read == [] and same.documents["unchanged"] == 5, same.to_json()

    _piped(kb, folder, "older", revision=False)  # records from before the revision was written
    again = kb.ingest([folder], "older", verify=False)
    assert sorted(read) == ["guide.md", "hosts.eml", "page.html", "report.pdf"], read
    assert again.chunks["embedded"] == 0, again.to_json()


ROWS = [["Cluster", "Region", "Terabytes"], ["ORION-7", "eu-west", "412"], ["VEGA-2", "us-east", "1,208"]]
TABLE_PDF = text_pdf(
    [
        [
            ("text", 50, 60, 11, "Storage by cluster"),
            ("text", 50, 80, 10, "The clusters grew in every region this quarter, the western ones most."),
            ("text", 50, 108, 10, "Table 2: Capacity per cluster"),
            *table_items(ROWS, y=115),
            ("text", 50, 200, 10, "Numbers are end-of-quarter values."),
        ]
    ]
)
DEFAULTS = '[extract]\nocr = "auto"\nocr_min_confidence = 0.8\nocr_dpi = 200\ntables = true\n'


def _settings_folder(tmp_path: Path, name: str) -> str:
    folder = write_folder(tmp_path, name, {"notes.txt": PROSE + "\n", "page.html": PAGE, "hosts.eml": MAIL})
    (Path(folder) / "table.pdf").write_bytes(TABLE_PDF)
    return folder


def _kb_with(kb, tmp_path: Path, extract: str) -> kbctl.KnowledgeBase:
    """The test's knowledge base under ``extract`` (a TOML ``[extract]`` table), in a config file."""
    config = tmp_path / f"kbctl-{len(list(tmp_path.glob('kbctl-*.toml')))}.toml"
    config.write_text(extract)
    return kbctl.open(config=config, home=kb.settings.database.home, tenant=kb.tenant, profile="hash-384")


def _pdf_text(kb, name: str) -> str:
    ns = kb.namespace(name)
    return (
        kb.connection()
        .execute(
            "SELECT string_agg(c.text, ' ' ORDER BY c.position) FROM kbctl.chunks c JOIN kbctl.documents d"
            " ON d.id = c.document_id WHERE d.namespace_id = %s AND d.uri LIKE '%%table.pdf'",
            (ns.id,),
        )
        .fetchone()[0]
    )


def test_a_pdf_is_read_again_when_its_extract_settings_change_and_skipped_while_they_do_not(kb, tmp_path, monkeypatch):
    """``[extract] tables = false`` (or OCR's settings) change a PDF's text: the next ingest reads the
    stored PDFs again (and the mails, whose attachments the PDF extractor reads), not the other
    sources; at the defaults, written out or not, the hash is what it was before settings counted."""
    from kbctl.ingest.steps import content_hash, source_hash

    folder = _settings_folder(tmp_path, "settings")
    first = kb.ingest([folder], "settings", verify=False)
    assert first.documents["new"] == 4, first.to_json()
    prof = kb.settings.profile("hash-384")
    assert _hashes(kb, "settings")["table.pdf"] == source_hash(content_hash(TABLE_PDF), prof, "pdf-5")
    assert "| --- |" in _pdf_text(kb, "settings")

    read = _read(monkeypatch)
    for extract, reread in [
        (DEFAULTS, []),  # the defaults written out: nobody on them reads anything again
        ("[extract]\nocr_min_confidence = 0.5\n", []),  # a warning's threshold: the text is the same
        ("[extract]\ntables = false\n", ["hosts.eml", "table.pdf"]),
        ("[extract]\ntables = false\n", []),
        ("", ["hosts.eml", "table.pdf"]),  # back to the defaults
        ('[extract]\nocr = "off"\n', ["hosts.eml", "table.pdf"]),
        ('[extract]\nocr = "off"\nocr_dpi = 300\n', []),  # no OCR: its resolution changes nothing
        ("[extract]\nocr_dpi = 300\n", ["hosts.eml", "table.pdf"]),
    ]:
        read.clear()
        with _kb_with(kb, tmp_path, extract) as k:
            report = k.ingest([folder], "settings", verify=False)
        assert sorted(read) == reread, (extract, read)
        assert report.documents["failed"] == 0 and report.documents["new"] == 0, report.to_json()
        if extract.startswith("[extract]\ntables = false") and reread:
            assert "| --- |" not in _pdf_text(kb, "settings") and "ORION-7" in _pdf_text(kb, "settings")
            assert report.documents["changed"] == 1, report.to_json()
        elif extract == "" and reread:
            assert "| --- |" in _pdf_text(kb, "settings") and report.documents["changed"] == 1, report.to_json()
    assert kb.verify("settings").ok


def test_records_extracted_under_settings_are_stored_under_them_as_an_ingest_under_them_would(
    kb, tmp_path, monkeypatch
):
    """``kbctl extract`` under ``tables = false`` writes that into ``extract_revision``: ``kbctl store``
    of its records stores what a direct ingest under the same settings would, and the next ingest
    under them skips the PDF; under other settings it reads it again."""
    from kbctl.ingest.fetch import fetch
    from kbctl.ingest.stages import chunk_records, embed_records, source_records, store_items

    folder = _settings_folder(tmp_path, "pipe")
    with _kb_with(kb, tmp_path, "[extract]\ntables = false\n") as k:
        prof = k.settings.profile("hash-384")
        records = list(k.records.extract(json.dumps(r) for r in source_records(fetch([folder]))))
        pdf = next(r for r in records if r.get("source_uri", "").endswith("table.pdf"))
        assert pdf["extract_revision"] == "pdf-5 pdf-tables-off", pdf["extract_revision"]
        stored = k.store(store_items(embed_records(chunk_records(records, prof), prof), prof), "pipe", verify=False)
        assert stored.documents["new"] == 4, stored.to_json()
        k.ingest([folder], "direct", verify=False)
    assert _hashes(kb, "pipe") == _hashes(kb, "direct")
    assert "| --- |" not in _pdf_text(kb, "pipe")

    read = _read(monkeypatch)
    with _kb_with(kb, tmp_path, "[extract]\ntables = false\n") as k:
        same = k.ingest([folder], "pipe", verify=False)
    assert read == [] and same.documents["unchanged"] == 4, same.to_json()
    again = kb.ingest([folder], "pipe", verify=False)  # the defaults: the tables come back
    assert sorted(read) == ["hosts.eml", "table.pdf"] and again.documents["changed"] == 1, again.to_json()
