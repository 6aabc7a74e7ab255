"""The MCP surface with the SDK's own client, for each protocol revision kbctl supports (the
stateless 2026-07-28, reached by ``server/discover``, and the 2025-11-25 ``initialize``
handshake), over stdio (``kbctl -v mcp``) and streamable HTTP (``kbctl -v serve``'s ``/mcp``):
list the tools with their output schemas, call each and validate its structured content against
its schema, read a document resource, and be refused one outside the agent's scope (a one-line
error, no traceback in the server's log). The JSON API's answers validate against the same schemas."""

from __future__ import annotations

import functools
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import anyio
import httpx
import jsonschema
import pytest

from kbctl.server.schemas import OUTPUTS, parse_resource_uri, resource_uri
from tests.conftest import ROOT

from .conftest import env_for, stop
from .test_edges import start_logged

MODERN, HANDSHAKE = "2026-07-28", "2025-11-25"
REVISIONS = {MODERN: "auto", HANDSHAKE: "legacy"}  # Client(mode=...): auto probes server/discover first
ALL = set(OUTPUTS)


@dataclass
class Logged:
    url: str
    log: Path
    tokens: dict[str, str]


@pytest.fixture(scope="module")
def logged(served, tmp_path_factory):
    """A second ``kbctl -v serve`` over the session's data (tokens required), its log in a file."""
    log = tmp_path_factory.mktemp("revisions") / "serve.log"
    run = start_logged(served.home, served.tenant, served.config, log)
    yield Logged(run.url, log, served.tokens)
    stop(run.proc)


@pytest.fixture(scope="module")
def technical_doc(served) -> str:
    """A document of technical_kb (outside the billing agent's scope)."""
    r = httpx.post(
        served.url + "/v1/search",
        json={"query": "deploy", "namespaces": ["technical_kb"], "k": 1},
        headers=served.headers("ops"),
        timeout=30,
    )
    assert r.status_code == 200, r.text
    return r.json()["passages"][0]["doc_id"]


def stdio_transport(served, agent: str, errlog, **env: str):
    from mcp import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kbctl", "-v", "mcp", "--agent", agent],
        cwd=str(ROOT),
        env={**env_for(served.home, served.tenant, served.config), **env},
    )
    return stdio_client(params, errlog=errlog)


def http_transport(url: str, token: str, **headers: str):
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}", **headers}, timeout=60)
    return streamable_http_client(url + "/mcp", http_client=http)


def structured(result, schema: dict) -> dict:
    """The structured content of a tool result, checked against ``schema`` and against its text."""
    assert not result.is_error, result.content
    jsonschema.validate(result.structured_content, schema)
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


async def exercise(client, technical_doc: str) -> dict:
    """As the billing agent (billing_kb only, every tool): everything the acceptance asks for."""
    from mcp.shared.exceptions import MCPError

    out: dict = {"revision": client.protocol_version}
    tools = {t.name: t for t in (await client.list_tools()).tools}
    out["tools"] = tools
    schemas = {name: t.output_schema for name, t in tools.items()}
    calls = {
        "search_knowledge": {"query": "refund", "k": 3},
        "verify_claim": {"claim": "refunds take 5 to 10 business days"},
        "research_topic": {"topic": "refund", "budget": 600},
        "list_namespaces": {},
    }
    answers = {name: structured(await client.call_tool(name, args), schemas[name]) for name, args in calls.items()}
    context = await client.call_tool("search_knowledge", {"query": "refund", "budget": 200})
    answers["search_context"] = structured(context, schemas["search_knowledge"])
    hit = answers["search_knowledge"]["passages"][0]
    answers["get_document"] = structured(
        await client.call_tool("get_document", {"doc_id": hit["doc_id"], "around_chunk": hit["chunk_id"]}),
        schemas["get_document"],
    )
    answers["record_feedback"] = structured(
        await client.call_tool(
            "record_feedback",
            {"query_id": answers["search_knowledge"]["query_id"], "doc_id": hit["doc_id"], "useful": True},
        ),
        schemas["record_feedback"],
    )
    out["answers"] = answers
    out["templates"] = (await client.list_resource_templates()).resource_templates
    out["chunk"] = (await client.read_resource(hit["resource"])).contents[0]
    out["document"] = (await client.read_resource(resource_uri("billing_kb", hit["doc_id"]))).contents[0]
    out["hit"] = hit
    refusals = {}
    for name, uri in {
        "other_namespace": resource_uri("technical_kb", technical_doc),
        "missing_namespace": resource_uri("zzz_kb", technical_doc),
        "doc_of_another_namespace": resource_uri("billing_kb", technical_doc),
        "missing_doc": resource_uri("billing_kb", FORGED),
        "bad_uri": "kbctl://billing_kb/not-a-number",
    }.items():
        with pytest.raises(MCPError) as e:
            await client.read_resource(uri)
        refusals[name] = e.value.error.message
    out["refused_resources"] = refusals
    out["refused_tool"] = await client.call_tool("search_knowledge", {"query": "x", "namespaces": ["technical_kb"]})
    out["prompts"] = {p.name for p in (await client.list_prompts()).prompts}
    prompt = await client.get_prompt("answer_with_citations", {"question": "How long do refunds take?"})
    out["prompt"] = prompt.messages[0].content.text
    with pytest.raises(MCPError) as e:
        await client.get_prompt("answer_with_citations", {"question": "x", "namespaces": "technical_kb"})
    out["refused_prompt"] = e.value.error.message
    return out


