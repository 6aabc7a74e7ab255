"""Acceptance of the CLI foundation: ingest → search, namespace isolation, fast help, errors.

Commands run in this process through the CLI's ``main()`` (the ``cli`` fixture), against the
session's embedded server, in this test's own tenant; a few run as ``python -m kbctl`` processes
(``cli_process``) where exit codes, stdout/stderr and pipes of a real process are the point. Only
the first test loads the real model; the rest use ``hash-384``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, SAMPLE

SUPPORT = {"billing_kb": "billing", "technical_kb": "technical", "account_kb": "account"}
HIT_KEYS = {"rank", "score", "doc_id", "chunk_id", "source", "title", "text", "namespace", "metadata", "citation"}
HEAVY = ("torch", "sentence_transformers", "psycopg", "trafilatura")


def _json(p):
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)


def _assert_one_line_error(p, code: int) -> list[str]:
    """Exit ``code``, nothing on stdout, an ``error:`` line (and at most a hint) on stderr, no traceback."""
    err = p.stderr.decode()
    assert p.returncode == code, err
    assert p.stdout == b""
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert [ln for ln in lines if ln.startswith("error:")] == lines[:1], err
    assert all(ln.startswith(("error:", "hint:")) for ln in lines), err
    return lines


# -- ingest and search with the real model --------------------------------------------------------


def test_ingest_then_search_with_the_real_model(cli):
    report = _json(cli("ingest", "sample_corpus/support/billing", "-n", "billing_kb", "--json"))
    assert report["errors"] == [] and report["documents"]["new"] == 15  # 14 files + 1 e-mail attachment
    assert report["verify"]["ok"]

    result = _json(cli("search", "how long do refunds take", "-n", "billing_kb", "--json"))
    assert {"query", "namespace", "mode", "hits"} <= set(result)
    assert result["query"] == "how long do refunds take" and result["namespace"] == "billing_kb"
    assert result["hits"], result
    for i, hit in enumerate(result["hits"], 1):
        assert set(hit) >= HIT_KEYS, set(hit)
        assert hit["rank"] == i and hit["namespace"] == "billing_kb"
        assert isinstance(hit["score"], float) and hit["text"] and hit["citation"]
    top = result["hits"][0]
    assert top["source"] == "refunds.md" and top["title"] == "Refunds"
    assert top["metadata"]["abs_path"] == str(SAMPLE / "support/billing/refunds.md")
    assert "refunds.md" in top["citation"]

    # The namespace is pinned to the default real profile.
    (ns,) = _json(cli("namespaces", "--json"))
    assert (ns["name"], ns["profile"], ns["model"], ns["dimension"]) == (
        "billing_kb",
        "minilm",
        "all-MiniLM-L6-v2",
        384,
    )
    assert (ns["documents"], ns["chunks"]) == (15, report["verify"]["counts"]["chunks"])

    # Exact identifiers through the lexical lane (no model load).
    lex = _json(cli("search", "PAY-1051", "-n", "billing_kb", "--mode", "lexical", "--json"))
    assert lex["mode"] == "lexical" and lex["hits"][0]["source"] == "failed-payments.txt"

    # A metadata query: filters only, no scores.
    meta = _json(cli("search", "", "-n", "billing_kb", "--filter", "source_type=pdf", "--json"))
    assert meta["hits"] and {h["source"] for h in meta["hits"]} == {"pricing-and-plans.pdf"}
    assert all(h["score"] is None for h in meta["hits"])

    # Running again on the unchanged folder embeds nothing.
    again = _json(cli("ingest", "sample_corpus/support/billing", "-n", "billing_kb", "--sync", "--json"))
    assert again["chunks"]["embedded"] == 0 and again["documents"]["unchanged"] == 15
    assert again["documents"]["new"] == again["documents"]["changed"] == again["documents"]["removed"] == 0


# -- isolation between namespaces ---------------------------------------------------------------

ISOLATION_QUERIES = ("q01", "q06", "q21", "q22", "q47", "q51")  # two per support namespace, chosen for overlap


def _queries() -> list[dict]:
    rows = [json.loads(ln) for ln in (SAMPLE / "eval/queries.jsonl").read_text().splitlines() if ln.strip()]
    picked = [r for r in rows if r["id"] in ISOLATION_QUERIES]
    assert len(picked) == len(ISOLATION_QUERIES)
    return picked


def test_namespaces_are_isolated_in_every_mode(cli, tmp_path):
    for ns, folder in SUPPORT.items():
        r = _json(cli("-p", "hash-384", "ingest", f"sample_corpus/support/{folder}", "-n", ns, "--json", "--no-verify"))
        assert r["errors"] == []
    listed = {n["name"]: n for n in _json(cli("namespaces", "--json"))}
    assert set(listed) == set(SUPPORT)
    assert {n: (v["profile"], v["documents"]) for n, v in listed.items()} == {
        "billing_kb": ("hash-384", 15),
        "technical_kb": ("hash-384", 12),
        "account_kb": ("hash-384", 17),
    }

    # Each namespace's queries (chosen for words the other namespaces share), in every mode.
    runs = [(q["query"], q["namespace"], mode) for q in _queries() for mode in ("lexical", "dense", "hybrid", "auto")]
    results = [cli("search", query, "-n", ns, "--mode", mode, "-k", "10", "--json") for query, ns, mode in runs]
    nonempty = 0
    for (query, ns, mode), p in zip(runs, results):
        result = _json(p)
        folder = str(SAMPLE / "support" / SUPPORT[ns]) + "/"
        for hit in result["hits"]:
            assert hit["namespace"] == ns, (query, ns, mode, hit["namespace"])
            assert hit["metadata"]["abs_path"].startswith(folder), (query, ns, mode, hit["metadata"]["abs_path"])
        nonempty += bool(result["hits"])
    assert nonempty >= len(runs) * 3 // 4  # the check is not vacuous

    # --ef-search reaches the dense lane and is validated
    assert (
        _json(cli("search", "refund", "-n", "billing_kb", "--mode", "dense", "--json"))["details"]["dense_path"]
        == "exact"
    )
    hnsw = tmp_path / "hnsw.toml"  # a namespace this small is scanned exactly unless the threshold says otherwise
    hnsw.write_text("[profiles.hash-384.hnsw]\nexact_threshold = 0\n")
    wide = _json(
        cli(
            "--config",
            str(hnsw),
            "search",
            "refund",
            "-n",
            "billing_kb",
            "--mode",
            "dense",
            "--ef-search",
            "400",
            "--json",
        )
    )
    default = _json(cli("--config", str(hnsw), "search", "refund", "-n", "billing_kb", "--mode", "dense", "--json"))
    assert wide["hits"] and wide["hits"][0]["chunk_id"] == default["hits"][0]["chunk_id"]
    assert (wide["details"]["dense_path"], wide["details"]["ef_search"]) == ("hnsw", 400)
    assert default["details"]["ef_search"] < 400
    assert cli("search", "refund", "-n", "billing_kb", "--ef-search", "0").returncode == 2

    # Deleting one namespace removes it with its documents and chunks, and leaves the others whole.
    p = cli("namespaces", "delete", "billing_kb", "--yes")
    assert p.returncode == 0 and "15 documents" in p.stderr.decode()
    left = {n["name"]: n["documents"] for n in _json(cli("namespaces", "--json"))}
    assert left == {"technical_kb": 12, "account_kb": 17}
    assert _json(cli("search", "refund", "-n", "technical_kb", "--json"))["hits"]
    assert cli("search", "refund", "-n", "billing_kb", "--json").returncode != 0


# -- fast help, light imports -------------------------------------------------------------------


def test_help_imports_nothing_heavy():
    """What keeps ``kbctl --help`` fast is what it does not import (its time is a benchmark's:
    bench part ``cold``), so this checks the imports, not a clock."""
    p = subprocess.run([sys.executable, "-m", "kbctl", "--help"], capture_output=True, cwd=ROOT, timeout=60)
    assert p.returncode == 0 and b"ingest" in p.stdout and b"search" in p.stdout

    probe = f"import json, sys, kbctl.cli.main; print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))"
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr.decode()
    assert json.loads(p.stdout) == []


# -- errors --------------------------------------------------------------------------------------


def test_unknown_namespace_is_a_usage_error_in_a_process(cli_process):
    lines = _assert_one_line_error(cli_process("search", "refunds", "-n", "no_such_ns", "--json"), 2)
    assert "no_such_ns" in lines[0] and lines[1].startswith("hint:")


def test_unknown_config_key_suggests_the_right_one(cli, tmp_path):
    cfg = tmp_path / "kbctl.toml"
    cfg.write_text('[profiles.minilm.search]\nfusoin = "rrf"\n')
    lines = _assert_one_line_error(cli("--config", str(cfg), "config", "show", "--json"), 2)
    assert "fusoin" in lines[0]
    assert any("did you mean" in ln and "fusion" in ln for ln in lines), lines
    # the same file named by the environment
    lines = _assert_one_line_error(cli("namespaces", env={"KBCTL_CONFIG": str(cfg)}), 2)
    assert any("did you mean" in ln for ln in lines)


def test_unreachable_dsn_is_one_line_without_traceback_in_a_process(cli_process):
    p = cli_process("--dsn", "postgresql://nobody@127.0.0.1:1/x", "namespaces", "--json")
    lines = _assert_one_line_error(p, 1)
    assert "127.0.0.1" in lines[0] or "connect" in lines[0]


def test_json_on_stdout_parses_through_a_pipe_and_messages_stay_on_stderr(kb_home, tenant):
    env = dict(os.environ, KBCTL_HOME=str(kb_home), KBCTL_TENANT=tenant, PYTHONWARNINGS="ignore")
    kbctl, parse = (
        f"{sys.executable} -m kbctl -p hash-384",
        f"{sys.executable} -c 'import json, sys; print(json.dumps(json.load(sys.stdin)))'",
    )
    # ingest prints its summary as JSON when stdout is a pipe, and its warnings on stderr
    p = subprocess.run(
        [
            "bash",
            "-o",
            "pipefail",
            "-c",
            f"{kbctl} ingest sample_corpus/engineering/releases sample_corpus/no-such-file.md -n piped --no-verify | {parse}",
        ],
        capture_output=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr.decode()
    report = json.loads(p.stdout)
    assert report["documents"]["new"] == 12 and len(report["errors"]) == 1
    assert "1 item(s) failed" in p.stderr.decode() and "Traceback" not in p.stderr.decode()
    p = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f"{kbctl} search 'release notes' -n piped --json | {parse}"],
        capture_output=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr.decode()
    assert json.loads(p.stdout)["hits"]


def test_a_reader_that_leaves_early_is_not_an_error(tmp_path):
    """``kbctl fetch … | head -1``: the reader closes the pipe while kbctl still writes. A closed
    pipe is not an error (``kbctl.cli.main``): exit 0 and nothing on stderr, so a cron job under
    ``set -o pipefail`` does not fail. typer turned it into exit 1 before the CLI could see it."""
    env = dict(os.environ, KBCTL_HOME=str(tmp_path / "home"), PYTHONWARNINGS="ignore")
    env.pop("PYTHONUNBUFFERED", None)  # buffered, as a cron job's stdout is
    p = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f"{sys.executable} -m kbctl fetch sample_corpus | head -1"],
        capture_output=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert json.loads(p.stdout)["type"] == "source"
    assert p.returncode == 0, p.stderr.decode()
    assert p.stderr == b""


def test_a_reader_gone_before_the_last_flush_is_not_an_error(tmp_path):
    """The reader left before kbctl flushed its buffered stdout at exit (output under one buffer,
    so no write saw the closed pipe during the run): Python's own flush at shutdown failed,
    printed "Exception ignored ... BrokenPipeError" and exited 120 (seen in CI as a flaky
    ``kbctl fetch … | head -1``). Made certain here: the pipe's reading end is closed first."""
    small = tmp_path / "small.txt"
    small.write_text("hello\n")
    env = dict(os.environ, KBCTL_HOME=str(tmp_path / "home"), PYTHONWARNINGS="ignore")
    env.pop("PYTHONUNBUFFERED", None)
    for args in (["fetch", str(small)], ["config", "check", "--json"], ["-h"], ["search", "-h"]):
        r, w = os.pipe()
        os.close(r)  # the reader is gone before kbctl writes a byte
        try:
            p = subprocess.run(
                [sys.executable, "-m", "kbctl", *args], stdout=w, stderr=subprocess.PIPE, env=env, cwd=ROOT, timeout=120
            )
        finally:
            os.close(w)
        assert p.returncode == 0, (args, p.returncode, p.stderr.decode())
        assert p.stderr == b"", args


