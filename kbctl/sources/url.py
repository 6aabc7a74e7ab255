"""HTTP(S) for the fetch stage: URLs and feeds into ``Source``\\ s, and the one GET behind them.

``fetch_url`` is all ``kbctl.fetch`` calls for an http(s) target: it GETs the URL (conditionally,
for a feed it has seen), yields the page or the feed, and with ``follow_links`` the pages that
summary-only entries link to. ``get`` is one GET with the stdlib (``http.client``): redirects, a
timeout, a deadline, a minimum rate, a body-size cap, retries with backoff, and the address policy
of ``kbctl.sources.policy`` checked on every connection, so at every redirect hop and for every
feed link. ``get`` raises ``SourceError`` with a readable message when the URL cannot be fetched::

    refused http://10.0.0.5/: 10.0.0.5 is a private address              (hint: how to allow it)
    refused http://127.0.0.1/x (redirected from http://host/): 127.0.0.1 is a loopback address
    refused file:///etc/passwd (redirected from http://host/): only http and https are followed
    could not reach http://host/: connection refused after 4 tries
    could not reach http://host/: host not found
    could not fetch http://host/x: HTTP 404 Not Found
    could not fetch http://host/x: HTTP 503 Service Unavailable after 4 tries
    could not fetch http://host/x: HTTP 503 Service Unavailable; the server asks to be asked again in 3600 s (Retry-After), past the 60 s kbctl waits
    could not fetch http://host/x: took longer than the 60 s limit (deadline)
    could not fetch http://host/x: sent 12 bytes/s, slower than the 1024 bytes/s minimum (min_rate)
    could not fetch http://host/x: the connection closed before the body ended after 4 tries   (hint: --retry-failed)
    could not fetch http://host/x: the read timed out after 40 of 5000 bytes (nothing came for 20 s) after 4 tries
    could not fetch http://host/x: the connection was lost after 40 bytes (connection reset by peer) after 4 tries
    http://host/big is 31 MB, larger than the 20 MB limit (max_bytes)      (hint: raise max_bytes…)
    http://host/big is larger than the 20 MB limit (max_bytes); stopped reading
    http://host/big is larger than the 20 MB limit (max_bytes) once decompressed
    could not fetch http://host/x.gz: corrupt gzip body (cut short)
    could not fetch http://host/x.zst: zstd data, which kbctl does not read      (hint: zstd -d)
    could not fetch http://host/x.tar.gz: a tar archive, which kbctl does not read   (hint: tar -xf)

A body is read without its Content-Encoding (gzip, deflate); a body that is gzip, bzip2 or xz data
all the same (its magic bytes: a ``.gz``, ``.bz2`` or ``.xz`` file, or a feed gzipped by a
misconfigured server, sent without Content-Encoding) is decompressed too, and a Content-Type that
only said so (``application/gzip``, ``application/x-bzip2``, ``application/x-xz``, octet-stream)
dropped, so that the inner type is found as for any body (the URL without its ``.gz``, ``.bz2`` or
``.xz``, then the bytes). Decompressed, a body keeps to ``max_bytes`` like any other. zstd data is
refused (reading it takes a package kbctl does not depend on), and so is a tar archive, compressed
or not (kbctl reads no archive: unpacked, its folder is ingested).

Connection errors, a body cut short (the connection closed before it ended) or that stalls or is
reset midway (said so, with how much of it came: the server was reached), timeouts, 429 and 5xx
are retried (after the server's Retry-After when it gives one; one longer than
``retry_after_cap`` fails at once, saying so); other 4xx, refusals, a missed deadline or rate, TLS
certificate errors and unknown hosts are not. A 304 is an answer, not an error: ``get`` returns it
with an empty body. The ``*_proxy`` environment variables are not used: through a proxy
the address policy could not see the address connected to.
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
import zlib
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, Callable, Iterable, Iterator, Mapping
from urllib.parse import urldefrag, urljoin, urlsplit, urlunsplit

from ..errors import SourceError
from ..mediatypes import inner_name
from ..textutil.dates import iso_utc
from ..types import ItemError, Source
from . import policy
from .compressed import GZIP_WBITS, Compression, CorruptData, decompress, inflate, is_tar, is_zstd, sniff
from .folder import human_bytes
from .options import FetchOptions, guess_media_type
from .state import FeedState

__all__ = [
    "Response",
    "fetch_url",
    "get",
    "backoff_delay",
    "is_http_url",
    "canonical_url",
    "item_error",
    "MAX_REDIRECTS",
    "MAX_BYTES_HINT",
]

log = logging.getLogger(__name__)

_CHUNK = 64 * 1024
_REDIRECTS = (301, 302, 303, 307, 308)
# the Content-Encodings read (zlib window bits to try: "deflate" is zlib data, or raw from some servers)
_CODINGS = {
    "gzip": (GZIP_WBITS,),
    "x-gzip": (GZIP_WBITS,),
    "deflate": (zlib.MAX_WBITS, -zlib.MAX_WBITS),
}
#: Content-Types that say no more than "compressed" or "bytes": once such a body is decompressed,
#: its type is found anew (from the URL without ``.gz``, ``.bz2`` or ``.xz``, then from its bytes).
_CONTAINER_TYPES = frozenset(
    {
        "application/gzip",
        "application/x-gzip",
        "application/gzip-compressed",
        "application/x-gzip-compressed",
        "application/x-compressed",
        "application/x-bzip2",
        "application/x-bzip",
        "application/x-xz",
        "application/octet-stream",
        "binary/octet-stream",
    }
)
#: Redirects followed in one try before giving up.
MAX_REDIRECTS = 10
#: How to let kbctl read a larger response body.
MAX_BYTES_HINT = "raise max_bytes (in bytes) in the [fetch] table of kbctl.toml"
#: What to do about a URL that failed for now (a long Retry-After, a body cut or stalled midway).
RETRY_LATER_HINT = "run the ingest again later: `kbctl ingest -n NS --retry-failed` fetches what failed"
#: How to give a slow server longer (before ``RETRY_LATER_HINT``).
TIMEOUT_HINT = "raise timeout (in seconds) in the [fetch] table of kbctl.toml for a slow server"

Fetched = Source | ItemError


# -- URLs and feeds into Sources ------------------------------------------------------------------


def fetch_url(
    url: str, opts: FetchOptions, state: FeedState | None = None, follow_links: bool = False
) -> Iterator[Fetched]:
    """One URL: a page, or a feed (conditional on ``state``) and maybe the pages its entries link to."""
    from . import feed

    url = urldefrag(url)[0]
    known = state.get(url) if state is not None else None
    try:
        resp = get(url, opts, _conditional_headers(known))
    except SourceError as e:
        yield item_error(url, e)
        return
    if resp.status == 304:
        log.info("%s: not modified since the last fetch (304), nothing to do", url)
        return
    parsed = None
    if feed.may_be_feed(resp.media_type, resp.url, resp.body):
        parsed = feed.parse_feed(resp.body, resp.url, resp.headers.get("Content-Type"))
    if parsed is None:
        yield _url_source(url, resp, "url")
        return
    extra = {"feed_title": parsed.get("feed", {}).get("title"), "entries": len(parsed.get("entries", ()))}
    yield _url_source(url, resp, "feed", extra)
    etag, last_modified = resp.headers.get("ETag"), resp.headers.get("Last-Modified")
    if state is not None and (etag or last_modified):
        state.set(url, etag, last_modified)
    if follow_links:
        written = lambda: feed.written_ids(resp.body, resp.headers.get("Content-Type"))  # noqa: E731
        yield from _follow(feed.summary_only_links(parsed, resp.url, opts.summary_chars, written), resp.url, opts)


def _follow(links: Iterable[tuple[str, str]], feed_uri: str, opts: FetchOptions) -> Iterator[Fetched]:
    """The pages that summary-only feed entries link to, each as a Source of kind "url"; a link
    that is not http(s) is refused (a feed never makes kbctl read a local file)."""
    for entry_id, link in links:
        if not is_http_url(link):
            why = f"refused {link} (linked from {feed_uri}): only http and https links are followed"
            yield ItemError("fetch", link, "SourceError", why)
            continue
        try:
            resp = get(link, opts)
        except SourceError as e:
            yield item_error(link, e)
            continue
        yield _url_source(link, resp, "url", {"feed_url": feed_uri, "entry_id": entry_id})


def item_error(source: str, e: SourceError) -> ItemError:
    """The ledger record of a failed fetch (a URL, a file, stdin): one line, the hint (if any)
    after the message (an ``ItemError`` has no hint of its own: ``kbctl errors`` and the report
    show the message)."""
    message = f"{e.message}; {e.hint}" if e.hint else e.message
    return ItemError("fetch", source, "SourceError", message)


def _conditional_headers(known: tuple[str | None, str | None] | None) -> dict[str, str]:
    etag, last_modified = known or (None, None)
    headers = {}
    if etag:
        headers["If-None-Match"] = etag
    if last_modified:
        headers["If-Modified-Since"] = last_modified
    return headers


def _url_source(requested: str, resp: Response, kind: str, extra: dict[str, Any] | None = None) -> Source:
    """A Source from a ``Response``; the media type falls back on the URL's suffix."""
    meta = {
        "url": requested,
        "status": resp.status,
        "content_type": resp.headers.get("Content-Type"),
        "charset": resp.charset,
        "etag": resp.headers.get("ETag"),
        "last_modified": resp.headers.get("Last-Modified"),
        "fetched_at": iso_utc(),
        **(extra or {}),
    }
    path = resp.url.split("?", 1)[0]
    if resp.decompressed:
        path = inner_name(path)  # "feed.xml.gz": the type of what it held
    media_type = resp.media_type or guess_media_type(path)
    return Source(uri=canonical_url(resp.url), content=resp.body, media_type=media_type, kind=kind, metadata=meta)


