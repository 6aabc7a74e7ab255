"""A running server and its tenants: a tenant deleted under it (``kbctl tenants delete``) stays
deleted. Its agents' requests, a token still remembered or none needed, over the JSON API or MCP,
are refused in one line (404) and never make the tenant again with an empty store; made again with
``kbctl tenants create``, it is served from the next request on (``test_ids_qa``)."""

from __future__ import annotations

import json
import os
import sys

import anyio
import pytest

from tests.conftest import ROOT
from tests.server import test_ids
from tests.server.test_ids import _client

two_tenants = test_ids.two_tenants  # the fixture: tenant A's app and token, tenant B beside it


def _registered(kb_home, other: str) -> set[str]:
    import kbctl

    with kbctl.open(home=kb_home, tenant=other, profile="hash-384") as k:
        return {t["name"] for t in k.tenants()}


def _delete(kb_home, other: str, name: str) -> None:
    import kbctl

    with kbctl.open(home=kb_home, tenant=other, profile="hash-384") as k:
        assert k.delete_tenant(name) is not None


@pytest.mark.parametrize("token", [True, False], ids=["remembered-token", "no-token-needed"])
def test_the_json_api_refuses_a_tenant_deleted_under_it(two_tenants, kb_home, token):
    settings, bearer, _, other = two_tenants
    if not token:
        settings = settings.with_overrides({"server.require_token": False})
    with _client(settings, bearer if token else "") as client:
        if not token:
            client.headers.pop("Authorization")
        before = client.post("/v1/search", json={"query": "quorvax ledger"})
        assert before.status_code == 200, before.text  # a knowledge base pooled, the token remembered
        _delete(kb_home, other, settings.tenant)
        answers = [
            client.post("/v1/search", json={"query": "quorvax ledger"}),
            client.get("/v1/namespaces"),
        ]
        health = client.get("/healthz")  # the server's own tenant: it cannot serve
    for r in answers:
        assert r.status_code == 404, r.text
        assert r.json() == {"error": f"tenant {settings.tenant!r} was deleted"}, r.text
    assert health.status_code == 503
    assert health.json() == {"ok": False, "error": f"tenant {settings.tenant!r} was deleted"}
    assert settings.tenant not in _registered(kb_home, other)
    assert other in _registered(kb_home, other)


def test_mcp_refuses_a_tenant_deleted_under_it(two_tenants, kb_home):
    from mcp import Client

    from kbctl.server.agents import agent_from_settings
    from kbctl.server.mcp import mcp_server
    from kbctl.server.metrics import Metrics
    from kbctl.server.service import Service
    from kbctl.server.tools import Toolbox

    settings, _, _, other = two_tenants
    service = Service(settings)
    server = mcp_server(Toolbox(service, agent_from_settings(settings, "ops"), Metrics()))

    async def main():
        async with Client(server) as client:
            before = await client.call_tool("search_knowledge", {"query": "quorvax ledger"})
            await anyio.to_thread.run_sync(_delete, kb_home, other, settings.tenant)
            after = await client.call_tool("search_knowledge", {"query": "quorvax ledger"})
            listed = await client.call_tool("list_namespaces", {})
        return before, after, listed

    try:
        before, after, listed = anyio.run(main)
    finally:
        service.close()
    assert not before.is_error and json.loads(before.content[0].text)["passages"]
    for result in (after, listed):
        assert result.is_error and result.content[0].text == f"tenant {settings.tenant!r} was deleted", result
    assert settings.tenant not in _registered(kb_home, other)


def test_a_server_whose_tenant_was_deleted_does_not_start(two_tenants, kb_home):
    """``kbctl serve`` warms up on its tenant (``Service.warm``): one line, exit 2, no tenant made."""
    from kbctl.errors import TenantNotFound
    from kbctl.server.service import Service

    settings, _, _, other = two_tenants
    _delete(kb_home, other, settings.tenant)
    service = Service(settings)
    try:
        with pytest.raises(TenantNotFound) as e:
            service.warm()
    finally:
        service.close()
    assert e.value.exit_code == 2 and e.value.message == f"tenant {settings.tenant!r} was deleted"
    assert settings.tenant not in _registered(kb_home, other)


