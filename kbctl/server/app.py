"""``kbctl serve``: one ASGI app (Starlette, served by uvicorn) with

- ``/mcp``: MCP over streamable HTTP (the official SDK), one ``MCPServer`` per agent;
- ``/v1/search``, ``/v1/tools/{name}``, ``/v1/documents/{id}``, ``/v1/namespaces``, ``/v1/feedback``:
  the same tools as plain JSON (errors: ``{"error": message}`` with a 4xx or 5xx status);
- ``/healthz`` and ``/metrics`` (Prometheus), without a token.

Every other request carries ``Authorization: Bearer <token>`` of an agent (``[server]
require_token``); the token picks the agent, the agent its namespaces and tools.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from typing import Any

import anyio
from pydantic import ValidationError, validate_call
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ..config import Settings
from ..errors import KbctlError
from .agents import TOOLS, UNSCOPED, Agent, agent_from_settings, unavailable
from .metrics import Metrics
from .service import CANCEL, Cancel, Service
from .tools import Toolbox, error_status

log = logging.getLogger(__name__)

__all__ = ["create_app"]

_TOKEN_TTL = 30.0  # seconds a token's agent is remembered: a revoked token stops working within this
_RAW_OPTIONS = ("mode", "per_doc", "fusion", "ef_search", "rerank", "prf", "explain")
_OPEN = ("/healthz", "/metrics")


class _State:
    def __init__(self, settings: Settings, open_kb) -> None:
        self.settings = settings
        self.service = Service(settings, open_kb)
        self.metrics = Metrics()
        self.metrics.ledger(self._ledger)
        self.tokens: dict[str, tuple[float, Agent | None]] = {}
        self.mcp_apps: dict[Agent, Any] = {}
        self.lock = anyio.Lock()
        self.tg: Any = None

    def _ledger(self) -> dict:
        with self.service.kb() as kb:
            return kb.stats()

    def agent(self, name: str | None, tenant: str | None = None) -> Agent:
        a = agent_from_settings(self.settings.data, name)
        return a if a.tenant or not tenant else Agent(a.name, a.namespaces, a.tools, a.k, a.budget, tenant, a.principal)

    async def authenticate(self, scope: Scope) -> Agent | None:
        header = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
        token = header[7:].strip() if header[:7].lower() == "bearer " else ""
        if not token:
            return None if self.settings.data["server"]["require_token"] else self.agent(None)
        hit = self.tokens.get(token)
        if hit is not None and time.monotonic() - hit[0] < _TOKEN_TTL:
            return hit[1]
        owner = await anyio.to_thread.run_sync(self._lookup, token)
        agent = None
        if owner is not None and owner[1] in self.settings.data.get("agents", {}):
            agent = self.agent(owner[1], owner[0])
        if len(self.tokens) > 10000:
            self.tokens.clear()
        self.tokens[token] = (time.monotonic(), agent)
        return agent

    def _lookup(self, token: str) -> tuple[str, str] | None:
        with self.service.kb() as kb:
            return kb.agent_of_token(token)

    def toolbox(self, agent: Agent) -> Toolbox:
        return Toolbox(self.service, agent, self.metrics)

    async def mcp_app(self, agent: Agent):
        """The MCP app of ``agent`` (made on its first request, its session manager run by the lifespan)."""
        async with self.lock:
            app = self.mcp_apps.get(agent)
            if app is None:
                from .mcp import mcp_server

                server = mcp_server(self.toolbox(agent))
                app = server.streamable_http_app(
                    stateless_http=True,
                    json_response=True,
                    host="127.0.0.1",
                    max_request_body_size=int(self.settings.data["server"]["max_body_bytes"]),
                )
                await self.tg.start(_run_manager, server.session_manager)
                self.mcp_apps[agent] = app
        return app


async def _run_manager(manager, *, task_status=anyio.TASK_STATUS_IGNORED) -> None:
    async with manager.run():
        task_status.started()
        await anyio.sleep_forever()


def _error(status: int, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers or None)


async def _body(request: Request) -> dict:
    limit = int(request.app.state.kb.settings.data["server"]["max_body_bytes"])
    data = b""
    async for part in request.stream():
        data += part
        if len(data) > limit:
            raise _TooLarge(limit)
    if not data:
        return {}
    try:
        obj = json.loads(data)
    except ValueError:
        raise _BadRequest("the request body is not JSON") from None
    if not isinstance(obj, dict):
        raise _BadRequest("the request body must be a JSON object")
    return obj


class _TooLarge(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body is larger than {limit} bytes")


class _BadRequest(Exception):
    pass


async def _call(request: Request, tool: str, args: dict) -> Response:
    """Run ``tool`` with ``args`` for the request's agent, in a worker thread; cancelled if the client leaves."""
    state: _State = request.app.state.kb
    agent: Agent = request.scope["kbctl.agent"]
    box = state.toolbox(agent)
    if (tool if tool != "search_raw" else "search_knowledge") not in agent.tools or tool not in (*TOOLS, "search_raw"):
        return _error(404, str(unavailable("tool", tool)))

    def run():
        if tool == "search_raw":
            return box.search_result(**args).to_json()
        return validate_call(getattr(box, tool))(**args)

    return await _in_thread(request, tool, run)


