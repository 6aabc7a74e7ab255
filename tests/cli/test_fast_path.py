"""``kbctl search`` through a running server before the CLI is imported (``kbctl.cli.fast``).

A real ``kbctl serve`` (hash profile) over the sample corpus: the fast path prints what the
in-process search prints, imports neither typer nor ``kbctl.api`` (nor numpy, psycopg, rich for
JSON), falls back to the normal CLI for what it does not take and for a server that is down.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kbctl.cli.fast import _Declined, parse_search
from tests.conftest import ROOT, SAMPLE, run_kbctl
from tests.server.conftest import CONFIG, free_port, start_server, stop

TENANT = "t_fast_path"
HEAVY = ("typer", "click", "kbctl.api", "kbctl.cli.main", "numpy", "psycopg", "kbctl.search", "kbctl.store")

# Run the fast path in a fresh interpreter; report its exit code (None: it declined) and the heavy
# modules it loaded on stderr, after whatever it printed.
PROBE = """
import json, sys
from kbctl.cli.fast import _fast
code = _fast(sys.argv[1:])
sys.stdout.flush()
heavy = [m for m in {heavy!r} if m in sys.modules]
print("PROBE " + json.dumps({{"code": code, "heavy": heavy, "rich": "rich" in sys.modules}}), file=sys.stderr)
"""


@pytest.fixture(scope="module")
def server(kb_home, tmp_path_factory):
    import kbctl

    config = tmp_path_factory.mktemp("fast") / "kbctl.toml"
    config.write_text(CONFIG)
    kb = kbctl.open(config=config, home=kb_home, tenant=TENANT)
    for ns, folder in (("billing_kb", "support/billing"), ("technical_kb", "support/technical")):
        kb.ingest([str(SAMPLE / folder)], ns, verify=False)
    tokens = {a: kb.create_agent_token(a) for a in ("billing", "ops")}
    ids = kb.ids()  # the server's answers name documents and chunks by these opaque ids (kbctl.ids)
    kb.close()
    run = start_server(kb_home, TENANT, config)
    yield {"url": run.url, "config": config, "home": kb_home, "tokens": tokens, "ids": ids}
    stop(run.proc)


def _env(server, **more: str) -> dict[str, str]:
    return dict(
        os.environ,
        KBCTL_HOME=str(server["home"]),
        KBCTL_TENANT=TENANT,
        KBCTL_CONFIG=str(server["config"]),
        PYTHONWARNINGS="ignore",
        **more,
    )


def _via(server, agent: str = "ops") -> dict[str, str]:
    return {"KBCTL_SERVER": server["url"], "KBCTL_TOKEN": server["tokens"][agent]}


def probe(server, *args: str, **env: str) -> tuple[dict, subprocess.CompletedProcess]:
    p = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *args],
        capture_output=True,
        env=_env(server, **env),
        cwd=ROOT,
        timeout=120,
    )
    lines = p.stderr.decode().splitlines()
    report = json.loads(next(line for line in lines if line.startswith("PROBE "))[6:])
    return report, p


def in_process(server, *args: str):
    """The normal CLI, in this process, with no server configured."""
    env = {"KBCTL_HOME": str(server["home"]), "KBCTL_TENANT": TENANT, "KBCTL_CONFIG": str(server["config"])}
    return run_kbctl(args, env={**env, "KBCTL_SERVER": None, "KBCTL_TOKEN": None})


def _untimed(stdout: bytes, ids=None) -> list:
    """The JSON lines printed, without the one field that differs between two runs (timings) and
    the server's paths, which a server's answer leaves out (issue 26: ``metadata.uri``, ``abs_path``).
    ``ids``: an in-process search's, whose raw ids are sealed as the server seals those it gives out."""
    rows = [json.loads(line) for line in stdout.decode().splitlines()]
    for r in rows:
        (r.get("details") or {}).pop("timings_ms", None)
        if ids is not None and "generations" in (r.get("details") or {}):
            r["details"]["generations"] = {n: ids.seal("g", g) for n, g in r["details"]["generations"].items()}
        for hit in r.get("hits") or ([r] if "metadata" in r else []):
            for key in ("uri", "abs_path"):
                (hit.get("metadata") or {}).pop(key, None)
            if ids is not None:
                hit["doc_id"], hit["chunk_id"] = ids.seal("d", hit["doc_id"]), ids.seal("c", hit["chunk_id"])
    return rows


@pytest.mark.parametrize(
    "args",
    [
        ("search", "refund", "-n", "billing_kb", "--json"),
        ("search", "-n", "billing_kb", "-n", "technical_kb", "how do refunds work", "-k", "3", "--json"),
        ("search", "password reset", "--namespace=technical_kb", "--mode", "lexical", "-k2", "--json"),
        ("search", "invoice", "-n", "billing_kb", "--mode=dense", "--per-doc", "1", "--explain", "--json"),
        ("search", "refund", "-n", "billing_kb", "--mode", "hybrid", "--fusion", "convex", "--prf", "off", "--json"),
        ("search", "refund", "-n", "billing_kb", "--no-rerank", "--ef-search", "80", "--jsonl"),
        ("-q", "search", "-n", "billing_kb", "--format", "json", "--", "-refund"),
    ],
)
def test_fast_path_prints_what_the_in_process_search_prints(server, args):
    report, p = probe(server, *args, **_via(server))
    assert report["code"] == 0, p.stderr.decode()
    assert report["heavy"] == [] and report["rich"] is False
    local = in_process(server, *args)
    assert local.returncode == 0, local.stderr.decode()
    assert p.stdout.strip()
    assert _untimed(p.stdout) == _untimed(local.stdout, server["ids"])