def test_a_server_whose_tenant_was_deleted_still_serves_other_tenants_agents(two_tenants, kb_home, tmp_path):
    """A server serves the agents of every tenant (a token names its tenant: ``kbctl.agent_of_token``,
    the definer's lookup across tenants). It looked a token up on a connection of its own tenant, so
    once that tenant was deleted every token's lookup failed (503 ``authentication failed``, another
    tenant's too) until a restart. B's token is still served, and reads B's documents only; a token
    of the deleted tenant never authenticates (its rows went with it: 401), one still remembered is
    refused as its tenant's (404); ``/healthz`` says the server's own tenant is gone, and the
    operator's scrape of ``/metrics`` still answers (B's calls; no ledger of the deleted tenant)."""
    import kbctl

    settings, token_a, _, other = two_tenants
    settings = settings.with_overrides({"server.metrics_open": True})
    config = tmp_path / "kbctl.toml"  # the fixture's: [agents.ops], pinned to no tenant
    with kbctl.open(config=config, home=kb_home, tenant=other) as b:
        token_b = b.create_agent_token("ops")
    with kbctl.open(config=config, home=kb_home, tenant=settings.tenant) as a:
        unused_a = a.create_agent_token("ops")  # never sent before the delete: not remembered
    with _client(settings, token_a) as client:
        before = client.post("/v1/search", json={"query": "quorvax ledger", "k": 10})
        assert before.status_code == 200, before.text  # A's token remembered, A's knowledge base pooled
        _delete(kb_home, other, settings.tenant)
        served = client.post(
            "/v1/search", json={"query": "quorvax ledger", "k": 10}, headers={"Authorization": f"Bearer {token_b}"}
        )
        listed = client.get("/v1/namespaces", headers={"Authorization": f"Bearer {token_b}"})
        remembered = client.post("/v1/search", json={"query": "quorvax ledger"})
        forgotten = client.post(
            "/v1/search", json={"query": "quorvax ledger"}, headers={"Authorization": f"Bearer {unused_a}"}
        )
        health = client.get("/healthz")
        scrape = client.get("/metrics")
    assert served.status_code == 200, served.text
    titles = {p["title"] for p in served.json()["passages"]}
    assert titles == {"beta 0", "beta 1", "beta 2"}, titles  # B's three, none of A's
    assert listed.status_code == 200 and [n["name"] for n in listed.json()["namespaces"]] == ["kb"], listed.text
    assert remembered.status_code == 404, remembered.text
    assert remembered.json() == {"error": f"tenant {settings.tenant!r} was deleted"}
    assert forgotten.status_code == 401 and "quorvax" not in forgotten.text, forgotten.text
    assert health.status_code == 503
    assert health.json()["error"] == f"tenant {settings.tenant!r} was deleted"
    assert scrape.status_code == 200, scrape.text
    assert f'tenant="{other}"' in scrape.text and "kbctl_documents{" not in scrape.text
    assert settings.tenant not in _registered(kb_home, other)


_MCP_CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_namespaces", "arguments": {}}}
_MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}


