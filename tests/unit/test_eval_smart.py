"""`kbctl.evals.smart`: classic SMART-format collections (CACM, CISI, ADI, MED…) to BEIR folders.

The fixtures are written here, in the layouts of the real files (fields on marker lines, CRLF and
Latin-1 in the older ones, judgements as pairs or in TREC's four columns); the real collections are
research-only and never used by the tests.
"""

from __future__ import annotations

import json
import os

import pytest

from kbctl.errors import ConfigError, UsageError
from kbctl.evals import load_beir
from kbctl.evals.smart import convert_smart, read_smart, read_smart_qrels
from tests.conftest import run_kbctl

DOCS = """.I 1
.T
Preliminary Report-International
Algebraic Language
.B
CACM December, 1958
.A
Perlis, A. J.
.I 2
.T
Extraction of Roots by
Repeated Subtractions
.W
A method of   extracting roots
is given.
.A
Sugai, I.
.I 3
.B
CACM, 1959
.I 004
.T
Caf\xe9 scheduling
"""

QUERIES = """.I 1
.W
 What articles exist which deal with
 TSS (Time Sharing System)?
.N
 1. Richard Alexander
.I 2
.W
 Roots of numbers by subtraction
.I 3
.N
 no question in this one
"""


def _files(tmp_path, docs=DOCS, queries=QUERIES, qrels="01 1 0 0\n01 004 0 0\n02 2 0 0\n02 9 0 0\n07 1 0 0\n"):
    paths = []
    for name, text in (("docs.all", docs), ("query.text", queries), ("qrels.text", qrels)):
        p = tmp_path / name
        p.write_bytes(text.encode("latin-1").replace(b"\n", b"\r\n"))
        paths.append(p)
    return paths


def test_records_fields_and_ids_are_read_as_written(tmp_path):
    docs, _, _ = _files(tmp_path)
    recs = read_smart(docs)
    assert [r[0] for r in recs] == ["1", "2", "3", "4"]  # "004" is document 4, as qrels name it
    assert recs[0][1] == {
        "T": "Preliminary Report-International Algebraic Language",
        "B": "CACM December, 1958",
        "A": "Perlis, A. J.",
    }
    assert recs[1][1]["W"] == "A method of extracting roots is given."  # lines joined, runs of spaces one
    assert recs[3][1]["T"] == "Café scheduling"  # Latin-1, as the old files are


def test_a_file_that_is_not_smart_is_a_one_line_error(tmp_path):
    p = tmp_path / "corpus.jsonl"
    p.write_text('{"_id": "1"}\n')
    with pytest.raises(ConfigError, match=r"corpus.jsonl:1: expected a record's '.I <id>' line first"):
        read_smart(p)


def test_qrels_layouts_pairs_and_trec_are_told_apart(tmp_path):
    pairs = tmp_path / "pairs"
    pairs.write_text("     1     28\t0\t0.000000\n 1 35 0 0.000000\n2 7 1\n")
    assert read_smart_qrels(pairs) == ("pairs", {"1": {"28": 1, "35": 1}, "2": {"7": 1}})
    trec = tmp_path / "trec"
    trec.write_text("1 0 13 1\n1 0 14 0\n2 0 7 2\n")
    assert read_smart_qrels(trec) == ("trec", {"1": {"13": 1, "14": 0}, "2": {"7": 2}})
    # the same file forced as pairs reads the iteration column as the document
    assert read_smart_qrels(trec, "pairs")[1] == {"1": {"0": 1}, "2": {"0": 1}}
    short = tmp_path / "short"
    short.write_text("1 28\n")
    with pytest.raises(ConfigError, match=r"short:1: expected 'query 0 document grade'"):
        read_smart_qrels(short, "trec")


def test_convert_writes_a_beir_folder_that_eval_reads_and_says_what_it_left_out(tmp_path):
    docs, queries, qrels = _files(tmp_path)
    out = tmp_path / "beir"
    report = convert_smart(docs, queries, qrels, out, metadata_fields=["A", "B"])
    corpus = [json.loads(line) for line in (out / "corpus.jsonl").read_text().splitlines()]
    assert [d["_id"] for d in corpus] == ["1", "2", "4"]  # 3 has neither title nor text
    assert corpus[0] == {
        "_id": "1",
        "title": "Preliminary Report-International Algebraic Language",
        "text": "",
        "metadata": {"author": "Perlis, A. J.", "source": "CACM December, 1958"},
    }
    assert corpus[1]["text"] == "A method of extracting roots is given."
    assert report.to_json() == {
        "out": str(out),
        "documents": 3,
        "queries": 2,
        "judged_queries": 2,
        "judgements": 5,
        "qrels_layout": "pairs",
        "left_out": {
            "documents without text": 1,
            "queries without text": 1,
            "judgements of a document not in the corpus (written; counted as missed)": 1,
            "judgements of a query not in the queries file (written; not evaluated)": 1,
        },
    }
    ds = load_beir(out)
    assert [q.id for q in ds.queries] == ["1", "2"]
    assert ds.queries[0].text == "What articles exist which deal with TSS (Time Sharing System)?"
    assert dict(ds.qrels["1"]) == {"1": 1, "4": 1} and dict(ds.qrels["2"]) == {"2": 1, "9": 1}


def test_queries_numbered_by_position_as_cranfields_judgements_are(tmp_path):
    queries = ".I 001\n.W\nfirst question\n.I 002\n.W\nsecond question\n.I 004\n.W\nthird question\n"
    docs, q, qrels = _files(tmp_path, queries=queries, qrels="3 2\n")
    with pytest.raises(ConfigError, match="no judgement names a query"):  # .I ids 1, 2, 4: no query 3
        convert_smart(docs, q, qrels, tmp_path / "by-id")
    # numbered 1, 2, 3 in file order, query 3 is the third
    convert_smart(docs, q, qrels, tmp_path / "by-position", number_queries_by_position=True)
    ds = load_beir(tmp_path / "by-position")
    assert [(x.id, x.text) for x in ds.queries] == [("3", "third question")]


