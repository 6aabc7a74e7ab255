"""OpenTelemetry traces (``kbctl.telemetry``, docs/telemetry.md) exported to an in-process collector.

One ``kbctl ingest`` (in process, through the CLI's boundary, parented by ``TRACEPARENT``) and one
served search (``kbctl serve``'s app in process: a ``traceparent`` header on /v1, ``_meta.traceparent``
of an MCP request) show their spans, parented to the caller's span, with the attributes that help
and without the query text. With telemetry off, nothing is recorded.
"""

from __future__ import annotations

import json
import secrets

import pytest

from kbctl import telemetry
from kbctl.types import Principal

pytest.importorskip("opentelemetry.sdk")

CONFIG = """
[defaults]
profile = "hash-384"

[server]
require_token = false

[telemetry]
enabled = {enabled}
"""

QUERY = "how long do refunds take"
INGEST_STAGES = ("fetch", "extract", "embed", "store", "verify")
SEARCH_STEPS = ("lane.lexical", "lane.dense", "gate", "fuse", "page")


@pytest.fixture(scope="session")
def collector():
    """An in-memory exporter on the process's SDK tracer provider (set here unless one is set)."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


@pytest.fixture
def spans(collector):
    collector.clear()
    yield collector
    telemetry.reset()
    collector.clear()


def _config(tmp_path, enabled: bool):
    cfg = tmp_path / "kbctl.toml"
    cfg.write_text(CONFIG.format(enabled=str(enabled).lower()))
    return cfg


def _caller() -> tuple[str, int, int]:
    """A caller's traceparent, its trace id and its span id."""
    trace_id, span_id = secrets.randbits(128) | 1, secrets.randbits(64) | 1
    return f"00-{trace_id:032x}-{span_id:016x}-01", trace_id, span_id


def _by_name(finished) -> dict[str, list]:
    out: dict[str, list] = {}
    for s in finished:
        out.setdefault(s.name, []).append(s)
    return out


def _one(named: dict[str, list], name: str):
    assert name in named, sorted(named)
    assert len(named[name]) == 1, (name, len(named[name]))
    return named[name][0]


def _no_query_text(finished, text: str) -> None:
    for s in finished:
        for key, value in (s.attributes or {}).items():
            assert text not in str(value), (s.name, key)


def test_an_ingest_is_traced_under_the_callers_traceparent(cli, spans, tmp_path):
    traceparent, trace_id, span_id = _caller()
    cfg = _config(tmp_path, True)
    p = cli("ingest", "sample_corpus/support/billing", "-n", "billing_kb", "--json",
            env={"KBCTL_CONFIG": str(cfg), "TRACEPARENT": traceparent})  # fmt: skip
    assert p.returncode == 0, p.stderr.decode()
    report = json.loads(p.stdout)
    finished = spans.get_finished_spans()
    named = _by_name(finished)
    root = _one(named, "kbctl.ingest")
    assert root.parent is not None and root.parent.is_remote
    assert (root.parent.trace_id, root.parent.span_id) == (trace_id, span_id)
    assert all(s.context.trace_id == trace_id for s in finished)
    for stage in INGEST_STAGES:
        batch = named.get(f"kbctl.ingest.{stage}")
        assert batch, (stage, sorted(named))
        assert all(s.parent.span_id == root.context.span_id for s in batch), stage
    a = root.attributes
    assert a["kbctl.namespace"] == "billing_kb" and a["kbctl.command"] == "ingest"
    assert a["kbctl.documents.new"] == report["documents"]["new"] == 15
    assert a["kbctl.run_id"] == report["run_id"]
    # per batch, with item counts: every source fetched, extracted, its chunks embedded and stored
    assert sum(s.attributes["kbctl.items"] for s in named["kbctl.ingest.fetch"]) == 14
    assert sum(s.attributes["kbctl.items"] for s in named["kbctl.ingest.extract"]) == 14
    chunks = report["chunks"]["embedded"] + report["chunks"]["reused"]
    assert sum(s.attributes["kbctl.chunks"] for s in named["kbctl.ingest.extract"]) == chunks
    assert sum(s.attributes["kbctl.embedded"] for s in named["kbctl.ingest.embed"]) == report["chunks"]["embedded"]
    assert sum(s.attributes["kbctl.documents"] for s in named["kbctl.ingest.store"]) == 15
    assert _one(named, "kbctl.ingest.verify").attributes["kbctl.ok"] is True


