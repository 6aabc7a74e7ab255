"""The agent surface: kbctl's tools over MCP (stdio and streamable HTTP) and a JSON API.

An adapter over ``kbctl.api`` (which never imports it): ``kbctl serve`` and ``kbctl mcp`` call
``serve_http`` and ``serve_stdio``; ``open_kb`` (default ``KnowledgeBase``) makes the pooled
knowledge bases. The tools' algorithms are the library's (``kb.verify_claim``, ``kb.research``).

- ``agents``: ``[agents.NAME]`` → ``Agent`` (namespaces, tools, defaults, tenant, principal)
- ``service``: the warm process (pooled knowledge bases, the query embedder loaded once)
- ``tools``: the six tools, bound to an agent, their output capped and paged
- ``mcp``: an ``MCPServer`` (the official SDK) of an agent's tools
- ``app``: the ASGI app of ``kbctl serve`` (JSON API, /mcp, /healthz, /metrics, bearer tokens)
- ``metrics``: Prometheus metrics
- ``client``: how ``kbctl search`` forwards to a running server (urllib only: it stays import-light)
"""

from __future__ import annotations

from typing import Any, Callable

from ..config import Settings

__all__ = ["serve_http", "serve_stdio"]


def serve_http(
    settings: Settings,
    open_kb: Callable[[Settings], Any] | None = None,
    *,
    host: str | None = None,
    port: int | None = None,
) -> None:
    """Serve HTTP until SIGTERM or Ctrl-C; uvicorn drains requests in flight (``[server] drain_seconds``)."""
    import uvicorn

    from .app import create_app

    srv = settings.data["server"]
    config = uvicorn.Config(
        create_app(settings, open_kb),
        host=host or srv["host"],
        port=int(port or srv["port"]),
        log_level="warning",
        timeout_graceful_shutdown=int(srv["drain_seconds"]),
        lifespan="on",
        access_log=False,
    )
    uvicorn.Server(config).run()


def serve_stdio(settings: Settings, open_kb: Callable[[Settings], Any] | None = None, agent: str | None = None) -> None:
    """Serve MCP over stdin/stdout to one client, as ``[agents.AGENT]`` (unscoped without one)."""
    import anyio

    from .agents import agent_from_settings
    from .mcp import mcp_server
    from .metrics import Metrics
    from .service import Service
    from .tools import Toolbox

    scope = agent_from_settings(settings.data, agent)
    service = Service(settings, open_kb)
    service.warm()
    try:
        anyio.run(mcp_server(Toolbox(service, scope, Metrics())).run_stdio_async)
    finally:
        service.close()
