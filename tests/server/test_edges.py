"""The agent server's edges (issue 26, security round 2): Host and Origin on every route in every
mode, slow clients cut off, a connection cap, typed and bounded request bodies, MCP errors that
say why, /metrics behind the token, no server paths in answers.

Most tests drive a second ``kbctl -v serve`` (``edge``) over the session's data, with
``require_token = false`` (tokens still pick an agent), short timeouts and a small connection cap,
its log in a file the tests read."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import pytest

from tests.conftest import ROOT, SAMPLE

from .conftest import CONFIG, Running, env_for, stop, wait_listening

HEADER_TIMEOUT = 3
BODY_TIMEOUT = 3
MAX_CONNECTIONS = 6

EDGE_SERVER = f"""
require_token = false
allowed_hosts = ["kb.internal"]
header_timeout = {HEADER_TIMEOUT}
body_timeout = {BODY_TIMEOUT}
max_connections = {MAX_CONNECTIONS}
"""


@dataclass
class Edge:
    url: str
    port: int
    log: Path
    tokens: dict[str, str]

    def headers(self, agent: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[agent]}"}

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def start_logged(home: Path, tenant: str, config: Path, log: Path, *extra: str) -> Running:
    """``kbctl -v serve --port 0`` with its stderr in ``log``; returns once it says where it listens
    (the system picked the port: tests.server.conftest.start_server)."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kbctl", "-v", "serve", "--port", "0", *extra],
            cwd=ROOT,
            env=env_for(home, tenant, config),
            stdout=out,
            stderr=out,
        )

    def stderr() -> str:
        return log.read_text(errors="replace")

    url, port = wait_listening(proc, stderr)
    return Running(proc, url, port, stderr)


@pytest.fixture(scope="module")
def edge(served, tmp_path_factory):
    folder = tmp_path_factory.mktemp("edge")
    config = folder / "kbctl.toml"
    config.write_text(CONFIG.replace("[server]\n", "[server]\n" + EDGE_SERVER))
    run = start_logged(served.home, served.tenant, config, folder / "serve.log")
    yield Edge(run.url, run.port, folder / "serve.log", served.tokens)
    stop(run.proc)


@pytest.fixture(scope="module")
def open_server(served, tmp_path_factory):
    """``require_token = false`` and nothing else new: the mode of defect 5."""
    folder = tmp_path_factory.mktemp("open")
    config = folder / "kbctl.toml"
    config.write_text(CONFIG.replace("[server]\n", "[server]\nrequire_token = false\n"))
    run = start_logged(served.home, served.tenant, config, folder / "serve.log")
    yield Edge(run.url, run.port, folder / "serve.log", served.tokens)
    stop(run.proc)


HOSTILE = {"Host": "attacker.example:8765", "Origin": "http://attacker.example:8765"}


# -- defect 5: DNS rebinding -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [("post", "/v1/search"), ("get", "/v1/namespaces"), ("post", "/mcp"), ("get", "/metrics"), ("get", "/healthz")],
)
def test_a_rebinding_host_is_refused_on_every_route_without_tokens(open_server, method, path):
    kw = {"content": b'{"query": "refund"}', "headers": {**HOSTILE, "Content-Type": "text/plain"}}
    r = httpx.request(
        method.upper(), open_server.url + path, timeout=30, **(kw if method == "post" else {"headers": HOSTILE})
    )
    assert r.status_code == 421, r.text
    assert "attacker.example" in r.json()["error"] and "allowed_hosts" in r.json()["error"]


def test_a_rebinding_host_is_refused_with_a_token_too(served):
    for path in ("/v1/namespaces", "/healthz"):
        r = httpx.get(served.url + path, headers={**served.headers("ops"), **HOSTILE}, timeout=30)
        assert r.status_code == 421, r.text


def test_a_foreign_origin_is_refused_and_a_listed_host_is_served(edge):
    body = {"query": "refund", "k": 1}
    r = httpx.post(edge.url + "/v1/search", json=body, headers={"Origin": "http://attacker.example"}, timeout=30)
    assert r.status_code == 403 and "Origin" in r.json()["error"]
    ok = httpx.post(edge.url + "/v1/search", json=body, headers={"Host": "kb.internal:8765"}, timeout=30)
    assert ok.status_code == 200, ok.text
    local = httpx.post(edge.url + "/v1/search", json=body, headers={"Origin": f"http://localhost:{edge.port}"})
    assert local.status_code == 200, local.text


