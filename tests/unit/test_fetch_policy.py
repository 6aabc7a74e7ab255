"""The fetch policy: which addresses a URL may reach, per-request deadline and minimum rate.

Only loopback exists on the test machine, so "public" addresses appear only through a fake
resolver; every server here listens on 127.0.0.x with an ephemeral port and every test is bounded
to a few seconds.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kbctl.errors import ConfigError
from kbctl.ingest.fetch import FetchOptions, fetch
from kbctl.sources import policy
from kbctl.types import ItemError, Source

FAST = dict(timeout=5, retries=0, backoff_base=0.001, backoff_jitter=0.0)


# -- the address classifier -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "address, kind",
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped: Python 3.11 calls it neither loopback nor private
        ("::ffff:7f00:1", "loopback"),
        ("64:ff9b::7f00:1", "loopback"),  # NAT64 of 127.0.0.1
        ("2002:7f00:1::1", "loopback"),  # 6to4 of 127.0.0.1
        ("169.254.169.254", "link-local"),  # cloud metadata
        ("fe80::1", "link-local"),
        ("::ffff:169.254.169.254", "link-local"),
        ("10.1.2.3", "private"),
        ("172.16.5.4", "private"),
        ("192.168.0.1", "private"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("::ffff:10.0.0.1", "private"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "reserved"),
        ("100.64.0.1", "reserved"),  # carrier-grade NAT: not global
        ("192.0.2.1", "reserved"),  # documentation
        ("93.184.216.34", None),
        ("8.8.8.8", None),
        ("::ffff:8.8.8.8", None),
        ("2606:4700:4700::1111", None),
    ],
)
def test_address_kind(address, kind):
    assert policy.address_kind(address) == kind


def test_allow_hosts_by_name_and_network():
    p = policy.FetchPolicy.from_options(
        FetchOptions(allow_hosts=("10.0.0.0/8", "Intranet.Example", "::1", "[fd00::1]"))
    )
    assert p.refusal("x.test", "10.9.8.7") is None
    assert p.refusal("intranet.example.", "192.168.1.1") is None  # named: any address it resolves to
    assert p.refusal("x.test", "::1") is None
    assert p.refusal("x.test", "::ffff:10.1.1.1") is None  # a mapped address is its IPv4 address
    assert p.refusal("x.test", "fd00::1") is None
    assert p.refusal("x.test", "192.168.1.1") == "192.168.1.1 is a private address"
    assert p.refusal("x.test", "8.8.8.8") is None
    assert policy.FetchPolicy.from_options(FetchOptions(allow_private=True)).refusal("x", "127.0.0.1") is None


def test_bad_allow_hosts_entry_is_a_config_error():
    with pytest.raises(ConfigError) as e:
        FetchOptions.from_config({"allow_hosts": ["10.0.0.0/33"]})
    assert "allow_hosts" in e.value.message


def test_resolve_once_and_keep_only_allowed_addresses():
    calls = Counter()

    def fake(host, port, *args, **kwargs):
        calls[host] += 1
        table = {"public.test": ["93.184.216.34", "10.0.0.5"], "intranet.test": ["10.0.0.5", "::1"]}
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in table[host]
        ]

    strict = policy.FetchPolicy.from_options(FetchOptions())
    assert [a[4][0] for a in policy.allowed_addresses("public.test", 80, strict, resolve=fake)] == ["93.184.216.34"]
    with pytest.raises(policy.Refused) as e:
        policy.allowed_addresses("intranet.test", 80, strict, resolve=fake)
    assert str(e.value) == "10.0.0.5 is a private address"
    by_net = policy.FetchPolicy.from_options(FetchOptions(allow_hosts=("10.0.0.0/8",)))
    assert [a[4][0] for a in policy.allowed_addresses("intranet.test", 80, by_net, resolve=fake)] == ["10.0.0.5"]
    by_name = policy.FetchPolicy.from_options(FetchOptions(allow_hosts=("intranet.test",)))
    assert [a[4][0] for a in policy.allowed_addresses("intranet.test", 80, by_name, resolve=fake)] == [
        "10.0.0.5",
        "::1",
    ]
    assert calls == Counter({"public.test": 1, "intranet.test": 3})  # one lookup per connection


# -- local servers --------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # a trickling handler must not hold up the test's teardown

    def handle_error(self, request, client_address):
        pass  # the client hanging up on a slow answer is expected


class Site:
    """Routes ``path -> (status, headers, body)`` or a callable of the handler; counts requests."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.routes: dict = {}
        self.hits: Counter = Counter()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                site.hits[self.path] += 1
                route = site.routes.get(self.path, (404, {"Content-Length": "0"}, b""))
                if callable(route):
                    return route(self)
                status, headers, body = route
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = _Server((host, port), Handler)
        self.host, self.port = host, self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()

    def url(self, path: str, host: str | None = None) -> str:
        return f"http://{host or self.host}:{self.port}{path}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def page(body: str, content_type: str = "text/html; charset=utf-8"):
    data = body.encode()
    return 200, {"Content-Type": content_type, "Content-Length": str(len(data))}, data