@pytest.mark.parametrize("first", ["json", "mcp"])
def test_a_remembered_token_never_reaches_its_tenant_made_again(two_tenants, kb_home, tmp_path, monkeypatch, first):
    """A server remembers a token's lookup (``_TOKEN_TTL``): T deleted and made again within that
    window (``kbctl tenants delete T``, ``kbctl tenants create T``), an old token of T was served on
    the new, empty T. A token reaches only the tenant it was made for: the lookup notes that
    tenant's id key (made anew with it) and each borrow checks the key it reads against it, so the
    old token is refused as an unknown one (401) from the first request on, by the JSON API and by
    MCP, and forgotten; the new T's own token is served."""
    import kbctl
    from kbctl.server import app as server_app

    monkeypatch.setattr(server_app, "_TOKEN_TTL", 3600.0)  # remembered throughout, however slow the machine
    settings, token_a, _, other = two_tenants
    config = tmp_path / "kbctl.toml"  # the fixture's: [agents.ops]
    with _client(settings, token_a) as client:
        before = client.post("/v1/search", json={"query": "quorvax ledger"})
        assert before.status_code == 200, before.text  # A's token remembered, A's knowledge base pooled
        with kbctl.open(home=kb_home, tenant=other, profile="hash-384") as admin:
            admin.delete_tenant(settings.tenant)
            admin.create_tenant(settings.tenant)  # a new, empty T under the name
        with kbctl.open(config=config, home=kb_home, tenant=settings.tenant) as a:
            token_new = a.create_agent_token("ops")
        mcp = lambda: client.post("/mcp", json=_MCP_CALL, headers=_MCP_HEADERS)  # noqa: E731
        json_api = [
            lambda: client.post("/v1/search", json={"query": "quorvax ledger"}),
            lambda: client.get("/v1/namespaces"),
        ]
        calls = [mcp, *json_api] if first == "mcp" else [*json_api, mcp]
        answers = [call() for call in calls]
        fresh = client.get("/v1/namespaces", headers={"Authorization": f"Bearer {token_new}"})
    if first == "mcp":  # the borrow of the tool's call refuses it: a tool's error (the HTTP exchange was fine)
        r = answers.pop(0)
        assert r.status_code == 200 and r.json()["result"]["isError"], r.text
        assert r.json()["result"]["content"][0]["text"] == "missing or invalid bearer token", r.text
    for r in answers:  # refused by the borrow (/v1/search first), then by the gate: forgotten, looked up, unknown
        assert r.status_code == 401 and r.headers["WWW-Authenticate"] == "Bearer", r.text
        assert r.json() == {"error": "missing or invalid bearer token"}, r.text
    assert fresh.status_code == 200 and fresh.json() == {"namespaces": []}, fresh.text


def test_the_mcp_apps_a_server_keeps_are_bounded(kb_home, tenant, tmp_path, monkeypatch):
    """The server keeps one MCP app per agent and tenant (its session manager running): one more for
    every agent that calls, and for every agent of a tenant each time it is made again. Without a
    bound that grew for as long as the server ran. The least recently used app is stopped past the
    bound (``_MCP_APPS``) and an app of a tenant made again replaces the old tenant's; an agent whose
    app was stopped is served again by a new one."""
    import kbctl
    from kbctl.config import load_settings
    from kbctl.server import app as server_app

    monkeypatch.setattr(server_app, "_MCP_APPS", 2)
    names = ["a1", "a2", "a3"]
    config = tmp_path / "kbctl.toml"
    config.write_text('[defaults]\nprofile = "hash-384"\n' + "".join(f"[agents.{n}]\n" for n in names))
    with kbctl.open(config=config, home=kb_home, tenant=tenant) as k:
        k.create_namespace("kb")
        tokens = {n: k.create_agent_token(n) for n in names}
    dsn = {key: v for key, v in __import__("os").environ.items() if key == "KBCTL_DSN"}
    settings = load_settings(config, overrides={"database.home": str(kb_home), "defaults.tenant": tenant}, env=dsn)

    def call(client, token: str) -> None:
        r = client.post("/mcp", json=_MCP_CALL, headers={**_MCP_HEADERS, "Authorization": f"Bearer {token}"})
        assert r.status_code == 200 and not r.json()["result"].get("isError"), r.text
        listed = json.loads(r.json()["result"]["content"][0]["text"])["namespaces"]
        assert [n["name"] for n in listed] == ["kb"], r.text

    with _client(settings, "") as client:
        state = client.app.state
        seen: dict = {}
        for n in [*names, "a1"]:
            call(client, tokens[n])
            seen.update(state.mcp_apps)
            assert len(state.mcp_apps) <= 2
        assert {a.name for a in state.mcp_apps} == {"a3", "a1"}  # a2 the least recently used: stopped
        with kbctl.open(home=kb_home, tenant=tenant + "_admin", profile="hash-384") as admin:
            admin.delete_tenant(tenant)
            admin.create_tenant(tenant)
        with kbctl.open(config=config, home=kb_home, tenant=tenant) as k:
            k.create_namespace("kb")
            again = k.create_agent_token("a1")
        call(client, again)
        assert [a.name for a in state.mcp_apps] == ["a1"]  # the old tenant's apps went with it
        seen.update(state.mcp_apps)
        stopped = [kept.scope.cancel_called for a, kept in seen.items() if a not in state.mcp_apps]
        assert stopped == [True] * 3  # their session managers too: a2, then the old tenant's a3 and a1
    with kbctl.open(home=kb_home, tenant=tenant + "_admin", profile="hash-384") as admin:
        admin.delete_tenant(tenant)
        admin.delete_tenant(admin.tenant)


