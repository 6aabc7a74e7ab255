"""The edges of ``kbctl serve`` that come before any route: which Host and Origin a request may
carry, how deep its JSON may nest, and how long a client may take to send its headers.

- ``HostRule``: one rule for every route (``/v1``, ``/mcp``, ``/metrics``, ``/healthz``) in every
  mode. A request's ``Host`` must name ``localhost``, ``127.0.0.1``, ``[::1]``, the ``--host`` the
  server listens on, or a name in ``[server] allowed_hosts``; when the server listens on every
  address (``0.0.0.0`` or ``::``) any IP-address literal is accepted too (a DNS-rebinding request
  always carries the attacker's *name*). An ``Origin``, when sent, must name one of the same hosts
  (IP literals other than loopback are not enough): a web page elsewhere cannot drive the server.
- ``body_problem``: why a request body is refused: a POST must be ``application/json`` (a web
  page's "simple" ``text/plain`` request cannot reach a tool) and nest at most ``MAX_JSON_DEPTH``
  levels (``json_depth`` reads that without recursion, before parsing).
- ``guarded_protocol``: uvicorn's h11 protocol with a deadline on a request's headers, counted
  from the connection (or from a kept-alive connection's first byte of its next request).
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Any, Iterable

from ..errors import echo

__all__ = [
    "HostRule",
    "json_depth",
    "body_problem",
    "replay_body",
    "guarded_protocol",
    "LOOPBACK_NAMES",
    "MAX_JSON_DEPTH",
]

log = logging.getLogger(__name__)

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_WILDCARD = ("0.0.0.0", "::", "")
MAX_JSON_DEPTH = 64  # a request body nested deeper is refused (400) before it is parsed


def _split_host(value: str) -> str:
    """The host part of a ``Host`` header or an origin's authority, lowercase, without port or brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else value
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class HostRule:
    """Which ``Host`` and ``Origin`` headers a request may carry (see the module docstring)."""

    def __init__(self, listen: str, allowed: Iterable[str] = ()) -> None:
        self.listen = _split_host(listen)
        self.wildcard = self.listen in _WILDCARD
        names = {*LOOPBACK_NAMES, *(_split_host(a) for a in allowed if a.strip())}
        if not self.wildcard:
            names.add(self.listen)
        self.names = frozenset(names)

    def describe(self) -> str:
        """What the rule accepts, in one line (for the refusal and the startup log)."""
        names = ", ".join(sorted(self.names))
        return f"{names}{' or any IP address' if self.wildcard else ''} (add names to [server] allowed_hosts)"

    def host_ok(self, host: str) -> bool:
        h = _split_host(host)
        return bool(h) and (h in self.names or (self.wildcard and _is_ip(h)))

    def origin_ok(self, origin: str) -> bool:
        scheme, sep, rest = origin.strip().partition("://")
        if not sep or scheme.lower() not in ("http", "https"):
            return False
        return _split_host(rest.split("/", 1)[0]) in self.names

    def check(self, headers: dict[bytes, bytes]) -> str | None:
        """None when the request may go on, else the one-line reason it may not."""
        host = headers.get(b"host", b"").decode("latin-1")
        if not self.host_ok(host):
            return f"Host {echo(host)} is not served here; accepted: {self.describe()}"
        origin = headers.get(b"origin")
        if origin is not None and not self.origin_ok(origin.decode("latin-1")):
            return f"Origin {echo(origin.decode('latin-1'))} may not call this server; accepted: {self.describe()}"
        return None


def json_depth(data: bytes, cap: int) -> int:
    """The deepest nesting of ``[``/``{`` in JSON text (strings skipped), stopping once past ``cap``."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > cap:
                    return deepest
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return deepest


def body_problem(method: str, headers: dict[bytes, bytes], body: bytes) -> tuple[int, str] | None:
    """Why a request body is refused (status, reason), or None: POST bodies are JSON, not too deep."""
    if method != "POST":
        return None
    kind = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
    if kind != b"application/json":
        shown = kind.decode("latin-1")[:60] or "none"
        return 415, f"the request body must be sent as Content-Type: application/json (got {shown})"
    if json_depth(body, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        return 400, f"the request body nests deeper than {MAX_JSON_DEPTH} levels"
    return None


def replay_body(body: bytes, receive: Any) -> Any:
    """A ``receive`` that hands the app the body already read, then waits for the client to leave."""
    sent = False

    async def replay() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


_TIMEOUT_ANSWER = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"content-length: %d\r\n\r\n%s"
)


def guarded_protocol(header_seconds: float) -> type:
    """uvicorn's h11 protocol whose requests must send their headers within ``header_seconds``:
    a connection still sending them then gets a 408 and is closed (a slowloris is cut off)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(H11Protocol):
        _header_timer: Any = None

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._header_timer is None and self.conn.their_state is h11.IDLE:
                self._arm()  # the first byte of a kept-alive connection's next request
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:
                self._disarm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._header_timer = self.loop.call_later(header_seconds, self._headers_late)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_late(self) -> None:
            self._header_timer = None
            if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
                return
            peer = f"{self.client[0]}:{self.client[1]}" if self.client else "?"
            log.info("closed a connection from %s: no complete request headers within %gs", peer, header_seconds)
            body = b'{"error": "request headers not received within %gs"}' % header_seconds
            self.transport.write(_TIMEOUT_ANSWER % (len(body), body))
            self.transport.close()

    return GuardedH11Protocol
