"""Loading BEIR folders and golden JSONL sets; bad files are ConfigErrors naming file and line."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from kbctl.errors import ConfigError
from kbctl.evals.datasets import EvalQuery, iter_beir_corpus, load_beir, load_dataset, load_golden

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "eval"
BEIR = FIX / "beir_tiny"


def test_beir_keeps_only_judged_queries_in_file_order():
    ds = load_beir(BEIR)
    assert ds.kind == "beir" and ds.name == "beir_tiny"
    assert [q.id for q in ds.queries] == ["q1", "q2", "4"]  # q3 is only in train; int ids become str
    assert ds.queries[0] == EvalQuery("q1", "how long do refunds take", None)
    assert dict(ds.qrels["q2"]) == {"d2": 2, "d1": 0}
    assert ds.corpus_path == BEIR / "corpus.jsonl"


def test_beir_other_split():
    ds = load_beir(BEIR, split="train")
    assert [q.id for q in ds.queries] == ["q3"] and dict(ds.qrels["q3"]) == {"d4": 1}


def test_dataset_is_frozen_and_qrels_read_only():
    ds = load_beir(BEIR)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ds.name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        ds.qrels["q1"]["d9"] = 1  # type: ignore[index]


def test_corpus_is_streamed_with_defaults():
    it = iter_beir_corpus(BEIR)
    first = next(it)
    assert first == {
        "_id": "d1",
        "title": "Refund timing",
        "text": "Refunds reach the card within 5 to 10 business days.",
        "metadata": {"lang": "en"},
    }
    rest = list(it)
    assert [d["_id"] for d in rest] == ["d2", "3", "d4"]  # the blank line is skipped
    assert rest[1]["title"] == "" and rest[1]["metadata"] == {}


def test_golden_set():
    ds = load_golden(FIX / "golden.jsonl")
    assert ds.kind == "golden" and ds.name == "golden" and ds.corpus_path is None
    assert [q.id for q in ds.queries] == ["q01", "q02", "q03"]
    assert ds.queries[0].namespace == "billing_kb" and ds.queries[2].namespace is None
    assert dict(ds.qrels["q01"]) == {"support/billing/refunds.md": 2, "support/billing/plan-changes.md": 1}
    assert dict(ds.qrels["q02"]) == {"support/billing/failed-payments.txt": 1}  # list -> grade 1
    assert dict(ds.qrels["q03"]) == {"engineering/oncall.md": 1, "engineering/old-rota.md": 0}


def test_load_dataset_picks_the_layout():
    assert load_dataset(BEIR).kind == "beir"
    assert load_dataset(FIX / "golden.jsonl").kind == "golden"
    with pytest.raises(ConfigError, match="not a BEIR collection"):
        load_dataset(FIX / "bad")
    with pytest.raises(ConfigError, match="not found"):
        load_dataset(FIX / "nope.jsonl")


def test_limited_keeps_the_first_queries():
    ds = load_golden(FIX / "golden.jsonl").limited(2)
    assert [q.id for q in ds.queries] == ["q01", "q02"] and set(ds.qrels) == {"q01", "q02"}


@pytest.mark.parametrize(
    "name, line, message",
    [
        ("grade.jsonl", 2, "grade of 'a.md' must be an integer"),
        ("typo.jsonl", 2, "unknown key 'querry'"),
        ("duplicate.jsonl", 2, "duplicate query id 'q01'"),
        ("json.jsonl", 3, "not valid JSON"),
        ("norelevant.jsonl", 1, "no document with a grade above 0"),
        ("noquery.jsonl", 1, "'query' must be a non-empty string"),
    ],
)
def test_bad_golden_lines_name_file_and_line(name, line, message):
    path = FIX / "bad" / name
    with pytest.raises(ConfigError) as info:
        load_golden(path)
    assert str(info.value).startswith(f"{path}:{line}: ")
    assert message in str(info.value)


def test_typo_gets_a_suggestion():
    with pytest.raises(ConfigError) as info:
        load_golden(FIX / "bad" / "typo.jsonl")
    assert info.value.hint == "did you mean 'query'?"


def _beir_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "col"
    shutil.copytree(BEIR, dst)
    return dst


@pytest.mark.parametrize(
    "row, message",
    [
        ("q1\td9\n", "expected 3 tab-separated columns"),
        ("q1\td9\thigh\n", "score must be an integer"),
        ("q1\td1\t2\n", "duplicate judgement"),
    ],
)
def test_bad_qrels_rows(tmp_path, row, message):
    col = _beir_copy(tmp_path)
    qrels = col / "qrels" / "test.tsv"
    qrels.write_text(qrels.read_text() + row)
    with pytest.raises(ConfigError) as info:
        load_beir(col)
    assert str(info.value).startswith(f"{qrels}:6: ") and message in str(info.value)


def test_bad_corpus_line(tmp_path):
    col = _beir_copy(tmp_path)
    (col / "corpus.jsonl").write_text('{"_id": "d1", "text": "ok"}\n{"_id": "", "text": "no id"}\n')
    with pytest.raises(ConfigError, match=r"corpus.jsonl:2: '_id'"):
        list(iter_beir_corpus(col))


# --- real-world BEIR folders ------------------------------------------------------------------
# beir_messy is a converted collection as users bring them: corpus.jsonl.gz, a BOM and CRLF line
# ends in every file, integer _ids, unjudged queries without a text (3: "", 4: no key, 6: null),
# qrels/test.tsv with an extra column named in its header, a score 0 row (query 1, document 4), a
# judged document not in the corpus (99), one judged that has neither title nor text (3) and a
# judged query not in queries.jsonl (7);
# qrels/train.tsv has no header and judges query 4, which has no text.

MESSY = FIX / "beir_messy"


def test_a_messy_beir_folder_loads_with_its_notes():
    ds = load_dataset(MESSY)
    assert ds.kind == "beir" and ds.corpus_path == MESSY / "corpus.jsonl.gz"
    assert [q.id for q in ds.queries] == ["1", "2", "5"]
    assert ds.queries[0].text == "how long do refunds take"  # no BOM, no \r
    assert dict(ds.qrels["1"]) == {"1": 1, "4": 0}
    assert dict(ds.qrels["2"]) == {"2": 1, "99": 1}
    assert dict(ds.qrels["5"]) == {"5": 2, "3": 1}
    assert len(ds.notes) == 2
    skipped, missing = ds.notes
    assert "3 queries" in skipped and "no text" in skipped and "lines 3, 4, 6" in skipped
    assert "1 judged query" in missing and "'7'" in missing and "not evaluated" in missing


def test_an_unjudged_query_with_empty_text_is_skipped(tmp_path):
    col = _beir_copy(tmp_path)
    with (col / "queries.jsonl").open("a") as fh:
        fh.write('{"_id": "q9", "text": ""}\n{"_id": "q10"}\n{"_id": "q11", "text": 7}\n')
    ds = load_beir(col)
    assert [q.id for q in ds.queries] == ["q1", "q2", "4"]
    assert ds.notes == (
        f"{col / 'queries.jsonl'}: 3 queries not judged in qrels/test.tsv have no text and were skipped (lines 5, 6, 7)",
    )


def test_a_judged_query_with_empty_text_is_one_line_naming_file_and_line():
    with pytest.raises(ConfigError) as info:
        load_beir(MESSY, split="train")
    assert str(info.value) == f"{MESSY / 'queries.jsonl'}:4: query '4' is judged in qrels/train.tsv but has no text"
    assert "\n" not in str(info.value) and "qrels/train.tsv" in (info.value.hint or "")


def test_a_clean_folder_has_no_notes():
    assert load_beir(BEIR).notes == ()


def test_judged_queries_missing_from_queries_file_are_noted_not_evaluated(tmp_path):
    col = _beir_copy(tmp_path)
    qrels = col / "qrels" / "test.tsv"
    qrels.write_text(qrels.read_text() + "q77\td1\t1\nq78\td1\t1\n")
    ds = load_beir(col)
    assert [q.id for q in ds.queries] == ["q1", "q2", "4"] and "q77" not in ds.qrels
    assert ds.notes == (f"{qrels}: 2 judged queries are not in queries.jsonl and are not evaluated: 'q77', 'q78'",)


def test_no_judged_query_in_the_queries_file_is_an_error(tmp_path):
    col = _beir_copy(tmp_path)
    (col / "qrels" / "test.tsv").write_text("q77\td1\t1\n")
    with pytest.raises(ConfigError, match="none of the 1 judged queries.*is in queries.jsonl"):
        load_beir(col)


def test_qrels_that_judge_nothing_are_an_error(tmp_path):
    col = _beir_copy(tmp_path)
    (col / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n")
    with pytest.raises(ConfigError, match="test.tsv: judges no query"):
        load_beir(col)


def test_a_missing_split_names_the_splits_present():
    with pytest.raises(ConfigError) as info:
        load_beir(BEIR, split="dev")
    assert str(info.value) == f"{BEIR / 'qrels' / 'dev.tsv'}: qrels file not found"
    assert info.value.hint == "splits here: test, train (--split test)"


def test_a_folder_without_qrels_says_so(tmp_path):
    col = _beir_copy(tmp_path)
    shutil.rmtree(col / "qrels")
    (col / "qrels").mkdir()
    with pytest.raises(ConfigError) as info:
        load_beir(col)
    assert "no qrels/*.tsv" in (info.value.hint or "")


def test_gzipped_queries_and_corpus_are_read(tmp_path):
    import gzip

    col = _beir_copy(tmp_path)
    for name in ("queries", "corpus"):
        plain = col / f"{name}.jsonl"
        (col / f"{name}.jsonl.gz").write_bytes(gzip.compress(plain.read_bytes()))
        plain.unlink()
    assert load_dataset(col).kind == "beir"
    assert [q.id for q in load_beir(col).queries] == ["q1", "q2", "4"]
    assert [d["_id"] for d in iter_beir_corpus(col)] == ["d1", "d2", "3", "d4"]


def test_a_broken_gzip_file_is_one_line(tmp_path):
    col = _beir_copy(tmp_path)
    (col / "queries.jsonl").unlink()
    (col / "queries.jsonl.gz").write_bytes(b"not gzip at all\n")
    with pytest.raises(ConfigError) as info:
        load_beir(col)
    assert str(info.value).startswith(f"{col / 'queries.jsonl.gz'}: not a readable gzip file")


def test_the_corpus_of_a_messy_folder_is_streamed():
    docs = list(iter_beir_corpus(MESSY))
    assert [d["_id"] for d in docs] == ["1", "2", "3", "4", "2", "5"]
    assert docs[0]["title"] == "Refund timing" and docs[1]["text"] == ""


def test_a_bom_is_not_part_of_the_first_line(tmp_path):
    col = _beir_copy(tmp_path)
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        path = col / name
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes().replace(b"\n", b"\r\n"))
    assert [q.id for q in load_beir(col).queries] == ["q1", "q2", "4"]
    assert dict(load_beir(col).qrels["q2"]) == {"d2": 2, "d1": 0}
    assert next(iter_beir_corpus(col))["_id"] == "d1"


def test_qrels_columns_are_found_by_their_header(tmp_path):
    col = _beir_copy(tmp_path)
    (col / "qrels" / "test.tsv").write_text("corpus-id\tnote\tquery-id\tscore\nd2\tx\tq2\t2\nd1\ty\tq1\t1\n")
    ds = load_beir(col)
    assert dict(ds.qrels["q2"]) == {"d2": 2} and dict(ds.qrels["q1"]) == {"d1": 1}


def test_extra_qrels_columns_without_a_header_are_an_error_with_a_hint(tmp_path):
    col = _beir_copy(tmp_path)
    (col / "qrels" / "test.tsv").write_text("q1\t0\td1\t1\n")  # TREC's query, iteration, document, grade
    with pytest.raises(ConfigError) as info:
        load_beir(col)
    assert "expected 3 tab-separated columns, got 4" in str(info.value)
    assert "query-id" in (info.value.hint or "") and "header" in (info.value.hint or "")


def test_a_header_without_a_score_column_is_an_error(tmp_path):
    col = _beir_copy(tmp_path)
    (col / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tgrade\tnote\nq1\td1\t1\tx\n")
    with pytest.raises(ConfigError, match=r"test.tsv:1: the header names no 'score' column"):
        load_beir(col)


def test_judged_documents_of_every_split(tmp_path):
    from kbctl.evals.datasets import beir_relevant_documents

    assert beir_relevant_documents(MESSY) == {"test": {"1", "2", "99", "5", "3"}, "train": {"4", "1"}}
    assert beir_relevant_documents(BEIR) == {"test": {"d2", "d1", "3"}, "train": {"d4"}}


def test_a_corpus_record_without_a_text_key_is_title_only(tmp_path):
    col = _beir_copy(tmp_path)
    (col / "corpus.jsonl").write_text('{"_id": "d1", "title": "A title only"}\n{"_id": "d2", "text": null}\n')
    assert [(d["title"], d["text"]) for d in iter_beir_corpus(col)] == [("A title only", ""), ("", "")]


def test_a_golden_set_with_a_bom_and_crlf_loads(tmp_path):
    path = tmp_path / "golden.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + (FIX / "golden.jsonl").read_bytes().replace(b"\n", b"\r\n"))
    assert [q.id for q in load_golden(path).queries] == ["q01", "q02", "q03"]


def test_gzipped_qrels_are_read(tmp_path):
    import gzip

    col = _beir_copy(tmp_path)
    for split in ("test", "train"):
        plain = col / "qrels" / f"{split}.tsv"
        (col / "qrels" / f"{split}.tsv.gz").write_bytes(gzip.compress(plain.read_bytes()))
        plain.unlink()
    ds = load_dataset(col)
    assert [q.id for q in ds.queries] == ["q1", "q2", "4"]
    assert dict(ds.qrels["q2"]) == {"d2": 2, "d1": 0}
    assert [q.id for q in load_beir(col, split="train").queries] == ["q3"]
    from kbctl.evals.datasets import beir_relevant_documents

    assert beir_relevant_documents(col) == {"test": {"d2", "d1", "3"}, "train": {"d4"}}
    with pytest.raises(ConfigError) as info:
        load_beir(col, split="dev")
    assert str(info.value) == f"{col / 'qrels' / 'dev.tsv'}: qrels file not found"
    assert info.value.hint == "splits here: test, train (--split test)"


def test_a_plain_qrels_file_is_read_before_its_gzipped_copy(tmp_path):
    import gzip

    col = _beir_copy(tmp_path)
    (col / "qrels" / "test.tsv.gz").write_bytes(gzip.compress(b"q1\td4\t3\n"))
    assert dict(load_beir(col).qrels["q2"]) == {"d2": 2, "d1": 0}  # test.tsv, as before


def test_a_broken_gzipped_qrels_file_is_one_line(tmp_path):
    col = _beir_copy(tmp_path)
    (col / "qrels" / "test.tsv").unlink()
    (col / "qrels" / "test.tsv.gz").write_bytes(b"not gzip\n")
    with pytest.raises(ConfigError) as info:
        load_beir(col)
    assert str(info.value).startswith(f"{col / 'qrels' / 'test.tsv.gz'}: not a readable gzip file")


def test_a_judged_query_given_twice_with_another_text_is_one_line_naming_both_lines(tmp_path):
    """queries.jsonl naming a judged query twice: which text was searched? The last one was,
    in the first one's place, without a word."""
    col = _beir_copy(tmp_path)
    queries = col / "queries.jsonl"
    with queries.open("a") as fh:
        fh.write('{"_id": "q1", "text": "another text"}\n')
    with pytest.raises(ConfigError) as info:
        load_beir(col)
    assert str(info.value) == f"{queries}:5: query 'q1' is given again (first on line 1) with another text"
    assert "\n" not in str(info.value) and info.value.hint
    # the same line twice, or an unjudged query twice, changes nothing that is searched
    queries.write_text(queries.read_text().replace('"another text"', '"how long do refunds take"'))
    assert load_beir(col).queries[0].text == "how long do refunds take"
    with queries.open("a") as fh:
        fh.write('{"_id": "q3", "text": "one"}\n{"_id": "q3", "text": "two"}\n')
    assert [q.id for q in load_beir(col).queries] == ["q1", "q2", "4"]


def test_a_judged_query_holding_a_nul_is_one_line_naming_file_and_line(tmp_path):
    """A NUL in a query's text was refused by the search only once the run reached that query,
    naming neither its id nor its line."""
    col = _beir_copy(tmp_path)
    queries = col / "queries.jsonl"
    queries.write_text(queries.read_text().replace("change my annual plan", "change my\\u0000plan"))
    with pytest.raises(ConfigError) as info:
        load_beir(col)
    assert str(info.value) == f"{queries}:2: query 'q2' holds a NUL character"
    golden = tmp_path / "g.jsonl"
    golden.write_text(
        '{"id": "a", "query": "ok", "relevant": ["x"]}\n{"id": "b", "query": "x\\u0000", "relevant": ["x"]}\n'
    )
    with pytest.raises(ConfigError) as info:
        load_golden(golden)
    assert str(info.value) == f"{golden}:2: 'query' holds a NUL character"