_DEFAULT_PORTS = {"http": 80, "https": 443}


def canonical_url(url: str) -> str:
    """One form per URL, a page's identity: scheme and host in lower case, the default port, the
    fragment and an empty path dropped (``HTTP://Example.COM:80#x`` → ``http://example.com/``)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    userinfo, _, hostport = parts.netloc.rpartition("@")
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    try:
        port = parts.port
        netloc = host if port is None or port == _DEFAULT_PORTS.get(scheme) else f"{host}:{port}"
    except ValueError:  # a port that is not a number: left as written, in lower case
        netloc = hostport.lower()
    netloc = f"{userinfo}@{netloc}" if userinfo else netloc
    path = parts.path or ("/" if netloc else "")
    return urlunsplit((scheme, netloc, path, parts.query, ""))


# -- one GET --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Response:
    """What a GET answered: the final URL (after redirects, without fragment), status, headers, body
    (without its Content-Encoding; ``decompressed`` when it was gzip, bzip2 or xz data without one)."""

    url: str
    status: int
    headers: email.message.Message
    body: bytes
    decompressed: bool = False

    @property
    def media_type(self) -> str | None:
        """The Content-Type without its parameters, lower-cased (``None`` when absent, or when it
        only said "gzip" or "bytes" of a body since decompressed)."""
        ct = self.headers.get("Content-Type")
        media_type = ct.split(";", 1)[0].strip().lower() or None if ct else None
        return None if self.decompressed and media_type in _CONTAINER_TYPES else media_type

    @property
    def charset(self) -> str | None:
        """The ``charset`` parameter of the Content-Type, if any."""
        return self.headers.get_content_charset() if self.headers.get("Content-Type") else None


class _Retry(Exception):
    """A failure worth another try; ``verb`` tells connection problems from HTTP statuses."""

    def __init__(
        self, reason: str, verb: str = "reach", retry_after: float | None = None, hint: str | None = None
    ) -> None:
        super().__init__(reason)
        self.reason, self.verb, self.retry_after, self.hint = reason, verb, retry_after, hint


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
    rules = policy.FetchPolicy.from_options(options)
    tries = 0
    while True:
        tries += 1
        try:
            return _get_once(url, options, rules, dict(headers or {}))
        except _Retry as e:
            if e.retry_after is not None and e.retry_after > options.retry_after_cap:
                # the server's word: a retry before then is refused again (sleeping the cap before
                # each of them cost a batch minutes a URL, to fail all the same)
                raise SourceError(
                    f"could not {e.verb} {url}: {e.reason}; the server asks to be asked again in"
                    f" {e.retry_after:.0f} s (Retry-After), past the {options.retry_after_cap:g} s kbctl waits",
                    hint=RETRY_LATER_HINT,
                ) from None
            if tries > options.retries:
                plural = "try" if tries == 1 else "tries"
                raise SourceError(f"could not {e.verb} {url}: {e.reason} after {tries} {plural}", hint=e.hint) from None
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


def _get_once(url: str, options: FetchOptions, rules: policy.FetchPolicy, headers: dict[str, str]) -> Response:
    """One try: the request and its redirects, all within ``options.deadline``."""
    clock = policy.Clock(options.deadline, options.timeout)
    current = url
    for _ in range(MAX_REDIRECTS + 1):
        answer = _exchange(url, current, options, rules, headers, clock)
        if isinstance(answer, Response):
            return answer
        current = urljoin(current, answer)
        if urlsplit(current).scheme.lower() not in ("http", "https"):
            raise SourceError(f"refused {current} (redirected from {url}): only http and https are followed")
    raise SourceError(f"could not fetch {url}: more than {MAX_REDIRECTS} redirects")


def _exchange(
    url: str,
    current: str,
    options: FetchOptions,
    rules: policy.FetchPolicy,
    headers: dict[str, str],
    clock: policy.Clock,
) -> Response | str:
    """GET ``current`` (``url`` or a hop of its redirects): the ``Response``, or where to go next."""
    scheme, host, port, path = _split(url, current)
    try:
        with closing(_Connection(scheme, host, port, options, rules, clock)) as conn:
            sent = {
                "User-Agent": options.user_agent,
                "Accept": "*/*",
                "Accept-Encoding": "gzip, deflate",
                "Connection": "close",
                **headers,
            }
            conn.request("GET", path, headers=sent)
            with closing(conn.getresponse()) as resp:
                return _answer(url, current, resp, options, clock)
    except policy.Refused as e:
        hop = urldefrag(current)[0]
        where = hop if hop == url else f"{hop} (redirected from {url})"
        raise SourceError(f"refused {where}: {e}", hint=policy.OPT_IN_HINT) from None
    except policy.TooSlow as e:
        raise SourceError(f"could not fetch {url}: {e}") from None
    except http.client.InvalidURL as e:
        raise SourceError(f"could not fetch {url}: invalid URL ({e})") from None
    except (OSError, http.client.HTTPException) as e:
        if isinstance(e, TimeoutError) and clock.bounded:
            raise SourceError(f"could not fetch {url}: {clock.overdue()}") from None
        raise _connection_error(url, e, options) from None


def _split(url: str, current: str) -> tuple[str, str, int, str]:
    """``(scheme, host, port, path?query)`` of ``current`` (``SourceError`` for a malformed URL)."""
    try:
        parts = urlsplit(current)
        port = parts.port
    except ValueError as e:  # "http://[::1", "http://h:port/"
        raise SourceError(f"could not fetch {url}: invalid URL ({e})") from None
    scheme = parts.scheme.lower()
    if not parts.hostname:
        raise SourceError(f"could not fetch {url}: invalid URL (no host)")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return scheme, parts.hostname, port or (443 if scheme == "https" else 80), path


def _answer(
    url: str, current: str, resp: http.client.HTTPResponse, options: FetchOptions, clock: policy.Clock
) -> Response | str:
    """A 2xx (its body read) or a 304 is a ``Response``; a redirect gives its Location; 429 and 5xx
    are retried; anything else is final."""
    final = urldefrag(current)[0]
    location = resp.getheader("Location")
    if resp.status in _REDIRECTS and location:
        return location.strip()
    if resp.status == 304:
        return Response(final, 304, resp.msg, b"")
    if 200 <= resp.status < 300:
        body = _read_capped(resp, final, options.max_bytes, clock)
        body = _decoded(body, resp.getheader("Content-Encoding"), final, options.max_bytes)
        kind = sniff(body)
        if kind is not None:  # gzip, bzip2 or xz data sent as such (a .gz file), or a misconfigured server
            body = _unpacked(body, kind, final, options.max_bytes)
        elif is_zstd(body):
            raise SourceError(
                f"could not fetch {final}: zstd data, which kbctl does not read",
                hint="download it, decompress it (zstd -d FILE) and ingest the file it holds",
            )
        if is_tar(body):  # extract called it a "binary file", hint "exclude other files"
            raise SourceError(
                f"could not fetch {final}: a tar archive, which kbctl does not read",
                hint="download it, unpack it (tar -xf FILE -C DIR) and ingest the folder",
            )
        return Response(final, resp.status, resp.msg, body, kind is not None)
    status = f"HTTP {resp.status} {resp.reason}".rstrip()
    if resp.status == 429 or 500 <= resp.status < 600:
        raise _Retry(status, verb="fetch", retry_after=_retry_after(resp.msg))
    raise SourceError(f"could not fetch {url}: {status}")


def _connection_error(url: str, reason: object, options: FetchOptions) -> Exception:
    """Turn what the HTTP client met under the HTTP layer into a retry or a final ``SourceError``."""
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
    return SourceError(f"could not fetch {url}: {reason}")


def _retry_after(headers: email.message.Message | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date)."""
    value = headers.get("Retry-After") if headers is not None else None
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - datetime.now(UTC)).total_seconds()


