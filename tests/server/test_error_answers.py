"""What a refused request of the JSON API gets, and what the server logs of it: a JSON body
``{"error": "…"}`` with a 4xx status on every route (an unknown path and a wrong method too), and
one INFO line in the server's log naming the request and the reason, without a traceback (as MCP's
refusals are logged: ``kbctl.server.mcp``)."""

from __future__ import annotations

import json
import logging

import anyio
import pytest

from tests.conftest import TEST_DSN, _create_tenant
from tests.server.test_ids import _client, make_two_tenants


@pytest.fixture(scope="module")
def two_tenants(kb_home, tmp_path_factory):
    """test_ids' two_tenants (tenant A's app and token, tenant B beside it), made once for this
    module: its tests send A's routes requests they refuse (or MCP's ``tools/list``) and read the
    answers and the log; none writes."""
    tenant = "t_error_answers"
    if TEST_DSN:
        _create_tenant(tenant)
    return make_two_tenants(kb_home, tenant, tmp_path_factory.mktemp("error-answers"))


JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status"),
    [
        ("get", "/v1/nothing_here", {}, 404),
        ("get", "/", {}, 404),
        ("get", "/v1/search", {}, 405),
        ("post", "/v1/namespaces", {"json": {}}, 405),
        ("delete", "/v1/documents/d_x", {}, 405),
    ],
)
def test_an_unknown_route_or_method_is_a_json_error(two_tenants, method, path, kwargs, status):
    """Starlette answered them with a plain-text ``Not Found`` / ``Method Not Allowed``, where every
    other error of the API is ``{"error": message}``: a client reading ``r.json()["error"]`` failed."""
    settings, token, _, _ = two_tenants
    with _client(settings, token) as client:
        r = client.request(method.upper(), path, **kwargs)
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    assert isinstance(r.json()["error"], str) and r.json()["error"], r.text
    if status == 405:
        assert r.headers["allow"]


REFUSED = [
    ("post", "/v1/search", {"content": b'{"query": ', "headers": JSON}, 400, "the request body is not JSON"),
    ("post", "/v1/search", {"json": {"query": 5}}, 400, "invalid arguments: query"),
    ("post", "/v1/search", {"json": {"query": "x", "k": 10**6}}, 400, "k must be at most"),
    ("post", "/v1/search", {"json": {"query": "x", "namespaces": ["elsewhere"]}}, 400, "is not available"),
    ("post", "/v1/search", {"json": {"query": "x", "raw": True, "options": [1]}}, 400, "options may hold only"),
    ("post", "/v1/tools/no_such_tool", {"json": {}}, 404, "tool 'no_such_tool' is not available"),
    ("get", "/v1/documents/d_forged?window=-1", {}, 400, "invalid arguments: window"),
    ("post", "/v1/search", {"json": {"query": "x"}, "headers": {"Authorization": "Bearer nope"}}, 401, "bearer"),
    ("post", "/v1/search", {"content": b"{}", "headers": {"Content-Type": "text/plain"}}, 415, "Content-Type"),
    ("get", "/v1/nothing_here", {}, 404, "Not Found"),
]


def test_each_refusal_is_logged_once_at_info(two_tenants, caplog):
    """The JSON API logged none of its refusals (a 400, 401, 404 or 415 left no line even with
    ``kbctl -v serve``), where MCP logs each one: an operator could not see why an agent failed."""
    settings, token, _, _ = two_tenants
    with _client(settings, token) as client:
        for method, path, kwargs, status, fragment in REFUSED:
            caplog.clear()
            with caplog.at_level(logging.INFO, logger="kbctl"):
                r = client.request(method.upper(), path, **kwargs)
            assert r.status_code == status and fragment in r.json()["error"], (path, r.text)
            lines = [rec for rec in caplog.records if rec.name.startswith("kbctl.server")]
            said = [rec for rec in lines if r.json()["error"] in rec.getMessage()]
            assert len(said) == 1, (path, [rec.getMessage() for rec in lines])
            assert said[0].levelno == logging.INFO and not said[0].exc_info
            assert f" {path.split('?')[0]} " in said[0].getMessage() and str(status) in said[0].getMessage()


@pytest.mark.parametrize(
    "headers",
    [
        {"Accept": "text/event-stream"},
        {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"},
        {"Accept": "text/event-stream", "MCP-Protocol-Version": "2026-07-28"},
        {"Accept": "application/json"},
    ],
)
@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_mcp_takes_only_post_and_opens_no_event_stream(two_tenants, method, headers):
    """``GET /mcp`` with ``Accept: text/event-stream`` opened the SDK's event stream, on which a
    stateless server never writes: it held the connection (and a worker) until the client left, so
    a client with a token could tie up the server's connections. A server that offers no stream
    answers 405 (the MCP streamable-HTTP transport allows it), with ``Allow: POST``, as JSON."""
    settings, token, _, _ = two_tenants
    sent: list[dict] = []
    asked: list[bool] = []

    async def receive():
        if not asked:
            asked.append(True)
            return {"type": "http.request", "body": b"", "more_body": False}
        await anyio.sleep_forever()  # a client that stays

    async def collect(message):
        sent.append(message)

    async def request(app):
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": "/mcp",
            "raw_path": b"/mcp",
            "query_string": b"",
            "root_path": "",
            "headers": [(b"host", b"127.0.0.1:8765"), (b"authorization", f"Bearer {token}".encode())]
            + [(k.lower().encode(), v.encode()) for k, v in headers.items()],
            "client": ("127.0.0.1", 5000),
            "server": ("127.0.0.1", 8765),
        }
        with anyio.move_on_after(5) as waited:
            await app(scope, receive, collect)
        return waited.cancelled_caught

    with _client(settings, token) as client:  # the app with its lifespan running (MCP apps need it)
        held = client.portal.call(request, client.app)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    names = {k.decode().lower(): v.decode() for k, v in start["headers"]}
    assert not held and start["status"] == 405, (start, body[:200])
    assert names["allow"] == "POST" and names["content-type"] == "application/json"
    assert json.loads(body)["error"], body


def test_mcp_still_answers_a_post(two_tenants):
    settings, token, _, _ = two_tenants
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
    with _client(settings, token) as client:
        r = client.post("/mcp", json=call, headers=headers)
    assert r.status_code == 200 and r.json()["result"]["tools"], r.text
