"""`kbctl eval compare BASE NEW`: two saved results judged without a database."""

from __future__ import annotations

import json

from kbctl.evals.runner import report_to_json, run_eval
from tests.conftest import run_kbctl
from tests.unit.test_eval_significance import DATASET, N, _baseline, _search


def _files(tmp_path, worse_on: int):
    base, cur = tmp_path / "base.json", tmp_path / "cur.json"
    base.write_text(json.dumps(_baseline(worse_on)))
    cur.write_text(json.dumps(report_to_json(run_eval(DATASET, _search, ["now"]))))
    return base, cur


def _run(tmp_path, *args):
    home = tmp_path / "no-home"
    p = run_kbctl(["eval", "compare", *map(str, args)], env={"KBCTL_HOME": str(home), "KBCTL_DSN": None})
    assert not home.exists(), "comparing two files must not start or create a store"
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def test_a_significant_drop_exits_3_with_its_p_value(tmp_path):
    base, cur = _files(tmp_path, N)  # worse on every query
    code, out, err = _run(tmp_path, base, cur, "--alpha", "0.05")
    assert code == 3, err
    assert "regression: now: ndcg@10" in err and "p < 0.001" in err and "Traceback" not in err
    assert "against baseline" in out and "ndcg@10" in out


def test_a_drop_on_two_queries_passes_under_alpha_and_fails_without(tmp_path):
    base, cur = _files(tmp_path, 2)
    assert _run(tmp_path, base, cur)[0] == 3
    code, out, err = _run(tmp_path, base, cur, "--alpha", "0.05", "--print-json")
    assert code == 0, err
    data = json.loads(out)
    row = next(r for r in data["comparison"] if r["metric"] == "ndcg@10")
    assert row["p_value"] == 0.5 and row["queries"] == N and row["regressed"] is False and data["regressions"] == []
    assert row["mode"] == "now" and row["delta"] < -0.01  # past the tolerance, but not significant


def test_files_that_are_not_results_or_share_no_mode_are_one_line_errors(tmp_path):
    base, cur = _files(tmp_path, 0)
    junk = tmp_path / "junk.json"
    junk.write_text('{"hello": 1}')
    code, _, err = _run(tmp_path, junk, cur)
    assert code == 2 and "not a kbctl eval result" in err and "Traceback" not in err
    code, _, err = _run(tmp_path, tmp_path / "missing.json", cur)
    assert code == 2 and "cannot read the baseline" in err
    other = json.loads(cur.read_text())
    other["modes"] = {"elsewhere": other["modes"]["now"]}
    cur.write_text(json.dumps(other))
    code, _, err = _run(tmp_path, base, cur)
    assert code == 2 and "share no mode" in err
    code, _, err = _run(tmp_path, base, base, "--alpha", "0")
    assert code == 2 and "significance level" in err


def test_a_mode_name_from_a_file_reaches_the_terminal_escaped(tmp_path):
    """A result file is someone's bytes: a mode name holding a terminal escape prints as text."""
    evil = "now\x1b]0;owned\x07\x1b[2J"
    base, cur = _files(tmp_path, N)
    for path in (base, cur):
        data = json.loads(path.read_text())
        data["modes"] = {evil: data["modes"]["now"]}
        path.write_text(json.dumps(data))
    code, out, err = _run(tmp_path, base, cur)
    assert code == 3 and "regression:" in err
    assert "\x1b" not in out + err and "\x07" not in out + err
