"""What an agent sends, checked the same on every route (docs/hardening.md, "Agent API: input
checks, round 2"): the raw search by either of its routes, what an error echoes of the input, and
an MCP string argument that reads as JSON null. Each test failed before its fix."""

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
    module: its tests only send input to A's routes and read what they answer."""
    tenant = "t_input_checks"
    if TEST_DSN:
        _create_tenant(tenant)
    return make_two_tenants(kb_home, tenant, tmp_path_factory.mktemp("input-checks"))


LONG = "x" * 60_000  # within [server] max_body_bytes (65536): the server reads it, and must not echo it
ECHO = 80  # what an error shows of a value sent, at most (kbctl.errors.echo)


def _raw_routes(client, body: dict, **headers: str) -> tuple:
    """The raw search's answer by ``/v1/search`` with ``"raw": true`` and by ``/v1/tools/search_raw``."""
    a = client.post("/v1/search", json={**body, "raw": True}, headers=headers)
    b = client.post("/v1/tools/search_raw", json=body, headers=headers)
    return a, b


@pytest.mark.parametrize(
    "body",
    [
        {"query": "quorvax ledger", "options": {"mode": "lexical", "explain": True}},
        {"query": "quorvax ledger", "mode": "lexical"},  # an option outside `options`
        {"query": "quorvax ledger", "options": {"mode": "lexical", "bogus": 1}},
        {"query": "quorvax ledger", "options": ["mode"]},
        {"query": "quorvax ledger", "labels": {}},
        {"namespaces": ["kb"]},
    ],
)
def test_the_raw_search_takes_the_same_arguments_by_either_route(two_tenants, body):
    """``/v1/tools/search_raw`` took its options flat, and no ``options``: it answered 400 where
    ``/v1/search`` answered 200, and 200 where it refused."""
    settings, token, _, _ = two_tenants
    with _client(settings, token) as client:
        a, b = _raw_routes(client, body)
    assert a.status_code == b.status_code, (a.text, b.text)
    if a.status_code == 200:
        assert a.json()["mode"] == b.json()["mode"] == "lexical"
        assert [h["doc_id"] for h in a.json()["hits"]] == [h["doc_id"] for h in b.json()["hits"]]
    else:
        assert a.json() == b.json()


@pytest.mark.parametrize("path", ["/v1/search", "/v1/tools/search_raw", "/v1/tools/search_knowledge"])
def test_a_search_naming_another_tenant_is_refused_on_every_route(two_tenants, path):
    """A forwarded CLI search names its tenant (``Kbctl-Tenant``): ``/v1/tools/search_raw`` and
    ``/v1/tools/search_knowledge`` answered with the token's tenant's documents whatever it named."""
    settings, token, _, other = two_tenants
    body = {"query": "quorvax", **({"raw": True} if path == "/v1/search" else {})}
    with _client(settings, token) as client:
        own = client.post(path, json=body, headers={"Kbctl-Tenant": settings.tenant})
        others = [client.post(path, json=body, headers={"Kbctl-Tenant": t}) for t in (other, "no_such_tenant")]
    assert own.status_code == 200, own.text
    assert {(r.status_code, r.json()["error"]) for r in others} == {
        (409, "this token's agent searches another tenant than the one asked for")
    }


def test_mcp_offers_no_raw_search(two_tenants):
    """The raw search is the JSON API's only: an unscoped agent's MCP server lists the six tools and
    refuses ``search_raw`` (and the toolbox's other methods) as any tool it does not have."""
    from mcp import Client

    from kbctl.server.agents import TOOLS, agent_from_settings
    from kbctl.server.mcp import mcp_server
    from kbctl.server.metrics import Metrics
    from kbctl.server.service import Service
    from kbctl.server.tools import Toolbox

    settings, _, _, _ = two_tenants
    service = Service(settings)
    server = mcp_server(Toolbox(service, agent_from_settings(settings, "ops"), Metrics()))

    async def main():
        async with Client(server) as client:
            listed = [t.name for t in (await client.list_tools()).tools]
            calls = {n: await client.call_tool(n, {"query": "quorvax"}) for n in ("search_raw", "search_result")}
        return listed, calls

    try:
        listed, calls = anyio.run(main)
    finally:
        service.close()
    assert sorted(listed) == sorted(TOOLS)
    for name, result in calls.items():
        assert result.is_error and result.content[0].text == f"tool {name!r} is not available"


# -- what an error echoes of the input ----------------------------------------------------------------