def test_a_delete_without_yes_and_no_one_to_ask_is_a_usage_error(cli, tenant):
    """``kbctl namespaces delete NS`` in a cron job (stdin at its end): click's prompt reads EOF and
    aborts, which the CLI printed as "aborted" with exit 130, Ctrl-C's code, and no word of --yes.
    Now a usage error naming --yes, and nothing deleted; an answer on stdin is still read."""
    cli("-p", "hash-384", "namespaces", "create", "keep_me", check=True)
    for args in (("namespaces", "delete", "keep_me"), ("tenants", "delete", tenant)):
        lines = _assert_one_line_error(cli(*args), 2)
        assert "--yes" in " ".join(lines), lines
    assert [n["name"] for n in _json(cli("namespaces", "--json"))] == ["keep_me"]
    p = cli("namespaces", "delete", "keep_me", input=b"n\n")
    assert p.returncode == 1 and [n["name"] for n in _json(cli("namespaces", "--json"))] == ["keep_me"]
    assert cli("namespaces", "delete", "keep_me", input=b"y\n").returncode == 0
    assert _json(cli("namespaces", "--json")) == []


def test_deleting_a_tenant_or_a_namespace_that_does_not_exist_is_the_same_not_found_error(cli):
    """``tenants delete nope`` said "no tenant nope" and exited 1 (a runtime failure), where
    ``namespaces delete nope`` is a one-line error with exit 2 for the same situation."""
    lines = _assert_one_line_error(cli("namespaces", "delete", "no_such_ns", "--yes"), 2)
    assert "no_such_ns" in lines[0] and "does not exist" in lines[0] and lines[1].startswith("hint:")
    lines = _assert_one_line_error(cli("tenants", "delete", "no_such_tenant", "--yes"), 2)
    assert "no_such_tenant" in lines[0] and "does not exist" in lines[0], lines
    assert len(lines) == 2 and "kbctl tenants" in lines[1], lines