def _read_capped(resp: http.client.HTTPResponse, url: str, limit: int, clock: policy.Clock) -> bytes:
    """The body, refusing (by Content-Length, else while reading) anything past ``limit`` bytes.

    A body that ends before its Content-Length is a broken transfer, retried: ``read(n)`` returns
    what arrived when the server closes early, and that part stored would replace the document.
    So is one whose connection stalls (a read that times out) or is reset midway: the server was
    reached and answered, so the message says how much of the body came, not "could not reach".
    """
    length = (resp.getheader("Content-Length") or "").strip()
    if length.isascii() and length.isdigit() and int(length) > limit:
        raise SourceError(
            f"{url} is {human_bytes(int(length))}, larger than the {human_bytes(limit)} limit (max_bytes)",
            hint=MAX_BYTES_HINT,
        )
    chunks, total = [], 0
    try:
        while chunk := resp.read1(_CHUNK):  # read1: what came before a stall or a reset is counted
            total += len(chunk)
            if total > limit:
                raise SourceError(
                    f"{url} is larger than the {human_bytes(limit)} limit (max_bytes); stopped reading",
                    hint=MAX_BYTES_HINT,
                )
            chunks.append(chunk)
    except http.client.IncompleteRead:  # a chunked body whose connection closed before its last chunk
        raise _Retry(_CUT_SHORT, verb="fetch", hint=RETRY_LATER_HINT) from None
    except OSError as e:
        if isinstance(e, TimeoutError) and clock.bounded:
            raise  # the try's deadline cut the wait short: _exchange says so
        raise _lost(e, total, resp.length, clock.wait) from None
    if resp.length:  # bytes the Content-Length promised that never came (None without one)
        raise _Retry(f"{_CUT_SHORT} ({total} of {total + resp.length} bytes)", verb="fetch", hint=RETRY_LATER_HINT)
    return b"".join(chunks)


