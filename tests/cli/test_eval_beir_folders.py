"""`kbctl eval import` and `kbctl eval run` on a BEIR folder as users convert them (hash-384).

``tests/fixtures/eval/beir_messy`` (described in ``tests/unit/test_eval_datasets.py``): a gzipped
corpus with a title-only record, one with neither title nor text and a repeated ``_id``; unjudged
queries without a text; qrels with an extra column, a score 0 row, a judged document missing from
the corpus, one judged that is empty, and a judged query missing from the queries.
"""

from __future__ import annotations

import json

from tests.conftest import ROOT

MESSY = ROOT / "tests" / "fixtures" / "eval" / "beir_messy"


def _import(cli, ns: str, *extra: str):
    return cli("-p", "hash-384", "eval", "import", str(MESSY), "-n", ns, *extra)


def test_import_says_what_it_skipped_and_which_judged_documents_are_missing(cli):
    p = _import(cli, "messy")
    assert p.returncode == 0, p.stderr.decode()
    err = p.stderr.decode()
    assert "imported into messy: 4 new, 0 changed, 0 unchanged, 0 failed" in err
    assert "warning: skipped 1 record with neither title nor text: '3'" in err
    assert "warning: 1 _id given more than once: '2' (the first record kept)" in err
    assert (
        "warning: qrels/test.tsv judges 2 relevant documents that are not in the corpus or have neither"
        " title nor text: '3', '99' (they count as missed)" in err
    )
    assert "qrels/train.tsv" not in err  # its judged documents are all there
    data = json.loads(_import(cli, "messy2", "--json").stdout)
    assert data["documents"]["new"] == 4 and data["documents"]["failed"] == 0
    assert data["notes"] == [
        "skipped 1 record with neither title nor text: '3'",
        "1 _id given more than once: '2' (the first record kept)",
        "qrels/test.tsv judges 2 relevant documents that are not in the corpus or have neither title nor text:"
        " '3', '99' (they count as missed)",
    ]


def test_run_skips_unjudged_queries_without_text_and_scores_the_judged_ones(cli, tmp_path):
    assert _import(cli, "messy").returncode == 0
    out = tmp_path / "run.json"
    p = cli("eval", "run", str(MESSY), "-n", "messy", "--modes", "lexical", "--json", str(out))
    assert p.returncode == 0, p.stderr.decode()
    err = p.stderr.decode()
    assert "queries not judged in qrels/test.tsv have no text and were skipped (lines 3, 4, 6)" in err
    assert "1 judged query is not in queries.jsonl and is not evaluated: '7'" in err
    data = json.loads(out.read_text())
    lexical = data["modes"]["lexical"]
    assert lexical["num_queries"] == 3 and set(lexical["per_query"]) == {"1", "2", "5"}
    # score 0 (query 1, document 4) is judged not relevant: the one relevant document found is all
    assert lexical["per_query"]["1"]["recall@10"] == 1.0
    # a judged document missing from the corpus stays in the judgements, as in trec_eval and BEIR
    assert lexical["per_query"]["2"]["recall@10"] == 0.5
    assert len(data["notes"]) == 2


def test_a_judged_query_without_text_is_one_line_with_a_hint(cli):
    p = cli("eval", "run", str(MESSY), "-n", "messy", "--split", "train", "--modes", "lexical")
    assert p.returncode == 2
    lines = p.stderr.decode().strip().splitlines()
    assert lines[0] == f"error: {MESSY / 'queries.jsonl'}:4: query '4' is judged in qrels/train.tsv but has no text"
    assert len(lines) == 2 and "remove its rows from qrels/train.tsv" in lines[1]


def test_a_missing_split_lists_the_splits_present(cli):
    p = cli("eval", "run", str(MESSY), "-n", "messy", "--split", "dev", "--modes", "lexical")
    assert p.returncode == 2
    lines = p.stderr.decode().strip().splitlines()
    assert lines[0] == f"error: {MESSY / 'qrels' / 'dev.tsv'}: qrels file not found"
    assert len(lines) == 2 and "splits here: test, train (--split test)" in lines[1]


def test_a_smart_collection_converted_imports_and_runs(cli, tmp_path):
    """`kbctl eval convert-smart` → `eval import` → `eval run`: a classic collection end to end."""
    (tmp_path / "docs.all").write_bytes(
        b".I 1\r\n.T\r\nSorting records on tape\r\n.W\r\nA merge sort for magnetic tape files.\r\n"
        b".I 2\r\n.T\r\nCompiling Algol\r\n.W\r\nA one-pass compiler for the Algol language.\r\n"
        b".I 3\r\n.T\r\nCaf\xe9 queues\r\n"
    )
    (tmp_path / "query.text").write_text(".I 1\n.W\nmerge sort on tape\n.I 2\n.W\nalgol compiler\n")
    (tmp_path / "qrels.text").write_text("01 1 0 0\n02 2 0 0\n02 7 0 0\n")
    out = tmp_path / "beir"
    p = cli(
        "eval",
        "convert-smart",
        *(str(tmp_path / f) for f in ("docs.all", "query.text", "qrels.text")),
        "-o",
        str(out),
        "--json",
    )
    assert p.returncode == 0, p.stderr.decode()
    report = json.loads(p.stdout)
    assert (report["documents"], report["queries"], report["judgements"]) == (3, 2, 3)
    assert report["left_out"] == {"judgements of a document not in the corpus (written; counted as missed)": 1}
    assert _import_dir(cli, out, "smart").returncode == 0
    p = cli("eval", "run", str(out), "-n", "smart", "--modes", "lexical", "--print-json")
    assert p.returncode == 0, p.stderr.decode()
    per_query = json.loads(p.stdout)["modes"]["lexical"]["per_query"]
    # document 7 is judged but not in the corpus: missed, as trec_eval counts it
    assert per_query["1"]["recall@10"] == 1.0 and per_query["2"]["recall@10"] == 0.5
    again = cli(
        "eval", "convert-smart", *(str(tmp_path / f) for f in ("docs.all", "query.text", "qrels.text")), "-o", str(out)
    )
    assert again.returncode == 2 and "exists and is not an empty folder" in again.stderr.decode()


