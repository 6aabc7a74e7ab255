"""OpenTelemetry traces (``kbctl.telemetry``, docs/telemetry.md) exported to an in-process collector.

One ``kbctl ingest`` (in process, through the CLI's boundary, parented by ``TRACEPARENT``) and one
served search (``kbctl serve``'s app in process: a ``traceparent`` header on /v1, ``_meta.traceparent``
of an MCP request) show their spans, parented to the caller's span, with the attributes that help
and without the query text. With telemetry off, nothing is recorded.
"""

from __future__ import annotations

import json
import secrets
import shutil

import pytest

from kbctl import telemetry
from kbctl.types import Principal
from tests.conftest import ROOT

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
INGEST_STEPS = ("prepare", "sync", "acl", "lexical")
SEARCH_STEPS = ("lane.lexical", "lane.dense", "gate", "fuse")
# Steps that are attributes rather than spans (each span costs a search about 0.1 ms): the query's
# embedding (on the dense lane) and the page (on the search; a reranked page has kbctl.search.rerank).
NOT_SPANS = ("kbctl.search.embed", "kbctl.search.page")


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


def _small_batches(monkeypatch) -> None:
    """Ingest batches of a few sources and documents (no configuration sets them), so a run has many."""
    import functools

    from kbctl.ingest import pipeline, producer
    from kbctl.store import lexical

    monkeypatch.setattr(producer, "BATCH_SOURCES", 4)
    monkeypatch.setattr(pipeline, "IngestOptions", functools.partial(pipeline.IngestOptions, batch_documents=4))
    monkeypatch.setattr(lexical, "PACK_MIN", 10)  # the lexical lane packs after this small ingest


def test_an_ingest_is_traced_under_the_callers_traceparent(cli, spans, tmp_path, monkeypatch):
    _small_batches(monkeypatch)
    corpus = tmp_path / "billing"
    shutil.copytree(ROOT / "sample_corpus/support/billing", corpus)
    traceparent, trace_id, span_id = _caller()
    cfg = _config(tmp_path, True)
    env = {"KBCTL_CONFIG": str(cfg), "TRACEPARENT": traceparent}
    p = cli("ingest", str(corpus), "-n", "billing_kb", "--sync", "--json", env=env)
    assert p.returncode == 0, p.stderr.decode()
    report = json.loads(p.stdout)
    finished = spans.get_finished_spans()
    named = _by_name(finished)
    root = _one(named, "kbctl.ingest")
    assert root.parent is not None and root.parent.is_remote
    assert (root.parent.trace_id, root.parent.span_id) == (trace_id, span_id)
    assert all(s.context.trace_id == trace_id for s in finished)
    for stage in (*INGEST_STAGES, *INGEST_STEPS):
        batch = named.get(f"kbctl.ingest.{stage}")
        assert batch, (stage, sorted(named))
        assert all(s.parent.span_id == root.context.span_id for s in batch), stage
    a = root.attributes
    assert a["kbctl.namespace"] == "billing_kb" and a["kbctl.command"] == "ingest"
    assert a["kbctl.documents.new"] == report["documents"]["new"] == 15
    assert a["kbctl.run_id"] == report["run_id"]
    # one span per batch per stage, with item counts: 14 sources 4 at a time, 15 documents 4 at a time
    fetched = [s.attributes["kbctl.items"] for s in named["kbctl.ingest.fetch"]]
    assert fetched[:4] == [4, 4, 4, 2] and fetched[4:] in ([], [0]), fetched  # the last one: the end of the input
    assert [s.attributes["kbctl.items"] for s in named["kbctl.ingest.extract"]] == [4, 4, 4, 2]
    chunks = report["chunks"]["embedded"] + report["chunks"]["reused"]
    assert sum(s.attributes["kbctl.chunks"] for s in named["kbctl.ingest.extract"]) == chunks
    embeds, stores = named["kbctl.ingest.embed"], named["kbctl.ingest.store"]
    assert len(embeds) == len(stores) >= 4
    assert all(0 < s.attributes["kbctl.documents"] <= 4 for s in stores)
    assert sum(s.attributes["kbctl.embedded"] for s in embeds) == report["chunks"]["embedded"]
    assert sum(s.attributes["kbctl.documents"] for s in stores) == 15
    assert sum(s.attributes["kbctl.chunks"] for s in stores) == chunks
    assert _one(named, "kbctl.ingest.verify").attributes["kbctl.ok"] is True
    # the steps around the stages: the model made ready, --sync, the ACLs, the lexical lane packed
    prepare = _one(named, "kbctl.ingest.prepare").attributes
    assert prepare["kbctl.profile"] == "hash-384" and prepare["kbctl.model"]
    sync = _one(named, "kbctl.ingest.sync").attributes
    assert sync["kbctl.namespace"] == "billing_kb" and sync["kbctl.documents"] == sync["kbctl.chunks"] == 0
    acl = _one(named, "kbctl.ingest.acl").attributes
    assert acl["kbctl.namespace"] == "billing_kb" and acl["kbctl.documents"] == 0
    packed = _one(named, "kbctl.ingest.lexical").attributes
    assert packed["kbctl.namespace"] == "billing_kb" and packed["kbctl.packed"] is True
    assert packed["kbctl.chunks"] == chunks and packed["kbctl.postings"] > 0
    _no_query_text(finished, "refund")  # no document text either

    # again, one source gone: --sync removes its document, nothing is packed
    spans.clear()
    (corpus / "refunds.md").unlink()
    p = cli("ingest", str(corpus), "-n", "billing_kb", "--sync", "--json", env=env)
    assert p.returncode == 0, p.stderr.decode()
    report = json.loads(p.stdout)
    named = _by_name(spans.get_finished_spans())
    sync = _one(named, "kbctl.ingest.sync").attributes
    assert sync["kbctl.documents"] == report["documents"]["removed"] == 1
    assert sync["kbctl.chunks"] == report["chunks"]["deleted"] > 0
    assert _one(named, "kbctl.ingest.lexical").attributes["kbctl.packed"] is False


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
        assert dense.attributes["kbctl.embed_ms"] > 0 and dense.attributes["kbctl.model"]
        assert not set(NOT_SPANS) & set(named) and "kbctl.search.rerank" not in named
        lexical = named["kbctl.search.lane.lexical"][0].attributes
        assert lexical["kbctl.hits"] > 0 and lexical["kbctl.postings"] > 0
        assert lexical["kbctl.candidates"] >= a["kbctl.k"]
        assert _one(named, "kbctl.search.gate").attributes["kbctl.withheld"] == 0
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
    spans.clear()
    kb.search(QUERY, namespace="billing_kb")
    search = _one(_by_name(spans.get_finished_spans()), "kbctl.search")
    assert search.attributes["kbctl.query"] == QUERY
    assert search.parent is None  # no caller: a root