def test_the_errors_of_a_run_that_does_not_exist_are_a_not_found_error(cli, tmp_path):
    """``kbctl errors --run 99`` printed an empty table and exited 0, as if the run had no errors."""
    (tmp_path / "a.md").write_text("# A\n\nSome text.\n")
    run = _json(cli("-p", "hash-384", "ingest", str(tmp_path), "-n", "docs", "--no-verify"))["run_id"]
    assert _json(cli("errors", "--run", str(run), "--json")) == []  # a run without errors: still 0
    lines = _assert_one_line_error(cli("errors", "--run", "987654321"), 2)
    assert "no run 987654321" in lines[0] and "kbctl runs" in lines[1], lines
    cli("-p", "hash-384", "namespaces", "create", "other", check=True)
    lines = _assert_one_line_error(cli("errors", "--run", str(run), "-n", "other"), 2)  # not a run of that namespace
    assert f"no run {run}" in lines[0] and "other" in lines[0], lines


def test_a_profile_whose_model_makes_vectors_of_another_dimension_is_a_pin_mismatch(cli, tmp_path):
    """A profile saying 256-d over a model that makes 384-d vectors failed as an EmbeddingError
    (exit 1, a runtime failure, "the model could not load"): the model loads and embeds; the profile
    (its pin) disagrees with it, a configuration error like any other pin mismatch (exit 2)."""
    cfg = tmp_path / "kbctl.toml"
    cfg.write_text('[profiles.mini]\nmodel = "all-MiniLM-L6-v2"\ndimension = 256\n')
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nSome text.\n")
    p = cli("--config", str(cfg), "-p", "mini", "ingest", str(tmp_path / "docs"), "-n", "fresh", "--no-verify")
    lines = _assert_one_line_error(p, 2)
    assert "384-d" in lines[0] and "'mini'" in lines[0] and "256" in lines[0], lines
    assert len(lines) == 2 and "dimension = 384" in lines[1], lines
    assert _json(cli("namespaces", "--json")) == []  # and nothing was made