def test_refusals_are_one_line_with_a_hint(tmp_path):
    docs, queries, qrels = _files(tmp_path)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(UsageError, match="exists and is not an empty folder"):
        convert_smart(docs, queries, qrels, tmp_path / "full")
    with pytest.raises(UsageError, match="'title' is not a SMART field letter"):
        convert_smart(docs, queries, qrels, tmp_path / "o1", text_fields=["title"])
    unrelated = tmp_path / "unrelated"
    unrelated.write_text("50 900\n")
    with pytest.raises(ConfigError, match="no judgement names a query and a document"):
        convert_smart(docs, queries, unrelated, tmp_path / "o2")
    assert not (tmp_path / "o2").exists()  # nothing written when it cannot be evaluated


def test_cleverdon_codes_are_graded_as_beir_grades(tmp_path):
    """Cranfield's judgements: 'query document code', Cleverdon's code 1 (a complete answer) … 4
    (minimum interest), -1 not relevant; a BEIR grade is 5 - code, -1 is 0."""
    queries = ".I 001\n.W\nfirst question\n.I 002\n.W\nsecond question\n"
    qrels = "1 1 2 \n1 2 1\n1 4 4\n2 2 -1\n2 4 3\n"
    docs, q, rel = _files(tmp_path, queries=queries, qrels=qrels)
    assert read_smart_qrels(rel, grades="cleverdon") == (
        "pairs",
        {"1": {"1": 3, "2": 4, "4": 1}, "2": {"2": 0, "4": 2}},
    )
    assert read_smart_qrels(rel)[1]["2"] == {"2": 1, "4": 1}  # by default every pair is relevant, as before
    report = convert_smart(docs, q, rel, tmp_path / "graded", grades="cleverdon", number_queries_by_position=True)
    assert report.judged_queries == 2 and report.judgements == 5
    ds = load_beir(tmp_path / "graded")
    assert dict(ds.qrels["1"]) == {"1": 3, "2": 4, "4": 1} and dict(ds.qrels["2"]) == {"2": 0, "4": 2}
    trec = tmp_path / "trec"
    trec.write_text("1 0 1 1\n1 0 2 -1\n")  # the code in TREC's grade column
    assert read_smart_qrels(trec, grades="cleverdon") == ("trec", {"1": {"1": 4, "2": 0}})


def test_a_code_that_is_not_cleverdons_is_a_one_line_error(tmp_path):
    rel = tmp_path / "cranqrel"
    for line, message in (("1 184 0\n", "code '0'"), ("1 184 6\n", "code '6'"), ("1 184\n", "no code")):
        rel.write_text("1 29 2\n" + line)
        with pytest.raises(ConfigError, match=rf"cranqrel:2: .*{message}") as info:
            read_smart_qrels(rel, grades="cleverdon")
        assert "\n" not in str(info.value) and info.value.hint
    docs, queries, qrels = _files(tmp_path)
    with pytest.raises(UsageError, match="unknown grades 'cleverdun'"):
        convert_smart(docs, queries, qrels, tmp_path / "o", grades="cleverdun")  # type: ignore[arg-type]


def test_an_output_folder_whose_parent_is_missing_is_refused_before_anything_is_read(tmp_path):
    """``-o a/b/beir`` where ``a/b`` does not exist: the parents were made without a word (a typo in
    the path left folders behind); as ``kbctl eval`` treats its other output paths, it is a usage
    error (exit 2, one line and a hint), and nothing is made."""
    docs, queries, qrels = _files(tmp_path)
    with pytest.raises(UsageError, match="there is no folder") as info:
        convert_smart(docs, queries, qrels, tmp_path / "a" / "b" / "beir")
    assert "\n" not in info.value.message and "create the folder first" in (info.value.hint or "")
    assert not (tmp_path / "a").exists()
    env = {k: None for k in os.environ if k.startswith("KBCTL_")} | {"KBCTL_HOME": str(tmp_path / "home")}
    r = run_kbctl(
        ["eval", "convert-smart", str(docs), str(queries), str(qrels), "-o", str(tmp_path / "a" / "b")], env=env
    )
    lines = r.stderr.decode().strip().splitlines()
    assert r.returncode == 2 and len(lines) == 2, r.stderr.decode()
    assert lines[0] == f"error: {tmp_path / 'a' / 'b'}: there is no folder {tmp_path / 'a'}", lines
    assert lines[1].startswith("hint: create the folder first") and r.stdout == b""
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("late", [b"\xe9", "\u00e9".encode()])
def test_lines_are_read_as_the_whole_file_was(tmp_path, late):
    """The files are read a line at a time, decoded as the whole file decodes: UTF-8 unless one
    byte anywhere (here past the first 64 KiB) is not, then Latin-1 throughout; a BOM is dropped;
    CRLF, CR, form feed and the other line breaks of ``str.splitlines`` end a line."""
    from kbctl.evals.smart import _text_lines

    body = "\ufeff.I 1\r\n.T\rCafé\x0cnext\n" + "x\n" * 40_000
    path = tmp_path / "docs.all"
    path.write_bytes(body.encode() + b"tail " + late + b"\n")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    expected = [(n, line.rstrip()) for n, line in enumerate(text.lstrip("\ufeff").splitlines(), start=1)]
    got = list(_text_lines(path))
    assert got == expected
    assert got[2][1] == ("Café" if late != b"\xe9" else "CafÃ©") and got[-1][1].startswith("tail ")