def _import_dir(cli, path, ns: str):
    return cli("-p", "hash-384", "eval", "import", str(path), "-n", ns)


def test_sweep_says_what_the_dataset_left_out(cli):
    """`eval sweep` reads the dataset as `eval run` does, and says its notes as `eval run` does."""
    assert _import(cli, "messy").returncode == 0
    p = cli(
        "eval", "sweep", str(MESSY), "-n", "messy",
        "--fusion", "rrf", "--rrf-k", "60", "--dense-weight", "0.5", "--candidates", "50",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr.decode()
    err = p.stderr.decode()
    assert (
        "warning:" in err
        and "queries not judged in qrels/test.tsv have no text and were skipped (lines 3, 4, 6)" in err
    )
    assert "1 judged query is not in queries.jsonl and is not evaluated: '7'" in err
    assert "rrf_k = 60" in p.stdout.decode()  # the results still on stdout


def test_convert_smart_grades_cleverdon_codes(cli, tmp_path):
    (tmp_path / "cran.all").write_text(".I 1\n.T\nslip flow\n.W\nslip flow\n.I 2\n.T\nshock waves\n.W\nshocks\n")
    (tmp_path / "cran.qry").write_text(".I 001\n.W\nslip flow?\n.I 003\n.W\nshock waves?\n")
    (tmp_path / "cranqrel").write_text("1 1 1\n1 2 -1\n2 2 3\n")
    files = [str(tmp_path / f) for f in ("cran.all", "cran.qry", "cranqrel")]
    out = tmp_path / "beir"
    p = cli("eval", "convert-smart", *files, "-o", str(out), "--number-queries-by-position", "--grades", "cleverdon")
    assert p.returncode == 0, p.stderr.decode()
    assert (out / "qrels" / "test.tsv").read_text() == "query-id\tcorpus-id\tscore\n1\t1\t4\n1\t2\t0\n2\t2\t2\n"
    bad = cli("eval", "convert-smart", *files, "-o", str(tmp_path / "o2"), "--grades", "stars")
    assert bad.returncode == 2 and "unknown grades 'stars'" in bad.stderr.decode()


def test_gzipped_qrels_are_read_by_import_and_run(cli, tmp_path):
    import gzip
    import shutil

    col = tmp_path / "messy"
    shutil.copytree(MESSY, col)
    plain = col / "qrels" / "test.tsv"
    (col / "qrels" / "test.tsv.gz").write_bytes(gzip.compress(plain.read_bytes()))
    plain.unlink()
    p = _import_dir(cli, col, "gz")
    assert p.returncode == 0, p.stderr.decode()
    assert "warning: qrels/test.tsv.gz judges 2 relevant documents" in p.stderr.decode()
    p = cli("eval", "run", str(col), "-n", "gz", "--modes", "lexical", "--print-json")
    assert p.returncode == 0, p.stderr.decode()
    assert json.loads(p.stdout)["modes"]["lexical"]["num_queries"] == 3
    assert "queries not judged in qrels/test.tsv.gz have no text" in p.stderr.decode()


def test_an_empty_namespace_is_refused_not_scored_zero(cli):
    """It scored 0 on every query with exit 0 (and exit 3 under a gate, as if quality had dropped)."""
    assert cli("-p", "hash-384", "namespaces", "create", "empty").returncode == 0
    for extra in ((), ("--fail-under", "ndcg@10=0.5")):
        p = cli("eval", "run", str(MESSY), "-n", "empty", "--modes", "lexical", *extra)
        assert p.returncode == 2, p.stderr.decode()
        assert p.stdout == b"" and "Traceback" not in p.stderr.decode()
        assert "error: namespace 'empty' holds no documents" in p.stderr.decode()


def test_the_settings_record_the_split_and_the_profile_the_search_reads(cli, tmp_path):
    """`--generation shadow` recorded the active generation's profile: a run of the shadow and
    one of the active namespace said the same profile."""
    cfg = tmp_path / "kbctl.toml"
    cfg.write_text('[profiles.h256]\nembedder = "hash"\nmodel = "hash"\ndimension = 256\nrevision = "2"\n')
    env = {"KBCTL_CONFIG": str(cfg)}
    assert _import(cli, "messy").returncode == 0
    p = cli("reembed", "messy", "-p", "h256", env=env)
    assert p.returncode == 0, p.stderr.decode()
    run = ("eval", "run", str(MESSY), "-n", "messy", "--modes", "dense", "--print-json")
    active = json.loads(cli(*run, env=env).stdout)["settings"]
    shadow = json.loads(cli(*run, "--generation", "shadow", env=env).stdout)["settings"]
    assert (active["profile"], active["split"]) == ("hash-384", "test")
    assert (shadow["profile"], shadow["split"], shadow["generation"]) == ("h256", "test", "shadow")
