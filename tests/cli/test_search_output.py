"""``kbctl search``'s output as a user and an agent read it: through a pipe, on a narrow terminal,
and its notes (the search QA pass of docs/hardening.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, TEST_DSN, _create_tenant


@pytest.fixture(scope="module")
def support(kb_home):
    """The sample corpus's support articles (hash-384) in a tenant of this module's, ingested once
    (the tests only search them), and a shell environment that reaches them."""
    tenant = "t_search_output_support"
    if TEST_DSN:
        _create_tenant(tenant)
    env = dict(os.environ, KBCTL_HOME=str(kb_home), KBCTL_TENANT=tenant, PYTHONWARNINGS="ignore")
    env.pop("PYTHONUNBUFFERED", None)  # buffered, as a cron job's stdout is
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "kbctl",
            "-p",
            "hash-384",
            "ingest",
            "sample_corpus/support",
            "-n",
            "sup",
            "--no-verify",
        ],
        capture_output=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr.decode()
    return env


@pytest.mark.parametrize(
    "args",
    [
        "",  # the table
        "--format markdown",
        "--format context --budget 100000",
        "--explain",
    ],
)
def test_a_reader_that_leaves_early_is_not_an_error_in_any_format(support, args):
    """``kbctl search … | head -1`` under ``set -o pipefail``: rich's console answered the closed
    pipe with exit 1 (its ``on_broken_pipe``) where the JSON formats exit 0 (``kbctl.cli.main``).
    Every page here is larger than a pipe's buffer, so kbctl is still writing when head leaves."""
    cmd = f"{sys.executable} -m kbctl search '' -f source_type=markdown -n sup -k 1000 {args} | head -1"
    p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, env=support, cwd=ROOT, timeout=300)
    assert p.stdout.strip(), p.stderr.decode()
    assert p.returncode == 0, p.stderr.decode()
    assert b"Traceback" not in p.stderr and b"Exception ignored" not in p.stderr