def test_json_api_posts_must_be_application_json(open_server):
    url = open_server.url + "/v1/search"
    r = httpx.post(url, content=b'{"query": "refund"}', headers={"Content-Type": "text/plain"})
    assert r.status_code == 415 and "application/json" in r.json()["error"]
    r = httpx.post(url, content=b'{"query": "refund"}')
    assert r.status_code == 415


def test_the_host_rule():
    from kbctl.server.guard import HostRule

    local = HostRule("127.0.0.1")
    assert local.host_ok("127.0.0.1:8765") and local.host_ok("localhost") and local.host_ok("[::1]:80")
    assert not local.host_ok("10.0.0.5:8765") and not local.host_ok("attacker.example") and not local.host_ok("")
    every = HostRule("0.0.0.0", ["kb.example.org"])
    assert every.host_ok("10.0.0.5:8765") and every.host_ok("[fe80::1]:8765") and every.host_ok("KB.example.org")
    assert not every.host_ok("attacker.example:8765") and not every.host_ok("10.0.0.5.nip.io")
    assert every.origin_ok("http://kb.example.org:8765") and not every.origin_ok("http://10.0.0.5:8765")
    assert not every.origin_ok("null") and "any IP address" in every.describe()
    named = HostRule("kb.lan")
    assert named.host_ok("kb.lan:8765") and not named.host_ok("10.0.0.5")


def test_host_flag_is_honoured_by_v1_and_mcp(served, tmp_path):
    """``serve --host 127.0.0.2`` (a loopback address other than 127.0.0.1): both /v1 and /mcp
    accept ``Host: 127.0.0.2:PORT``; on f9966c7 /mcp refused every Host but the loopback names."""
    run = start_logged(served.home, served.tenant, served.config, tmp_path / "log", "--host", "127.0.0.2")
    port, url = run.port, run.url
    try:
        assert url == f"http://127.0.0.2:{port}"
        v1 = httpx.get(url + "/v1/namespaces", headers=served.headers("ops"), timeout=30)
        assert v1.status_code == 200, v1.text
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        mcp = httpx.post(
            url + "/mcp",
            json=init,
            headers={**served.headers("ops"), "Accept": "application/json, text/event-stream"},
            timeout=30,
        )
        assert mcp.status_code == 200, mcp.text
        for path in ("/v1/namespaces", "/mcp"):
            hostile = httpx.get(url + path, headers={**served.headers("ops"), **HOSTILE}, timeout=30)
            assert hostile.status_code == 421
    finally:
        stop(run.proc)


# -- defect 7: MCP errors ----------------------------------------------------------------------------


def _mcp_calls(url: str, headers: dict, calls: list[tuple[str, dict]]) -> list:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main():
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            streamable_http_client(url + "/mcp", http_client=http) as streams,
            ClientSession(streams[0], streams[1]) as session,
        ):
            await session.initialize()
            return [await session.call_tool(name, args) for name, args in calls]

    return anyio.run(main)


REFUSALS = [
    ("search_knowledge", {"query": "deploy", "namespaces": ["technical_kb"]}, "/v1/tools/search_knowledge"),
    ("search_knowledge", {"query": "refund", "k": 51}, "/v1/tools/search_knowledge"),
    ("search_knowledge", {"query": "refund", "filters": ["author="]}, "/v1/tools/search_knowledge"),
    ("search_knowledge", {"query": "refund", "cursor": "x"}, "/v1/tools/search_knowledge"),
    ("verify_claim", {"claim": "x", "k": 21}, "/v1/tools/verify_claim"),
    ("get_document", {"doc_id": "d_" + "A" * 22}, "/v1/tools/get_document"),  # opens under no key
    ("research_topic", {"topic": "x", "budget": 10**6}, "/v1/tools/research_topic"),
]


