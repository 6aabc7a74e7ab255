"""``kbctl serve``: one ASGI app (Starlette, served by uvicorn) with

- ``/mcp``: MCP over streamable HTTP (the official SDK; POST only, stateless), one ``MCPServer`` per agent;
- ``/v1/search``, ``/v1/tools/{name}``, ``/v1/documents/{id}``, ``/v1/namespaces``, ``/v1/feedback``:
  the same tools as plain JSON (errors: ``{"error": message}`` with a 4xx or 5xx status);
- ``/healthz`` (without a token) and ``/metrics`` (Prometheus; a token unless ``[server] metrics_open``).

Every other request carries ``Authorization: Bearer <token>`` of an agent (``[server]
require_token``); the token picks the agent, the agent its namespaces and tools. Before any of
that, ``_Gate`` applies the server's edges to every route (``kbctl.server.guard``): Host and
Origin, the body's size, deadline, content type and depth.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import time
from typing import Any, AsyncIterator

import anyio
from pydantic import ValidationError, validate_call
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .. import telemetry
from ..config import Settings
from ..errors import KbctlError, TenantNotFound, cut, echo
from .agents import TOOLS, UNSCOPED, Agent, agent_from_settings, unavailable
from .faults import error_status, public_fault, validation_message
from .guard import HostRule, body_problem, replay_body
from .metrics import Metrics
from .schemas import dump
from .service import BEARER, CANCEL, Cancel, Service
from .tools import Toolbox

log = logging.getLogger(__name__)

__all__ = ["create_app", "TENANT_HEADER"]

_TOKEN_TTL = 30.0  # seconds a token's lookup is remembered. Not a revoke's window: every request that reads
# a knowledge base checks its token in the statement its borrow runs anyway (Service.kb), and the routes that
# read none look it up again (_remembered); a tenant made again since never honours it (Agent.made_for)
TENANT_HEADER = "kbctl-tenant"  # the tenant a forwarded search is of (kbctl.server.client)
_RAW_OPTIONS = ("mode", "per_doc", "fusion", "ef_search", "rerank", "prf", "explain")


class _State:
    def __init__(self, settings: Settings, open_kb) -> None:
        self.settings = settings
        self.service = Service(settings, open_kb)
        self.metrics = Metrics()
        self.metrics.ledger(self._ledger)
        self.tokens: dict[str, tuple[float, Agent | None]] = {}
        self.ledger_gone = False  # the server's tenant's ledger could not be read: said once
        self.mcp_apps: dict[Agent, _McpApp] = {}  # in the order of their last use
        self.lock = anyio.Lock()
        self.tg: Any = None

    def _ledger(self) -> dict:
        """The server's tenant's ledger for ``/metrics``; none once that tenant was deleted (the
        scrape still answers: the other tenants' agents are served, their calls counted)."""
        try:
            with self.service.kb() as kb:
                return kb.stats()
        except TenantNotFound as e:
            if not self.ledger_gone:  # once: a scraper asks every few seconds
                self.ledger_gone = True
                log.warning("/metrics: no ingest figures to export: %s", e.message)
            return {"namespaces": []}

    def agent(self, name: str | None, tenant: str | None = None) -> Agent:
        """``[agents.NAME]`` serving ``tenant`` (its token's; the server's without one) unless it is
        pinned to a tenant: the tenant is always named, as its calls are counted by it (``Metrics``)."""
        a = agent_from_settings(self.settings, name)
        if a.tenant:
            return a
        return Agent(a.name, a.namespaces, a.tools, a.k, a.budget, tenant or self.settings.tenant, a.principal)

    async def authenticate(self, token: str, remembered: bool = True) -> Agent | None:
        """The agent of bearer ``token`` (None: unknown, revoked, or none given where one is needed).
        A lookup is remembered for ``_TOKEN_TTL`` unless a borrow has refused the token since
        (``Service.refused``: revoked, or its tenant made again) or ``remembered`` is False (a route
        that reads no knowledge base, whose borrow would check the token: looked up again)."""
        if not token:
            return None if self.settings.server.require_token else self.agent(None)
        hit = self.tokens.get(token)
        refused = self.service.refused(token)
        if (
            hit is not None
            and remembered
            and not refused
            and time.monotonic() - hit[0] < _TOKEN_TTL
            and not self._outlived(hit[1])
        ):
            return hit[1]
        owner = await anyio.to_thread.run_sync(self.service.agent_of_token, token)
        agent = None
        if owner is not None and owner[1] in self.settings.agents:
            agent = self.agent(owner[1], owner[0])
            if agent.tenant != owner[0]:
                # the agent is pinned to another tenant ([agents.NAME] tenant): a token serves only the
                # tenant it was made under, whose row it is (and whose revoke ends it), never another's
                log.info("a token of tenant %r names agent %r, which is pinned to another tenant", *owner[:2])
                agent = None
            else:  # and only the tenant of that name it was made for: each borrow checks (Service.kb)
                agent = dataclasses.replace(agent, made_for=owner[2])
        if len(self.tokens) > 10000:
            self.tokens.clear()
        self.tokens[token] = (time.monotonic(), agent)
        return agent

    def _outlived(self, agent: Agent | None) -> bool:
        """Whether a remembered token's tenant was made again since its lookup, as a borrow has
        seen (a new id key): then it is looked up again (and found no more: its tokens went with
        the tenant it was made for). A borrow that reads the new key first refuses it itself."""
        if agent is None or agent.made_for is None or agent.tenant is None:
            return False
        known = self.service.known_ids(agent.tenant)
        return known is not None and known != agent.made_for

    def toolbox(self, agent: Agent) -> Toolbox:
        return Toolbox(self.service, agent, self.metrics)

    @contextlib.asynccontextmanager
    async def mcp_app(self, agent: Agent) -> AsyncIterator[Any]:
        """The MCP app of ``agent`` for one request (made on its first request, its session manager
        run in the lifespan's task group). At most ``_MCP_APPS`` are kept, the least recently used
        stopped first (once its requests are done); making a tenant's app stops the apps of that
        tenant made for another of its instances (deleted and made again: ``Agent.made_for``)."""
        async with self.lock:
            kept = self.mcp_apps.pop(agent, None)
            if kept is None:
                kept = await self._start_mcp(agent)
                for other in [a for a in self.mcp_apps if _outdone(a, agent)]:
                    self._retire(other)
            self.mcp_apps[agent] = kept  # the most recently used last
            kept.busy += 1
            while len(self.mcp_apps) > _MCP_APPS:
                self._retire(next(iter(self.mcp_apps)))
        try:
            yield kept.app
        finally:
            kept.busy -= 1
            if kept.retired and not kept.busy:
                kept.scope.cancel()

    async def _start_mcp(self, agent: Agent) -> _McpApp:
        from mcp.server.transport_security import TransportSecuritySettings

        from .mcp import mcp_server

        server = mcp_server(self.toolbox(agent))
        app = server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            # the gate has checked Host and Origin by the server's one rule (HostRule), for every route
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            max_request_body_size=self.settings.server.max_body_bytes,
        )
        scope = await self.tg.start(_run_manager, server.session_manager)
        return _McpApp(app, scope)

    def _retire(self, agent: Agent) -> None:
        """Forget ``agent``'s app and stop its session manager, at once or after its last request."""
        kept = self.mcp_apps.pop(agent)
        kept.retired = True
        if not kept.busy:
            kept.scope.cancel()