def _short(message: str) -> None:
    assert len(message) < 3 * ECHO + 120, message[:300]
    assert "x" * (ECHO + 1) not in message, message[:300]
    assert "…" in message, message[:300]


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("post", "/v1/search", {"query": "quorvax", "cursor": LONG}),
        ("get", f"/v1/documents/d_{'A' * 22}?cursor={LONG[:6000]}", None),
        ("post", "/v1/search", {"query": "quorvax", "namespaces": [LONG]}),
        ("post", "/v1/search", {"query": "quorvax", "filters": [LONG]}),
        ("post", "/v1/search", {"query": "quorvax", "filters": [LONG + "=1"]}),
        ("post", "/v1/search", {"query": "quorvax", "mode": LONG}),
        ("post", "/v1/search", {"query": "quorvax", LONG: 1}),
        ("post", "/v1/search", {"query": "quorvax", "raw": True, LONG: 1}),
        ("post", "/v1/search", {"query": "quorvax", "raw": True, "options": {"prf": LONG}}),
        ("post", "/v1/search", {"query": "quorvax", "raw": True, "options": {"fusion": LONG}}),
        ("post", f"/v1/tools/{LONG[:6000]}", {}),
        ("post", "/v1/tools/get_document", {"doc_id": LONG}),
        ("post", "/v1/tools/get_document", {"doc_id": "{doc}", "around_chunk": LONG}),
        ("get", f"/v1/documents/{LONG[:6000]}", None),
        ("post", "/v1/feedback", {"query_id": LONG, "doc_id": "d_x", "useful": True}),
    ],
)
def test_an_error_echoes_at_most_80_characters_of_what_was_sent(two_tenants, caplog, method, path, body):
    """A bad cursor, namespace, filter, mode, argument name, tool name or id came back whole in the
    error (60,000 characters), and in the server's log."""
    settings, token, _, _ = two_tenants
    with caplog.at_level(logging.INFO), _client(settings, token) as client:
        if body and body.get("doc_id") == "{doc}":  # a document that opens: the chunk is what is wrong
            body = {
                **body,
                "doc_id": client.post("/v1/search", json={"query": "quorvax"}).json()["passages"][0]["doc_id"],
            }
        r = client.post(path, json=body) if method == "post" else client.get(path)
    assert 400 <= r.status_code < 500, r.text[:300]
    _short(r.json()["error"])
    assert not _logged_whole(caplog)


def _logged_whole(caplog) -> list[str]:
    """The server's log lines (not the test client's) that hold more of the input than an echo."""
    return [
        r.getMessage()[:200]
        for r in caplog.records
        if not r.name.startswith("httpx") and "x" * (ECHO + 1) in r.getMessage()
    ]


def test_an_mcp_error_echoes_at_most_80_characters_of_what_was_sent(two_tenants, caplog):
    """The same over MCP: a tool's refusal, an unknown tool's name (also in the INFO line that logs
    it), a resource URI and a prompt's name."""
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    from kbctl.server.agents import agent_from_settings
    from kbctl.server.mcp import mcp_server
    from kbctl.server.metrics import Metrics
    from kbctl.server.service import Service
    from kbctl.server.tools import Toolbox

    settings, _, _, _ = two_tenants
    service = Service(settings)
    server = mcp_server(Toolbox(service, agent_from_settings(settings, "ops"), Metrics()))

    async def main():
        out = {}
        async with Client(server) as client:
            out["cursor"] = (await client.call_tool("search_knowledge", {"query": "q", "cursor": LONG})).content[0].text
            out["namespace"] = (
                (await client.call_tool("search_knowledge", {"query": "q", "namespaces": [LONG]})).content[0].text
            )
            out["tool"] = (await client.call_tool(LONG, {})).content[0].text
            out["id"] = (await client.call_tool("get_document", {"doc_id": LONG})).content[0].text
            for key, call in (
                ("resource", lambda: client.read_resource(f"kbctl://{LONG}")),
                ("prompt", lambda: client.get_prompt(LONG, {})),
            ):
                with pytest.raises(MCPError) as e:
                    await call()
                out[key] = e.value.error.message
        return out

    try:
        with caplog.at_level(logging.INFO):
            out = anyio.run(main)
    finally:
        service.close()
    for key, message in out.items():
        assert "x" * (ECHO + 1) not in message, (key, message[:300])
        assert len(message) < 3 * ECHO + 120, (key, message[:300])
    assert not _logged_whole(caplog)


def test_the_echo_helper():
    from kbctl.errors import echo

    assert echo("abc") == "'abc'"
    assert echo("y" * 80) == repr("y" * 80)
    assert echo("y" * 81) == repr("y" * 80 + "…")
    assert echo(42) == "42" and echo(None) == "None"
    assert len(echo(list(range(10_000)))) <= 81 + 2
    assert echo("\x00" * 200).count("\\x00") == 80


