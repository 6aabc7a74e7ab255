"""A hostile agent against the opaque ids (``kbctl.ids``) and the surfaces around them: what the QA
pass of session 39 found. Each test failed before its fix (docs/hardening.md, "QA of the opaque ids")."""

from __future__ import annotations

import json

import pytest

from tests.server import test_ids
from tests.server.test_ids import _client, _records

two_tenants = test_ids.two_tenants  # the fixture: tenant A's app and token, tenant B beside it


def test_feedback_on_a_query_whose_namespace_was_deleted_is_not_available(two_tenants, kb_home):
    """A logged query keeps the namespace ids it searched; judging one of its documents after that
    namespace was deleted (and made again under its name) is "not available", as any document the
    query cannot be judged on, not a 500 (the insert broke the feedback's foreign key)."""
    import kbctl

    settings, token, _, _ = two_tenants
    with kbctl.open(home=kb_home, tenant=settings.tenant, profile="hash-384") as a:
        a.ingest_records(_records("delta", 1), "old", verify=False)
    with _client(settings, token) as client:
        found = client.post("/v1/search", json={"query": "delta ledger", "namespaces": ["old"]}).json()
        doc = found["passages"][0]["doc_id"]
        with kbctl.open(home=kb_home, tenant=settings.tenant, profile="hash-384") as a:
            a.delete_namespace("old")
            a.ingest_records(_records("delta", 1), "old", verify=False)
        r = client.post("/v1/feedback", json={"query_id": found["query_id"], "doc_id": doc, "useful": True})
    assert r.status_code == 400, r.text
    assert r.json() == {"error": f"document {doc!r} is not available"}


@pytest.mark.parametrize("runner", ["cli", "cli_process"])
def test_a_search_of_another_tenant_than_the_servers_is_not_forwarded(served, kb, tenant, runner, request):
    """``kbctl --tenant T search`` with ``[server] url`` set: a server whose token serves another
    tenant answered with that tenant's documents (and ids sealed under its key, which T's
    ``tenants id-of`` cannot open). The search runs in-process, on T, as without a server."""
    run = request.getfixturevalue(runner)
    kb.ingest_records(
        [{"id": "mine", "title": "mine", "text": "A refund of tenant T's own."}], "billing_kb", verify=False
    )
    env = {"KBCTL_CONFIG": str(served.config), "KBCTL_SERVER": served.url, "KBCTL_TOKEN": served.tokens["ops"]}
    p = run("search", "refund", "-n", "billing_kb", "--json", env=env)
    assert p.returncode == 0, p.stderr
    hits = json.loads(p.stdout)["hits"]
    assert [h["title"] for h in hits] == ["mine"], [h["title"] for h in hits]
    assert isinstance(hits[0]["doc_id"], int)  # searched in-process: the operator's raw ids
    if runner == "cli_process":  # the fast path's warning (the in-process CLI's log goes to the real stderr)
        assert b"searches another tenant" in p.stderr, p.stderr


def test_the_tenant_a_forwarded_search_asks_for_tells_an_agent_nothing_of_other_tenants(two_tenants):
    """The header the CLI names its tenant with: its own tenant is served; any other name, a tenant
    that exists or one that does not, gets the same refusal."""
    settings, token, _, other = two_tenants
    with _client(settings, token) as client:
        own = client.post("/v1/search", json={"query": "quorvax"}, headers={"Kbctl-Tenant": settings.tenant})
        answers = [
            client.post("/v1/search", json={"query": "quorvax"}, headers={"Kbctl-Tenant": name})
            for name in (other, "no_such_tenant", "")
        ]
    assert own.status_code == 200, own.text
    assert {(r.status_code, r.text) for r in answers} == {
        (409, '{"error":"this token\'s agent searches another tenant than the one asked for"}')
    }


def test_a_tenant_made_again_under_its_name_gets_its_new_key_in_a_running_server(two_tenants, kb_home):
    """A running server read its tenant's id key once (``Service.ids``): after ``kbctl tenants delete
    T`` and T made again (a new key), it went on sealing with the old one, so the ids it handed out
    were ones ``kbctl tenants id-of`` (the key in the database) and any restarted server cannot open,
    and it refused the ids the new key seals."""
    import kbctl
    from kbctl.api import KnowledgeBase
    from kbctl.server.agents import agent_from_settings
    from kbctl.server.metrics import Metrics
    from kbctl.server.service import Service
    from kbctl.server.tools import Toolbox

    settings, _, _, other = two_tenants
    service = Service(settings)
    box = Toolbox(service, agent_from_settings(settings, "ops"), Metrics())
    try:
        before = box.search_knowledge("quorvax ledger").passages[0].doc_id  # the key read, a kb pooled
        with kbctl.open(home=kb_home, tenant=other, profile="hash-384") as admin:
            admin.delete_tenant(settings.tenant)
            admin.create_tenant(settings.tenant)  # made again: a deleted tenant is not made on first use
        with kbctl.open(home=kb_home, tenant=settings.tenant, profile="hash-384") as a:
            a.ingest_records(_records("omega", 1), "kb", verify=False)
            (hit,) = a.search("omega ledger", ["kb"], k=1).hits
            given = a.ids().seal("d", hit.doc_id)  # what the new key seals: a restarted server's id
        after = box.search_knowledge("omega ledger").passages[0]
        document = box.get_document(given)
        with KnowledgeBase(settings) as kb:
            opened = kb.open_id(after.doc_id)
    finally:
        service.close()
    assert after.doc_id == given and opened["id"] == hit.doc_id
    assert document.doc_id == given and document.title == "omega 0"
    assert before != given
