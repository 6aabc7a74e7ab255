"""``kbctl mcp`` over stdio when the client closes stdin right after its requests (``printf … |
kbctl mcp``, a script's heredoc): every request read before EOF is answered before the process
exits. The MCP SDK's stdio loop cancelled the requests still in flight at EOF, and only those
answered inline (``initialize``, ``tools/list``) came back (docs/hardening.md, session 47)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

import kbctl
from tests.conftest import ROOT
from tests.server.conftest import env_for, tenant_pair

MODERN = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "pipe", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
CALLS = [
    ("search_knowledge", {"query": "quorvax ledger"}),
    ("search_knowledge", {"query": "ledger of a tenant", "k": 3}),
    ("verify_claim", {"claim": "the quorvax ledger"}),
    ("research_topic", {"topic": "quorvax"}),
    ("list_namespaces", {}),
]


def _requests(era: str) -> list[dict]:
    """The requests a client pipes in one go: the handshake (2025-11-25) or none (2026-07-28,
    each request enveloped), then a tools/list and each tool call, ids 2 on."""
    if era == "handshake":
        head = [
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "pipe", "version": "1"},
                },
            },
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
        ]
        meta: dict = {}
    else:
        head, meta = [], {"_meta": ENVELOPE}
    calls = [{"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {**meta}}]
    for i, (name, arguments) in enumerate(CALLS, 3):
        params = {"name": name, "arguments": arguments, **meta}
        calls.append({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params})
    return head + calls


@pytest.mark.parametrize("era", ["handshake", "modern"])
def test_requests_piped_then_eof_are_all_answered_before_exit(kb_home, tenant, tmp_path, era):
    _, config, docs = tenant_pair(tmp_path, tenant, lambda _: "")
    with kbctl.open(config=config, home=kb_home, tenant=tenant) as kb:
        kb.ingest([str(docs)], "kb", verify=False)
    requests = _requests(era)
    stdin = "".join(json.dumps(r) + "\n" for r in requests).encode()
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "kbctl", "mcp"],
        input=stdin,  # written, then closed: EOF right after the last request
        capture_output=True,
        cwd=ROOT,
        env=env_for(kb_home, tenant, config),
        timeout=120,
    )
    took = time.monotonic() - t0
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    answers = {a["id"]: a for a in map(json.loads, p.stdout.decode().splitlines())}
    asked = [r["id"] for r in requests if "id" in r]
    assert sorted(answers) == asked, (sorted(answers), p.stderr.decode()[-2000:])
    assert all("result" in answers[i] for i in asked), [answers[i] for i in asked if "result" not in answers[i]]
    calls = [answers[i]["result"] for i in asked[-len(CALLS) :]]
    assert not any(c.get("isError") for c in calls), calls
    assert "quorvax" in json.dumps(calls[0]["structuredContent"]["passages"])
    assert calls[-1]["structuredContent"]["namespaces"][0]["name"] == "kb"
    assert took < 60, took  # answered, not held for the drain's bound