def test_an_empty_store_or_config_option_is_a_usage_error(cli):
    """``kbctl --home "$DIR"`` with DIR unset: an empty ``--home`` was taken as "not given", so a
    cron job wrote into the user's default store; an empty ``--dsn`` fell back to the embedded
    server, an empty ``--config`` to ``./kbctl.toml``. Each is now a usage error (as ``--tenant ""``
    is), before anything is opened."""
    for option in ("--home", "--dsn", "--config"):
        lines = _assert_one_line_error(cli(option, "", "config", "show", "--json"), 2)
        assert option in lines[0], lines


def test_unknown_option_is_a_usage_error_without_traceback(cli):
    for args in (
        ("search", "refunds", "-n", "billing_kb", "--no-such-option"),
        ("search", "refunds", "-n", "billing_kb", "-p", "x"),
    ):
        p = cli(*args)
        assert p.returncode == 2 and p.stdout == b"", p.stderr.decode()
        assert b"Traceback" not in p.stderr and b"no such option" in p.stderr


@pytest.mark.parametrize(
    "args, said, hinted",
    [
        # a range or type typer checks: click printed its usage block, a blank line, then "Error: …"
        (("search", "refunds", "-n", "billing_kb", "--ef-search", "0"), "--ef-search", "HNSW ef_search"),
        (("search", "refunds", "-n", "billing_kb", "-k", "abc"), "-k", "Number of results"),
        (("search", "refunds"), "--namespace", "Namespace to search"),
        (("search", "refunds", "-n", "billing_kb", "--no-such-option"), "no such option", "kbctl search -h"),
        (("namespaces", "--bogus"), "no such option", "kbctl namespaces -h"),
        (("db", "nosuch"), "no such command", "kbctl db -h"),
        (("db", "status", "--bogus"), "no such option", "kbctl db status -h"),
        (("search", "refunds", "-n", "billing_kb", "--mode"), "requires an argument", "kbctl search -h"),
        (("eval", "run", "golden.jsonl", "--depth", "many"), "--depth", "Documents retrieved per query"),
    ],
)
def test_a_usage_error_of_any_command_is_one_line_and_a_hint(cli, args, said, hinted):
    lines = _assert_one_line_error(cli(*args), 2)
    assert len(lines) == 2 and said in lines[0] and hinted in lines[1], lines
    assert not any(ln.startswith(("Usage:", "Try ")) for ln in lines), lines


