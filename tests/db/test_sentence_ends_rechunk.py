"""A namespace chunked while the sentence splitter wanted a space after a full stop (before session
42): its next ingest chunks again only the sources whose text holds a Chinese or Japanese full stop
(``kbctl.chunk.UNSPACED_STOPS``), now cut there; the others keep their rows as they are, chunk ids
and all, and only take the new source hash; nothing unchanged is embedded again. The same for a
namespace chunked by session 42's splitter ("sentences-2"), whose ASCII ``?``/``!`` between CJK
characters ended no sentence (session 43: ``kbctl.chunk.MOVED_SINCE``)."""

from __future__ import annotations

import re

import pytest

from kbctl import chunk
from kbctl.extract.tables import table_header
from tests.conftest import set_in_chunker, write_folder

_SPACED_END = re.compile(r"(?<=[.!?…])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|\n(?=\s*[-*•]\s)|\n{2,}")
# Session 42's sentence ends ("sentences-2"): those and the unspaced stops, with no space needed.
_SENTENCES_2 = re.compile(_SPACED_END.pattern + r"|(?<=[。｡！？．])(?![。｡！？．」』）〕】〉》”’\"')\]0-9０-９])\s*")
# Chinese sentences of 20 to 60 characters, no space anywhere: one paragraph of about 2,400.
SENTENCES = [
    "".join(chr(0x4E00 + (i * 131 + j * 7919) % 20000) for j in range(20 + (i * 17) % 41)) + "。" for i in range(60)
]
ENGLISH = " ".join(f"Refund rule {i} says invoices are settled within {i + 2} business days." for i in range(40))
# The same, each ending at an ASCII question or exclamation mark, no space after it.
ASCII_MARKED = [s[:-1] + "?!"[i % 2] for i, s in enumerate(SENTENCES)]
DOCS = {
    "zh.md": "# 长文\n\n" + "".join(SENTENCES) + "\n",
    "en.md": "# Refunds\n\n" + ENGLISH + "\n",
}


def _windows_before_cuts_6(*args):
    """Session 45's cut of a sentence longer than a chunk: token windows, none marked."""
    return ((*w, False) for w in chunk._windows(*args))


def _rows(kb, name: str) -> dict[str, list[tuple]]:
    """Per document (its file name): its chunks' ids, spans, texts and hashes, in order, and its source hash."""
    ns = kb.namespace(name)
    out: dict[str, list[tuple]] = {}
    for uri, sh, cid, s, e, text, h in kb.connection().execute(
        "SELECT d.uri, d.source_hash, c.id, c.char_start, c.char_end, c.text, c.content_hash FROM kbctl.chunks c"
        " JOIN kbctl.documents d ON d.id = c.document_id AND d.namespace_id = c.namespace_id"
        " WHERE c.namespace_id = %s ORDER BY d.uri, c.position",
        (ns.id,),
    ):
        out.setdefault(uri.rsplit("/", 1)[-1], []).append((sh, cid, s, e, text, h))
    return out


def _rechunked(kb, tmp_path, name: str, docs: dict[str, str], old_chunker: dict, read_again: list[str], restamped):
    """``docs`` (file name: text) in a folder, ingested into ``name`` by an older chunker
    (``old_chunker``: ``kbctl.chunk``'s attributes as they were, its ``SENTENCE_ENDS`` among them:
    ``set_in_chunker``),
    then by this one: every document unchanged and verified, ``read_again`` (file names) the only
    ones extracted again, ``restamped`` kept row for row, chunk ids and all, under a new source
    hash; a third ingest finds all unchanged and embeds nothing. Returns ``_rows`` before and
    after, and the second ingest's report."""
    from kbctl.ingest import producer

    folder = write_folder(tmp_path, name, docs)
    with pytest.MonkeyPatch.context() as m:
        for attr, value in old_chunker.items():
            set_in_chunker(m, attr, value)
        first = kb.ingest([folder], name, verify=False)
    n = len(docs)
    assert first.documents["new"] == n, first.to_json()
    before = _rows(kb, name)
    read: list[str] = []
    extract_source = producer.extract_source
    with pytest.MonkeyPatch.context() as m:
        m.setattr(producer, "extract_source", lambda s, *a: read.append(s.uri) or extract_source(s, *a))
        again = kb.ingest([folder], name)
    assert again.verify is not None and again.verify["ok"], again.to_json()
    assert again.documents["unchanged"] == n and again.documents["changed"] == 0, again.to_json()
    assert sorted(u.rsplit("/", 1)[-1] for u in read) == sorted(read_again)
    after = _rows(kb, name)
    for doc in restamped:  # restamped: rows kept, chunk ids and all
        assert [r[1:] for r in after[doc]] == [r[1:] for r in before[doc]], doc
        assert {r[0] for r in after[doc]} != {r[0] for r in before[doc]}, doc

    third = kb.ingest([folder], name, verify=False)
    assert third.documents["unchanged"] == n and third.chunks["embedded"] == 0, third.to_json()
    assert _rows(kb, name) == after
    return before, after, again


