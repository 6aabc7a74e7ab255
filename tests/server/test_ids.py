"""The ids the server hands agents are opaque, per tenant: document, chunk and query ids come from
sequences every tenant shares, so raw ones would tell tenant A's agent how much tenant B ingested or
searched between two of its own calls. The server seals them (``kbctl.ids``) under its tenant's key;
anything that does not open under it is "not available", as a missing document is."""

from __future__ import annotations

import json
import os

import anyio
import pytest

from tests.conftest import TEST_DSN, _create_tenant

CONFIG = '[defaults]\nprofile = "hash-384"\n[server]\nlog_queries = true\n[agents.ops]\n'


def _records(prefix: str, n: int) -> list[dict]:
    return [
        {"id": f"{prefix}{i}", "title": f"{prefix} {i}", "text": f"The {prefix} ledger entry number {i} of quorvax."}
        for i in range(n)
    ]


@pytest.fixture
def two_tenants(kb_home, tenant, tmp_path):
    """Tenant A ingests a document, tenant B three, then A another: A's app (JSON API) and toolbox."""
    return make_two_tenants(kb_home, tenant, tmp_path)


def make_two_tenants(kb_home, tenant: str, tmp_path):
    """``two_tenants``'s stores and settings for ``tenant`` (and ``tenant_b``), config under ``tmp_path``."""
    import kbctl
    from kbctl.config import load_settings

    other = f"{tenant}_b"[:60]
    if TEST_DSN:
        _create_tenant(other)
    config = tmp_path / "kbctl.toml"
    config.write_text(CONFIG)
    with kbctl.open(config=config, home=kb_home, tenant=tenant) as a:
        a.ingest_records(_records("alpha", 1), "kb", verify=False)
    with kbctl.open(config=config, home=kb_home, tenant=other) as b:
        b.ingest_records(_records("beta", 3), "kb", verify=False)
    with kbctl.open(config=config, home=kb_home, tenant=tenant) as a:
        a.ingest_records(_records("gamma", 1), "kb", verify=False)
        token = a.create_agent_token("ops")
        raw = {h.title: (h.doc_id, h.chunk_id) for h in a.search("quorvax ledger", ["kb"], k=10).hits}
    dsn = {k: v for k, v in os.environ.items() if k == "KBCTL_DSN"}  # make test-dsn: that server
    settings = load_settings(config, overrides={"database.home": str(kb_home), "defaults.tenant": tenant}, env=dsn)
    return settings, token, raw, other


def _client(settings, token):
    from starlette.testclient import TestClient

    from kbctl.server.app import create_app

    client = TestClient(create_app(settings, warm=False), base_url="http://127.0.0.1:8765")
    client.headers["Authorization"] = f"Bearer {token}"
    return client


def test_ids_do_not_reveal_what_another_tenant_ingested(two_tenants):
    settings, token, raw, _ = two_tenants
    assert raw["gamma 0"][0] - raw["alpha 0"][0] == 1 + 3  # the shared sequence: B's three in between
    with _client(settings, token) as client:
        r = client.post("/v1/search", json={"query": "quorvax ledger", "k": 10})
        assert r.status_code == 200, r.text
        found = {p["title"]: p for p in r.json()["passages"]}
    for title in ("alpha 0", "gamma 0"):
        p = found[title]
        for key, kind in (("doc_id", "d_"), ("chunk_id", "c_")):
            assert isinstance(p[key], str) and p[key].startswith(kind), p
        assert p["resource"] == f"kbctl://kb/{p['doc_id']}#{p['chunk_id']}"
    assert r.json()["query_id"].startswith("q_")
    assert all(isinstance(v, str) for v in _ids(r.json())), r.text  # no raw id left anywhere
    # A's two documents: nothing in their ids tells how many B ingested in between
    assert _opened(settings, found["gamma 0"]["doc_id"]) - _opened(settings, found["alpha 0"]["doc_id"]) == 4