def test_a_group_without_its_command_still_shows_its_help(cli):
    p = cli("db")
    assert p.returncode == 2 and "Usage: kbctl db" in p.stderr.decode() and "Commands:" in p.stderr.decode()


# -- informational commands ------------------------------------------------------------------------


def test_namespaces_db_status_and_config_show_as_json(cli, tenant):
    assert _json(cli("namespaces", "--json")) == []
    r = _json(
        cli(
            "-p",
            "hash-384",
            "ingest",
            "sample_corpus/engineering/releases",
            "-n",
            "releases_kb",
            "--json",
            "--no-verify",
        )
    )
    assert r["documents"]["new"] == 12
    (ns,) = _json(cli("namespaces", "--json"))
    assert ns["tenant"] == tenant and ns["name"] == "releases_kb" and ns["profile"] == "hash-384"
    assert (ns["documents"], ns["dimension"]) == (12, 384) and ns["chunks"] >= 12

    status = _json(cli("db", "status", "--json"))
    assert status["embedded"] is True
    assert status["server_version"].split(".")[0] == "18"
    assert tuple(int(x) for x in status["pgvector"].split(".")[:2]) >= (0, 7)
    assert status["migrations"] and all(m["checksum_ok"] for m in status["migrations"])
    opt = _json(cli("db", "optimize", "--json"))
    assert opt["reindex"] is False and {t["table"] for t in opt["tables"]} >= {"chunks", "lexical_postings"}
    opt = _json(cli("db", "optimize", "--full", "--json"))
    assert opt["full"] is True and all(t["bytes_after"] > 0 for t in opt["tables"] if t["table"] == "chunks")
    assert _json(cli("namespaces", "--json"))[0]["chunks"] >= 12  # nothing lost in the rewrite

    cfg = _json(cli("config", "show", "--json"))
    assert cfg["settings"]["defaults"]["tenant"] == tenant  # KBCTL_TENANT applied
    assert cfg["settings"]["defaults"]["profile"] == "minilm"
    assert cfg["sources"] and cfg["sources"][0].endswith("default.toml")
    cfg = _json(cli("-p", "hash-384", "config", "show", "--json"))
    assert cfg["settings"]["defaults"]["profile"] == "hash-384"  # flags win