def test_the_next_ingest_cuts_chinese_at_its_full_stops_and_keeps_latin_chunks_as_they_are(kb, tmp_path, monkeypatch):
    folder = write_folder(tmp_path, "zh", DOCS)
    with monkeypatch.context() as m:  # the splitter and the source hash before session 42
        set_in_chunker(m, "_SENTENCE_END", _SPACED_END)
        set_in_chunker(m, "_line_windows", _windows_before_cuts_6)
        set_in_chunker(m, "SENTENCE_ENDS", "")
        first = kb.ingest([folder], "zh", verify=False)
    assert first.documents["new"] == 2, first.to_json()
    before = _rows(kb, "zh")
    size = kb.settings.profile("hash-384").chunk.size
    cut_inside = [t for _, _, _, _, t, _ in before["zh.md"][:-1] if not t.endswith("。")]
    assert cut_inside  # the old chunks end in the middle of sentences
    fingerprint = kb.namespaces.get("zh").fingerprint

    again = kb.ingest([folder], "zh")
    assert again.verify is not None and again.verify["ok"], again.to_json()
    assert again.documents["unchanged"] == 2 and again.documents["changed"] == 0, again.to_json()
    after = _rows(kb, "zh")
    # the English document: not read again, its rows as they were but for the source hash
    assert [r[1:] for r in after["en.md"]] == [r[1:] for r in before["en.md"]]
    assert {r[0] for r in after["en.md"]} != {r[0] for r in before["en.md"]}
    # the Chinese one: chunked again, at its full stops, within the size
    zh = after["zh.md"]
    assert all(t.endswith("。") for _, _, _, _, t, _ in zh) and all(len(t) <= size for _, _, _, _, t, _ in zh)
    assert [r[1:] for r in zh] != [r[1:] for r in before["zh.md"]]
    assert again.chunks["embedded"] > 0 and again.chunks["embedded"] <= len(zh), again.to_json()
    assert kb.namespaces.get("zh").fingerprint == fingerprint  # no re-embed, no refusal

    third = kb.ingest([folder], "zh", verify=False)  # from now on both are skipped as unchanged
    assert third.documents["unchanged"] == 2 and third.chunks["embedded"] == 0, third.to_json()
    assert _rows(kb, "zh") == after


def test_a_plan_restamps_nothing(kb, tmp_path, monkeypatch):
    folder = write_folder(tmp_path, "en", {"en.md": DOCS["en.md"]})
    with monkeypatch.context() as m:
        set_in_chunker(m, "SENTENCE_ENDS", "")
        kb.ingest([folder], "en", verify=False)
    before = _rows(kb, "en")
    plan = kb.ingest([folder], "en", plan=True)
    assert plan.documents["unchanged"] == 1, plan.to_json()
    assert _rows(kb, "en") == before  # the old source hash too