def _served(cfg, kb_home, tenant):
    from starlette.testclient import TestClient

    from kbctl.config import load_settings
    from kbctl.server.app import create_app

    settings = load_settings(cfg, {"database.home": str(kb_home), "defaults.tenant": tenant})
    return TestClient(create_app(settings, warm=False), base_url="http://127.0.0.1:8765")


def test_a_served_search_is_traced_under_the_callers_traceparent(cli, kb_home, tenant, spans, tmp_path):
    assert cli("ingest", "sample_corpus/support/billing", "-n", "billing_kb", "--json",
               env={"KBCTL_CONFIG": str(_config(tmp_path, False))}).returncode == 0  # fmt: skip
    spans.clear()
    traceparent, trace_id, span_id = _caller()
    with _served(_config(tmp_path, True), kb_home, tenant) as client:
        r = client.post("/v1/search", json={"query": QUERY}, headers={"traceparent": traceparent})
        assert r.status_code == 200, r.text
        assert r.json()["passages"]
        finished = spans.get_finished_spans()
        named = _by_name(finished)
        assert all(s.context.trace_id == trace_id for s in finished), [s.name for s in finished]
        request = _one(named, "kbctl.request")
        assert (request.parent.trace_id, request.parent.span_id) == (trace_id, span_id)
        assert request.attributes["http.response.status_code"] == 200
        assert request.attributes["url.path"] == "/v1/search"
        tool = _one(named, "kbctl.tool")
        assert tool.parent.span_id == request.context.span_id
        assert tool.attributes["kbctl.tool"] == "search_knowledge"
        search = _one(named, "kbctl.search")
        assert search.parent.span_id == tool.context.span_id
        a = search.attributes
        assert a["kbctl.namespaces"] == ("billing_kb",) and a["kbctl.mode"] == "auto" and a["kbctl.k"] > 0
        assert a["kbctl.lanes"] == "hybrid" and a["kbctl.hits"] > 0 and a["kbctl.withheld"] == 0
        assert a["kbctl.query.chars"] == len(QUERY) and "kbctl.query" not in a
        for step in SEARCH_STEPS:
            s = _one(named, f"kbctl.search.{step}")
            assert s.parent.span_id == search.context.span_id, step  # the dense lane's too: from its thread
        dense = named["kbctl.search.lane.dense"][0]
        assert dense.attributes["kbctl.path"] in ("exact", "hnsw", "hnsw+exact") and dense.attributes["kbctl.hits"] > 0
        assert _one(named, "kbctl.search.embed").parent.span_id == dense.context.span_id
        lexical = named["kbctl.search.lane.lexical"][0].attributes
        assert lexical["kbctl.hits"] > 0 and lexical["kbctl.postings"] > 0
        assert lexical["kbctl.candidates"] >= a["kbctl.k"]
        assert _one(named, "kbctl.search.gate").attributes["kbctl.withheld"] == 0
        assert _one(named, "kbctl.search.page").attributes["kbctl.hits"] == a["kbctl.hits"]
        render = _one(named, "kbctl.search.render")
        assert render.parent.span_id == tool.context.span_id and render.end_time <= tool.end_time
        _no_query_text(finished, "refunds")

        # feedback, in a search with it
        spans.clear()
        body = {"query": QUERY, "raw": True, "options": {"prf": "hybrid"}}
        assert client.post("/v1/search", json=body, headers={"traceparent": traceparent}).status_code == 200
        named = _by_name(spans.get_finished_spans())
        feedback = _one(named, "kbctl.search.feedback")
        assert feedback.parent.span_id == _one(named, "kbctl.search").context.span_id
        assert feedback.attributes["kbctl.docs"] > 0
        assert len(named["kbctl.search.gate"]) == len(named["kbctl.search.fuse"]) == 2  # both rounds

        # MCP: the request's _meta.traceparent
        spans.clear()
        traceparent, trace_id, span_id = _caller()
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "search_knowledge",
                "arguments": {"query": QUERY},
                "_meta": {"traceparent": traceparent},
            },
        }
        headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
        r = client.post("/mcp", json=call, headers=headers)
        assert r.status_code == 200, r.text
        assert not r.json()["result"].get("isError"), r.text
        finished = spans.get_finished_spans()
        named = _by_name(finished)
        tool = _one(named, "kbctl.tool")
        assert tool.context.trace_id == trace_id
        chain = {s.context.span_id: s for s in finished}
        up = tool
        while up.parent is not None and up.parent.span_id in chain:
            up = chain[up.parent.span_id]
        assert up.parent is not None and (up.parent.trace_id, up.parent.span_id) == (trace_id, span_id)
        assert _one(named, "kbctl.search").parent.span_id == tool.context.span_id
        _no_query_text(finished, "refunds")

        # MCP without _meta: the HTTP traceparent header of the /mcp request
        spans.clear()
        traceparent, trace_id, span_id = _caller()
        del call["params"]["_meta"]
        r = client.post("/mcp", json=call, headers={**headers, "traceparent": traceparent})
        assert r.status_code == 200 and not r.json()["result"].get("isError"), r.text
        named = _by_name(spans.get_finished_spans())
        request = _one(named, "kbctl.request")
        assert (request.parent.trace_id, request.parent.span_id) == (trace_id, span_id)
        assert request.attributes["url.path"] == "/mcp"
        assert _one(named, "kbctl.tool").context.trace_id == trace_id