# -- MCP: a string argument that reads as JSON null -----------------------------------------------


@pytest.mark.parametrize("text", ["null", " null "])
def test_an_mcp_string_argument_null_is_that_string(two_tenants, text):
    """The MCP SDK parses a string argument of a parameter not typed plain ``str`` as JSON when it
    can, so ``"null"`` became None: ``around_chunk: "null"`` read the whole document and
    ``cursor: "null"`` the first page, where the JSON API refuses both as what they are."""
    from mcp import Client

    from kbctl.server.agents import agent_from_settings
    from kbctl.server.mcp import mcp_server
    from kbctl.server.metrics import Metrics
    from kbctl.server.service import Service
    from kbctl.server.tools import Toolbox

    settings, token, _, _ = two_tenants
    service = Service(settings)
    server = mcp_server(Toolbox(service, agent_from_settings(settings, "ops"), Metrics()))

    async def main():
        async with Client(server) as client:
            found = json.loads(
                (await client.call_tool("search_knowledge", {"query": "quorvax ledger"})).content[0].text
            )
            doc = found["passages"][0]["doc_id"]
            return {
                "around_chunk": await client.call_tool("get_document", {"doc_id": doc, "around_chunk": text}),
                "cursor": await client.call_tool("get_document", {"doc_id": doc, "cursor": text}),
                "search cursor": await client.call_tool("search_knowledge", {"query": "quorvax", "cursor": text}),
                "absent": await client.call_tool("get_document", {"doc_id": doc}),
                "explicit null": await client.call_tool("get_document", {"doc_id": doc, "cursor": None}),
            }, doc

    try:
        out, doc = anyio.run(main)
    finally:
        service.close()
    with _client(settings, token) as client:
        api = client.post("/v1/tools/get_document", json={"doc_id": doc, "around_chunk": text}).json()["error"]
    assert (
        out["around_chunk"].is_error
        and out["around_chunk"].content[0].text == api == f"chunk {text!r} is not available"
    )
    for key in ("cursor", "search cursor"):
        assert out[key].is_error and out[key].content[0].text == f"invalid cursor {text!r}", key
    assert not out["absent"].is_error and not out["explicit null"].is_error
    assert json.loads(out["absent"].content[0].text) == json.loads(out["explicit null"].content[0].text)


# -- MCP: an argument the tool does not take ------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("search_knowledge", {"query": "quorvax", "namespace": ["kb"]}),  # a misspelled `namespaces`
        ("search_knowledge", {"query": "quorvax", "filter": ["title=alpha 0"]}),  # a misspelled `filters`
        ("verify_claim", {"claim": "quorvax", "bogus": 1}),
        ("list_namespaces", {"x": 1}),
        ("search_knowledge", {"query": "quorvax", "labels": {}}),  # the wrapper's own keyword
    ],
)
def test_an_mcp_argument_the_tool_does_not_take_is_refused(two_tenants, tool, args):
    """The MCP SDK dropped an argument a tool does not take and ran the tool without it: a search
    with ``filter`` (for ``filters``) answered unfiltered, ``namespace`` (for ``namespaces``) over every
    namespace, where the JSON API refuses them (``invalid arguments: filter: Unexpected keyword
    argument``). Over MCP the same line, as a tool error."""
    from mcp import Client

    from kbctl.server.agents import agent_from_settings
    from kbctl.server.mcp import mcp_server
    from kbctl.server.metrics import Metrics
    from kbctl.server.service import Service
    from kbctl.server.tools import Toolbox

    settings, token, _, _ = two_tenants
    service = Service(settings)
    server = mcp_server(Toolbox(service, agent_from_settings(settings, "ops"), Metrics()))

    async def main():
        async with Client(server) as client:
            return await client.call_tool(tool, args)

    try:
        result = anyio.run(main)
    finally:
        service.close()
    with _client(settings, token) as client:
        api = client.post(f"/v1/tools/{tool}", json=args)
    assert api.status_code == 400 and "Unexpected keyword argument" in api.json()["error"], api.text
    assert result.is_error, result.content[0].text[:200]
    assert result.content[0].text == api.json()["error"]


# -- the agent server's follow-ups (docs/hardening.md, session 43) --------------------------------


def _mcp_calls(settings, calls: list[tuple[str, dict]]) -> list:
    """Each (tool, arguments) called over MCP (the SDK's in-memory client) by agent ``ops``."""
    from mcp import Client

    from kbctl.server.agents import agent_from_settings
    from kbctl.server.mcp import mcp_server
    from kbctl.server.metrics import Metrics
    from kbctl.server.service import Service
    from kbctl.server.tools import Toolbox

    service = Service(settings)
    server = mcp_server(Toolbox(service, agent_from_settings(settings, "ops"), Metrics()))

    async def main():
        async with Client(server) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    try:
        return anyio.run(main)
    finally:
        service.close()


