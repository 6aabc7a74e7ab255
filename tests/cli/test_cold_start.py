"""The query path stays light: no torch, transformers or extraction libraries in a cold CLI process.

Each command runs in its own Python process against the session's server; an exit hook reports
which heavy modules were imported. A search embeds its query with the real model (the namespaces are
filled with all-MiniLM-L6-v2), so the model backend chosen for queries is what is checked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, SAMPLE

HEAVY = ("torch", "transformers", "sentence_transformers", "trafilatura", "pdfplumber", "feedparser")
TENANT = "cold_start"

# Runs the CLI in this process; at exit, prints the heavy modules that were imported.
RUNNER = """
import atexit, json, sys
atexit.register(lambda: sys.stderr.write("\\nHEAVY " + json.dumps(sorted({m.split('.')[0] for m in sys.modules} & set(HEAVY))) + "\\n"))
HEAVY = %r
%s
from kbctl.cli.main import main
main(%r)
"""

# Pretends this CPU's recorded decision is bf16 for throughput (what auto picks on CPUs with
# avx512_bf16), with onnx-fp32 for queries, whatever this machine decided.
FORCE_BF16_DECISION = """
import dataclasses
import kbctl.embed.precision as p
_read = p._read_cached
def _bf16(path):
    c = _read(path)
    return c and dataclasses.replace(c, precision="bf16", query_precision="onnx-fp32")
p._read_cached = _bf16
"""


@pytest.fixture(scope="module")
def filled(kb_home):
    import kbctl

    kb = kbctl.open(home=kb_home, tenant=TENANT, profile="minilm")
    for ns, folder in (("technical_kb", "support/technical"), ("billing_kb", "support/billing")):
        report = kb.ingest([str(SAMPLE / folder)], ns, verify=False)
        assert not report.errors, report.errors
    kb.close()
    return kb_home


def run(home, args, prelude: str = "", env: dict | None = None):
    e = dict(os.environ, KBCTL_HOME=str(home), KBCTL_TENANT=TENANT, PYTHONWARNINGS="ignore")
    e.update(env or {})
    p = subprocess.run(
        [sys.executable, "-c", RUNNER % (HEAVY, prelude, list(args))],
        capture_output=True,
        text=True,
        env=e,
        cwd=ROOT,
        timeout=300,
    )
    heavy = json.loads(p.stderr.rsplit("HEAVY ", 1)[1])
    return p, heavy


COMMANDS = [
    ["--help"],
    ["search", "LMN-4012 scope denied", "-n", "technical_kb", "--json"],
    ["search", "how long do refunds take", "-n", "billing_kb", "--mode", "dense", "--json"],
    ["namespaces"],
    ["runs"],
    ["errors"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_query_path_commands_import_nothing_heavy(filled, args):
    p, heavy = run(filled, args)
    assert p.returncode == 0, p.stderr
    assert heavy == [], f"kbctl {' '.join(args)} imported {heavy}"
    if args[0] == "search":
        result = json.loads(p.stdout)
        assert result["hits"] and not result["degraded"], result  # the query really was embedded


def test_search_uses_the_query_backend_when_throughput_is_bf16(filled):
    """On a CPU where auto picks torch bf16 for ingest, a search still embeds with ONNX."""
    args = ["search", "how long do refunds take", "-n", "billing_kb", "--mode", "dense", "--json"]
    p, heavy = run(filled, args, prelude=FORCE_BF16_DECISION)
    assert p.returncode == 0, p.stderr
    assert heavy == [], heavy
    assert json.loads(p.stdout)["hits"]


def test_the_import_check_can_fail(filled, tmp_path):
    """Control: with bf16 pinned for queries too, the same search imports torch, and the check sees it."""
    cfg = tmp_path / "kbctl.toml"
    cfg.write_text('[profiles.minilm]\nprecision = "bf16"\n')
    args = ["search", "how long do refunds take", "-n", "billing_kb", "--mode", "dense", "--json"]
    p, heavy = run(filled, args, env={"KBCTL_CONFIG": str(cfg)})
    assert p.returncode == 0, p.stderr
    assert "torch" in heavy and "sentence_transformers" in heavy


def test_ingest_records_both_decisions_before_any_search(filled):
    """The auto decision and the ONNX export exist after ingest: a first search measures nothing."""
    from kbctl.config import load_settings
    from kbctl.embed.onnx import FP32_FILE, optimized_copy
    from kbctl.embed.precision import cached_decision

    settings = load_settings(overrides={"database.home": str(filled)})
    prof = settings.profile("minilm")
    d = cached_decision(prof)
    assert d is not None
    assert d.query_precision in ("onnx-fp32", "onnx-int8", "fp32")
    if d.query_precision == "onnx-fp32":
        [export] = settings.model_cache.glob(f"*/{FP32_FILE}")
        assert optimized_copy(export).exists()
    p = subprocess.run(
        [sys.executable, "-m", "kbctl", "-v", "config", "show"],
        capture_output=True,
        text=True,
        env=dict(os.environ, KBCTL_HOME=str(filled)),
        cwd=ROOT,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert f"queries (search) -> {d.query_precision}" in p.stdout
    assert f"throughput (ingest, embed) -> {d.precision}" in p.stdout


def test_onnx_query_vectors_rank_like_torch(filled):
    """Dense top-10 on the sample eval's queries: the ONNX query path ranks as torch fp32 does."""
    import dataclasses

    import kbctl

    queries = [
        json.loads(line) for line in (SAMPLE / "eval" / "queries.jsonl").read_text().splitlines() if line.strip()
    ]
    queries = [q for q in queries if q["namespace"] in ("technical_kb", "billing_kb")]
    assert len(queries) >= 15
    kb = kbctl.open(home=filled, tenant=TENANT)
    try:
        base = kb.profile_for("billing_kb")
        overlaps = []
        for q in queries:
            ranked = {}
            for precision in ("fp32", "onnx-fp32"):
                prof = dataclasses.replace(base, precision=precision)
                kb.profile_for = lambda ns, profile=None, _p=prof: _p  # one query, one backend
                hits = kb.search(q["query"], q["namespace"], mode="dense", k=10).hits
                ranked[precision] = [h.chunk_id for h in hits]
            overlaps.append(len(set(ranked["fp32"]) & set(ranked["onnx-fp32"])) / max(1, len(ranked["fp32"])))
            assert ranked["fp32"][:3] == ranked["onnx-fp32"][:3], q["query"]
        assert sum(overlaps) / len(overlaps) >= 0.99, overlaps
    finally:
        kb.close()