def _lost(e: OSError, got: int, left: int | None, timeout: float) -> _Retry:
    """The retry of a body whose read timed out, or whose connection was lost, after ``got`` bytes
    (``left`` more promised by its Content-Length; ``None`` without one)."""
    came = f"{got} of {got + left} bytes" if left else f"{got} bytes"
    if isinstance(e, TimeoutError):
        reason = f"the read timed out after {came} (nothing came for {timeout:g} s)"
        return _Retry(reason, verb="fetch", hint=f"{TIMEOUT_HINT}, or {RETRY_LATER_HINT}")
    why = e.strerror or str(e) or type(e).__name__
    return _Retry(
        f"the connection was lost after {came} ({why[:1].lower()}{why[1:]})", verb="fetch", hint=RETRY_LATER_HINT
    )


# the server was reached and answered: "could not reach … connection broken (IncompleteRead)" misled
_CUT_SHORT = "the connection closed before the body ended"


def _decoded(body: bytes, coding: str | None, url: str, limit: int) -> bytes:
    """The body without its Content-Encoding, decoded to at most ``limit`` bytes.

    A server may compress a body unasked (a request without Accept-Encoding accepts any coding), and
    one kept compressed was refused as "binary file (… application/gzip)"; so gzip and deflate are
    asked for and read, bounded like the body itself (a small bomb stops at the limit). Another
    coding (br, zstd) is an error, never its bytes stored as the page.
    """
    coding = (coding or "").strip().lower()
    if coding in ("", "identity"):
        return body
    if coding not in _CODINGS:
        raise SourceError(f"could not fetch {url}: the body is compressed as {coding!r}, which kbctl does not read")
    return _inflated(body, coding, url, limit)