_MCP_APPS = 256  # MCP apps a server keeps (one per agent and tenant instance that called): the least recently used go


@dataclasses.dataclass(eq=False)
class _McpApp:
    app: Any
    scope: anyio.CancelScope  # its session manager's
    busy: int = 0  # requests in it now
    retired: bool = False  # forgotten: stopped when ``busy`` is 0


def _outdone(kept: Agent, new: Agent) -> bool:
    """Whether ``kept``'s app serves an instance of ``new``'s tenant other than ``new``'s (the tenant
    was deleted and made again under its name since): no token of it is served any more."""
    return (
        kept.tenant == new.tenant
        and kept.made_for is not None
        and new.made_for is not None
        and kept.made_for != new.made_for
    )


async def _run_manager(manager, *, task_status=anyio.TASK_STATUS_IGNORED) -> None:
    with anyio.CancelScope() as scope:
        async with manager.run():
            task_status.started(scope)
            await anyio.sleep_forever()


def _error(status: int, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers or None)


async def _body(request: Request) -> dict:
    limit = request.app.state.kb.settings.server.max_body_bytes
    data = b""
    async for part in request.stream():
        data += part
        if len(data) > limit:
            raise _TooLarge(limit)
    if not data:
        return {}
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):
        raise _BadRequest("the request body is not JSON") from None
    if not isinstance(obj, dict):
        raise _BadRequest("the request body must be a JSON object")
    try:
        json.dumps(obj, ensure_ascii=False, allow_nan=True).encode("utf-8")
    except UnicodeEncodeError:
        raise _BadRequest("the request body holds an escaped lone surrogate (\\ud800-\\udfff): not text") from None
    return obj