def test_namespace_bind_verify_stages_and_migrate_through_the_library(cli):
    assert cli("-p", "hash-384", "namespaces", "create", "fresh").returncode == 0
    p = cli("namespaces", "bind", "fresh", "-p", "minilm")
    assert p.returncode == 0 and "pinned to minilm" in p.stderr.decode()
    assert {n["name"]: n["profile"] for n in _json(cli("namespaces", "--json"))} == {"fresh": "minilm"}

    # the NDJSON stages, each one command, piped by hand
    records = cli("fetch", "sample_corpus/engineering/releases", check=True).stdout
    for stage in (("extract",), ("-p", "hash-384", "chunk"), ("-p", "hash-384", "embed")):
        records = cli(*stage, input=records, check=True).stdout
    report = _json(cli("-p", "hash-384", "store", "-n", "piped", input=records))
    assert report["documents"]["new"] == 12 and report["verify"]["ok"]
    chunked = cli(
        "chunk",
        "-n",
        "piped",
        input=cli("extract", input=cli("fetch", "sample_corpus/engineering/releases").stdout).stdout,
    )
    again = [json.loads(ln) for ln in cli("embed", "-n", "piped", input=chunked.stdout, check=True).stdout.splitlines()]
    assert len(again) == 12 and {r["type"] for r in again} == {"embedded"}  # the namespace's profile and stored vectors

    verify = _json(cli("verify", "-n", "piped", "--json"))
    assert verify["ok"] and verify["counts"]["documents"] == 12
    assert [r["status"] for r in _json(cli("runs", "-n", "piped", "--json"))] == ["ok"]
    assert _json(cli("errors", "-n", "piped", "--json")) == []
    p = cli("db", "migrate")
    assert p.returncode == 0 and "applied 0 migration(s)" in p.stderr.decode()
    shown = cli("config", "show", check=True).stdout.decode()
    assert "# resolved profile minilm: fingerprint" in shown and "precision" in shown