def test_the_query_text_is_recorded_only_when_configured(kb, spans, tmp_path):
    kb.ingest(["sample_corpus/support/billing"], namespace="billing_kb")
    kb.settings = kb.settings.with_overrides({"telemetry.enabled": True, "telemetry.record_query": True})
    telemetry.configure(kb.settings.telemetry)
    spans.clear()
    kb.search(QUERY, namespace="billing_kb")
    search = _one(_by_name(spans.get_finished_spans()), "kbctl.search")
    assert search.attributes["kbctl.query"] == QUERY
    assert search.parent is None  # no caller: a root


def test_a_filter_only_search_traces_its_metadata_lane_and_gate(acl_corpus_kb, spans):
    """A search of filters only (the metadata strategy) has its lane and its gate, as ranked ones do."""
    kb = acl_corpus_kb
    kb.settings = kb.settings.with_overrides({"telemetry.enabled": True})
    telemetry.configure(kb.settings.telemetry)
    spans.clear()
    result = kb.search("", "acl_kb", filters=["source_type=markdown"], k=2, principal=Principal("u9", ("sales",)))
    assert result.mode == "metadata" and len(result.hits) == 2
    named = _by_name(spans.get_finished_spans())
    search = _one(named, "kbctl.search")
    assert search.attributes["kbctl.lanes"] == "metadata" and search.attributes["kbctl.filters"] == 1
    lanes, gates = named.get("kbctl.search.lane.metadata", []), named.get("kbctl.search.gate", [])
    assert lanes and len(lanes) == len(gates), sorted(named)  # one of each per round (more when the page is short)
    assert all(s.parent.span_id == search.context.span_id for s in (*lanes, *gates))
    assert [s.attributes["kbctl.candidates"] for s in lanes] == [2, 8]  # 2 withheld: a second, deeper round
    assert lanes[0].attributes["kbctl.hits"] == 2 and lanes[1].attributes["kbctl.hits"] == 4
    assert [s.attributes["kbctl.candidates"] for s in gates] == [2, 4]
    assert [s.attributes["kbctl.withheld"] for s in gates] == [2, 2]
    assert gates[0].attributes["kbctl.unrestricted"] is False


@pytest.fixture
def acl_corpus_kb(kb, tmp_path):
    """Four markdown documents, the first two for group eng only."""
    for n, acl in enumerate(("[group:eng]", "[group:eng]", "[public]", "[public]")):
        (tmp_path / f"doc{n}.md").write_text(f"---\ntitle: Handbook {n}\nacl: {acl}\n---\n\nSection {n} of it.\n")
    kb.ingest([str(tmp_path / f"doc{n}.md") for n in range(4)], namespace="acl_kb")
    return kb


def test_with_telemetry_off_nothing_is_recorded(cli, kb_home, tenant, spans, tmp_path):
    traceparent, _, _ = _caller()
    cfg = _config(tmp_path, False)
    p = cli("ingest", "sample_corpus/support/billing", "-n", "billing_kb",
            env={"KBCTL_CONFIG": str(cfg), "TRACEPARENT": traceparent})  # fmt: skip
    assert p.returncode == 0, p.stderr.decode()
    with _served(cfg, kb_home, tenant) as client:
        r = client.post("/v1/search", json={"query": QUERY}, headers={"traceparent": traceparent})
        assert r.status_code == 200 and r.json()["passages"]
    assert not telemetry.enabled()
    assert spans.get_finished_spans() == ()