COERCED = [  # (tool, arguments, the argument named): each read as something else by pydantic's lax mode
    ("search_knowledge", {"query": "quorvax", "k": True}, "k"),
    ("search_knowledge", {"query": "quorvax", "budget": True}, "budget"),
    ("search_knowledge", {"query": "quorvax", "limit": True}, "limit"),
    ("search_knowledge", {"query": "quorvax", "snippets": "yes"}, "snippets"),
    ("search_knowledge", {"query": "quorvax", "snippets": 1}, "snippets"),
    ("verify_claim", {"claim": "quorvax", "k": True}, "k"),
    ("research_topic", {"topic": "quorvax", "budget": True}, "budget"),
    ("get_document", {"doc_id": "d_" + "A" * 22, "window": True}, "window"),
    ("get_document", {"doc_id": "d_" + "A" * 22, "snippets": "true"}, "snippets"),
    ("record_feedback", {"query_id": "q_" + "A" * 22, "doc_id": "d_" + "A" * 22, "useful": "yes"}, "useful"),
]


@pytest.mark.parametrize(("tool", "args", "name"), COERCED)
def test_a_boolean_for_a_count_or_a_string_for_a_boolean_is_refused(two_tenants, tool, args, name):
    """``k: true`` was read as 1 and ``snippets: "yes"`` as true (pydantic's lax mode): an agent that
    sent the wrong type got an answer to another question. Now a 400 naming the argument, and over
    MCP the same line as a tool error."""
    settings, token, _, _ = two_tenants
    with _client(settings, token) as client:
        api = client.post(f"/v1/tools/{tool}", json=args)
    assert api.status_code == 400, api.text
    assert api.json()["error"].startswith(f"invalid arguments: {name}: "), api.text
    [result] = _mcp_calls(settings, [(tool, args)])
    assert result.is_error and result.content[0].text == api.json()["error"], result.content[0].text[:200]


@pytest.mark.parametrize(
    ("body", "name"),
    [
        ({"query": "quorvax", "k": True}, "k"),
        ({"query": "quorvax", "options": {"per_doc": True}}, "per_doc"),
        ({"query": "quorvax", "options": {"ef_search": True}}, "ef_search"),
        ({"query": "quorvax", "options": {"rerank": "yes"}}, "rerank"),
        ({"query": "quorvax", "options": {"explain": 1}}, "explain"),
    ],
)
def test_the_raw_search_refuses_a_boolean_for_a_count_or_a_string_for_a_boolean(two_tenants, body, name):
    settings, token, _, _ = two_tenants
    with _client(settings, token) as client:
        a, b = _raw_routes(client, body)
    assert a.status_code == b.status_code == 400, (a.text, b.text)
    assert a.json() == b.json() and a.json()["error"].startswith(f"invalid arguments: {name}: "), a.text


def test_what_real_clients_send_for_counts_and_booleans_is_still_read(two_tenants):
    """JSON numbers and booleans, a count as a numeric string (as before), and a document's query
    parameters (strings by nature: ``window=1``, ``snippets=true``) are read as they were."""
    settings, token, _, _ = two_tenants
    with _client(settings, token) as client:
        r = client.post("/v1/search", json={"query": "quorvax ledger", "k": "1", "snippets": True, "limit": 1})
        assert r.status_code == 200 and len(r.json()["passages"]) == 1, r.text
        r = client.post("/v1/search", json={"query": "quorvax ledger", "k": 1.0, "budget": 500})
        assert r.status_code == 200 and r.json()["context"], r.text
        hit = client.post("/v1/search", json={"query": "quorvax ledger"}).json()["passages"][0]
        for snippets in ("true", "false", "1", "0"):
            params = {"around_chunk": hit["chunk_id"], "window": "1", "limit": "5", "snippets": snippets}
            r = client.get(f"/v1/documents/{hit['doc_id']}", params=params)
            assert r.status_code == 200, (snippets, r.text)
        r = client.get(f"/v1/documents/{hit['doc_id']}", params={"snippets": "yes"})
        assert r.status_code == 400 and r.json()["error"].startswith("invalid arguments: snippets: "), r.text
        r = client.post("/v1/search", json={"query": "quorvax ledger", "raw": True, "options": {"rerank": False}})
        assert r.status_code == 200, r.text
        nulls = {"k": None, "budget": None, "limit": None, "cursor": None}  # as `kbctl search` forwards them
        r = client.post("/v1/search", json={"query": "quorvax ledger", **nulls})
        assert r.status_code == 200, r.text
        raw = {"k": None, "filters": None, "options": {"per_doc": None, "ef_search": None, "rerank": None}}
        r = client.post("/v1/search", json={"query": "quorvax ledger", "raw": True, **raw})
        assert r.status_code == 200, r.text
        r = client.post("/v1/tools/verify_claim", json={"claim": "quorvax ledger", "k": 2})
        assert r.status_code == 200, r.text


