"""``kbctl search`` through a running ``kbctl serve`` (``[server] url`` / ``KBCTL_SERVER``).

urllib only, and nothing heavy imported: the point is a search without loading a model. A server
that cannot be reached (or a search with options it does not take) gives None, and the caller
searches in-process; an answer the server refused (4xx) is the caller's error, as in-process.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.error
import urllib.request
from typing import Any, Sequence

from ..config import Settings
from ..errors import UsageError
from ..types import Hit, SearchResult

log = logging.getLogger(__name__)

__all__ = ["forward_search"]

_FORWARDED = {"mode", "k", "filters", "per_doc", "fusion", "ef_search", "rerank", "prf", "explain"}


def forward_search(
    settings: Settings, query: str, namespace: str | Sequence[str], options: dict[str, Any]
) -> SearchResult | None:
    """The server's answer to this search, or None when it should run in-process."""
    srv = settings.data["server"]
    url = str(srv["url"]).rstrip("/")
    given = {k: v for k, v in options.items() if v not in (None, (), [], False)}
    if not url or set(given) - _FORWARDED or options.get("principal") is not None:
        return None
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
        headers={"Content-Type": "application/json", **_auth(srv)},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return _result(json.loads(resp.read()))
    except urllib.error.HTTPError as e:
        if 400 <= e.code < 500 and e.code not in (401, 404, 413):
            raise UsageError(_message(e)) from None
        log.warning("server at %s answered %s (%s); searching in-process", url, e.code, _message(e))
    except (urllib.error.URLError, OSError, ValueError) as e:
        log.info("server at %s not reachable (%s); searching in-process", url, e)
    return None


def _auth(srv) -> dict[str, str]:
    token = os.environ.get(str(srv["token_env"]), "") if srv["token_env"] else ""
    return {"Authorization": f"Bearer {token}"} if token else {}


def _message(e: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(e.read()).get("error"))
    except (ValueError, OSError, AttributeError):
        return e.reason


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