def test_after_sentences_2_the_next_ingest_cuts_at_ascii_marks_between_cjk_and_restamps_the_rest(
    kb, tmp_path, monkeypatch
):
    docs = {"ask.md": "# 質問\n\n" + "".join(ASCII_MARKED) + "\n", **DOCS}
    folder = write_folder(tmp_path, "ask", docs)
    with monkeypatch.context() as m:  # the splitter and the source hash of session 42
        set_in_chunker(m, "_SENTENCE_END", _SENTENCES_2)
        set_in_chunker(m, "_line_windows", _windows_before_cuts_6)
        set_in_chunker(m, "SENTENCE_ENDS", "sentences-2")
        first = kb.ingest([folder], "ask", verify=False)
    assert first.documents["new"] == 3, first.to_json()
    before = _rows(kb, "ask")
    assert [t for _, _, _, _, t, _ in before["ask.md"][:-1] if not t.endswith(("?", "!"))]  # cut mid-sentence
    size = kb.settings.profile("hash-384").chunk.size

    again = kb.ingest([folder], "ask")
    assert again.verify is not None and again.verify["ok"], again.to_json()
    assert again.documents["unchanged"] == 3 and again.documents["changed"] == 0, again.to_json()
    after = _rows(kb, "ask")
    for name in ("en.md", "zh.md"):  # no ASCII mark between CJK characters: not read again, restamped
        assert [r[1:] for r in after[name]] == [r[1:] for r in before[name]], name
        assert {r[0] for r in after[name]} != {r[0] for r in before[name]}, name
    ask = after["ask.md"]
    assert all(t.endswith(("?", "!")) and len(t) <= size for _, _, _, _, t, _ in ask)
    assert [r[1:] for r in ask] != [r[1:] for r in before["ask.md"]]
    assert 0 < again.chunks["embedded"] <= len(ask), again.to_json()

    third = kb.ingest([folder], "ask", verify=False)
    assert third.documents["unchanged"] == 3 and third.chunks["embedded"] == 0, third.to_json()
    assert _rows(kb, "ask") == after


_CODE = "\n".join(f"result_{i} = compute_checksum(data[{i}], seed={i * 7})" for i in range(120))


def test_after_sentences_3_the_next_ingest_fences_every_piece_of_a_long_code_block_and_restamps_the_rest(
    kb, tmp_path, monkeypatch
):
    """Session 45 ("cuts-4"): a fenced code block longer than a chunk is cut between lines, each
    piece a fenced block. A namespace chunked by session 43's chunker ("sentences-3") reads again
    only the sources a chunk of which opens a code block or holds a ``|`` (a table written without
    outer bars is a table now, its header on every piece); the others are restamped."""
    docs = {
        "code.md": "# Code\n\nIntro paragraph.\n\n```python\n" + _CODE + "\n```\n\nAfter the code.\n",
        "short.md": "# Short\n\nRun it:\n\n```sh\nkbctl ingest docs/\n```\n",
        "table.md": "# Cities\n\nCity | Rank\n--- | ---\n" + "\n".join(f"City{i:03d} | {i}" for i in range(150)) + "\n",
        "en.md": DOCS["en.md"],
    }
    folder = write_folder(tmp_path, "code", docs)
    with monkeypatch.context() as m:  # the chunker and the source hash of session 43
        set_in_chunker(m, "_fence", lambda t: None)  # no block is code
        set_in_chunker(m, "table_start", lambda t: (0, head) if (head := table_header(t)) else None)
        set_in_chunker(m, "SENTENCE_ENDS", "sentences-3")
        first = kb.ingest([folder], "code", verify=False)
    assert first.documents["new"] == 4, first.to_json()
    before = _rows(kb, "code")
    assert any(not t.startswith("```") and "compute_checksum" in t for _, _, _, _, t, _ in before["code.md"])

    again = kb.ingest([folder], "code")
    assert again.verify is not None and again.verify["ok"], again.to_json()
    assert again.documents["unchanged"] == 4 and again.documents["changed"] == 0, again.to_json()
    after = _rows(kb, "code")
    for name in ("en.md", "short.md"):  # the short block comes out alike: its rows kept, chunk ids and all
        assert [r[1:] for r in after[name]] == [r[1:] for r in before[name]], name
        assert {r[0] for r in after[name]} != {r[0] for r in before[name]}, name
    code = [t for _, _, _, _, t, _ in after["code.md"] if "compute_checksum" in t]
    assert len(code) > 3 and all(t.startswith("```python\n") and t.endswith("\n```") for t in code)
    assert after["code.md"][0][4:] == before["code.md"][0][4:] == ("Intro paragraph.", before["code.md"][0][5])
    table = [t for _, _, _, _, t, _ in after["table.md"]]
    assert len(table) > 1 and all(t.startswith("City | Rank\n--- | ---\n") for t in table)
    assert not all(t.startswith("City | Rank\n") for _, _, _, _, t, _ in before["table.md"])
    assert 0 < again.chunks["embedded"] <= len(code) + len(table) + 1, again.to_json()  # the prose's vectors reused

    third = kb.ingest([folder], "code", verify=False)
    assert third.documents["unchanged"] == 4 and third.chunks["embedded"] == 0, third.to_json()
    assert _rows(kb, "code") == after