def test_options_it_does_not_take_run_the_normal_cli(server):
    for args in (
        ("search", "refund", "-n", "billing_kb", "--as", "user:1", "--json"),
        ("search", "refund", "-n", "billing_kb", "--format", "context"),
        ("search", "refund", "-n", "billing_kb", "--explain"),
        ("search", "refund", "-n", "billing_kb", "-k", "three", "--json"),
        ("search", "--help"),
        ("--home", "/elsewhere", "namespaces", "list"),
    ):
        with pytest.raises(_Declined):
            parse_search(list(args))
    report, p = probe(server, "search", "refund", "-n", "billing_kb", "--format", "context", **_via(server))
    assert report["code"] is None and p.stdout == b""


def test_parsed_options_are_the_search_commands_arguments():
    parsed = parse_search(
        ["-c", "x.toml", "--tenant=acme", "search", "-nbilling", "q", "-f", "lang=en", "-f", "year>=2020", "--rerank"]
    )
    assert parsed["config"] == "x.toml" and parsed["overrides"]["defaults.tenant"] == "acme"
    assert parsed["query"] == "q" and parsed["namespace"] == ["billing"] and parsed["format"] == "table"
    assert parsed["options"]["filters"] == ["lang=en", "year>=2020"] and parsed["options"]["rerank"] is True
    assert parsed["notes"] == []


def test_a_budget_the_fast_path_cannot_use_is_noted_as_the_cli_notes_it():
    parsed = parse_search(["search", "q", "-n", "billing", "--budget", "300", "--json"])
    assert [n for n in parsed["notes"] if "--budget" in n and "--format context" in n], parsed["notes"]
    with pytest.raises(_Declined):  # typer's range error, through the normal CLI
        parse_search(["search", "q", "-n", "billing", "--budget", "0", "--json"])


def test_table_and_markdown_through_the_fast_path(server):
    report, p = probe(server, "search", "refund", "-n", "billing_kb", **_via(server))
    assert report["code"] == 0 and report["heavy"] == []
    local = in_process(server, "search", "refund", "-n", "billing_kb")
    assert p.stdout == local.stdout and b"strategy:" in p.stderr
    report, p = probe(server, "search", "refund", "-n", "billing_kb", "--format", "markdown", **_via(server))
    assert report["code"] == 0
    assert p.stdout == in_process(server, "search", "refund", "-n", "billing_kb", "--format", "markdown").stdout


def test_a_refused_search_is_the_error_the_cli_prints(server):
    report, p = probe(server, "search", "refund", "-n", "technical_kb", "--json", **_via(server, "billing"))
    assert report["code"] == 2 and p.stdout == b""
    assert p.stderr.decode().splitlines()[0].startswith("error:") and "not available" in p.stderr.decode()


def test_a_server_that_is_down_falls_back_with_one_warning(server):
    args = ("search", "refund", "-n", "billing_kb", "--json")
    down = {"KBCTL_SERVER": f"http://127.0.0.1:{free_port()}", "KBCTL_TOKEN": "x"}
    report, p = probe(server, *args, **down)
    assert report["code"] is None and p.stdout == b""
    p = subprocess.run(
        [sys.executable, "-m", "kbctl", *args], capture_output=True, env=_env(server, **down), cwd=ROOT, timeout=300
    )
    assert p.returncode == 0, p.stderr.decode()
    assert _untimed(p.stdout) == _untimed(in_process(server, *args).stdout)  # both in-process: raw ids
    warnings = [line for line in p.stderr.decode().splitlines() if "not reachable" in line]
    assert len(warnings) == 1 and warnings[0].startswith("WARNING")


def test_no_server_configured_is_the_normal_cli(server):
    report, p = probe(server, "search", "refund", "-n", "billing_kb", "--json", KBCTL_SERVER="")
    assert report["code"] is None and p.stdout == b""


def test_server_url_from_the_config_file(server, tmp_path):
    config = tmp_path / "kbctl.toml"
    text = server["config"].read_text().replace("[server]\n", f'[server]\nurl = "{server["url"]}"\n', 1)
    assert "url = " in text
    config.write_text(text)
    args = ("search", "refund", "-n", "billing_kb", "--json")
    report, p = probe(server, "--config", str(config), *args, KBCTL_TOKEN=server["tokens"]["ops"])
    assert report["code"] == 0 and report["heavy"] == [], p.stderr.decode()
    assert _untimed(p.stdout) == _untimed(in_process(server, *args).stdout, server["ids"])


@pytest.mark.parametrize("store", ["--home", "--dsn"])
def test_a_store_named_on_the_command_line_is_never_forwarded(server, store):
    # The billing agent's server refuses technical_kb; a search of a store the user names runs in
    # this process against that store, whatever [server] url says (issue 25, part 6).
    where = str(server["home"]) if store == "--home" else f"postgresql://kbctl@127.0.0.1:{free_port()}/none"
    args = (store, where, "search", "password reset", "-n", "technical_kb", "--json")
    report, p = probe(server, *args, **_via(server, "billing"))
    assert report["code"] is None and p.stdout == b""  # the fast path declines: the normal CLI runs it
    p = subprocess.run(
        [sys.executable, "-m", "kbctl", *args],
        capture_output=True,
        env=_env(server, **_via(server, "billing")),
        cwd=ROOT,
        timeout=300,
    )
    err = p.stderr.decode()
    assert "not available" not in err and "not reachable" not in err
    if store == "--home":  # the named store answers, with what the in-process search prints
        assert p.returncode == 0, err
        local = in_process(server, "search", "password reset", "-n", "technical_kb", "--json")
        assert json.loads(p.stdout)["hits"] and _untimed(p.stdout) == _untimed(local.stdout)
    else:  # nothing listens there: the in-process search's connection error, not the server's answer
        assert p.returncode != 0 and p.stdout == b"" and err.startswith("error:"), err
