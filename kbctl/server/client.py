"""``kbctl search`` through a running ``kbctl serve`` (``[server] url`` / ``KBCTL_SERVER``).

urllib only, and nothing heavy imported: the point is a search without loading a model (the CLI's
fast path, ``kbctl.cli.fast``, calls this before typer, rich or ``kbctl.api`` are imported). A
server that cannot be reached (or a search with options it does not take) gives None, and the
caller searches in-process; an answer the server refused (4xx) is the caller's error, as in-process.
A server's hits name their document and chunk by the opaque ids it gives every agent (strings,
``kbctl.ids``), not the raw ids of an in-process search: ``kbctl tenants id-of`` opens one.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.error
import urllib.request
from typing import Any, Sequence

from ..config import ServerSettings, Settings
from ..errors import UsageError
from ..types import Hit, SearchResult

log = logging.getLogger(__name__)

__all__ = ["forward_search", "ask_server", "skip_once"]

_FORWARDED = {"mode", "k", "filters", "per_doc", "fusion", "ef_search", "rerank", "prf", "explain"}
# Servers already found unusable in this process, and why: the next forward_search logs the reason
# once and searches in-process without asking again (the fast path asked, the CLI falls back).
_SKIP: dict[str, str] = {}


class Unusable(Exception):
    """The server could not answer this search (unreachable, or an answer the caller falls back from)."""


def forward_search(
    settings: Settings, query: str, namespace: str | Sequence[str], options: dict[str, Any]
) -> SearchResult | None:
    """The server's answer to this search, or None when it should run in-process (a warning is
    logged when a configured server could not be used)."""
    url = settings.server.url.rstrip("/")
    if url in _SKIP:
        log.warning("%s", _SKIP.pop(url))
        return None
    try:
        return ask_server(settings, query, namespace, options)
    except Unusable as e:
        log.warning("%s", e)
        return None


def skip_once(settings: Settings, reason: str) -> None:
    """The next ``forward_search`` to this server logs ``reason`` and searches in-process."""
    _SKIP[settings.server.url.rstrip("/")] = reason


def ask_server(
    settings: Settings, query: str, namespace: str | Sequence[str], options: dict[str, Any]
) -> SearchResult | None:
    """The server's answer; None when no server is configured or the options are not forwarded;
    ``Unusable`` when it could not answer; ``UsageError`` when it refused the search (4xx)."""
    srv = settings.server
    url = srv.url.rstrip("/")
    given = {k: v for k, v in options.items() if v is not None and v != () and v != [] and v is not False}
    if options.get("rerank") is False:  # --no-rerank is an explicit choice, unlike an absent --explain
        given["rerank"] = False
    if not url or set(given) - _FORWARDED or options.get("principal") is not None:
        return None
    if given.get("k", 0) > srv.max_k or len(query) > srv.max_query_chars:
        return None  # past the server's limits for agents ([server] max_k, max_query_chars): in-process
    body = {
        "raw": True,
        "query": query,
        "namespaces": [namespace] if isinstance(namespace, str) else list(namespace),
        "k": given.pop("k", None),
        "filters": list(given.pop("filters", ()) or ()) or None,
        "options": {k: v for k, v in given.items() if not (k == "mode" and v == "auto")},
    }
    req = urllib.request.Request(
        f"{url}/v1/search",
        json.dumps(body).encode(),
        method="POST",
        # the tenant searched: a server whose token serves another refuses (409), and it runs here
        headers={"Content-Type": "application/json", "Kbctl-Tenant": settings.tenant, **_auth(srv), **_trace()},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return _result(json.loads(resp.read()))
    except urllib.error.HTTPError as e:
        if e.code == 409:
            raise Unusable(f"server at {url} searches another tenant for this token; searching in-process") from None
        if 400 <= e.code < 500 and e.code not in (401, 404, 413):
            raise UsageError(_message(e)) from None
        raise Unusable(f"server at {url} answered {e.code} ({_message(e)}); searching in-process") from None
    except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError) as e:
        reason = getattr(e, "reason", None) or e
        raise Unusable(f"server at {url} not reachable ({reason}); searching in-process") from None


def _auth(srv: ServerSettings) -> dict[str, str]:
    token = os.environ.get(srv.token_env, "") if srv.token_env else ""
    return {"Authorization": f"Bearer {token}"} if token else {}


def _trace() -> dict[str, str]:
    """The caller's trace context (``TRACEPARENT``, ``TRACESTATE``), for the server to continue."""
    pairs = (("traceparent", "TRACEPARENT"), ("tracestate", "TRACESTATE"))
    return {header: os.environ[var] for header, var in pairs if os.environ.get(var)}


def _message(e: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(e.read()).get("error"))
    except (ValueError, OSError, AttributeError):
        return str(e.reason)


def _result(d: dict) -> SearchResult:
    ns = d["namespace"]
    hits = tuple(Hit(**h) for h in d["hits"])
    return SearchResult(
        d["query"],
        (ns,) if isinstance(ns, str) else tuple(ns),
        d["mode"],
        d["strategy"],
        hits,
        d["degraded"],
        tuple(d["notes"]),
        d["details"],
        d.get("withheld", 0),
    )
