"""`kbctl eval run --baseline` and `kbctl eval compare` as a CI job uses them: a baseline that
cannot be set against the run (another dataset, depth or set of queries; no mode in common) is
bad input (exit 2, before any query is searched), never a pass or a "regression"; `--print-json`
keeps stdout one JSON document.
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import ROOT, run_kbctl

TINY = ROOT / "tests" / "fixtures" / "eval" / "beir_tiny"


@pytest.fixture
def saved(cli, tmp_path):
    """beir_tiny imported (hash-384) and a baseline of its lexical and dense modes."""
    p = cli("-p", "hash-384", "eval", "import", str(TINY), "-n", "tiny")
    assert p.returncode == 0, p.stderr.decode()
    base = tmp_path / "base.json"
    p = cli("eval", "run", str(TINY), "-n", "tiny", "--modes", "lexical,dense", "--json", str(base))
    assert p.returncode == 0, p.stderr.decode()
    return base


def _refused(p, *needles: str) -> str:
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert "Traceback" not in err and p.stdout == b"", err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "hint:" in err, err
    for needle in needles:
        assert needle in lines[0], err
    return lines[0]


def test_print_json_with_a_baseline_is_one_json_document_on_stdout(cli, saved):
    p = cli("eval", "run", str(TINY), "-n", "tiny", "--modes", "lexical", "--baseline", str(saved), "--print-json")
    assert p.returncode == 0, p.stderr.decode()
    data = json.loads(p.stdout)  # the comparison table used to follow the JSON on stdout
    assert {r["metric"] for r in data["comparison"]} >= {"ndcg@10", "map"} and data["regressions"] == []


def test_a_baseline_sharing_no_mode_with_the_run_is_refused(cli, saved):
    """It passed: an empty comparison, exit 0, whatever the run scored."""
    p = cli("eval", "run", str(TINY), "-n", "tiny", "--modes", "hybrid", "--baseline", str(saved))
    _refused(p, "no mode", "hybrid")
    assert "lexical, dense" in p.stderr.decode()  # the hint names the baseline's modes
    # one mode in common: compared, and the other said on stderr
    p = cli("eval", "run", str(TINY), "-n", "tiny", "--modes", "lexical,hybrid", "--baseline", str(saved))
    assert p.returncode == 0, p.stderr.decode()
    assert "warning: mode hybrid is not in the baseline" in p.stderr.decode()


@pytest.mark.parametrize(
    "args, needles",
    [
        (("--limit", "1"), ("queries", "1 of its 3")),
        (("--depth", "5"), ("depth 100", "depth 5")),
        (("--split", "train"), ("queries",)),
    ],
)
def test_a_baseline_of_other_queries_or_another_depth_is_refused(cli, saved, args, needles):
    """Each mean was compared with the baseline's over other queries, or another depth."""
    p = cli("eval", "run", str(TINY), "-n", "tiny", "--modes", "lexical", "--baseline", str(saved), *args)
    _refused(p, "baseline", *needles)


def test_a_baseline_of_another_dataset_is_refused(cli, saved, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(TINY, other)
    p = cli("eval", "run", str(other), "-n", "tiny", "--modes", "lexical", "--baseline", str(saved))
    _refused(p, "dataset 'beir_tiny'", "'other'")


def test_compare_refuses_results_of_another_dataset_depth_or_queries(cli, saved, tmp_path):
    def variant(name, change):
        data = json.loads(saved.read_text())
        change(data)
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(data))
        return path

    def dataset(d):
        d["dataset"] = d["settings"]["dataset"] = "scifact"

    def depth(d):
        d["settings"]["depth"] = 10

    def queries(d):
        del d["queries"]["q1"]
        for m in d["modes"].values():
            del m["per_query"]["q1"]

    env = {"KBCTL_HOME": str(tmp_path / "no-home"), "KBCTL_DSN": None}
    for change, needle in ((dataset, "'scifact'"), (depth, "depth 10"), (queries, "queries")):
        p = run_kbctl(["eval", "compare", str(saved), str(variant(change.__name__, change))], env=env)
        _refused(p, needle)
    p = run_kbctl(["eval", "compare", str(saved), str(saved)], env=env)
    assert p.returncode == 0, p.stderr.decode()


def test_a_baseline_of_another_k_says_which_metrics_it_did_not_compare(cli, saved):
    """The p@K only one side computed was dropped from the comparison without a word."""
    p = cli("eval", "run", str(TINY), "-n", "tiny", "--modes", "lexical", "-k", "5", "--baseline", str(saved),
            "--print-json")  # fmt: skip
    assert p.returncode == 0, p.stderr.decode()
    compared = {r["metric"] for r in json.loads(p.stdout)["comparison"]}
    assert "p@5" not in compared and "p@10" not in compared and "ndcg@10" in compared
    notes = [line for line in p.stderr.decode().splitlines() if line.startswith("warning:") and "p@5" in line]
    assert len(notes) == 1 and "p@10" in notes[0] and "not compared" in notes[0], p.stderr.decode()
    # the same baseline at its own k: nothing to say
    p = cli("eval", "run", str(TINY), "-n", "tiny", "--modes", "lexical", "--baseline", str(saved), "--print-json")
    assert "not compared" not in p.stderr.decode()


def test_compare_says_which_metrics_only_one_result_holds(cli, saved, tmp_path):
    data = json.loads(saved.read_text())
    for m in data["modes"].values():
        m["metrics"]["p@5"] = m["metrics"].pop("p@10")
    other = tmp_path / "k5.json"
    other.write_text(json.dumps(data))
    env = {"KBCTL_HOME": str(tmp_path / "no-home"), "KBCTL_DSN": None}
    p = run_kbctl(["eval", "compare", str(saved), str(other)], env=env)
    assert p.returncode == 0, p.stderr.decode()
    notes = [line for line in p.stderr.decode().splitlines() if "not compared" in line]
    assert len(notes) == 1 and "p@5" in notes[0] and "p@10" in notes[0], p.stderr.decode()


def test_a_tiny_negative_delta_is_not_printed_as_minus_zero(cli, saved, tmp_path):
    data = json.loads(saved.read_text())
    data["modes"]["lexical"]["metrics"]["ndcg@10"] -= 1e-9
    current = tmp_path / "current.json"
    current.write_text(json.dumps(data))
    env = {"KBCTL_HOME": str(tmp_path / "no-home"), "KBCTL_DSN": None}
    p = run_kbctl(["eval", "compare", str(saved), str(current)], env=env)
    assert p.returncode == 0, p.stderr.decode()
    out = p.stdout.decode()
    assert "ndcg@10" in out and "0.0000" in out and "-0.0000" not in out, out