class _TooLarge(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body is larger than {limit} bytes")


class _BadRequest(Exception):
    pass


async def _call(request: Request, tool: str, args: dict) -> Response:
    """Run ``tool`` with ``args`` for the request's agent, in a worker thread; cancelled if the client
    leaves. Every route of the JSON API comes here, so what it checks holds on each: the tenant a
    forwarded search names (``Kbctl-Tenant``), the agent's tools, and the raw search's arguments
    (``_raw_arguments``), whether it came as ``/v1/search`` with ``"raw": true`` or as
    ``/v1/tools/search_raw``."""
    state: _State = request.app.state.kb
    agent: Agent = request.scope["kbctl.agent"]
    asked = request.headers.get(TENANT_HEADER)
    if asked is not None and asked != agent.tenant:
        # ``kbctl --tenant T search`` forwarded (``kbctl.server.client``): this token's agent searches
        # another tenant, whose documents T must not be shown (the CLI searches T in-process). The
        # answer is the same whatever T is: it tells an agent nothing of other tenants.
        return _error(409, "this token's agent searches another tenant than the one asked for")
    box = state.toolbox(agent)
    if (tool if tool != "search_raw" else "search_knowledge") not in agent.tools or tool not in (*TOOLS, "search_raw"):
        return _error(404, str(unavailable("tool", tool)))
    if tool == "search_raw":
        args = _raw_arguments(args)

    def run():
        return validate_call(getattr(box, tool))(**args)

    return await _in_thread(request, tool, run)


async def _in_thread(request: Request, tool: str, run) -> Response:
    state: _State = request.app.state.kb
    tenant = request.scope["kbctl.agent"].tenant or ""
    cancel = Cancel()
    reset = CANCEL.set(cancel)
    out: dict[str, Any] = {}
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_watch_disconnect, request, cancel, tg.cancel_scope)
            try:
                out["result"] = await anyio.to_thread.run_sync(run)
            except ValidationError as e:
                out["error"] = (400, validation_message(e))
            except KbctlError as e:
                status = error_status(e)
                if status >= 500:  # a fault: logged whole below (unless the client left), told by its kind
                    out["fault"] = e
                    out["error"] = (status, public_fault(e, tool))
                else:
                    out["error"] = (status, e.message if hasattr(e, "message") else str(e))
            except Exception as e:  # an unexpected failure: logged here, a 500 without internals there
                log.exception("tool %s failed", tool)
                state.metrics.errors.labels(tool=tool, error=type(e).__name__, tenant=tenant).inc()
                out["error"] = (500, "internal error")
            tg.cancel_scope.cancel()
    finally:
        CANCEL.reset(reset)
    if cancel.cancelled:
        client = request.scope.get("client") or ("?", 0)
        log.info("client %s:%s left before its answer (%s)", *client[:2], tool)
        return _error(499, "client closed request")
    if "fault" in out:  # not a cancelled request's statement: a real fault
        log.error("tool %s failed: %s", tool, out["fault"].message, exc_info=out["fault"])
        state.metrics.errors.labels(tool=tool, error=type(out["fault"]).__name__, tenant=tenant).inc()
    if "error" in out:
        status, message = out["error"]
        if status == 401:  # a remembered token of a tenant made again since (``StaleToken``)
            state.metrics.http.labels(route="auth", status="401", tenant="").inc()
            return _error(401, message, **{"WWW-Authenticate": "Bearer"})
        return _error(status, message)
    return JSONResponse(dump(out["result"]))


async def _watch_disconnect(request: Request, cancel: Cancel, scope) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            await anyio.to_thread.run_sync(cancel.cancel)
            return


# -- routes ------------------------------------------------------------------------------------------