def test_after_cuts_4_a_fixed_namespace_restamps_its_code_and_tables_without_reading_them(kb, tmp_path, monkeypatch):
    """Session 45 ("cuts-5") moved only the semantic strategy's cuts (a code block or a table is a
    unit, or cut as the fixed strategy cuts it): a namespace of the fixed strategy chunked under
    "cuts-4" reads none of its code and tables again; each source takes the new hash. Since
    "cuts-6" (session 46) it is read again for what that moved, as one stored under "cuts-5": here
    code.md, for its paragraphs of one sentence (no sentence end inside, as a long line's window),
    which come out alike (nothing embedded)."""
    from kbctl.ingest import producer

    docs = {
        "code.md": "# Code\n\nIntro paragraph.\n\n```python\n" + _CODE + "\n```\n\nAfter the code.\n",
        "table.md": "# Cities\n\nCity | Rank\n--- | ---\n" + "\n".join(f"City{i:03d} | {i}" for i in range(150)) + "\n",
        "en.md": DOCS["en.md"],
    }
    folder = write_folder(tmp_path, "cuts", docs)
    with monkeypatch.context() as m:
        set_in_chunker(m, "SENTENCE_ENDS", "cuts-4")
        first = kb.ingest([folder], "cuts", verify=False)
    assert first.documents["new"] == 3, first.to_json()
    before = _rows(kb, "cuts")
    read: list[str] = []
    extract_source = producer.extract_source
    monkeypatch.setattr(producer, "extract_source", lambda s, *a: read.append(s.uri) or extract_source(s, *a))
    again = kb.ingest([folder], "cuts")
    assert again.verify is not None and again.verify["ok"], again.to_json()
    assert again.documents["unchanged"] == 3 and again.chunks["embedded"] == 0, again.to_json()
    assert [u.rsplit("/", 1)[-1] for u in read] == ["code.md"]
    after = _rows(kb, "cuts")
    for name in docs:
        assert [r[1:] for r in after[name]] == [r[1:] for r in before[name]], name
        assert {r[0] for r in after[name]} != {r[0] for r in before[name]}, name


def test_after_cuts_5_the_next_ingest_reads_again_captioned_tables_and_long_lines_and_restamps_the_rest(kb, tmp_path):
    """Session 46 ("cuts-6"): a table's caption is repeated, marked continued, on its pieces after
    the first; a sentence longer than a chunk is cut between names, the piece going on the line
    opened with ``…``. A namespace chunked under "cuts-5" reads again the sources a chunk of which
    opens with a caption over a table's header or holds no sentence end (``MOVED_SINCE["cuts-5"]``;
    not a table's piece: its rule near its top); a table without caption and prose of whole
    sentences are restamped."""
    names = ", ".join(f"Person{i} Surname{i * 7 % 13}" for i in range(300))
    rows = "\n".join(f"| City{i:03d} | {i} |" for i in range(150))
    docs = {
        "names.md": "# People\n\nContributors: " + names + "\n",
        "caption.md": "# Cities\n\nTable 3: Cities by rank\n| City | Rank |\n| --- | --- |\n" + rows + "\n",
        "table.md": "# Cities\n\n| City | Rank |\n| --- | --- |\n" + rows + "\n",
        "en.md": DOCS["en.md"],
    }
    session_45 = {  # the chunker and the source hash of session 45
        "_line_windows": _windows_before_cuts_6,
        "_continued_head": lambda caption, head, limit, tok: (head, limit - tok.count(head) - 1),
        "SENTENCE_ENDS": "cuts-5",
    }
    before, after, again = _rechunked(
        kb, tmp_path, "lines", docs, session_45, ["caption.md", "names.md"], ("en.md", "table.md")
    )
    people = [t for _, _, _, _, t, _ in after["names.md"]]
    assert len(people) > 2 and all(t.startswith(chunk.CUT_MARK) for t in people[1:])
    assert not any(t.startswith(chunk.CUT_MARK) for _, _, _, _, t, _ in before["names.md"])
    cities = [t for _, _, _, _, t, _ in after["caption.md"]]
    assert len(cities) > 1 and all(t.startswith("Table 3: Cities by rank (continued)\n| City |") for t in cities[1:])
    assert 0 < again.chunks["embedded"] <= len(people) + len(cities), again.to_json()