def test_mcp_refusals_carry_the_json_apis_reason_and_log_no_traceback(edge):
    calls = [(name, args) for name, args, _ in REFUSALS] + [("search_knowledge", {"query": "x", "namespaces": "ab"})]
    results = _mcp_calls(edge.url, edge.headers("billing"), calls)
    for (name, args, path), result in zip(REFUSALS, results):
        assert result.is_error, (name, args)
        text = result.content[0].text
        expected = httpx.post(edge.url + path, json=args, headers=edge.headers("billing"), timeout=30).json()["error"]
        assert text == expected, (name, args)
        assert "\n" not in text
    typed = results[-1]
    assert typed.is_error and typed.content[0].text.startswith("invalid arguments: namespaces")
    log = edge.log_text()
    assert "Traceback" not in log and "is not available" in log  # refusals logged at info, one line each


def test_an_mcp_fault_logs_one_traceback_and_a_refusal_none(caplog):
    """In process: the SDK's own client against ``mcp_server``; a tool whose knowledge base fails is
    a fault (one ERROR record with its traceback), a k too large a refusal (INFO, no traceback)."""
    import logging

    from mcp import Client

    from kbctl.config import load_settings
    from kbctl.server.agents import Agent
    from kbctl.server.mcp import mcp_server
    from kbctl.server.metrics import Metrics
    from kbctl.server.tools import Toolbox

    class Broken:
        server = load_settings().server

        def kb(self, tenant=None, made_for=None):
            raise RuntimeError("the disk is on fire")

    server = mcp_server(Toolbox(Broken(), Agent(), Metrics()))  # type: ignore[arg-type]

    async def main():
        async with Client(server) as client:
            return (
                await client.call_tool("list_namespaces", {}),
                await client.call_tool("search_knowledge", {"query": "x", "k": 10**6}),
            )

    with caplog.at_level(logging.INFO):
        fault, refusal = anyio.run(main)
    assert fault.is_error and "disk" not in fault.content[0].text
    assert refusal.is_error and refusal.content[0].text == f"k must be at most {Broken.server.max_k}, got 1000000"
    with_traceback = [r for r in caplog.records if r.exc_info]
    assert len(with_traceback) == 1 and "list_namespaces" in with_traceback[0].getMessage()
    refused = [r for r in caplog.records if "k must be at most" in r.getMessage()]
    assert refused and all(r.levelno == logging.INFO and not r.exc_info for r in refused)


# -- defect 8: slow clients, connection cap, disconnects ----------------------------------------------


def _closed_while_trickling(sock: socket.socket, first: bytes, drip: bytes, rounds: int) -> bytes | None:
    """Send ``first``, then ``drip`` every 0.25 s for at most ``rounds`` rounds; what the server
    answered when it closed the connection, or None if it was still open at the end."""
    sock.settimeout(0.25)
    sock.sendall(first)
    answer = b""
    for _ in range(rounds):
        try:
            chunk = sock.recv(4096)
            if not chunk:
                return answer
            answer += chunk
            continue
        except TimeoutError:
            pass
        except ConnectionResetError:
            return answer
        # An answer that arrived since the wait ended is read before dripping again: a byte sent
        # after the server closed makes its kernel answer with a reset, and a reset can discard the
        # answer still unread here (the test then saw "connection reset", not the 408).
        if select.select([sock], [], [], 0)[0]:
            continue
        try:
            sock.sendall(drip)
        except OSError:
            return answer
    return None


def test_a_trickling_header_is_cut_off(edge):
    with socket.create_connection(("127.0.0.1", edge.port), timeout=10) as s:
        # 40 rounds of 0.25 s is 10 s: more than three times the 3 s header timeout
        answer = _closed_while_trickling(s, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"X", 40)
    assert answer is not None, "the server still read headers after 10 s"
    assert answer.startswith(b"HTTP/1.1 408")


def test_a_kept_alive_connections_next_request_has_the_same_deadline(edge):
    with socket.create_connection(("127.0.0.1", edge.port), timeout=10) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = b""
        while b"\r\n\r\n" not in first or not first.rstrip().endswith(b"}"):
            first += s.recv(4096)
        assert first.startswith(b"HTTP/1.1 200")
        answer = _closed_while_trickling(s, b"GET /healthz HTTP/1.1\r\n", b"X", 40)
    assert answer is not None and answer.startswith(b"HTTP/1.1 408")