async def _in_thread(request: Request, tool: str, run) -> Response:
    state: _State = request.app.state.kb
    cancel = Cancel()
    reset = CANCEL.set(cancel)
    out: dict[str, Any] = {}
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_watch_disconnect, request, cancel, tg.cancel_scope)
            try:
                out["result"] = await anyio.to_thread.run_sync(run)
            except ValidationError as e:
                out["error"] = (400, _validation_message(e))
            except KbctlError as e:
                out["error"] = (error_status(e), e.message if hasattr(e, "message") else str(e))
            except Exception as e:  # an unexpected failure: logged here, a 500 without internals there
                log.exception("tool %s failed", tool)
                state.metrics.errors.labels(tool=tool, error=type(e).__name__).inc()
                out["error"] = (500, "internal error")
            tg.cancel_scope.cancel()
    finally:
        CANCEL.reset(reset)
    if cancel.cancelled:
        return _error(499, "client closed request")
    if "error" in out:
        return _error(*out["error"])
    return JSONResponse(out["result"])


async def _watch_disconnect(request: Request, cancel: Cancel, scope) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            await anyio.to_thread.run_sync(cancel.cancel)
            return


def _validation_message(e: ValidationError) -> str:
    parts = []
    for err in e.errors():
        where = ".".join(str(p) for p in err["loc"]) or "body"
        parts.append(f"{where}: {err['msg']}")
    return "invalid arguments: " + "; ".join(parts[:5])


# -- routes ------------------------------------------------------------------------------------------


async def search(request: Request) -> Response:
    args = await _body(request)
    if args.pop("raw", False):
        extra = args.pop("options", None) or {}
        if not isinstance(extra, dict) or set(extra) - set(_RAW_OPTIONS):
            return _error(400, f"options may hold only {', '.join(_RAW_OPTIONS)}")
        bad = set(args) - {"query", "namespaces", "k", "filters"}
        if bad:
            return _error(400, f"unknown argument {sorted(bad)[0]!r}")
        if "query" not in args:
            return _error(400, "invalid arguments: query: Field required")
        return await _call(request, "search_raw", {**args, **extra})
    return await _call(request, "search_knowledge", args)


async def tool(request: Request) -> Response:
    return await _call(request, request.path_params["name"], await _body(request))


async def document(request: Request) -> Response:
    q = request.query_params
    args: dict[str, Any] = {"doc_id": request.path_params["doc_id"]}
    for key in ("around_chunk", "window", "limit", "cursor", "snippets"):
        if key in q:
            args[key] = q[key]
    return await _call(request, "get_document", args)


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
    for prof, seconds in state.service.model_load_seconds.items():
        state.metrics.model_load.labels(profile=prof).set(seconds)
    body = await anyio.to_thread.run_sync(generate_latest, state.metrics.registry)
    return PlainTextResponse(body, media_type=CONTENT_TYPE_LATEST)


class _Gate:
    """Authentication, body-size limit and the /mcp dispatch, in front of the routes."""

    def __init__(self, app: Starlette, state: _State) -> None:
        self.app, self.state = app, state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in _OPEN:
            return await self.app(scope, receive, send)
        limit = int(self.state.settings.data["server"]["max_body_bytes"])
        length = dict(scope.get("headers") or []).get(b"content-length", b"0")
        if length.isdigit() and int(length) > limit:
            return await _error(413, f"the request body is larger than {limit} bytes")(scope, receive, send)
        agent = await self.state.authenticate(scope)
        if agent is None:
            self.state.metrics.http.labels(route="auth", status="401").inc()
            return await _error(401, "missing or invalid bearer token", **{"WWW-Authenticate": "Bearer"})(
                scope, receive, send
            )
        scope["kbctl.agent"] = agent
        if scope["path"].rstrip("/") == "/mcp":
            app = await self.state.mcp_app(agent)
            return await app(scope, receive, send)
        await self.app(scope, receive, send)


def create_app(settings: Settings, open_kb=None, *, warm: bool = True):
    """The ASGI app of ``kbctl serve`` over knowledge bases ``open_kb(settings)`` makes (``KnowledgeBase``)."""
    state = _State(settings, open_kb)

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
    handlers = {_TooLarge: lambda r, e: _error(413, str(e)), _BadRequest: lambda r, e: _error(400, str(e))}
    inner = Starlette(routes=routes, lifespan=lifespan, exception_handlers=handlers)
    inner.state.kb = state
    return _Gate(inner, state)


_ = UNSCOPED
