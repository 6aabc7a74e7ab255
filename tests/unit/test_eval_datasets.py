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


def test_judged_query_missing_from_queries_file(tmp_path):
    col = _beir_copy(tmp_path)
    qrels = col / "qrels" / "test.tsv"
    qrels.write_text(qrels.read_text() + "q77\td1\t1\n")
    with pytest.raises(ConfigError, match="not in queries.jsonl.*q77"):
        load_beir(col)


def test_bad_corpus_line(tmp_path):
    col = _beir_copy(tmp_path)
    (col / "corpus.jsonl").write_text('{"_id": "d1", "text": "ok"}\n{"_id": "", "text": "no id"}\n')
    with pytest.raises(ConfigError, match=r"corpus.jsonl:2: '_id'"):
        list(iter_beir_corpus(col))


def test_missing_split(tmp_path):
    with pytest.raises(ConfigError, match="qrels file not found"):
        load_beir(BEIR, split="dev")