def test_ctrl_c_or_sigterm_mid_run_says_interrupted_on_one_line(kb, kb_home, tenant):
    """Ctrl-C (or SIGTERM) in the middle of a run closed it ``interrupted`` and exited 130 without a
    word on stderr: typer turns the ``KeyboardInterrupt`` into a silent exit 130 before the CLI's
    error boundary could say so. Now one line says the run was interrupted and that running it again
    goes on where it stopped."""
    import signal
    import time

    kb.connection()  # migrated before another process starts
    env = dict(os.environ, KBCTL_HOME=str(kb_home), KBCTL_TENANT=tenant, PYTHONWARNINGS="ignore")
    for n, sig in enumerate((signal.SIGINT, signal.SIGTERM)):
        ns = f"waits{n}"
        p = subprocess.Popen(
            [sys.executable, "-m", "kbctl", "-p", "hash-384", "ingest", "-n", ns, "-"],
            stdin=subprocess.PIPE,  # left open: the run waits for the end of its input
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=ROOT,
        )
        try:
            deadline = time.monotonic() + 120
            while not any(r["status"] == "running" for r in _runs_of(kb, ns)):
                assert p.poll() is None and time.monotonic() < deadline, p.poll()
                time.sleep(0.1)
            p.send_signal(sig)
            _, err = p.communicate(timeout=60)
        finally:
            p.kill() if p.poll() is None else None
        lines = err.decode().splitlines()
        assert p.returncode == 130, (p.returncode, lines)
        assert lines and lines[0].startswith("interrupted") and "Traceback" not in err.decode(), lines
        assert len(lines) == 2 and lines[1].startswith("hint:") and "again" in lines[1], lines
        assert [r["status"] for r in _runs_of(kb, ns)] == ["interrupted"]


def _runs_of(kb, ns: str) -> list[dict]:
    try:
        return kb.runs(ns)
    except Exception:  # the namespace is made by the run
        return []


def test_an_empty_tenant_name_is_refused_by_create_as_by_delete(cli, tenant):
    """``kbctl tenants create ""`` registered the current tenant (the empty name read as "not given")
    and exited 0, where ``tenants delete ""`` and ``--tenant ""`` refuse an empty name."""
    for args in (("tenants", "create", ""), ("tenants", "delete", "", "--yes")):
        lines = _assert_one_line_error(cli(*args), 2)
        assert "tenant name: empty" in lines[0], lines
    assert cli("tenants", "create").returncode == 0  # not given: this tenant, as documented


def test_db_optimize_shows_sizes_in_a_human_unit_and_its_json_keeps_the_bytes(cli):
    """``kbctl db optimize`` printed its tables' sizes in MB to one decimal (``MB before 0.0``) and
    ``0.0 MB freed``: a small store's tables all read alike. They read in a unit that suits them
    (``kbctl.cli.render.human_size``, as reembed's); ``--json`` keeps the exact bytes."""
    import re

    size = r"\d+(\.\d+)? (B|kB|MB|GB)"
    assert (
        cli("-p", "hash-384", "ingest", str(SAMPLE / "engineering/releases"), "-n", "rel", "--no-verify").returncode
        == 0
    )
    opt = _json(cli("db", "optimize", "--json"))
    assert all(isinstance(t["bytes_before"], int) and isinstance(t["bytes_after"], int) for t in opt["tables"]), opt
    p = cli("db", "optimize")
    out, err = p.stdout.decode(), p.stderr.decode()
    assert p.returncode == 0, err
    cells = [[c.strip() for c in re.split("[│┃]", line)[1:-1]] for line in out.splitlines()]
    assert ["table", "size before", "size after"] in cells and "MB" not in out.split("\n", 3)[1], out
    rows = [c for c in cells if c and c[0] in {t["table"] for t in opt["tables"]}]
    assert len(rows) == len(opt["tables"]), out
    for row in rows:
        assert all(re.fullmatch(size, c) for c in row[1:]) and len(row) == 3, row
    freed = [line for line in err.splitlines() if "tables;" in line]
    assert len(freed) == 1 and re.search(rf"tables; ({size} freed|grew {size})$", freed[0]), err
    assert "0.0 MB" not in err, err