def check(out: dict, revision: str, technical_doc: str) -> None:
    assert out["revision"] == revision
    assert set(out["tools"]) == ALL
    for name, t in out["tools"].items():
        assert t.output_schema["type"] == "object" and t.output_schema["additionalProperties"] is False, name
    answers = out["answers"]
    hit = out["hit"]
    assert {p["namespace"] for p in answers["search_knowledge"]["passages"]} == {"billing_kb"}
    assert isinstance(hit["score"], float) and hit["citation"]
    assert answers["search_knowledge"]["withheld"] == 0 and "next_cursor" in answers["search_knowledge"]
    assert answers["search_context"]["context"].startswith("[1] ") and answers["search_context"]["passages"] is None
    assert parse_resource_uri(hit["resource"]) == ("billing_kb", hit["doc_id"], hit["chunk_id"])
    assert hit["chunk_id"] in [c["chunk_id"] for c in answers["get_document"]["chunks"]]
    assert answers["get_document"]["resource"] == resource_uri("billing_kb", hit["doc_id"])
    assert answers["record_feedback"]["recorded"] is True
    assert [t.uri_template for t in out["templates"]] == ["kbctl://{namespace}/{doc_id}{#chunk_id}"]
    # the chunk resource is the passage; the document resource holds it among its chunks
    assert hit["text"] in out["chunk"].text and out["chunk"].uri == hit["resource"]
    assert out["chunk"].meta["chunk_id"] == hit["chunk_id"] and out["chunk"].mime_type == "text/markdown"
    assert hit["text"] in out["document"].text and out["document"].meta["chunks"] >= 1
    refused = out["refused_resources"]
    assert refused["other_namespace"] == "namespace 'technical_kb' is not available"
    assert refused["missing_namespace"] == "namespace 'zzz_kb' is not available"
    # a document of another namespace reads exactly like one that does not exist
    assert refused["doc_of_another_namespace"] == f"document {technical_doc!r} is not available"
    assert refused["missing_doc"] == f"document {FORGED!r} is not available"
    assert refused["bad_uri"].startswith("invalid resource URI")
    assert all("\n" not in m for m in refused.values())
    assert out["refused_tool"].is_error and out["refused_tool"].content[0].text == (
        "namespace 'technical_kb' is not available"
    )
    assert out["prompts"] == {"answer_with_citations", "check_claim"}
    assert "How long do refunds take?" in out["prompt"] and "['billing_kb']" in out["prompt"]
    assert out["refused_prompt"] == "namespace 'technical_kb' is not available"


FORGED = "d_" + "A" * 22  # an opaque id's shape that opens under no key: a document that is not there
REFUSAL = "INFO kbctl.server.mcp: "  # the level and logger of a refusal's one line (kbctl -v)


