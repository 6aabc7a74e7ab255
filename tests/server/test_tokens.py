"""A running server and the bearer tokens it remembers (``_TOKEN_TTL``): a revoked token
(``kbctl agents token revoke NAME``) is refused from the request after the revoke on, by the JSON
API, by MCP and by ``/metrics``, however long the server would remember the token's lookup; the
agent's new token and the tenant's other agents' tokens are served."""

from __future__ import annotations

import pytest

from tests.server import test_ids
from tests.server.test_ids import _client

two_tenants = test_ids.two_tenants  # the fixture: tenant A's app and token ([agents.ops]), tenant B beside it

_MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}


def _mcp(method: str, params: dict | None = None) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}


_MCP_CALL = _mcp("tools/call", {"name": "list_namespaces", "arguments": {}})
_REFUSED = {"error": "missing or invalid bearer token"}


def _revoke(settings, tmp_path, agent: str) -> int:
    import kbctl

    with kbctl.open(config=tmp_path / "kbctl.toml", home=settings.home, tenant=settings.tenant) as a:
        return a.revoke_agent_tokens(agent)


def _token(settings, tmp_path, agent: str) -> str:
    import kbctl

    with kbctl.open(config=tmp_path / "kbctl.toml", home=settings.home, tenant=settings.tenant) as a:
        return a.create_agent_token(agent)


@pytest.fixture
def remembered(two_tenants, tmp_path, monkeypatch):
    """The fixture's server, remembering a token's lookup for an hour (however slow the machine),
    with a second agent ([agents.reader]) whose token is not revoked."""
    import os

    from kbctl.config import load_settings
    from kbctl.server import app as server_app

    monkeypatch.setattr(server_app, "_TOKEN_TTL", 3600.0)
    settings, token, _, _ = two_tenants
    config = tmp_path / "kbctl.toml"
    config.write_text(config.read_text() + "[agents.reader]\n")
    dsn = {k: v for k, v in os.environ.items() if k == "KBCTL_DSN"}
    overrides = {"database.home": str(settings.home), "defaults.tenant": settings.tenant}
    settings = load_settings(config, overrides=overrides, env=dsn)
    assert "reader" in settings.agents
    return settings, token, _token(settings, tmp_path, "reader")


def _assert_refused(r) -> None:
    assert r.status_code == 401 and r.headers["WWW-Authenticate"] == "Bearer", r.text
    assert r.json() == _REFUSED, r.text


@pytest.mark.parametrize("first", ["json", "mcp"])
def test_a_revoked_token_is_refused_on_the_next_request(remembered, tmp_path, first):
    """A token used (its lookup remembered), revoked, used again at once: refused (401 over the JSON
    API, the tool's error over MCP), then forgotten: every route refuses it, ``/metrics`` and MCP's
    handshake too. The agent's new token and another agent's are served."""
    settings, token, reader = remembered
    with _client(settings, token) as client:
        mcp = lambda: client.post("/mcp", json=_MCP_CALL, headers=_MCP_HEADERS)  # noqa: E731
        search = lambda: client.post("/v1/search", json={"query": "quorvax ledger"})  # noqa: E731
        assert search().status_code == 200  # remembered, for the JSON API
        before = mcp()  # and for MCP (its app made)
        assert before.status_code == 200 and not before.json()["result"]["isError"], before.text
        assert client.get("/metrics").status_code == 200
        assert _revoke(settings, tmp_path, "ops") == 1
        calls = [mcp, search] if first == "mcp" else [search, mcp]
        answers = [call() for call in calls]
        namespaces = client.get("/v1/namespaces")
        handshake = client.post("/mcp", json=_mcp("tools/list"), headers=_MCP_HEADERS)
        scrape = client.get("/metrics")
        fresh = _token(settings, tmp_path, "ops")
        served = [client.get("/v1/namespaces", headers={"Authorization": f"Bearer {t}"}) for t in (fresh, reader)]
    if first == "mcp":  # the tool's call reads the key, and the token's row with it: a tool's error
        r = answers.pop(0)
        assert r.status_code == 200 and r.json()["result"]["isError"], r.text
        assert r.json()["result"]["content"][0]["text"] == _REFUSED["error"], r.text
    for r in [*answers, namespaces, handshake, scrape]:
        _assert_refused(r)
    for r in served:
        assert r.status_code == 200 and r.json()["namespaces"][0]["name"] == "kb", r.text


def test_a_token_revoked_before_a_handshake_is_refused_there(remembered, tmp_path):
    """MCP's handshake and lists read no knowledge base: a remembered token revoked since is looked
    up again for them (and not found), as it is for ``/metrics``."""
    settings, token, _ = remembered
    with _client(settings, token) as client:
        listed = client.post("/mcp", json=_mcp("tools/list"), headers=_MCP_HEADERS)
        assert listed.status_code == 200 and listed.json()["result"]["tools"], listed.text
        assert client.get("/metrics").status_code == 200
        _revoke(settings, tmp_path, "ops")
        answers = [client.post("/mcp", json=_mcp("tools/list"), headers=_MCP_HEADERS), client.get("/metrics")]
    for r in answers:
        _assert_refused(r)
