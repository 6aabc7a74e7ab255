"""What a refused request of the JSON API gets, and what the server logs of it: a JSON body
``{"error": "…"}`` with a 4xx status on every route (an unknown path and a wrong method too), and
one INFO line in the server's log naming the request and the reason, without a traceback (as MCP's
refusals are logged: ``kbctl.server.mcp``)."""

from __future__ import annotations

import logging

import pytest

from tests.server import test_ids
from tests.server.test_ids import _client

two_tenants = test_ids.two_tenants  # the fixture: tenant A's app and token, tenant B beside it

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
