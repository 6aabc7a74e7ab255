"""A fault on the server's side (the database gone, a statement timing out) is logged there with its
cause, and the client sees no internals: not psycopg's first line, which names the database host
and port. docs/agents.md: "shows the client just the tool's name" / "Error reading resource … only".
Before, a KbctlError of status 500 (DatabaseUnavailable, StatementTimeout) went to the client whole,
and a database error while a bearer token was looked up was a bare plaintext 500."""

from __future__ import annotations

import logging

import anyio
import pytest

from kbctl.errors import DatabaseUnavailable

INTERNAL = 'cannot connect to PostgreSQL: connection to server at "db.internal" (10.0.0.5), port 5432 failed'


class _DownKB:
    """A knowledge base whose every call finds the database gone."""

    def close(self):
        pass

    def __getattr__(self, name):
        def fail(*a, **kw):
            raise DatabaseUnavailable(INTERNAL)

        return fail


def _settings(**server):
    from kbctl.config import load_settings

    return load_settings(overrides={f"server.{k}": v for k, v in server.items()}, env={})


def test_a_database_fault_in_a_tool_over_mcp_shows_no_internals(caplog):
    from mcp import Client

    from kbctl.server.agents import Agent
    from kbctl.server.mcp import mcp_server
    from kbctl.server.metrics import Metrics
    from kbctl.server.service import Service
    from kbctl.server.tools import Toolbox

    service = Service(_settings(), lambda settings: _DownKB())
    server = mcp_server(Toolbox(service, Agent(), Metrics()))

    async def main():
        async with Client(server) as client:
            return await client.call_tool("search_knowledge", {"query": "refunds"})

    with caplog.at_level(logging.INFO):
        result = anyio.run(main)
    assert result.is_error and "db.internal" not in result.content[0].text
    assert "search_knowledge" in result.content[0].text
    assert any(
        "db.internal" in r.getMessage() or (r.exc_info and "db.internal" in str(r.exc_info[1])) for r in caplog.records
    )


def test_a_database_fault_reading_a_resource_shows_no_internals():
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    from kbctl.server.agents import Agent
    from kbctl.server.mcp import mcp_server
    from kbctl.server.metrics import Metrics
    from kbctl.server.schemas import resource_uri
    from kbctl.server.service import Service
    from kbctl.server.tools import Toolbox

    service = Service(_settings(), lambda settings: _DownKB())
    server = mcp_server(Toolbox(service, Agent(), Metrics()))

    async def main():
        async with Client(server) as client:
            with pytest.raises(MCPError) as e:
                await client.read_resource(resource_uri("billing_kb", "d_" + "A" * 22))
            return e.value.error.message

    message = anyio.run(main)
    assert "db.internal" not in message and "Error reading resource" in message


@pytest.mark.parametrize("token", [None, "Bearer kb_some_token"])
def test_a_database_fault_over_the_json_api_shows_no_internals(token):
    from starlette.testclient import TestClient

    from kbctl.server.app import create_app

    app = create_app(_settings(require_token=token is not None), lambda settings: _DownKB(), warm=False)
    headers = {"Authorization": token} if token else {}
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        r = client.post("/v1/search", json={"query": "refunds"}, headers=headers)
    assert r.status_code >= 500, r.text
    assert r.headers["content-type"].startswith("application/json"), r.text
    assert "db.internal" not in r.text and r.json()["error"]