def assert_refusals_logged_without_traceback(log: str) -> None:
    """Every refusal is one INFO line of kbctl.server.mcp, and nothing in the log is a traceback."""
    lines = log.splitlines()
    refusals = [line for line in lines if " refused: " in line]
    assert refusals and all(line.startswith(REFUSAL) for line in refusals), refusals
    expected = {
        "resource kbctl://technical_kb/": "refused: namespace 'technical_kb' is not available",
        "resource kbctl://zzz_kb/": "refused: namespace 'zzz_kb' is not available",
        f"resource kbctl://billing_kb/{FORGED} ": f"refused: document {FORGED!r} is not available",
        "resource kbctl://billing_kb/not-a-number ": "refused: invalid resource URI",
        "tool search_knowledge ": "refused: namespace 'technical_kb' is not available",
        "prompt namespaces ": "refused: namespace 'technical_kb' is not available",
    }
    for start, end in expected.items():
        assert any(line.startswith(REFUSAL + start) and end in line for line in refusals), (start, refusals)
    assert "Traceback" not in log


@pytest.mark.parametrize("revision", [MODERN, HANDSHAKE])
def test_stdio_revision_structured_results_resources_and_refusals(served, technical_doc, revision, tmp_path):
    from mcp import Client

    errlog = tmp_path / "mcp.log"

    async def main():
        with errlog.open("w") as err:
            async with Client(stdio_transport(served, "billing", err), mode=REVISIONS[revision]) as client:
                return await exercise(client, technical_doc)

    out = anyio.run(main)
    check(out, revision, technical_doc)
    assert_refusals_logged_without_traceback(errlog.read_text(errors="replace"))


@pytest.mark.parametrize("revision", [MODERN, HANDSHAKE])
def test_http_revision_structured_results_resources_and_refusals(logged, technical_doc, revision):
    from mcp import Client

    async def main():
        async with Client(http_transport(logged.url, logged.tokens["billing"]), mode=REVISIONS[revision]) as client:
            return await exercise(client, technical_doc)

    out = anyio.run(main)
    check(out, revision, technical_doc)
    assert_refusals_logged_without_traceback(logged.log.read_text(errors="replace"))


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in leaves(e)]
    return [exc]


