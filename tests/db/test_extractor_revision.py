"""A source stored before its extractor changed (``kbctl.extract.REVISIONS``, part of its source hash)
is read again on the next ingest, not skipped as unchanged: the PDF, HTML and mail fixes of session
43 reach the files already stored. Its documents go through the usual comparison (a chunk whose text
did not change keeps its vector); a source of a format whose extractor did not change (text,
Markdown) is still skipped, and one stored under an earlier sentence splitter is restamped only when
its extractor did not change either."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from kbctl import chunk
from kbctl import extract as extract_pkg
from kbctl.extract import html
from kbctl.ingest import producer
from tests.conftest import write_folder

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
    # read again: the PDF, the page and the mail (an HTML body); not the text and the Markdown
    assert sorted(read) == ["hosts.eml", "page.html", "report.pdf"], read
    assert again.documents["unchanged"] == 5 and again.documents["changed"] == 0, again.to_json()
    # their text is what it was: every chunk keeps its vector, none is embedded again
    assert again.chunks["embedded"] == 0 and 0 < again.chunks["reused"] < stored, again.to_json()
    after = _hashes(kb, "moved")
    assert {n for n in after if after[n] != before[n]} == {"hosts.eml", "page.html", "report.pdf"}

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
    # the text and the Markdown: restamped (their extractor did not move); the others read again
    assert sorted(read) == ["hosts.eml", "page.html", "report.pdf"], read
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
    assert any(r.get("extract_revision") for r in records)  # the PDF's, the page's, the mail's
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
    assert sorted(read) == ["hosts.eml", "page.html", "report.pdf"], read
    assert again.chunks["embedded"] == 0, again.to_json()
