"""One HTTP(S) GET with the stdlib: redirects, a timeout, a body-size cap, retries with backoff.

``get`` raises ``SourceError`` with a readable message when the URL cannot be fetched::

    could not reach http://host/: connection refused after 4 tries
    could not reach http://host/: host not found
    could not fetch http://host/x: HTTP 404 Not Found
    could not fetch http://host/x: HTTP 503 Service Unavailable after 4 tries
    http://host/big is 31 MB, larger than the 20 MB limit (max_bytes)
    http://host/big is larger than the 20 MB limit (max_bytes); stopped reading

Connection errors, timeouts, 429 and 5xx are retried; other 4xx, TLS certificate errors and
unknown hosts are not. A 304 is an answer, not an error: ``get`` returns it with an empty body.
"""

from __future__ import annotations

import email.message
import email.utils
import http.client
import logging
import random
import socket
import ssl
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable, Mapping
from urllib.parse import urldefrag, urlsplit

from ..errors import SourceError
from .folder import human_bytes
from .options import FetchOptions

__all__ = ["Response", "get", "backoff_delay", "is_http_url"]

log = logging.getLogger(__name__)

_CHUNK = 64 * 1024


@dataclass(frozen=True)
class Response:
    """What a GET answered: the final URL (after redirects, without fragment), status, headers, body."""

    url: str
    status: int
    headers: email.message.Message
    body: bytes

    @property
    def media_type(self) -> str | None:
        """The Content-Type without its parameters, lower-cased (``None`` when absent)."""
        ct = self.headers.get("Content-Type")
        return ct.split(";", 1)[0].strip().lower() or None if ct else None

    @property
    def charset(self) -> str | None:
        """The ``charset`` parameter of the Content-Type, if any."""
        return self.headers.get_content_charset() if self.headers.get("Content-Type") else None


class _Retry(Exception):
    """A failure worth another try; ``verb`` tells connection problems from HTTP statuses."""

    def __init__(self, reason: str, verb: str = "reach", retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason, self.verb, self.retry_after = reason, verb, retry_after


def is_http_url(target: str) -> bool:
    """Whether ``target`` is an http(s) URL."""
    return target[:8].lower().startswith(("http://", "https://"))


def get(
    url: str,
    options: FetchOptions,
    headers: Mapping[str, str] | None = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> Response:
    """GET ``url``, following redirects and retrying transient failures (raises ``SourceError``)."""
    tries = 0
    while True:
        tries += 1
        try:
            return _get_once(url, options, dict(headers or {}))
        except _Retry as e:
            if tries > options.retries:
                plural = "try" if tries == 1 else "tries"
                raise SourceError(f"could not {e.verb} {url}: {e.reason} after {tries} {plural}") from None
            delay = backoff_delay(tries, options, e.retry_after)
            log.info("%s: %s; try %d of %d in %.2f s", url, e.reason, tries + 1, options.retries + 1, delay)
            sleep(delay)


def backoff_delay(tries: int, options: FetchOptions, retry_after: float | None = None) -> float:
    """Seconds to wait after the ``tries``-th failed try: the server's Retry-After (capped), else
    exponential backoff ``base * factor ** (tries - 1)`` plus up to ``jitter`` of it at random."""
    if retry_after is not None:
        return max(0.0, min(retry_after, options.retry_after_cap))
    delay = options.backoff_base * options.backoff_factor ** (tries - 1)
    return delay + random.uniform(0, delay * options.backoff_jitter)


def _get_once(url: str, options: FetchOptions, headers: dict[str, str]) -> Response:
    req = urllib.request.Request(url, headers={"User-Agent": options.user_agent, "Accept": "*/*", **headers})
    try:
        with _opener().open(req, timeout=options.timeout) as resp:
            final = urldefrag(resp.geturl())[0]
            return Response(final, resp.status, resp.headers, _read_capped(resp, final, options.max_bytes))
    except urllib.error.HTTPError as e:
        with e:
            return _http_error(url, e)
    except urllib.error.URLError as e:
        raise _connection_error(url, e.reason, options) from None
    except (OSError, http.client.HTTPException) as e:  # while reading the body
        raise _connection_error(url, e, options) from None
    except ValueError as e:  # a malformed URL ("http://[::1")
        raise SourceError(f"could not fetch {url}: invalid URL ({e})") from None


def _http_error(url: str, e: urllib.error.HTTPError) -> Response:
    """A 304 is returned; 429 and 5xx are retried; anything else is final."""
    if e.code == 304:
        return Response(urldefrag(e.geturl() or url)[0], 304, e.headers, b"")
    status = f"HTTP {e.code} {e.reason}".rstrip()
    if e.code == 429 or 500 <= e.code < 600:
        raise _Retry(status, verb="fetch", retry_after=_retry_after(e.headers))
    raise SourceError(f"could not fetch {url}: {status}")


def _connection_error(url: str, reason: object, options: FetchOptions) -> Exception:
    """Turn what urllib met under the HTTP layer into a retry or a final ``SourceError``."""
    if isinstance(reason, ConnectionRefusedError):
        return _Retry("connection refused")
    if isinstance(reason, (TimeoutError, socket.timeout)):
        return _Retry(f"timed out after {options.timeout:g} s")
    if isinstance(reason, socket.gaierror):
        if reason.errno == socket.EAI_NONAME:
            return SourceError(f"could not reach {url}: host not found")
        return _Retry(f"host lookup failed ({reason.strerror})")
    if isinstance(reason, ssl.SSLCertVerificationError):
        return SourceError(f"could not reach {url}: TLS certificate not trusted ({reason.verify_message})")
    if isinstance(reason, ssl.SSLError):
        return SourceError(f"could not reach {url}: TLS error ({reason.reason or reason})")
    if isinstance(reason, http.client.HTTPException):
        return _Retry(f"connection broken ({type(reason).__name__})")
    if isinstance(reason, OSError):
        return _Retry(reason.strerror or str(reason) or type(reason).__name__)
    return SourceError(f"could not fetch {url}: {reason}")  # e.g. "unknown url type"


def _retry_after(headers: email.message.Message | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date)."""
    value = (headers or {}).get("Retry-After")
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return (when - datetime.now(timezone.utc)).total_seconds()


def _read_capped(resp: http.client.HTTPResponse, url: str, limit: int) -> bytes:
    """The body, refusing (by Content-Length, else while reading) anything past ``limit`` bytes."""
    length = resp.headers.get("Content-Length", "").strip()
    if length.isdigit() and int(length) > limit:
        raise SourceError(f"{url} is {human_bytes(int(length))}, larger than the {human_bytes(limit)} limit (max_bytes)")
    chunks, total = [], 0
    while chunk := resp.read(_CHUNK):
        total += len(chunk)
        if total > limit:
            raise SourceError(f"{url} is larger than the {human_bytes(limit)} limit (max_bytes); stopped reading")
        chunks.append(chunk)
    return b"".join(chunks)


class _RedirectHandler(urllib.request.HTTPRedirectHandler):
    """Follow redirects to http(s) only (urllib would also follow one to ftp://)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001 - urllib's signature
        if urlsplit(newurl).scheme.lower() not in ("http", "https"):
            raise urllib.error.HTTPError(newurl, code, f"redirect to {newurl} refused (not http/https)", headers, fp)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _opener() -> urllib.request.OpenerDirector:
    # built per request: ProxyHandler reads the *_proxy environment variables when it is made
    return urllib.request.build_opener(_RedirectHandler)