@pytest.mark.parametrize("revision", [MODERN, HANDSHAKE])
def test_http_revision_needs_the_token_and_a_served_origin_on_every_request(logged, revision):
    """Both eras go through the same gate: no token is a 401, a foreign Origin a 403, before any MCP."""
    from mcp import Client

    async def connect(token: str, **headers: str):
        async with Client(http_transport(logged.url, token, **headers), mode=REVISIONS[revision]) as client:
            return await client.list_tools()

    for token, headers in (("wrong", {}), (logged.tokens["billing"], {"Origin": "http://evil.example"})):
        with pytest.raises(BaseException) as refused:  # the SDK's error for a 4xx, inside its task groups
            anyio.run(functools.partial(connect, token, **headers))
        assert [type(e).__name__ for e in leaves(refused.value)] == ["MCPError"]
    if revision != MODERN:
        return
    # the same, by hand: a stateless request is a lone POST with its envelope, and each one is checked
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    modern = {
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/list",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    request = {**body, "params": {"_meta": meta}}
    url = logged.url + "/mcp"
    assert httpx.post(url, json=request, headers=modern, timeout=30).status_code == 401
    auth = {"Authorization": f"Bearer {logged.tokens['billing']}"}
    foreign = {**modern, **auth, "Origin": "http://evil.example"}
    assert httpx.post(url, json=request, headers=foreign, timeout=30).status_code == 403
    served = httpx.post(url, json=request, headers={**modern, **auth}, timeout=30)
    assert served.status_code == 200, served.text
    assert {t["name"] for t in served.json()["result"]["tools"]} == ALL


def test_the_json_api_answers_validate_against_the_mcp_output_schemas(served, technical_doc):
    """One schema per tool: what /v1 answers is valid against the outputSchema tools/list declares."""
    from mcp import Client

    async def schemas():
        async with Client(http_transport(served.url, served.tokens["ops"])) as client:
            return {t.name: t.output_schema for t in (await client.list_tools()).tools}

    declared = anyio.run(schemas)
    assert set(declared) == set(OUTPUTS)

    def post(path: str, body: dict) -> dict:
        r = httpx.post(served.url + path, json=body, headers=served.headers("ops"), timeout=30)
        assert r.status_code == 200, r.text
        return r.json()

    search = post("/v1/search", {"query": "refund", "namespaces": ["billing_kb"], "k": 3})
    hit = search["passages"][0]
    doc = httpx.get(
        served.url + f"/v1/documents/{technical_doc}", headers=served.headers("ops"), params={"limit": 2}, timeout=30
    )
    assert doc.status_code == 200, doc.text
    answers = {
        "search_knowledge": [
            search,
            post("/v1/search", {"query": "refund", "budget": 150}),
            post("/v1/tools/search_knowledge", {"query": "payment", "k": 6, "limit": 2, "snippets": True}),
        ],
        "verify_claim": [post("/v1/tools/verify_claim", {"claim": "Refunds go back to the original payment method"})],
        "research_topic": [post("/v1/tools/research_topic", {"topic": "failed payments", "budget": 800})],
        "get_document": [doc.json(), post("/v1/tools/get_document", {"doc_id": hit["doc_id"]})],
        "list_namespaces": [httpx.get(served.url + "/v1/namespaces", headers=served.headers("ops"), timeout=30).json()],
        "record_feedback": [
            post("/v1/feedback", {"query_id": search["query_id"], "doc_id": hit["doc_id"], "useful": False})
        ],
    }
    for name, bodies in answers.items():
        for body in bodies:
            jsonschema.validate(body, declared[name])
    assert answers["get_document"][0]["next_cursor"] == "2" and answers["get_document"][0]["resource"].startswith(
        "kbctl://technical_kb/"
    )
    # a checker that can fail: a drifted answer is refused by the schema
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**search, "extra": 1}, declared["search_knowledge"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**search, "passages": [{**hit, "score": "high"}]}, declared["search_knowledge"])


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_resource_fault_logs_one_traceback_and_a_refusal_none(caplog, mode):
    """In process: reading a document whose knowledge base fails is a fault (one ERROR record with its
    traceback, no internals for the client); a malformed URI a refusal (INFO, no traceback)."""
    import logging

    from mcp import Client
    from mcp.shared.exceptions import MCPError

    from kbctl.config import load_settings
    from kbctl.server.agents import Agent
    from kbctl.server.mcp import mcp_server
    from kbctl.server.metrics import Metrics
    from kbctl.server.tools import Toolbox

    class Broken:
        server = load_settings().server

        def kb(self, tenant=None, made_for=None):
            raise RuntimeError("the disk is on fire")

        def ids(self, tenant=None):  # the tenant's key is read from the database too
            raise RuntimeError("the disk is on fire")

    server = mcp_server(Toolbox(Broken(), Agent(), Metrics()))  # type: ignore[arg-type]
    doc = "d_" + "A" * 22  # an opaque id's shape: whether it opens is for the database's key to say

    async def main():
        errors = []
        async with Client(server, mode=mode) as client:
            for uri in (resource_uri("billing_kb", doc), "kbctl://billing_kb/x"):
                with pytest.raises(MCPError) as e:
                    await client.read_resource(uri)
                errors.append(e.value.error.message)
        return errors

    with caplog.at_level(logging.INFO):
        fault, refusal = anyio.run(main)
    assert "disk" not in fault and refusal.startswith("invalid resource URI")
    with_traceback = [r for r in caplog.records if r.exc_info]
    assert len(with_traceback) == 1 and f"kbctl://billing_kb/{doc}" in with_traceback[0].getMessage()
    refused = [r for r in caplog.records if "refused: invalid resource URI" in r.getMessage()]
    assert refused and all(r.levelno == logging.INFO and not r.exc_info for r in refused)


