"""``/metrics`` of a server that serves agents of several tenants: an agent's scrape holds only its
own tenant's series; the operator's (``[server] metrics_open``, no token) holds every tenant's."""

from __future__ import annotations

import pytest

from .conftest import app_for, tenant_pair


def _samples(text: str) -> list:
    from prometheus_client.parser import text_string_to_metric_families

    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def _count(samples: list, name: str, **labels: str) -> float:
    return sum(s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


@pytest.fixture
def two_tenants(kb_home, tenant, tmp_path):
    """A server of tenant A with an agent of A (``own``) and one pinned to tenant B (``other``), a
    namespace each, and a token each (B's made under B)."""
    import kbctl

    other, config, docs = tenant_pair(tmp_path, tenant, lambda b: f'[agents.own]\n[agents.other]\ntenant = "{b}"\n')
    tokens = {}
    for name, agent in ((tenant, "own"), (other, "other")):
        with kbctl.open(config=config, home=kb_home, tenant=name) as kb:
            kb.ingest([str(docs)], "kb", verify=False)
            tokens[agent] = kb.create_agent_token(agent)
    return config, tenant, other, tokens


def _calls(client, tokens) -> None:
    def bearer(agent):
        return {"Authorization": f"Bearer {tokens[agent]}"}

    assert client.post("/v1/search", json={"query": "quorvax"}, headers=bearer("own")).status_code == 200
    for _ in range(2):
        assert client.post("/v1/search", json={"query": "quorvax"}, headers=bearer("other")).status_code == 200
    r = client.post("/v1/tools/verify_claim", json={"claim": "quorvax ledger"}, headers=bearer("other"))
    assert r.status_code == 200, r.text
    r = client.post("/v1/search", json={"query": "quorvax", "namespaces": ["nope"]}, headers=bearer("other"))
    assert r.status_code == 400, r.text
    assert client.post("/v1/search", json={"query": "x"}, headers={"Authorization": "Bearer nope"}).status_code == 401


def test_an_agents_scrape_holds_only_its_own_tenants_calls(two_tenants, kb_home):
    from starlette.testclient import TestClient

    config, tenant, other, tokens = two_tenants
    with TestClient(app_for(kb_home, config, tenant), base_url="http://127.0.0.1:8765") as client:
        _calls(client, tokens)
        r = client.get("/metrics", headers={"Authorization": f"Bearer {tokens['own']}"})
    assert r.status_code == 200, r.text
    samples = _samples(r.text)
    assert _count(samples, "kbctl_request_seconds_count", tool="search_knowledge") == 1  # its own call
    assert _count(samples, "kbctl_request_seconds_count", tool="verify_claim") == 0
    assert _count(samples, "kbctl_errors_total") == 0  # B's refused search
    assert _count(samples, "kbctl_http_requests_total") == 0  # a 401 is nobody's tenant
    assert other not in r.text
    assert 'kbctl_documents{namespace="kb"}' in r.text  # the ledger of its tenant, as before


def test_the_operators_open_scrape_holds_every_tenants_calls(two_tenants, kb_home):
    from starlette.testclient import TestClient

    config, tenant, other, tokens = two_tenants
    app = app_for(kb_home, config, tenant, metrics_open=True)
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        _calls(client, tokens)
        r = client.get("/metrics")
    assert r.status_code == 200, r.text
    samples = _samples(r.text)
    assert _count(samples, "kbctl_request_seconds_count", tool="search_knowledge", tenant=tenant) == 1
    assert _count(samples, "kbctl_request_seconds_count", tool="search_knowledge", tenant=other) == 2
    assert _count(samples, "kbctl_request_seconds_count", tool="verify_claim", tenant=other) == 1
    assert _count(samples, "kbctl_errors_total", tenant=other) == 1
    assert _count(samples, "kbctl_http_requests_total", route="auth", status="401") == 1
