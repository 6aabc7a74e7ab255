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

import contextlib
import errno
import math
import signal
import socket
import threading
from typing import Any, Callable, Iterator

from .. import telemetry
from ..config import Settings
from ..errors import KbctlError

__all__ = ["serve_http", "serve_stdio"]


def serve_http(
    settings: Settings,
    open_kb: Callable[[Settings], Any] | None = None,
    *,
    host: str | None = None,
    port: int | None = None,
    on_listening: Callable[[str], None] | None = None,
) -> None:
    """Serve HTTP until SIGTERM or Ctrl-C; uvicorn drains requests in flight (``[server] drain_seconds``).

    ``port`` 0 (or ``[server] port = 0``) is a free port the system picks; ``on_listening`` is
    called with the URL, its port the real one, once the server takes connections."""
    import uvicorn

    from .app import create_app
    from .guard import guarded_protocol

    srv = settings.server
    host = host or srv.host
    port = srv.port if port is None else port
    sockets = _bind(host, port)  # bound, not listening: a connection is refused until the server is up
    try:
        app = create_app(settings, open_kb, host=host, warm=False)
        # warmed here, not in the app's lifespan: a tenant that does not exist (or was deleted) is the
        # error's one line and exit code, where uvicorn printed the lifespan's traceback and exited 3
        try:
            app.state.service.warm()
        except BaseException:
            app.state.service.close()
            raise
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            timeout_graceful_shutdown=srv.drain_seconds,
            lifespan="on",
            access_log=False,
            # slow clients: a deadline on each request's headers (the body's is the app's: [server] body_timeout)
            # the limits were checked when the settings loaded ([server], kbctl.config.sections)
            http=guarded_protocol(float(srv.header_timeout)),
            timeout_keep_alive=math.ceil(srv.keep_alive_timeout),  # uvicorn takes whole seconds: 0.5 is 1, not 0
            # uvicorn answers 503 once this many connections (the one asking included) are open
            limit_concurrency=srv.max_connections + 1,
        )
        url = _url(host, sockets[0].getsockname()[1])

        class _Server(uvicorn.Server):
            async def startup(self, sockets: list[socket.socket] | None = None) -> None:
                await super().startup(sockets)
                if self.started and on_listening is not None:
                    on_listening(url)

        with _sigterm_ends_cleanly():
            _Server(config).run(sockets=sockets)
    finally:
        for s in sockets:
            s.close()


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


@contextlib.contextmanager
def _sigterm_ends_cleanly() -> Iterator[None]:
    """SIGTERM is how a supervisor stops the server: once uvicorn has drained, exit 0.

    uvicorn catches SIGTERM, drains, restores the handler it found and raises the signal again;
    with the default handler the process died of it (143), so every ordinary stop read as a
    failure. The handler it finds is this no-op; a second SIGTERM during the drain is uvicorn's."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _bind(host: str, port: int) -> list[socket.socket]:
    """Bind every address ``host`` has, as asyncio's server would, on one port: the sockets uvicorn
    then listens on. Port 0 is the one the system picks for the first address, the others' too.

    uvicorn logged a bind error and exited 3, which for kbctl means a check did not hold. Here each
    is one line with a hint: a bind this machine refuses (the port in use, an address that is not
    this machine's, a port it may not take) is a runtime failure (exit 1, ``KbctlError``), a host
    name that does not resolve a name that does not exist (exit 2, ``UsageError``)."""
    from ..errors import UsageError

    where = f"{host}:{port}"
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise UsageError(
            f"cannot listen on {where}: {e.strerror}",
            hint="--host (or [server] host) names an address or a host name of this machine",
        ) from None
    for attempt in range(5):
        bound: list[socket.socket] = []
        chosen = port
        try:
            for family, kind, proto, _, address in dict.fromkeys(addresses):
                s = socket.socket(family, kind, proto)
                bound.append(s)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's server does
                if family == socket.AF_INET6:
                    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                s.bind((address[0], chosen, *address[2:]))
                chosen = s.getsockname()[1]
            return bound
        except OSError as e:
            for s in bound:
                s.close()
            # a port the system picked for one address may be taken on another: pick again
            if not (port == 0 and len(bound) > 1 and e.errno == errno.EADDRINUSE and attempt < 4):
                raise _bind_refused(f"{host}:{chosen}", chosen, e.errno, e.strerror) from None
    raise AssertionError("unreachable")


def _bind_refused(where: str, port: int, code: int | None, reason: str | None) -> KbctlError:
    """The one-line error of a bind the machine refused (``_bind``): exit 1, a hint by cause."""
    another = f"choose another port with --port or [server] port (now {port})"
    if code == errno.EADDRINUSE:
        why = "the port is in use"
        hint = f"another process listens there (another kbctl serve?): stop it, or {another}"
    elif code == errno.EADDRNOTAVAIL:
        why = "not an address of this machine"
        hint = "listen on one of this machine's addresses (`ip addr` lists them): --host, or [server] host"
    elif code == errno.EACCES:
        why = "permission denied"
        hint = f"a port below 1024 needs privileges: {another}"
    else:
        why = reason or "the system refused to bind it"
        hint = f"check --host and --port ([server] host and port): {another}"
    return KbctlError(f"cannot listen on {where}: {why}", hint=hint)


def serve_stdio(settings: Settings, open_kb: Callable[[Settings], Any] | None = None, agent: str | None = None) -> None:
    """Serve MCP over stdin/stdout to one client, as ``[agents.AGENT]`` (unscoped without one)."""
    import anyio

    from .agents import agent_from_settings
    from .mcp import mcp_server
    from .metrics import Metrics
    from .service import Service
    from .tools import Toolbox

    scope = agent_from_settings(settings, agent)
    telemetry.configure(settings.telemetry)  # before the first request: the MCP SDK's spans are recorded too
    service = Service(settings, open_kb)
    service.warm()
    try:
        anyio.run(mcp_server(Toolbox(service, scope, Metrics())).run_stdio_async)
    finally:
        service.close()