def _raw_arguments(args: dict) -> dict:
    """The raw search's arguments as ``Toolbox.search_raw`` takes them: ``query``, ``namespaces``,
    ``k`` and ``filters``, and ``options`` holding only ``_RAW_OPTIONS`` (flattened); anything else is
    a 400 (``_BadRequest``), by either route."""
    args = dict(args)
    extra = args.pop("options", None)
    extra = {} if extra is None else extra
    if not isinstance(extra, dict) or set(extra) - set(_RAW_OPTIONS):
        raise _BadRequest(f"options may hold only {', '.join(_RAW_OPTIONS)}")
    bad = set(args) - {"query", "namespaces", "k", "filters"}
    if bad:
        raise _BadRequest(f"unknown argument {echo(sorted(bad)[0])}")
    if "query" not in args:
        raise _BadRequest("invalid arguments: query: Field required")
    return {**args, **extra}


async def search(request: Request) -> Response:
    args = await _body(request)
    raw = args.pop("raw", False)
    if not isinstance(raw, bool):
        return _error(400, "invalid arguments: raw: Input should be a valid boolean")
    return await _call(request, "search_raw" if raw else "search_knowledge", args)


async def tool(request: Request) -> Response:
    return await _call(request, request.path_params["name"], await _body(request))


async def document(request: Request) -> Response:
    q = request.query_params
    unknown = sorted(set(q) - set(_DOCUMENT_PARAMETERS))
    if unknown:  # as every other route refuses what it does not take (a misspelled snipets=true)
        said = ", ".join(echo(key) for key in unknown[:5]) + (", …" if len(unknown) > 5 else "")
        raise _BadRequest(
            f"unknown query parameter{'s' if len(unknown) > 1 else ''} {said}"
            f" (/v1/documents/ID takes {', '.join(_DOCUMENT_PARAMETERS)})"
        )
    repeated = sorted(key for key in set(q) if len(q.getlist(key)) > 1)
    if repeated:  # ?window=1&window=9: which one was meant is the caller's to say, not the last's
        raise _BadRequest(
            f"query parameter{'s' if len(repeated) > 1 else ''} {', '.join(echo(key) for key in repeated)}"
            " given more than once: give each once"
        )
    args: dict[str, Any] = {"doc_id": request.path_params["doc_id"]}
    for key in _DOCUMENT_PARAMETERS:
        if key in q:
            args[key] = q[key]
    if "snippets" in args:  # a query's value is text: the tool takes a boolean only (kbctl.server.tools.Flag)
        args["snippets"] = _QUERY_BOOLEANS.get(args["snippets"].lower(), args["snippets"])
    return await _call(request, "get_document", args)


_DOCUMENT_PARAMETERS = ("around_chunk", "window", "limit", "cursor", "snippets")
_QUERY_BOOLEANS = {"true": True, "false": False, "1": True, "0": False}


async def namespaces(request: Request) -> Response:
    return await _call(request, "list_namespaces", {})


async def feedback(request: Request) -> Response:
    return await _call(request, "record_feedback", await _body(request))


async def healthz(request: Request) -> Response:
    state: _State = request.app.state.kb

    def ping():
        with state.service.kb() as kb:
            return len(kb.namespace_names())

    try:
        await anyio.to_thread.run_sync(ping)
    except KbctlError as e:
        return JSONResponse({"ok": False, "error": e.message}, status_code=503)
    return JSONResponse({"ok": True, "models": state.service.model_load_seconds})


async def metrics(request: Request) -> Response:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    state: _State = request.app.state.kb
    agent: Agent | None = request.scope.get("kbctl.agent")
    if agent is not None and (agent.namespaces or (agent.tenant or state.settings.tenant) != state.settings.tenant):
        # they name every namespace of the server's tenant, with its counts: only an agent that may
        # see them all (or anyone, with [server] metrics_open) reads them
        return _error(403, f"agent {agent.name!r}: /metrics name namespaces outside this agent's scope")
    for prof, seconds in state.service.model_load_seconds.items():
        state.metrics.model_load.labels(profile=prof).set(seconds)
    # an agent reads its tenant's calls only (the process serves other tenants' agents too); the
    # operator's open scrape ([server] metrics_open: no agent) reads every tenant's and the refusals
    registry = state.metrics.registry if agent is None else state.metrics.scrape(state.settings.tenant)
    body = await anyio.to_thread.run_sync(generate_latest, registry)
    return PlainTextResponse(body, media_type=CONTENT_TYPE_LATEST)