def test_assigning_new_settings_switches_the_process_traces(kb, spans):
    """``kb.settings = ...`` applies ``[telemetry]`` as opening did: no separate configure call."""
    kb.ingest(["sample_corpus/support/billing"], namespace="billing_kb")
    kb.settings = kb.settings.with_overrides({"telemetry.enabled": True, "telemetry.record_query": True})
    spans.clear()
    kb.search(QUERY, namespace="billing_kb")
    assert _one(_by_name(spans.get_finished_spans()), "kbctl.search").attributes["kbctl.query"] == QUERY
    kb.settings = kb.settings.with_overrides({"telemetry.enabled": False})
    spans.clear()
    kb.search(QUERY, namespace="billing_kb")
    assert not spans.get_finished_spans()


def test_a_reranked_page_has_its_span(kb, kb_home, tenant, spans, tmp_path):
    """Reranking, the costly part of a page, is a span of its own (a reranker registered here that
    reverses the fused order: what is traced is the call, whatever the model)."""
    from kbctl.search import rerank

    class Reverse:
        def score(self, query, texts):
            return [float(-i) for i in range(len(texts))][::-1]

    rerank.register_reranker("reverse-for-test", lambda profile: Reverse())
    cfg = tmp_path / "kbctl.toml"
    cfg.write_text('[profiles.hash-384.rerank]\nkind = "reverse-for-test"\nmodel = "none"\ntop_n = 5\n')
    kb.ingest(["sample_corpus/support/billing"], namespace="billing_kb")
    import kbctl

    rkb = kbctl.open(config=cfg, home=kb_home, tenant=tenant, profile="hash-384")
    try:
        plain = rkb.search(QUERY, "billing_kb", k=3, rerank=False)
        rkb.settings = rkb.settings.with_overrides({"telemetry.enabled": True})
        spans.clear()
        result = rkb.search(QUERY, "billing_kb", k=3, rerank=True)
    finally:
        rkb.close()
    assert result.details.get("reranked") is True
    assert [h.chunk_id for h in result.hits] != [h.chunk_id for h in plain.hits]
    named = _by_name(spans.get_finished_spans())
    search, reranked = _one(named, "kbctl.search"), _one(named, "kbctl.search.rerank")
    assert reranked.parent.span_id == search.context.span_id
    assert reranked.attributes["kbctl.candidates"] >= 3 and reranked.attributes["kbctl.reranked"] is True
    assert not set(NOT_SPANS) & set(named)


def test_a_filter_only_search_traces_its_metadata_lane_and_gate(acl_corpus_kb, spans):
    """A search of filters only (the metadata strategy) has its lane and its gate, as ranked ones do."""
    kb = acl_corpus_kb
    kb.settings = kb.settings.with_overrides({"telemetry.enabled": True})
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
