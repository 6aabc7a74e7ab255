"""A hostile agent against the opaque ids (``kbctl.ids``) and the surfaces around them: what the QA
pass of session 39 found. Each test failed before its fix (docs/hardening.md, "QA of the opaque ids")."""

from __future__ import annotations

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