class _ClientGone(Exception):
    """The client closed its connection before its request was answered."""


def _status_of(send: Send, span) -> Send:
    """``send``, noting the response's status on ``span``."""

    async def noted(message) -> None:
        if message["type"] == "http.response.start":
            span.set_attribute("http.response.status_code", message["status"])
        await send(message)

    return noted


def _refusals_logged(scope: Scope, send: Send) -> Send:
    """``send``, logging each refusal (a 4xx answer ``{"error": message}``) as one INFO line: the
    request and why. A fault (5xx) is logged where it happens, with its traceback; a client that left
    (499) where it is noticed; MCP's tool errors by ``kbctl.server.mcp``."""
    status = 0

    async def logged(message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body" and 400 <= status < 499:
            try:
                error = json.loads(message.get("body", b"")).get("error")
            except (ValueError, AttributeError):
                error = None
            if isinstance(error, str):
                log.info("refused %s %s (%d): %s", scope["method"], cut(scope["path"]), status, error)
            status = 0  # one line per answer
        await send(message)

    return logged


class _Gate:
    """In front of every route: Host and Origin (``HostRule``), authentication, the request body
    (size, deadline, content type, nesting depth) and the /mcp dispatch."""

    def __init__(self, app: Starlette, state: _State, rule: HostRule) -> None:
        self.app, self.state, self.rule = app, state, rule
        srv = state.settings.server
        self.limit = srv.max_body_bytes
        self.body_seconds = float(srv.body_timeout)
        self.open = ("/healthz", "/metrics") if srv.metrics_open else ("/healthz",)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        # The caller's trace continues here (its traceparent header; an MCP request's _meta.traceparent
        # is the MCP SDK's to read, which parents its span to this one when it has none).
        headers = dict(scope.get("headers") or [])
        attrs = {"http.request.method": scope["method"], "url.path": scope["path"]}
        send = _refusals_logged(scope, send)
        try:
            with (
                telemetry.continued(headers.get(b"traceparent"), headers.get(b"tracestate")),
                telemetry.span("kbctl.request", attrs, kind="server") as span,
            ):
                await self._serve(scope, receive, _status_of(send, span) if span.is_recording() else send)
        except _ClientGone:
            client = scope.get("client") or ("?", 0)
            log.info("client %s:%s left before its answer (%s %s)", *client[:2], scope["method"], scope["path"])

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or [])
        refusal = self.rule.check(headers)
        if refusal is not None:
            status = 421 if refusal.startswith("Host") else 403
            self.state.metrics.http.labels(route="host", status=str(status), tenant="").inc()
            return await _error(status, refusal)(scope, receive, send)
        length = headers.get(b"content-length", b"0")
        if length.isascii() and length.isdigit() and int(length) > self.limit:
            return await _error(413, f"the request body is larger than {self.limit} bytes", Connection="close")(
                scope, receive, send
            )
        try:
            body = await self._read_body(receive)
        except _TooLarge as e:
            return await _error(413, str(e), Connection="close")(scope, receive, send)
        except TimeoutError:
            message = f"the request body did not arrive within {self.body_seconds:g}s"
            return await _error(408, message, Connection="close")(scope, receive, send)
        problem = body_problem(scope["method"], headers, body)
        if problem is not None:
            return await _error(*problem)(scope, receive, send)
        replay = replay_body(body, receive)
        if scope["path"] not in self.open:
            token = _bearer(headers)
            try:
                agent = await self.state.authenticate(token, _remembered(scope["path"], body))
            except KbctlError as e:  # the token could not be looked up: the database, most likely
                log.error("looking up a bearer token failed: %s", e.message, exc_info=e)
                return await _error(503, public_fault(e, "authentication"))(scope, replay, send)
            if agent is None:
                self.state.metrics.http.labels(route="auth", status="401", tenant="").inc()
                return await _error(401, "missing or invalid bearer token", **{"WWW-Authenticate": "Bearer"})(
                    scope, replay, send
                )
            scope["kbctl.agent"] = agent
            reset = BEARER.set(token or None)  # each borrow of the request checks it (Service.kb)
            try:
                if scope["path"].rstrip("/") == "/mcp":
                    if scope["method"] != "POST":
                        # stateless: no event stream of the server's to open (a GET held its connection
                        # until the client left) and no session to end (DELETE); MCP allows a 405
                        return await _error(405, _MCP_POST_ONLY, Allow="POST")(scope, replay, send)
                    async with self.state.mcp_app(agent) as app:
                        return await app(scope, replay, send)
                return await self.app(scope, replay, send)
            finally:
                BEARER.reset(reset)
        await self.app(scope, replay, send)

    async def _read_body(self, receive: Receive) -> bytes:
        """The whole request body, within ``[server] body_timeout`` seconds and ``max_body_bytes``."""
        data = b""
        with anyio.fail_after(self.body_seconds):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise _ClientGone
                data += message.get("body", b"")
                if len(data) > self.limit:
                    raise _TooLarge(self.limit)
                if not message.get("more_body", False):
                    return data