def test_a_server_whose_tenant_was_never_made_does_not_start(kb_home, tenant, tmp_path):
    """``kbctl serve`` of a tenant no one made: a read does not make it (only a verb that writes),
    so the server refuses at start in one line with its hint, exit 2 (uvicorn printed the
    warm-up's traceback and exited 3, "a check did not hold"), and the tenant is still not made."""
    import subprocess

    from tests.server.conftest import env_for

    never = f"{tenant}_never"[:60]
    config = tmp_path / "kbctl.toml"
    config.write_text('[defaults]\nprofile = "hash-384"\n\n[server]\nrequire_token = false\n')
    p = subprocess.run(
        [sys.executable, "-m", "kbctl", "serve", "--port", "0"],
        cwd=ROOT,
        env=env_for(kb_home, never, config),
        capture_output=True,
        timeout=300,
    )
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert "Traceback" not in err and "startup failed" not in err, err
    assert [line for line in err.splitlines() if line.startswith("error:")] == [
        f"error: tenant {never!r} does not exist"
    ], err
    assert f"hint: create it: kbctl tenants create {never}" in err
    assert never not in _registered(kb_home, tenant)


def test_requests_for_a_tenant_never_made_are_refused_and_make_nothing(kb_home, tenant, tmp_path, monkeypatch):
    """An app (``create_app(warm=False)``, as a library caller builds one) of a tenant never made:
    its requests, over the JSON API and MCP, are 404 with the one line, never 500, and make no
    tenant (a read). kbctl's own rule, not the test session's (which makes any tenant by DSN)."""
    from kbctl.config import load_settings
    from kbctl.store import tenants

    monkeypatch.setattr(tenants, "role_for_use", tenants.role_for_use.__wrapped__)

    never = f"x{tenant}"[:60]  # a t_ name is made on first use in this test process (tests/conftest.py)
    config = tmp_path / "kbctl.toml"
    config.write_text('[defaults]\nprofile = "hash-384"\n\n[server]\nrequire_token = false\n')
    dsn = {k: v for k, v in os.environ.items() if k == "KBCTL_DSN"}
    settings = load_settings(config, overrides={"database.home": str(kb_home), "defaults.tenant": never}, env=dsn)
    with _client(settings, "") as client:
        client.headers.pop("Authorization")
        answers = [client.post("/v1/search", json={"query": "quorvax"}), client.get("/v1/namespaces")]
        mcp = client.post("/mcp", json=_MCP_CALL, headers=_MCP_HEADERS)
    for r in answers:
        assert r.status_code == 404, r.text
        assert r.json() == {"error": f"tenant {never!r} does not exist"}, r.text
    assert mcp.status_code in (200, 404), mcp.text
    assert f"tenant {never!r} does not exist" in mcp.text and "Traceback" not in mcp.text, mcp.text
    assert never not in _registered(kb_home, tenant)