@pytest.fixture
def site(monkeypatch):
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    s = Site()
    yield s
    s.close()


def test_a_local_server_is_refused_by_default_with_a_hint(site):
    site.routes["/page.html"] = page("<p>internal</p>")
    url = site.url("/page.html")
    (err,) = fetch([url], options=FetchOptions(**FAST))
    assert isinstance(err, ItemError) and (err.stage, err.source, err.error_class) == ("fetch", url, "SourceError")
    assert err.message.startswith(f"refused {url}: 127.0.0.1 is a loopback address")
    assert "allow_private = true" in err.message and "allow_hosts" in err.message and "\n" not in err.message
    assert site.hits["/page.html"] == 0  # refused before connecting


@pytest.mark.parametrize(
    "opt_in",
    [
        dict(allow_private=True),
        dict(allow_hosts=("127.0.0.1",)),
        dict(allow_hosts=("127.0.0.0/8",)),
        dict(allow_hosts=("localhost",)),
    ],
)
def test_a_local_server_is_fetched_with_an_opt_in(site, opt_in):
    site.routes["/page.html"] = page("<p>internal</p>")
    host = "localhost" if "localhost" in opt_in.get("allow_hosts", ()) else None
    (src,) = fetch([site.url("/page.html", host)], options=FetchOptions(**FAST, **opt_in))
    assert isinstance(src, Source) and src.content == b"<p>internal</p>"


def test_the_opt_in_is_read_from_the_fetch_table_of_the_config(site, tmp_path):
    from kbctl.config import load_settings

    cfg = tmp_path / "kbctl.toml"
    cfg.write_text('[fetch]\nallow_hosts = ["127.0.0.0/8"]\ndeadline = 5\n')
    opts = FetchOptions.from_config(load_settings(cfg, env={}).fetch)
    assert opts.allow_hosts == ("127.0.0.0/8",) and opts.deadline == 5 and not opts.allow_private
    site.routes["/page.html"] = page("ok")
    (src,) = fetch([site.url("/page.html")], options=opts)
    assert src.content == b"ok"
    defaults = FetchOptions.from_config(load_settings(env={}, cwd=tmp_path / "none").fetch)
    assert (defaults.allow_private, defaults.allow_hosts, defaults.deadline, defaults.min_rate) == (
        False,
        (),
        60.0,
        1024,
    )


def test_a_redirect_to_loopback_is_refused_at_the_hop(site):
    site.routes["/hop"] = (302, {"Location": site.url("/secret"), "Content-Length": "0"}, b"")
    site.routes["/mapped"] = (
        302,
        {"Location": f"http://[::ffff:127.0.0.1]:{site.port}/secret", "Content-Length": "0"},
        b"",
    )
    site.routes["/file"] = (301, {"Location": "file:///etc/passwd", "Content-Length": "0"}, b"")
    site.routes["/secret"] = page("secret")
    opts = FetchOptions(**FAST, allow_hosts=("localhost",))  # the name is allowed, 127.0.0.1 is not
    start = site.url("/hop", "localhost")
    hop, mapped, file_ = fetch([start, site.url("/mapped", "localhost"), site.url("/file", "localhost")], options=opts)
    assert hop.message.startswith(
        f"refused {site.url('/secret')} (redirected from {start}): 127.0.0.1 is a loopback address"
    )
    assert mapped.message.startswith(f"refused http://[::ffff:127.0.0.1]:{site.port}/secret (redirected from")
    assert "::ffff:127.0.0.1 is a loopback address" in mapped.message
    assert file_.message.startswith("refused file:///etc/passwd (redirected from") and "http and https" in file_.message
    assert site.hits["/hop"] == site.hits["/mapped"] == site.hits["/file"] == 1 and site.hits["/secret"] == 0