def test_a_connection_that_sends_nothing_is_closed(edge):
    with socket.create_connection(("127.0.0.1", edge.port), timeout=10) as s:
        answer = _closed_while_trickling(s, b"", b"", 40)
    assert answer is not None and answer.startswith(b"HTTP/1.1 408")


def test_a_trickling_body_is_cut_off(edge):
    head = (
        b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 2000\r\n\r\n{"
    )
    with socket.create_connection(("127.0.0.1", edge.port), timeout=10) as s:
        answer = _closed_while_trickling(s, head, b" ", 40)
    assert answer is not None, "the server still read the body after 10 s"
    assert answer.startswith(b"HTTP/1.1 408") and b"body" in answer


def test_connections_beyond_the_cap_are_refused(edge):
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    socks = [socket.create_connection(("127.0.0.1", edge.port), timeout=10) for _ in range(MAX_CONNECTIONS - 1)]
    try:
        for s in socks:
            s.sendall(head)  # each holds its connection open, its headers unfinished
        assert httpx.get(edge.url + "/healthz", timeout=30).status_code == 200  # the cap's last connection
        socks.append(socket.create_connection(("127.0.0.1", edge.port), timeout=10))
        socks[-1].sendall(head)
        over = httpx.get(edge.url + "/healthz", timeout=30)
        assert over.status_code == 503
    finally:
        for s in socks:
            s.close()


def test_a_client_that_leaves_is_one_info_line(edge):
    head = (
        b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b'Content-Length: 200\r\n\r\n{"query": '
    )
    with socket.create_connection(("127.0.0.1", edge.port), timeout=10) as s:
        s.sendall(head)
        time.sleep(0.3)
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "research_topic", "arguments": {}}}
    call["params"]["arguments"] = {"topic": "payments refunds invoices", "budget": 6000}
    for path, body in (("/v1/tools/research_topic", call["params"]["arguments"]), ("/mcp", call)):
        data = json.dumps(body).encode()
        with socket.create_connection(("127.0.0.1", edge.port), timeout=10) as s:
            s.sendall(
                b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s"
                % (path.encode(), len(data), data)
            )  # a whole request, and the client leaves while it runs
    time.sleep(2)
    for _ in range(50):  # the server notices within a moment; bounded
        if "left before its answer" in edge.log_text():
            break
        time.sleep(0.1)
    log = edge.log_text()
    assert "left before its answer" in log and "Traceback" not in log and "Exception in ASGI" not in log


# -- defect 9: depth, types, /metrics, server paths ----------------------------------------------------


def test_deeply_nested_json_is_a_400(served):
    deep = b'{"query": "x", "filters": ' + b"[" * 4000 + b"]" * 4000 + b"}"
    for path in ("/v1/search", "/v1/tools/verify_claim", "/mcp"):
        r = httpx.post(
            served.url + path,
            content=deep,
            headers={**served.headers("ops"), "Content-Type": "application/json", "Accept": "application/json"},
            timeout=30,
        )
        assert r.status_code == 400, (path, r.text)
        assert "deeper than" in r.json()["error"]


def test_mcp_bodies_that_are_not_text_or_not_json_are_4xx(served):
    headers = {**served.headers("ops"), "Content-Type": "application/json", "Accept": "application/json"}
    call = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "search_knowledge", '
    for body in (
        call + b'"arguments": {"query": "\\ud800"}}}',
        call + b'"arguments": {"query": "x", "k": Infinity}}}',
        call + b'"arguments": {"query": "x", "k": 1e400}}}',
        b"{not json",
        b"[]",
    ):
        r = httpx.post(served.url + "/mcp", content=body, headers=headers, timeout=30)
        assert r.status_code < 500, (body, r.text)
        if r.status_code == 200:
            assert r.json()["result"]["isError"], (body, r.text)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"raw": True, "query": "refund", "namespaces": "billing_kb"}, "invalid arguments: namespaces"),
        ({"raw": True, "query": "refund", "k": "many"}, "invalid arguments: k"),
        ({"raw": True, "query": "refund", "k": [5]}, "invalid arguments: k"),
        ({"raw": True, "query": 5}, "invalid arguments: query"),
        ({"raw": True, "query": "refund", "filters": "title=x"}, "invalid arguments: filters"),
        ({"raw": True, "query": "refund", "options": {"per_doc": "two"}}, "invalid arguments: per_doc"),
        ({"query": "refund", "namespaces": "billing_kb"}, "invalid arguments: namespaces"),
    ],
)
def test_every_search_path_checks_types(served, body, fragment):
    r = httpx.post(served.url + "/v1/search", json=body, headers=served.headers("ops"), timeout=30)
    assert r.status_code == 400 and r.json()["error"].startswith(fragment), r.text