def _ids(obj):
    """Every value under a key ending in ``_id``, at any depth."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k.endswith("_id"):
                yield v
            yield from _ids(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _ids(v)


def _opened(settings, token: str) -> int:
    """What an operator reads with ``kbctl tenants id-of``: the raw id."""
    from kbctl.api import KnowledgeBase

    with KnowledgeBase(settings) as kb:
        return kb.open_id(token)["id"]


def test_every_tool_gives_and_takes_opaque_ids(two_tenants):
    """search, verify, research, get_document and feedback over the JSON API: every id out is opaque,
    and what comes back in (a document, a chunk to center on, a query) opens to the same row."""
    settings, token, _, _ = two_tenants
    with _client(settings, token) as client:
        found = client.post("/v1/search", json={"query": "quorvax ledger", "k": 10}).json()
        hit = found["passages"][0]
        research = client.post("/v1/tools/research_topic", json={"topic": "quorvax ledger", "budget": 800})
        verify = client.post("/v1/tools/verify_claim", json={"claim": "the quorvax ledger entry"})
        context = client.post("/v1/search", json={"query": "quorvax ledger", "budget": 300})
        raw = client.post("/v1/search", json={"raw": True, "query": "quorvax ledger", "options": {"explain": True}})
        doc = client.get(f"/v1/documents/{hit['doc_id']}", params={"around_chunk": hit["chunk_id"], "window": 0})
        feedback = client.post(
            "/v1/feedback", json={"query_id": found["query_id"], "doc_id": hit["doc_id"], "useful": True}
        )
    for r in (research, verify, context, raw, doc, feedback):
        assert r.status_code == 200, r.text
        assert all(isinstance(v, str) and v[1] == "_" for v in _ids(r.json()) if v is not None), r.text
    assert doc.json()["doc_id"] == hit["doc_id"] and [c["chunk_id"] for c in doc.json()["chunks"]] == [hit["chunk_id"]]
    assert doc.json()["chunks"][0]["resource"] == hit["resource"]
    assert feedback.json() == {"recorded": True, "query_id": found["query_id"], "doc_id": hit["doc_id"], "useful": True}
    assert {p["doc_id"] for p in research.json()["documents"]} <= {p["doc_id"] for p in found["passages"]}
    assert {e["chunk_id"] for e in verify.json()["evidence"]} <= {p["chunk_id"] for p in found["passages"]}
    assert {h["doc_id"] for h in raw.json()["hits"]} == {p["doc_id"] for p in found["passages"]}
    assert all(g.startswith("g_") for g in raw.json()["details"]["generations"].values())
    assert {c["doc_id"] for c in context.json()["citations"]} <= {p["doc_id"] for p in found["passages"]}
    assert len({found["query_id"], research.json()["query_id"], verify.json()["query_id"]}) == 3


def test_an_id_that_does_not_open_reads_like_a_deleted_document(two_tenants, kb_home):
    """A forged or garbled id, a chunk's id given as a document's, one of another tenant (sealed under
    its key): each is "document '…' is not available", a 400, as a document that was deleted is;
    none is a 500 and none names a raw id."""
    import kbctl

    settings, token, _, other = two_tenants
    with kbctl.open(home=kb_home, tenant=settings.tenant, profile="hash-384") as a:
        a.ingest_records(_records("delta", 1), "old", verify=False)
        (gone,) = [h for h in a.search("delta ledger", ["old"], k=1).hits]
        deleted = a.ids().seal("d", gone.doc_id)
        a.delete_namespace("old")
    with kbctl.open(home=kb_home, tenant=other, profile="hash-384") as b:
        theirs = b.search("beta ledger", ["kb"], k=1).hits[0]
        foreign = b.ids().seal("d", theirs.doc_id)  # B's document, as B's agents see it
    with _client(settings, token) as client:
        hit = client.post("/v1/search", json={"query": "quorvax ledger", "k": 1}).json()["passages"][0]
        real = hit["doc_id"]
        tokens = {
            "deleted": deleted,
            "forged": "d_" + "A" * 22,
            "garbled": real[:-2] + ("AA" if real[-2:] != "AA" else "QA"),
            "a chunk's": hit["chunk_id"],
            "another tenant's": foreign,
            "a raw id": str(gone.doc_id),
            "a number's shape": "d_" + "1" * 22,
        }
        answers = {name: client.get(f"/v1/documents/{t}") for name, t in tokens.items()}
        feedback = client.post("/v1/feedback", json={"query_id": "q_" + "A" * 22, "doc_id": real, "useful": True})
    for name, r in answers.items():
        assert r.status_code == 400, (name, r.text)
        assert r.json() == {"error": f"document {tokens[name]!r} is not available"}, name
    assert feedback.status_code == 400 and feedback.json() == {"error": f"query {'q_' + 'A' * 22!r} is not available"}


def test_mcp_tools_and_resources_round_trip_opaque_ids(two_tenants):
    """The same over MCP: get_document and record_feedback take the ids a search gave, a resource
    URI holds them, and a forged one is refused as a missing document is."""
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    from kbctl.server.agents import agent_from_settings
    from kbctl.server.mcp import mcp_server
    from kbctl.server.metrics import Metrics
    from kbctl.server.service import Service
    from kbctl.server.tools import Toolbox

    settings, _, raw, _ = two_tenants
    service = Service(settings)
    server = mcp_server(Toolbox(service, agent_from_settings(settings, "ops"), Metrics()))
    forged = "d_" + "A" * 22

    async def main():
        out: dict = {}
        async with Client(server) as client:
            found = json.loads(
                (await client.call_tool("search_knowledge", {"query": "quorvax ledger"})).content[0].text
            )
            hit = found["passages"][0]
            out["hit"] = hit
            out["document"] = await client.call_tool(
                "get_document", {"doc_id": hit["doc_id"], "around_chunk": hit["chunk_id"], "window": 0}
            )
            out["feedback"] = await client.call_tool(
                "record_feedback", {"query_id": found["query_id"], "doc_id": hit["doc_id"], "useful": False}
            )
            out["resource"] = (await client.read_resource(hit["resource"])).contents[0]
            out["forged_tool"] = await client.call_tool("get_document", {"doc_id": forged})
            with pytest.raises(MCPError) as e:
                await client.read_resource(f"kbctl://kb/{forged}")
            out["forged_resource"] = e.value.error.message
        return out

    try:
        out = anyio.run(main)
    finally:
        service.close()
    hit = out["hit"]
    assert hit["doc_id"].startswith("d_") and hit["chunk_id"].startswith("c_")
    document = json.loads(out["document"].content[0].text)
    assert not out["document"].is_error and [c["chunk_id"] for c in document["chunks"]] == [hit["chunk_id"]]
    assert json.loads(out["feedback"].content[0].text)["doc_id"] == hit["doc_id"]
    assert out["resource"].meta["doc_id"] == hit["doc_id"] and out["resource"].meta["chunk_id"] == hit["chunk_id"]
    assert out["forged_tool"].is_error and out["forged_tool"].content[0].text == f"document {forged!r} is not available"
    assert out["forged_resource"] == f"document {forged!r} is not available"
    assert {v for v in (hit["doc_id"], hit["chunk_id"])}.isdisjoint({str(i) for pair in raw.values() for i in pair})


def test_the_operator_opens_an_agents_id_and_nothing_else(two_tenants, cli):
    """``kbctl tenants id-of``: the kind and raw id of an id the tenant's server gave, one line with
    exit code 2 for anything else (another tenant's id included)."""
    settings, token, raw, other = two_tenants
    with _client(settings, token) as client:
        found = {p["title"]: p for p in client.post("/v1/search", json={"query": "quorvax ledger"}).json()["passages"]}
    p = cli("tenants", "id-of", found["alpha 0"]["doc_id"], tenant_override=settings.tenant)
    assert p.returncode == 0, p.stderr
    assert p.stdout.decode().strip() == f"document {raw['alpha 0'][0]}"
    p = cli("tenants", "id-of", found["alpha 0"]["chunk_id"], "--json", tenant_override=settings.tenant)
    assert json.loads(p.stdout) == {"tenant": settings.tenant, "kind": "chunk", "id": raw["alpha 0"][1]}
    for bad in ("d_" + "A" * 22, "14", found["alpha 0"]["doc_id"]):
        who = other if bad == found["alpha 0"]["doc_id"] else settings.tenant  # B's key does not open A's ids
        p = cli("tenants", "id-of", bad, tenant_override=who)
        assert p.returncode == 2 and p.stdout == b"", p.stderr
        assert len(p.stderr.decode().strip().splitlines()) <= 2 and "is not an id" in p.stderr.decode()


def test_kbctl_show_takes_the_opaque_chunk_id_an_agent_was_given(two_tenants, cli):
    """A forwarded search's --json, or an agent's report, names chunks by their opaque ids:
    ``kbctl show`` opens one under the tenant's key as it takes a number; a document's id, or one
    the tenant did not give, is one line and exit code 2."""
    settings, token, raw, other = two_tenants
    with _client(settings, token) as client:
        found = {p["title"]: p for p in client.post("/v1/search", json={"query": "quorvax ledger"}).json()["passages"]}
    by_number = cli("show", str(raw["alpha 0"][1]), "-n", "kb", "--json", tenant_override=settings.tenant)
    by_token = cli("show", found["alpha 0"]["chunk_id"], "-n", "kb", "--json", tenant_override=settings.tenant)
    assert by_number.returncode == 0 and by_token.returncode == 0, (by_number.stderr, by_token.stderr)
    assert json.loads(by_token.stdout) == json.loads(by_number.stdout)
    for bad, who in ((found["alpha 0"]["doc_id"], settings.tenant), (found["alpha 0"]["chunk_id"], other)):
        p = cli("show", bad, "-n", "kb", tenant_override=who)
        assert p.returncode == 2 and p.stdout == b"", p.stderr
        assert len(p.stderr.decode().strip().splitlines()) <= 2, p.stderr