@pytest.mark.parametrize("extra", [{"limit": 2}, {"cursor": "1"}, {"snippets": True}, {"limit": 1, "cursor": "1"}])
def test_a_budget_with_paging_or_snippets_is_refused_naming_them(two_tenants, extra):
    """With ``budget`` the answer is one context block: ``limit``, ``cursor`` and ``snippets`` (of
    the list of passages) were ignored without a word, as if they had applied."""
    settings, token, _, _ = two_tenants
    args = {"query": "quorvax ledger", "budget": 500, **extra}
    with _client(settings, token) as client:
        api = client.post("/v1/search", json=args)
        alone = client.post("/v1/search", json={"query": "quorvax ledger", "budget": 500, "snippets": False})
    assert api.status_code == 400, api.text
    message = api.json()["error"]
    assert message.startswith("budget does not go with ") and all(f"`{key}`" in message for key in extra), message
    assert alone.status_code == 200 and alone.json()["context"], alone.text  # the defaults are no conflict
    [result] = _mcp_calls(settings, [("search_knowledge", args)])
    assert result.is_error and result.content[0].text == message


@pytest.mark.parametrize("query", ["the of and", "", "quorvax ledger"])
@pytest.mark.parametrize("option", [{"fusion": "bogus"}, {"prf": "bogus"}, {"fusion": "bogus", "mode": "lexical"}])
def test_an_unknown_fusion_or_prf_is_refused_whatever_the_query(two_tenants, query, option):
    """An unknown ``fusion`` or ``prf`` passed when the query had nothing searchable (``no_match``
    answered before the options were read), and an unknown fusion on a one-lane search (no fusion
    ran): the options are checked before the search."""
    settings, token, _, _ = two_tenants
    with _client(settings, token) as client:
        a, b = _raw_routes(client, {"query": query, "options": option})
    name = "fusion" if "fusion" in option else "prf"
    assert a.status_code == b.status_code == 400, (a.text, b.text)
    assert a.json()["error"] == b.json()["error"] == f"unknown {name} 'bogus'", a.text


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"foo": "1"}, "'foo'"),
        ({"window": "1", "snipets": "true"}, "'snipets'"),
        ({"doc_id": "d_x", "b": "2"}, "'b', 'doc_id'"),
    ],
)
def test_a_document_query_parameter_the_route_does_not_take_is_refused(two_tenants, params, named):
    """``GET /v1/documents/ID?foo=1`` answered as if ``foo`` was not there, where every other route
    refuses what it does not take: a misspelled ``snipets=true`` read the whole chunks."""
    settings, token, _, _ = two_tenants
    with _client(settings, token) as client:
        hit = client.post("/v1/search", json={"query": "quorvax ledger"}).json()["passages"][0]
        r = client.get(f"/v1/documents/{hit['doc_id']}", params=params)
    assert r.status_code == 400, r.text
    message = r.json()["error"]
    assert message.startswith(f"unknown query parameter{'s' if ',' in named else ''} {named}"), message
    assert "around_chunk, window, limit, cursor, snippets" in message


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("window=1&window=9", "'window'"),
        ("limit=2&snippets=true&limit=3", "'limit'"),
        ("snippets=true&snippets=false&window=1&window=1", "'snippets', 'window'"),
    ],
)
def test_a_document_query_parameter_given_twice_is_refused(two_tenants, query, named):
    """``GET /v1/documents/ID?window=1&window=9`` answered with one of the two (the last), as if the
    other was not there: which one the caller meant is theirs to say."""
    settings, token, _, _ = two_tenants
    with _client(settings, token) as client:
        hit = client.post("/v1/search", json={"query": "quorvax ledger"}).json()["passages"][0]
        r = client.get(f"/v1/documents/{hit['doc_id']}?{query}")
        once = client.get(f"/v1/documents/{hit['doc_id']}?window=1")
    assert r.status_code == 400, r.text
    message = r.json()["error"]
    assert message.startswith(f"query parameter{'s' if ',' in named else ''} {named} given more than once"), message
    assert once.status_code == 200, once.text