def test_the_address_checked_is_the_address_connected(monkeypatch):
    """DNS rebinding: a name that resolves to an allowed address, then to another, is connected to
    the address that was checked (one lookup per connection)."""
    allowed = Site("127.0.0.1")
    try:
        other = Site("127.0.0.2", allowed.port)
    except OSError:
        allowed.close()
        pytest.skip("127.0.0.2 is not available")
    allowed.routes["/"] = page("checked")
    other.routes["/"] = page("rebound")
    answers = iter(["127.0.0.1", "127.0.0.2", "127.0.0.2", "127.0.0.2"])
    lookups = []

    def rebinding(host, port, *args, **kwargs):
        lookups.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers), port))]

    monkeypatch.setattr(policy, "getaddrinfo", rebinding)
    try:
        (src,) = fetch(
            [f"http://rebind.test:{allowed.port}/"], options=FetchOptions(**FAST, allow_hosts=("127.0.0.1",))
        )
    finally:
        allowed.close()
        other.close()
    assert isinstance(src, Source) and src.content == b"checked"
    assert lookups == ["rebind.test"] and other.hits["/"] == 0


def test_feed_links_are_checked_one_by_one(site):
    feed = f"""<?xml version="1.0"?><rss version="2.0"><channel><title>F</title>
      <item><guid>a</guid><title>A</title><link>{site.url("/post/a.html", "localhost")}</link><description>s</description></item>
      <item><guid>b</guid><title>B</title><link>{site.url("/post/b.html")}</link><description>s</description></item>
      <item><guid>c</guid><title>C</title><link>file:///etc/passwd</link><description>s</description></item>
    </channel></rss>"""
    site.routes["/feed.xml"] = page(feed, "application/rss+xml")
    site.routes["/post/a.html"] = page("<p>a</p>")
    site.routes["/post/b.html"] = page("<p>b</p>")
    opts = FetchOptions(**FAST, allow_hosts=("localhost",))
    got = list(fetch([site.url("/feed.xml", "localhost")], options=opts, follow_links=True))
    assert [type(x).__name__ for x in got] == ["Source", "Source", "ItemError", "ItemError"]
    assert got[1].content == b"<p>a</p>"
    assert got[2].source == site.url("/post/b.html") and got[2].message.startswith(
        f"refused {site.url('/post/b.html')}: 127.0.0.1 is a loopback"
    )
    assert got[3].source.startswith("file:") and got[3].message.startswith(f"refused {got[3].source} (linked from")
    assert site.hits["/post/b.html"] == 0


# -- deadline and minimum rate --------------------------------------------------------------------


def _trickle(headers_too: bool, stop: threading.Event):
    """A handler that sends one byte every 0.2 s (the body only, or the status line onwards)."""

    def route(handler):
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n"
        if not headers_too:
            handler.wfile.write(head)
            head = b""
        for byte in head + b"x" * 1000:
            if stop.is_set():
                return
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(0.2)

    return route


@pytest.fixture
def stop():
    event = threading.Event()
    yield event
    event.set()


def test_a_trickling_body_is_cut_off_by_the_minimum_rate(site, stop):
    site.routes["/slow"] = _trickle(False, stop)
    opts = FetchOptions(**FAST, allow_private=True, deadline=30, min_rate=100, min_rate_grace=1)
    t0 = time.monotonic()
    (err,) = fetch([site.url("/slow")], options=opts)
    assert time.monotonic() - t0 < 5
    assert isinstance(err, ItemError) and "min_rate" in err.message and "slower than" in err.message, err


def test_trickling_headers_are_cut_off_by_the_deadline(site, stop):
    site.routes["/slow"] = _trickle(True, stop)
    opts = FetchOptions(**FAST, allow_private=True, deadline=1.5, min_rate=0)
    t0 = time.monotonic()
    (err,) = fetch([site.url("/slow")], options=opts)
    assert 1.4 < time.monotonic() - t0 < 5
    assert (
        isinstance(err, ItemError)
        and err.message == f"could not fetch {site.url('/slow')}: took longer than the 1.5 s limit (deadline)"
    )


def test_a_fast_answer_is_not_cut_off(site):
    site.routes["/big"] = page("y" * 300_000, "text/plain")
    opts = FetchOptions(**FAST, allow_private=True, deadline=5, min_rate=10_000, min_rate_grace=0)
    (src,) = fetch([site.url("/big")], options=opts)
    assert isinstance(src, Source) and len(src.content) == 300_000