def _unpacked(body: bytes, kind: Compression, url: str, limit: int) -> bytes:
    """A body of compressed data (gzip, bzip2, xz by its magic bytes) decompressed, refused past
    ``limit`` bytes as ``_inflated`` refuses a Content-Encoding's."""
    try:
        out = decompress(body, kind, limit)
    except CorruptData as e:
        raise SourceError(f"could not fetch {url}: corrupt {kind.name} body ({e})") from None
    if out is None:
        raise SourceError(f"could not fetch {url}: corrupt {kind.name} body (cut short)")
    if len(out) > limit:
        raise SourceError(
            f"{url} is larger than the {human_bytes(limit)} limit (max_bytes) once decompressed", hint=MAX_BYTES_HINT
        )
    return out


def _inflated(body: bytes, coding: str, url: str, limit: int) -> bytes:
    """``body`` decompressed (``coding`` a key of ``_CODINGS``), refused past ``limit`` bytes: the
    output is never let grow past ``limit + 1``, so a bomb costs no more memory than the limit."""
    reason = "cut short"
    for wbits in _CODINGS[coding]:
        try:
            out = inflate(body, wbits, limit)
        except zlib.error as e:
            reason = str(e)
            continue
        if out is not None and len(out) > limit:
            raise SourceError(
                f"{url} is larger than the {human_bytes(limit)} limit (max_bytes) once decompressed",
                hint=MAX_BYTES_HINT,
            )
        if out is not None:
            return out
    raise SourceError(f"could not fetch {url}: corrupt {coding} body ({reason})")


# -- the connection ---------------------------------------------------------------------------------


class _Connection(http.client.HTTPConnection):
    """An HTTP or HTTPS connection made by ``policy.connect`` (so only to an allowed address),
    whose socket keeps to the try's deadline and the minimum rate."""

    def __init__(
        self, scheme: str, host: str, port: int, options: FetchOptions, rules: policy.FetchPolicy, clock: policy.Clock
    ) -> None:
        super().__init__(host, port, timeout=options.timeout)
        self.default_port = 443 if scheme == "https" else 80  # the Host header names only other ports
        self._tls, self._options, self._rules, self._clock = scheme == "https", options, rules, clock

    def connect(self) -> None:
        sock = policy.connect(self.host, self.port, self._rules, self._clock.timeout())
        try:
            if self._tls:
                sock.settimeout(self._clock.timeout())
                sock = _tls_context().wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise
        self.sock = policy.MeteredSocket(sock, self._clock, self._options.min_rate, self._options.min_rate_grace)


@lru_cache(maxsize=1)
def _tls_context() -> ssl.SSLContext:
    return ssl.create_default_context()