def test_the_table_fits_the_columns_asked_for_wide_characters_included(tmp_path, kb_home, tenant):
    """``COLUMNS=40 kbctl search … | less``: off a terminal the table was always 200 columns wide,
    whatever COLUMNS said; now COLUMNS is the width when it is set, counted in terminal cells
    (a CJK character or an emoji takes two)."""
    from rich.cells import cell_len

    folder = tmp_path / "wide"
    folder.mkdir()
    (folder / "wide.md").write_text(
        "# 退款政策 🙂 Refunds\n\n退款在五到十个工作日内处理。Refunds 🙂🙂 take five to ten business days; "
        "see the billing handbook for the whole refund policy and its exceptions.\n",
        encoding="utf-8",
    )
    env = dict(os.environ, KBCTL_HOME=str(kb_home), KBCTL_TENANT=tenant, PYTHONWARNINGS="ignore")
    kbctl = [sys.executable, "-m", "kbctl"]
    p = subprocess.run(
        [*kbctl, "-p", "hash-384", "ingest", str(folder), "-n", "wide", "--no-verify"],
        capture_output=True, env=env, cwd=ROOT, timeout=600,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr.decode()
    for columns in (40, 100):
        p = subprocess.run(
            [*kbctl, "search", "refund policy", "-n", "wide"],
            capture_output=True, env={**env, "COLUMNS": str(columns)}, cwd=ROOT, timeout=300,
        )  # fmt: skip
        assert p.returncode == 0, p.stderr.decode()
        lines = p.stdout.decode().splitlines()
        assert any("退款" in ln for ln in lines), lines
        assert max(cell_len(ln) for ln in lines) <= columns, lines
    # without COLUMNS, off a terminal: the wide page as before
    env.pop("COLUMNS", None)
    p = subprocess.run([*kbctl, "search", "refund policy", "-n", "wide"], capture_output=True, env=env, cwd=ROOT)
    assert max(cell_len(ln) for ln in p.stdout.decode().splitlines()) > 100


@pytest.fixture
def billing(cli):
    """The sample corpus's billing articles (hash-384) in namespace ``bill``, searched in process."""
    cli("-p", "hash-384", "ingest", "sample_corpus/support/billing", "-n", "bill", "--no-verify", check=True)
    return cli


def test_a_budget_too_small_for_the_first_citation_says_so(billing):
    """``--format context --budget 5``: not even the first passage's citation fits, and the context
    was an empty line with exit 0 and not a word why; now a note on stderr names --budget."""
    p = billing("search", "refund policy", "-n", "bill", "--format", "context", "--budget", "5")
    assert p.returncode == 0 and p.stdout.strip() == b"", p.stdout
    assert "--budget" in p.stderr.decode(), p.stderr.decode()
    p = billing("search", "refund policy", "-n", "bill", "--format", "context", "--budget", "400")
    assert p.stdout.startswith(b"[1] ") and b"--budget" not in p.stderr, p.stderr.decode()


def test_the_note_of_corrections_stays_short_for_a_long_query(billing):
    """A long query of misspelled words (here 60 of them) printed every correction on one note
    line (a 100,000-character query: 20 KB of stderr); the note now names the first few and how
    many more, and ``details.corrections`` in --json keeps them all."""
    words = sorted(
        {
            w
            for w in (ROOT / "sample_corpus/support/billing/refunds.md").read_text(encoding="utf-8").lower().split()
            if w.isalpha() and len(w) >= 6
        }
    )
    query = " ".join(w + "q" for w in words[:60])
    p = billing("search", query, "-n", "bill", "--mode", "lexical", "--json")
    assert p.returncode == 0, p.stderr.decode()
    corrections = json.loads(p.stdout)["details"]["corrections"]
    assert len(corrections) > 20
    [note] = [ln for ln in p.stderr.decode().splitlines() if ln.startswith("note: corrected:")]
    assert len(note) < 400 and f"{len(corrections) - 10} more" in note, note


@pytest.mark.parametrize("mode", ["lexical", "dense"])
def test_feedback_asked_of_a_one_lane_search_is_noted(billing, mode):
    """``--prf hybrid --mode lexical``: feedback needs both lanes, and the option was dropped without
    a word; now a note says so (a hybrid search takes it as before, with no such note)."""
    p = billing("search", "refund policy", "-n", "bill", "--mode", mode, "--prf", "hybrid", "--json")
    assert p.returncode == 0, p.stderr.decode()
    notes = json.loads(p.stdout)["notes"]
    assert any("--prf" in n and "hybrid" in n for n in notes), notes
    p = billing("search", "refund policy", "-n", "bill", "--mode", "hybrid", "--prf", "hybrid", "--json")
    assert not [n for n in json.loads(p.stdout)["notes"] if "--prf" in n]
    assert "prf" in json.loads(p.stdout)["details"]


@pytest.mark.parametrize(
    "args, option",
    [
        (("--mode", "lexical", "--fusion", "rrf"), "--fusion"),
        (("--mode", "dense", "--fusion", "convex"), "--fusion"),
        (("--mode", "lexical", "--ef-search", "300"), "--ef-search"),
    ],
)
def test_an_option_of_a_lane_the_search_did_not_run_is_noted(billing, args, option):
    """``--fusion rrf --mode lexical`` (one lane: nothing to fuse) or ``--ef-search 300 --mode
    lexical`` (no dense lane) were dropped without a word, as ``--prf`` on one lane was: now a
    note says so; a hybrid search takes them with no such note."""
    p = billing("search", "refund policy", "-n", "bill", *args, "--json")
    assert p.returncode == 0, p.stderr.decode()
    notes = [n for n in json.loads(p.stdout)["notes"] if option in n]
    assert len(notes) == 1 and args[1] in notes[0], json.loads(p.stdout)["notes"]
    p = billing("search", "refund policy", "-n", "bill", "--mode", "hybrid", *args[2:], "--json")
    assert not [n for n in json.loads(p.stdout)["notes"] if option in n], json.loads(p.stdout)["notes"]


@pytest.mark.parametrize("fmt", [(), ("--json",), ("--jsonl",), ("--format", "markdown")])
def test_a_budget_without_the_context_format_is_noted(billing, fmt):
    """``--budget 300`` without ``--format context`` was dropped without a word (as ``--prf`` on one
    lane was): now a note says it applies to --format context only (on stderr, and in --json's
    notes as the search's own notes are), and the hits are unchanged."""
    p = billing("search", "refund policy", "-n", "bill", "--budget", "300", *fmt)
    assert p.returncode == 0, p.stderr.decode()
    notes = [ln for ln in p.stderr.decode().splitlines() if "--budget" in ln]
    assert len(notes) == 1 and notes[0].startswith("note: ") and "--format context" in notes[0], notes
    plain = billing("search", "refund policy", "-n", "bill", *fmt)
    assert b"--budget" not in plain.stderr
    if fmt == ("--json",):  # details hold the search's timings; the note is in notes, as the others are
        assert json.loads(plain.stdout)["hits"] == json.loads(p.stdout)["hits"]
        said = [n for n in json.loads(p.stdout)["notes"] if "--budget" in n]
        assert len(said) == 1 and "--format context" in said[0], json.loads(p.stdout)["notes"]
        assert not [n for n in json.loads(plain.stdout)["notes"] if "--budget" in n]
    else:
        assert plain.stdout == p.stdout


@pytest.mark.parametrize(
    "fmt",
    [
        ("--json", "--jsonl"),
        ("--json", "--format", "markdown"),
        ("--jsonl", "--format", "context"),
        ("--format", "table", "--json"),
    ],
)
def test_two_output_formats_that_disagree_are_a_usage_error(billing, fmt):
    """``--json --jsonl`` or ``--json --format markdown``: one of them was dropped without a word
    (``--json`` won), so a script that asked for JSON lines got one JSON object. Two formats that
    disagree are now a usage error naming both (exit 2, nothing on stdout); ones that agree
    (``--json --format json``) are one format, as before."""
    p = billing("search", "refund policy", "-n", "bill", *fmt)
    err = p.stderr.decode()
    assert p.returncode == 2 and p.stdout == b"" and "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), err
    assert all(f in lines[0] for f in fmt if f.startswith("--json")), err
    p = billing("search", "refund policy", "-n", "bill", "--json", "--format", "json")
    assert p.returncode == 0 and json.loads(p.stdout)["hits"], p.stderr.decode()
    p = billing("search", "refund policy", "-n", "bill", "--jsonl", "--format", "jsonl")
    assert p.returncode == 0 and all(json.loads(ln)["chunk_id"] for ln in p.stdout.splitlines()), p.stderr.decode()


@pytest.mark.parametrize("fmt", ["markdown", "context"])
def test_explain_with_an_output_that_cannot_show_lanes_is_noted(billing, fmt):
    """``--explain --format markdown`` (or context) printed what the format prints without the
    lanes, and not a word (as ``--budget`` with another format was): now a note says where the
    lanes are, and the output is unchanged."""
    p = billing("search", "refund policy", "-n", "bill", "--format", fmt, "--explain")
    assert p.returncode == 0, p.stderr.decode()
    notes = [ln for ln in p.stderr.decode().splitlines() if "--explain" in ln]
    assert len(notes) == 1 and notes[0].startswith("note: ") and fmt in notes[0], p.stderr.decode()
    plain = billing("search", "refund policy", "-n", "bill", "--format", fmt)
    assert plain.stdout == p.stdout and b"--explain" not in plain.stderr


def test_a_rerank_without_a_reranker_is_said_once(support):
    """``--rerank`` on a profile with no reranker model: a WARNING log line and the note said the
    same thing twice on stderr; the note (also in --json's ``notes``) is enough."""
    p = subprocess.run(
        [sys.executable, "-m", "kbctl", "search", "refund policy", "-n", "sup", "--rerank"],
        capture_output=True,
        env=support,
        cwd=ROOT,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr.decode()
    said = [ln for ln in p.stderr.decode().splitlines() if "reranker unavailable" in ln]
    assert len(said) == 1 and said[0].startswith("note: "), said


def _noted_result(degraded: bool):
    from kbctl.types import Hit, SearchResult

    hits = tuple(Hit(i, 0.5, i, 10 + i, f"d{i}.md", f"D{i}", "text", "ns", {}, f"d{i}.md") for i in (1, 2))
    notes = (
        "dense lane unavailable (could not load the model:\nno such file); answered from the lexical lane",
        "withheld 2 hit(s) this principal may not view",
    )
    return SearchResult("q", ("ns",), "hybrid", "hybrid", hits, degraded=degraded, notes=notes, withheld=2)


@pytest.mark.parametrize("degraded", [False, True])
@pytest.mark.parametrize("fmt", ["jsonl", "json", "table", "markdown"])
def test_notes_are_one_line_each_on_stderr_and_jsonl_stdout_holds_hits_only(capsys, fmt, degraded):
    """``--jsonl`` has no envelope for the notes ``--json`` carries (the search's, ``--budget``'s,
    the withheld count): they go to stderr, one line each, in every format, so stdout stays one hit
    a line for a JSONL reader and a reader of stderr can take a note a line. A note holding a
    newline (an embedder's error message) was written over two lines."""
    from kbctl.cli.search_spec import render

    render(_noted_result(degraded), fmt, quiet=False, notes=["--budget applies to --format context only"])
    out, err = capsys.readouterr()
    said = [ln for ln in err.splitlines() if ln.startswith(("note: ", "warning: "))]
    assert len(said) == 3, err
    assert any("could not load the model:" in ln and "no such file" in ln for ln in said), err
    assert not [ln for ln in err.splitlines() if ln.startswith("no such file")], err
    if fmt == "jsonl":
        rows = [json.loads(ln) for ln in out.splitlines()]
        assert [r["chunk_id"] for r in rows] == [11, 12] and all("notes" not in r for r in rows)
    if fmt == "json":  # the envelope keeps each note as it is
        doc = json.loads(out)
        assert doc["notes"][0].count("\n") == 1 and doc["notes"][-1].startswith("--budget") and doc["withheld"] == 2
    assert capsys.readouterr() == ("", "")
    render(_noted_result(degraded), fmt, quiet=True, notes=["--budget applies to --format context only"])
    assert not [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith(("note: ", "warning: "))]


@pytest.mark.parametrize("query", ["the of and", "refund policy"])
@pytest.mark.parametrize(
    "option", [("--fusion", "bogus"), ("--prf", "bogus"), ("--fusion", "bogus", "--mode", "lexical")]
)
def test_an_unknown_fusion_or_prf_is_refused_whatever_the_query(billing, query, option):
    """``--fusion bogus`` passed (exit 0, no note) when the query had nothing searchable (only
    stopwords) or when one lane ran (``--mode lexical``: nothing to fuse); ``--prf bogus`` too with
    nothing searchable. Checked before the search now, as the JSON API checks them."""
    p = billing("search", query, "-n", "bill", *option)
    assert p.returncode == 2, (p.returncode, p.stdout.decode()[:200], p.stderr.decode())
    err = p.stderr.decode()
    assert f"unknown {option[0][2:]} 'bogus'" in err and "Traceback" not in err, err