def test_a_numeric_string_k_is_read_as_a_number_on_every_path(served):
    for body in ({"raw": True, "query": "refund", "k": "2"}, {"query": "refund", "k": "2"}):
        r = httpx.post(served.url + "/v1/search", json=body, headers=served.headers("ops"), timeout=30)
        assert r.status_code == 200, r.text
        assert len(r.json().get("hits", r.json().get("passages"))) == 2


def test_metrics_need_a_token(served):
    assert httpx.get(served.url + "/metrics", timeout=30).status_code == 401
    r = httpx.get(served.url + "/metrics", headers=served.headers("reader"), timeout=30)
    assert r.status_code == 200 and "kbctl_documents" in r.text
    assert httpx.get(served.url + "/healthz", timeout=30).status_code == 200


def test_metrics_are_refused_to_an_agent_scoped_to_some_namespaces(served):
    """/metrics name every namespace of the server's tenant with its counts: an agent scoped to
    billing_kb read technical_kb's there (an agent can never tell what exists outside its scope)."""
    r = httpx.get(served.url + "/metrics", headers=served.headers("billing"), timeout=30)
    assert r.status_code == 403, r.text[:200]
    assert "technical_kb" not in r.text and "scope" in r.json()["error"]


def test_answers_hold_no_server_paths(served):
    root = str(SAMPLE.resolve())
    h = served.headers("ops")
    found = httpx.post(served.url + "/v1/search", json={"query": "refund", "k": 3}, headers=h, timeout=30).json()
    raw = httpx.post(served.url + "/v1/search", json={"raw": True, "query": "refund", "k": 3}, headers=h).json()
    hit = found["passages"][0]
    doc = httpx.get(served.url + f"/v1/documents/{hit['doc_id']}", headers=h, timeout=30).json()
    for answer in (found, raw, doc):
        text = json.dumps(answer)
        assert root not in text and "file://" not in text and os.sep + "tmp" + os.sep not in text, text[:500]
    assert doc["source"] == hit["source"] and doc["source"].endswith(".md")


# -- property: no JSON body makes a 500 -----------------------------------------------------------------


def test_generated_json_bodies_never_give_a_500(served):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    scalars = (
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=20)
    )
    values = st.recursive(
        scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3)
    )
    keys = st.sampled_from(
        ["query", "namespaces", "k", "filters", "budget", "mode", "limit", "cursor", "snippets", "raw", "options", "x"]
    )
    option = st.dictionaries(
        st.sampled_from(["mode", "per_doc", "fusion", "ef_search", "rerank", "prf", "explain"]), values, max_size=3
    )
    bodies = st.dictionaries(keys, values | option, max_size=6).map(lambda d: {"query": "refund", **d})

    with httpx.Client(base_url=served.url, headers=served.headers("ops"), timeout=30) as client:

        @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
        @given(body=bodies)
        def check(body):
            r = client.post("/v1/search", json=body)
            assert r.status_code < 500, (body, r.text)
            assert "error" in r.json() or r.status_code == 200

        check()
        for raw in (
            b'{"query": "x", "k": Infinity}',
            b'{"query": NaN}',
            b'{"query": "x", "k": 1e400}',
            b'{"query": "\\ud800"}',
            b'{"query": "x", "k": 99999999999999999999999999}',
            b'{"query": "x", "budget": -1, "limit": 0}',
            b'{"raw": true, "query": "x", "options": {"mode": ["lexical"]}}',
            b'{"raw": true, "query": "x", "options": []}',
            b"[]",
            b'"just a string"',
        ):
            r = client.post("/v1/search", content=raw, headers={"Content-Type": "application/json"})
            assert 400 <= r.status_code < 500, (raw, r.text)