def test_an_agent_without_get_document_reads_no_resources_and_gets_only_its_prompts(logged):
    """``reader`` (search_knowledge and list_namespaces): no template, a read refused like a tool it
    lacks, only the prompt of the tool it has; a prompt's missing argument is a one-line refusal."""
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    async def main():
        out: dict = {}
        async with Client(http_transport(logged.url, logged.tokens["reader"])) as client:
            out["templates"] = (await client.list_resource_templates()).resource_templates
            out["prompts"] = {p.name for p in (await client.list_prompts()).prompts}
            hit = (await client.call_tool("search_knowledge", {"query": "refund", "k": 1})).structured_content
            out["resource"] = hit["passages"][0]["resource"]
            for name, call in {
                "read": client.read_resource(out["resource"]),
                "other_prompt": client.get_prompt("check_claim", {"claim": "x"}),
                "missing_argument": client.get_prompt("answer_with_citations", {}),
            }.items():
                with pytest.raises(MCPError) as e:
                    await call
                out[name] = e.value.error.message
        return out

    out = anyio.run(main)
    assert out["templates"] == [] and out["prompts"] == {"answer_with_citations"}
    assert out["resource"].startswith("kbctl://")  # results still name their resource
    assert out["read"] == "tool 'get_document' is not available"
    assert out["other_prompt"] == "prompt 'check_claim' is not available"
    assert out["missing_argument"] == "invalid arguments: question: Field required"
    assert "Traceback" not in logged.log.read_text(errors="replace")


ACL_CONFIG = """
[defaults]
profile = "hash-384"

[agents.staff]
namespaces = ["staff_kb"]
principal = "user:u7"
groups = ["eng"]
"""

ACL_DOCS = {  # name: (its ACL, a word only it holds)
    "engdoc": ("[group:eng]", "quorvelleng"),
    "hrdoc": ("[group:hr]", "quorvellhr"),
    "userdoc": ("[user:u7]", "quorvelluser"),
}


@pytest.mark.parametrize("revision", [MODERN, HANDSHAKE])
def test_a_resource_is_read_within_the_agents_principals_acl(kb_home, tenant, tmp_path, revision):
    """An agent with a principal (user u7 of group eng) reads ``kbctl://<ns>/<doc>`` of a document
    its ACL allows, and is refused one that it does not (group hr only): a one-line refusal that
    reads like a missing document, none of the text, one INFO line in the server's log and no
    traceback. A chunk that is not in the document named is refused too."""
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    import kbctl

    config = tmp_path / "kbctl.toml"
    config.write_text(ACL_CONFIG)
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, (acl, word) in ACL_DOCS.items():
        (docs / f"{name}.md").write_text(f"---\ntitle: Handbook {name}\nacl: {acl}\n---\n\nThe {word} section.\n")
    with kbctl.open(config=config, home=kb_home, tenant=tenant) as kb:
        kb.ingest([str(docs)], "staff_kb", verify=False)
        found = {
            name: kb.search(word, "staff_kb", unrestricted=True, k=1).hits[0] for name, (_, word) in ACL_DOCS.items()
        }
        ids = kb.ids()  # the agent sees the ids sealed under the tenant's key (kbctl.ids)
    assert len({h.doc_id for h in found.values()}) == 3
    hits = {
        name: SimpleNamespace(doc_id=ids.seal("d", h.doc_id), chunk_id=ids.seal("c", h.chunk_id))
        for name, h in found.items()
    }
    errlog = tmp_path / "mcp.log"

    async def main():
        out: dict = {}
        served = type("Served", (), {"home": kb_home, "tenant": tenant, "config": config})
        with errlog.open("w") as err:
            async with Client(stdio_transport(served, "staff", err), mode=REVISIONS[revision]) as client:
                for name in ("engdoc", "userdoc"):
                    out[name] = (await client.read_resource(resource_uri("staff_kb", hits[name].doc_id))).contents[0]
                chunk = resource_uri("staff_kb", hits["engdoc"].doc_id, hits["engdoc"].chunk_id)
                out["chunk"] = (await client.read_resource(chunk)).contents[0]
                for name, uri in {
                    "denied": resource_uri("staff_kb", hits["hrdoc"].doc_id),
                    "denied_chunk": resource_uri("staff_kb", hits["hrdoc"].doc_id, hits["hrdoc"].chunk_id),
                    "chunk_of_another_doc": resource_uri("staff_kb", hits["engdoc"].doc_id, hits["userdoc"].chunk_id),
                    "missing": resource_uri("staff_kb", FORGED),
                }.items():
                    with pytest.raises(MCPError) as e:
                        await client.read_resource(uri)
                    out[name] = e.value.error.message
        return out

    out = anyio.run(main)
    assert "quorvelleng" in out["engdoc"].text and out["engdoc"].meta["doc_id"] == hits["engdoc"].doc_id
    assert "quorvelluser" in out["userdoc"].text
    assert "quorvelleng" in out["chunk"].text and out["chunk"].meta["chunk_id"] == hits["engdoc"].chunk_id
    hr = hits["hrdoc"].doc_id
    # refused exactly as a document that does not exist: nothing says it is there, nothing of it is shown
    assert out["denied"] == out["denied_chunk"] == f"document {hr!r} is not available"
    assert out["missing"] == f"document {FORGED!r} is not available"
    assert out["chunk_of_another_doc"] == f"chunk {hits['userdoc'].chunk_id!r} is not available"
    for m in (out["denied"], out["denied_chunk"], out["chunk_of_another_doc"]):
        assert "\n" not in m and "quorvell" not in m and "Handbook" not in m
    log = errlog.read_text(errors="replace")
    refusals = [line for line in log.splitlines() if " refused: " in line]
    assert len(refusals) == 4 and all(line.startswith(REFUSAL + "resource kbctl://staff_kb/") for line in refusals)
    assert sum(f"kbctl://staff_kb/{hr}" in line and line.endswith(f"document {hr!r} is not available")
               for line in refusals) == 2  # fmt: skip
    assert "Traceback" not in log and "quorvellhr" not in log


