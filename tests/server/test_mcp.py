"""``kbctl mcp`` driven by the MCP SDK's own stdio client, and ``/mcp`` of ``kbctl serve`` by its
streamable HTTP client: list the tools, call each."""

from __future__ import annotations

import json
import sys

import anyio
import pytest

from tests.conftest import ROOT

from .conftest import env_for

ALL = {"search_knowledge", "verify_claim", "research_topic", "get_document", "list_namespaces", "record_feedback"}


def text_of(result) -> dict:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


async def exercise(session, namespace: str) -> dict:
    await session.initialize()
    tools = {t.name: t for t in (await session.list_tools()).tools}
    found = text_of(await session.call_tool("search_knowledge", {"query": "refund", "k": 3}))
    out = {"tools": tools, "search": found}
    if "get_document" in tools:
        hit = found["passages"][0]
        out["document"] = text_of(
            await session.call_tool(
                "get_document", {"doc_id": hit["doc_id"], "around_chunk": hit["chunk_id"], "window": 1}
            )
        )
        out["verify"] = text_of(
            await session.call_tool("verify_claim", {"claim": "refunds take 5 to 10 business days"})
        )
        out["research"] = text_of(await session.call_tool("research_topic", {"topic": "refund", "budget": 600}))
        out["namespaces"] = text_of(await session.call_tool("list_namespaces", {}))
        out["feedback"] = text_of(
            await session.call_tool(
                "record_feedback", {"query_id": found["query_id"], "doc_id": hit["doc_id"], "useful": True}
            )
        )
        out["outside"] = await session.call_tool(
            "search_knowledge", {"query": "deploy", "namespaces": ["technical_kb"]}
        )
        out["missing"] = await session.call_tool("search_knowledge", {"query": "deploy", "namespaces": ["zzz_kb"]})
    return out


def test_stdio_server_lists_and_calls_every_tool(served):
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kbctl", "mcp", "--agent", "billing"],
        cwd=str(ROOT),
        env=env_for(served.home, served.tenant, served.config),
    )

    async def main():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            return await exercise(session, "billing_kb")

    out = anyio.run(main)
    assert set(out["tools"]) == ALL
    schema = out["tools"]["search_knowledge"].input_schema
    assert schema["required"] == ["query"] and "description" in schema["properties"]["budget"]
    assert out["tools"]["verify_claim"].description.startswith("Look for evidence")
    assert {p["namespace"] for p in out["search"]["passages"]} == {"billing_kb"}
    assert out["document"]["chunks"] and out["namespaces"]["namespaces"][0]["name"] == "billing_kb"
    assert "evidence_found" in out["verify"] and out["research"]["documents"] and out["feedback"]["recorded"]
    assert out["outside"].is_error and out["missing"].is_error
    assert out["outside"].content[0].text.replace("technical_kb", "?") == out["missing"].content[0].text.replace(
        "zzz_kb", "?"
    )


def test_stdio_agent_sees_only_its_tools(served):
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kbctl", "mcp", "--agent", "reader"],
        cwd=str(ROOT),
        env=env_for(served.home, served.tenant, served.config),
    )

    async def main():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            names = {t.name for t in (await session.list_tools()).tools}
            refused = await session.call_tool("verify_claim", {"claim": "x"})
            return names, refused

    names, refused = anyio.run(main)
    assert names == {"search_knowledge", "list_namespaces"}
    assert refused.is_error


@pytest.mark.parametrize("agent", ["billing", "ops"])
def test_streamable_http_mcp_with_a_token(served, agent):
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main():
        async with (
            httpx2.AsyncClient(headers=served.headers(agent), timeout=30) as http,
            streamable_http_client(served.url + "/mcp", http_client=http) as streams,
            ClientSession(streams[0], streams[1]) as session,
        ):
            return await exercise(session, "billing_kb")

    out = anyio.run(main)
    assert set(out["tools"]) == ALL
    assert out["outside"].is_error is (agent == "billing")