_MCP_POST_ONLY = (
    "/mcp takes POST only: this server is stateless, it opens no event stream (GET) and keeps no session (DELETE)"
)


def _bearer(headers: dict) -> str:
    """The bearer token of a request's ``Authorization`` header, else ""."""
    header = headers.get(b"authorization", b"").decode("latin-1")
    return header[7:].strip() if header[:7].lower() == "bearer " else ""


# The MCP methods that borrow a knowledge base for a token's agent (``Service.kb``, which checks the
# token in its statement): a remembered lookup serves them. The others (the handshake, the lists,
# /metrics) read none, so a remembered token is looked up again for them: one statement each.
_BORROWING = frozenset({"tools/call", "resources/read", "prompts/get"})


def _remembered(path: str, body: bytes) -> bool:
    """Whether a remembered lookup of the request's token may serve it: a request whose every use of
    the tenant goes through a borrow that checks the token (the JSON API's routes, MCP's calls of
    tools, resources and prompts). ``/metrics`` and MCP's handshake and lists are looked up again,
    so a revoked token is refused there too from the next request on."""
    if path == "/metrics":
        return False
    if path.rstrip("/") != "/mcp":
        return True
    try:
        message = json.loads(body) if body else None
    except (ValueError, RecursionError):
        return False
    return isinstance(message, dict) and message.get("method") in _BORROWING


def _http_error(request: Request, e: Exception) -> Response:
    """Starlette's own refusals (404 for a path no route has, 405 for a method the route does not
    take, with its ``Allow``) as the API's other errors are: ``{"error": message}``."""
    assert isinstance(e, HTTPException)
    return _error(e.status_code, e.detail, **(e.headers or {}))


def create_app(settings: Settings, open_kb=None, *, warm: bool = True, host: str | None = None):
    """The ASGI app of ``kbctl serve`` over knowledge bases ``open_kb(settings)`` makes (``KnowledgeBase``),
    listening on ``host`` (default ``[server] host``: it decides which Host headers are served)."""
    telemetry.configure(settings.telemetry)
    state = _State(settings, open_kb)
    srv = settings.server
    rule = HostRule(host or srv.host, srv.allowed_hosts)
    if rule.wildcard and not srv.allowed_hosts:
        log.warning("listening on every address: requests must name %s", rule.describe())
    else:
        log.info("requests must name %s", rule.describe())

    @contextlib.asynccontextmanager
    async def lifespan(app):
        if warm:
            await anyio.to_thread.run_sync(state.service.warm)
        async with anyio.create_task_group() as tg:
            state.tg = tg
            yield
            tg.cancel_scope.cancel()
        state.service.close()

    routes = [
        Route("/v1/search", search, methods=["POST"]),
        Route("/v1/tools/{name}", tool, methods=["POST"]),
        Route("/v1/documents/{doc_id}", document, methods=["GET"]),
        Route("/v1/namespaces", namespaces, methods=["GET"]),
        Route("/v1/feedback", feedback, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
    handlers = {
        _TooLarge: lambda r, e: _error(413, str(e)),
        _BadRequest: lambda r, e: _error(400, str(e)),
        HTTPException: _http_error,  # an unknown path, a wrong method: {"error": …} as every error
    }
    inner = Starlette(routes=routes, lifespan=lifespan, exception_handlers=handlers)
    inner.state.kb = state
    return _Gate(inner, state, rule)


_ = UNSCOPED
