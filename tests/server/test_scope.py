"""An agent scoped to billing_kb cannot reach technical_kb through any tool, filter, document id or
feedback call, and no answer tells whether what it asked for exists."""

from __future__ import annotations

import httpx
import pytest

from .conftest import app_for, tenant_pair

FORGED_DOC, FORGED_QUERY = "d_" + "A" * 22, "q_" + "A" * 22  # opaque ids' shape, opening under no key


def call(served, path, body=None, agent="billing", method="post", **kw):
    fn = getattr(httpx, method)
    kwargs = {"json": body} if method == "post" else {}
    return fn(served.url + path, headers=served.headers(agent), timeout=30, **kwargs, **kw)


def _same(a: httpx.Response, b: httpx.Response, x: str, y: str) -> None:
    assert a.status_code == b.status_code and 400 <= a.status_code < 500
    assert a.json()["error"].replace(x, "?") == b.json()["error"].replace(y, "?")


@pytest.mark.parametrize(
    "tool,args",
    [
        ("/v1/search", {"query": "deploy"}),
        ("/v1/tools/search_knowledge", {"query": "deploy"}),
        ("/v1/tools/verify_claim", {"claim": "deploy"}),
        ("/v1/tools/research_topic", {"topic": "deploy"}),
    ],
)
def test_no_search_tool_reaches_another_namespace(served, tool, args):
    existing = call(served, tool, {**args, "namespaces": ["technical_kb"]})
    missing = call(served, tool, {**args, "namespaces": ["no_such_kb"]})
    _same(existing, missing, "technical_kb", "no_such_kb")
    assert "not available" in existing.json()["error"]
    raw = call(served, "/v1/search", {"raw": True, "query": "deploy", "namespaces": ["technical_kb"]})
    _same(raw, missing, "technical_kb", "no_such_kb")


def test_default_scope_and_listing_show_only_its_namespace(served):
    names = [n["name"] for n in call(served, "/v1/namespaces", method="get").json()["namespaces"]]
    assert names == ["billing_kb"]
    hits = call(served, "/v1/search", {"query": "deploy rollback kubernetes", "k": 20}).json()["passages"]
    assert hits and {h["namespace"] for h in hits} == {"billing_kb"}


def test_filters_cannot_widen_the_scope(served):
    for f in (["namespace=technical_kb"], ["uri~"], ["tenant=default"]):
        r = call(served, "/v1/search", {"query": "deploy", "filters": f, "k": 20})
        assert r.status_code in (200, 400), r.text
        if r.status_code == 200:
            assert {h["namespace"] for h in r.json()["passages"]} <= {"billing_kb"}


def test_documents_of_another_namespace_look_like_missing_ones(served):
    tech = call(served, "/v1/search", {"query": "deploy", "namespaces": ["technical_kb"], "k": 1}, agent="ops").json()[
        "passages"
    ][0]
    billing = call(served, "/v1/search", {"query": "refund", "k": 1}).json()["passages"][0]
    other = call(served, f"/v1/documents/{tech['doc_id']}", method="get")
    missing = call(served, f"/v1/documents/{FORGED_DOC}", method="get")
    _same(other, missing, tech["doc_id"], FORGED_DOC)
    around = call(served, f"/v1/documents/{billing['doc_id']}", method="get", params={"around_chunk": tech["chunk_id"]})
    assert around.status_code == 400 and "not available" in around.json()["error"]


def test_feedback_cannot_touch_another_agents_query_or_namespace(served):
    ops = call(served, "/v1/search", {"query": "deploy", "namespaces": ["technical_kb"], "k": 1}, agent="ops").json()
    mine = call(served, "/v1/search", {"query": "refund", "k": 1}).json()
    others_query = call(
        served, "/v1/feedback", {"query_id": ops["query_id"], "doc_id": ops["passages"][0]["doc_id"], "useful": True}
    )
    no_query = call(
        served, "/v1/feedback", {"query_id": FORGED_QUERY, "doc_id": ops["passages"][0]["doc_id"], "useful": True}
    )
    _same(others_query, no_query, ops["query_id"], FORGED_QUERY)
    tech_doc = call(
        served, "/v1/feedback", {"query_id": mine["query_id"], "doc_id": ops["passages"][0]["doc_id"], "useful": True}
    )
    no_doc = call(served, "/v1/feedback", {"query_id": mine["query_id"], "doc_id": FORGED_DOC, "useful": True})
    _same(tech_doc, no_doc, ops["passages"][0]["doc_id"], FORGED_DOC)


def test_a_token_made_under_another_tenant_never_serves_an_agent_pinned_to_a_tenant(kb_home, tenant, tmp_path):
    """``[agents.NAME] tenant = "A"`` pins the agent to tenant A. A token made for it under another
    tenant B (``kbctl --tenant B agents token create NAME``: a row of B's) was served as A's agent:
    B's token read A's namespaces, and A's ``agents token revoke NAME`` could not revoke it (0
    revoked, the token still served). A token serves only the tenant it was made under: B's is a 401,
    A's own works, and A's revoke ends it."""
    from starlette.testclient import TestClient

    import kbctl
    from kbctl.errors import ConfigError
    from kbctl.store import agents as agent_store

    other, config, docs = tenant_pair(
        tmp_path, tenant, lambda _: f'[agents.pinned]\ntenant = "{tenant}"\nnamespaces = ["kb"]\n'
    )
    with kbctl.open(config=config, home=kb_home, tenant=tenant) as a:
        a.ingest([str(docs)], "kb", verify=False)
        own = a.create_agent_token("pinned")
    with kbctl.open(config=config, home=kb_home, tenant=other) as b:
        with pytest.raises(ConfigError, match="searches tenant") as refused:
            b.create_agent_token("pinned")
        assert f"kbctl --tenant {tenant} agents token create pinned" in (refused.value.hint or "")
        foreign = "kb_made_before_the_refusal"  # as a kbctl without it stored it: a row of B's
        agent_store.create_token(b.connection(), other, "pinned", foreign)
    app = app_for(kb_home, config, tenant)

    def search(token: str):
        with TestClient(app, base_url="http://127.0.0.1:8765") as client:
            return client.post(
                "/v1/search", json={"query": "quorvax ledger"}, headers={"Authorization": f"Bearer {token}"}
            )

    r = search(foreign)
    assert r.status_code == 401 and "quorvax" not in r.text, r.text
    assert search(own).status_code == 200 and "quorvax" in search(own).text
    with kbctl.open(config=config, home=kb_home, tenant=tenant) as a:
        assert a.revoke_agent_tokens("pinned") == 1
    app = app_for(kb_home, config, tenant)  # a new process: no token remembered
    assert search(own).status_code == 401