def test_a_tool_call_over_stdio_continues_the_trace_of_its_meta_traceparent(served, tmp_path, monkeypatch):
    """The SDK's own client sends ``_meta.traceparent`` with a tools/call to ``kbctl mcp`` (stdio),
    which exports its spans over OTLP to a collector on loopback: the search's spans are in the
    caller's trace, under the caller's span."""
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from mcp import Client
    from mcp.shared import _otel
    from opentelemetry import trace

    from tests.otlp import Collector

    # The caller here is the traceparent it sends, not this process. This process may trace (an SDK
    # tracer provider is set once for good, e.g. by tests/db/test_telemetry.py earlier in the
    # session): then the client's own span for the request (a new trace, no span being current)
    # would replace the traceparent of _meta with its own (SEP-414). The client does not trace.
    monkeypatch.setattr(_otel, "_tracer", trace.NoOpTracer())
    trace_id, span_id = "6df92f3577b34da6a3ce929d0e0e4738", "20f067aa0ba902b9"
    errlog = tmp_path / "mcp.log"

    async def main(collector: Collector):
        otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100"}
        with errlog.open("w") as err:
            async with Client(stdio_transport(served, "billing", err, **otel)) as client:
                result = await client.call_tool(
                    "search_knowledge", {"query": "refund", "k": 3}, meta={"traceparent": f"00-{trace_id}-{span_id}-01"}
                )
                for _ in range(100):  # the batch exporter sends within OTEL_BSP_SCHEDULE_DELAY
                    if any(s.name == "kbctl.search" for s in collector.spans()):
                        break
                    await anyio.sleep(0.1)
                return result

    with Collector() as collector:
        result = anyio.run(main, collector)
    assert not result.is_error and result.structured_content["passages"], result.content
    spans, received = collector.spans(), collector.describe()
    named: dict[str, list] = {}
    for s in spans:
        named.setdefault(s.name, []).append(s)
    assert {"kbctl.tool", "kbctl.search", "kbctl.search.lane.lexical", "kbctl.search.gate"} <= set(named), received
    assert len(named["kbctl.search"]) == len(named["kbctl.tool"]) == 1, received
    (search,), (tool,) = named["kbctl.search"], named["kbctl.tool"]
    assert search.trace_id.hex() == trace_id and search.parent_span_id == tool.span_id, received
    assert all(s.trace_id.hex() == trace_id for s in spans if s.name.startswith("kbctl.search")), received
    by_id = {s.span_id: s for s in spans}
    up = tool
    while up.parent_span_id in by_id:  # kbctl.tool, the SDK's tools/call span, …, the caller's span
        up = by_id[up.parent_span_id]
    assert up.parent_span_id.hex() == span_id and up.trace_id.hex() == trace_id, received
    assert "Traceback" not in errlog.read_text(errors="replace")