def _table_pieces_before_cuts_7(block, text, limit, tok):
    """Session 46's cut of a table: a row longer than a piece in token windows, unmarked; a header
    too long to repeat, the table cut as prose, its later pieces with no header."""
    offset, head = chunk.table_start(block.text) or (0, "")
    head, room = chunk._continued_head(block.text[:offset].rstrip(), head, limit, tok)
    if room < limit // 2:
        yield from chunk._prose_pieces(text.units(block, limit, tok), text, limit, 0)
        return

    def rows(t, b, lim, tk):
        start, end = b.start, b.start + len(b.text)
        body = start + offset + len(chunk.table_start(b.text)[1])
        unit_start, first = start, True
        while body < end:
            stop = t.find("\n", body + 1, end)
            stop = end if stop < 0 else stop
            body += t[body] == "\n"
            n = chunk._count_within(tk, t[unit_start:stop], lim)
            if n is not None:
                yield chunk._Unit(unit_start, stop, n, first)
            else:
                for ws, we, wm in chunk._windows(t, unit_start, stop, lim, tk):
                    yield chunk._Unit(ws, we, wm, first)
            unit_start, body, first = stop + 1, stop, False

    for s, e in chunk._pack(text.units(block, room, tok, rows), room, 0):
        body = text.span(s, e)
        yield s, e, (body if s == block.start else f"{head}\n{body}")


def test_after_cuts_6_the_next_ingest_reads_again_tables_with_a_long_row_or_header_and_restamps_the_rest(kb, tmp_path):
    """Session 48 ("cuts-7"): a table's row longer than a piece is cut between cells, else words,
    its later pieces opened with ``…`` under the header; a table whose header is too long to repeat
    is cut as a table under what of its header fits. A namespace chunked under "cuts-6" reads again
    the sources a chunk of which is a rule and one line, or a run of rows with no header
    (``MOVED_SINCE["cuts-6"]``); a table of short rows and prose are restamped."""
    words = " ".join(f"word{i % 50}" for i in range(400))
    wide = [f"Measured quantity {j}" for j in range(14)]
    docs = {
        "row.md": "# Notes\n\n| Key | Note |\n| --- | --- |\n| a | short |\n| b | " + words + " |\n| c | end |\n",
        "header.md": "# M\n\n| "
        + " | ".join(wide)
        + " |\n|"
        + " --- |" * 14
        + "\n"
        + "\n".join("| " + " | ".join(f"r{i}" for _ in wide) + " |" for i in range(40))
        + "\n",
        "table.md": "# Cities\n\n| City | Rank |\n| --- | --- |\n"
        + "\n".join(f"| City{i:03d} | {i} |" for i in range(140))
        + "\n",
        "en.md": DOCS["en.md"],
    }
    session_46 = {"_table_pieces": _table_pieces_before_cuts_7, "SENTENCE_ENDS": "cuts-6"}
    before, after, again = _rechunked(
        kb, tmp_path, "rows", docs, session_46, ["header.md", "row.md"], ("en.md", "table.md")
    )
    notes = [t for _, _, _, _, t, _ in after["row.md"]]
    assert len(notes) > 3 and all(t.startswith("| Key | Note |\n| --- | --- |\n") for t in notes)
    assert all(t.startswith("| Key | Note |\n| --- | --- |\n" + chunk.CUT_MARK) for t in notes[2:])
    measured = [t for _, _, _, _, t, _ in after["header.md"]]
    assert len(measured) > 2 and all(t.startswith("| Measured quantity 0 |") and " | … |\n" in t for t in measured[1:])
    assert not any(t.startswith("| Measured") for _, _, _, _, t, _ in before["header.md"][1:])
    assert 0 < again.chunks["embedded"] <= len(notes) + len(measured), again.to_json()
