"""Which addresses the fetch stage may connect to.

By default a URL may reach public addresses only. These are refused, IPv4 and IPv6 alike::

    kind            IPv4                                          IPv6
    unspecified     0.0.0.0                                       ::
    loopback        127.0.0.0/8                                   ::1
    link-local      169.254.0.0/16 (cloud metadata lives here)    fe80::/10
    multicast       224.0.0.0/4                                   ff00::/8
    private         10/8, 172.16/12, 192.168/16                   fc00::/7, fec0::/10
    reserved        anything else not globally routable: 0/8, 100.64/10, 192.0.2/24, 240/4…

An IPv6 address that carries an IPv4 address (IPv4-mapped ``::ffff:a.b.c.d``, NAT64
``64:ff9b::/96``, 6to4 ``2002::/16``) is judged by that IPv4 address.

``allow_private`` lifts the rule; ``allow_hosts`` lifts it for a host name (any address it resolves
to), an address or a network. The check is made on the address connected to: ``connect`` resolves
the name once, keeps the allowed addresses, connects to one of them (never to the name again, so a
second lookup cannot answer differently) and checks the socket's peer before any byte is sent.

Time is policy too: a ``Clock`` gives one try of a request ``deadline`` seconds in all, and a
``MeteredSocket`` bounds every wait by it and cuts off an answer that, ``grace`` seconds after its
first byte, has come slower than ``min_rate`` bytes/s on average (a server sending a byte a second).
"""

from __future__ import annotations

import io
import ipaddress
import socket
import time
from dataclasses import dataclass
from socket import getaddrinfo
from typing import Any, Callable, Iterable

from ..errors import ConfigError

__all__ = [
    "FetchPolicy",
    "Refused",
    "TooSlow",
    "Clock",
    "MeteredSocket",
    "address_kind",
    "parse_allow_hosts",
    "allowed_addresses",
    "connect",
    "OPT_IN_HINT",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: How to let kbctl fetch from an address the policy refuses.
OPT_IN_HINT = "to fetch it, set allow_private = true or add the host or its network to allow_hosts in the [fetch] table of kbctl.toml"

_PRIVATE = tuple(
    ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7", "fec0::/10")
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")


class Refused(Exception):
    """The policy refuses every address a host resolved to (the reason is the message)."""


class TooSlow(Exception):
    """A try ran past its deadline, or an answer came slower than the minimum rate."""


def address_kind(address: str | IPAddress) -> str | None:
    """``"loopback"``, ``"private"``, ``"link-local"``, ``"multicast"``, ``"unspecified"`` or
    ``"reserved"`` for an address that is not public; ``None`` for a public one."""
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    v4 = _embedded_ipv4(ip)
    if v4 is not None:
        return address_kind(v4)
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if any(ip.version == n.version and ip in n for n in _PRIVATE):
        return "private"
    if ip.is_private or ip.is_reserved or not ip.is_global or (ip.version == 6 and ip in _NAT64_LOCAL):
        return "reserved"
    return None


def _embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for (mapped, NAT64, 6to4), if any."""
    if ip.version != 6:
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip.sixtofour


def parse_allow_hosts(entries: Iterable[str]) -> tuple[frozenset[str], tuple[IPNetwork, ...]]:
    """``(host names, networks)`` from ``allow_hosts`` entries: an address is a one-address network,
    ``"a.b.c.d/n"`` a network, anything else a host name (``ConfigError`` for a malformed one)."""
    hosts, networks = set(), []
    for entry in entries:
        text = str(entry).strip().strip("[]")
        try:
            networks.append(ipaddress.ip_network(text, strict=False))
            continue
        except ValueError:
            pass
        name = _host_key(text)
        if "/" in text or not name or not all(c.isalnum() or c in "-._" for c in name):
            raise ConfigError(
                f"fetch.allow_hosts: {entry!r} is not a host name, an IP address or a network",
                hint='write a host ("wiki.internal"), an address ("127.0.0.1") or a network ("10.0.0.0/8")',
            )
        hosts.add(name)
    return frozenset(hosts), tuple(networks)


def _host_key(host: str) -> str:
    """A host name as compared with ``allow_hosts``: lower case, no trailing dot."""
    return host.strip().lower().rstrip(".")


@dataclass(frozen=True)
class FetchPolicy:
    """Which addresses may be connected to (see the module docstring)."""

    allow_private: bool = False
    hosts: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def from_options(cls, options: Any) -> FetchPolicy:
        """The policy of a ``FetchOptions`` (its ``allow_private`` and ``allow_hosts``)."""
        hosts, networks = parse_allow_hosts(options.allow_hosts)
        return cls(bool(options.allow_private), hosts, networks)

    def refusal(self, host: str, address: str) -> str | None:
        """Why connecting to ``address`` (which ``host`` resolved to) is refused; ``None`` if allowed."""
        if self.allow_private or _host_key(host) in self.hosts:
            return None
        ip = ipaddress.ip_address(address.split("%", 1)[0])  # no IPv6 zone in network tests
        kind = address_kind(ip)
        if kind is None:
            return None
        forms = [ip] + [v4 for v4 in (_embedded_ipv4(ip),) if v4 is not None]
        if any(f.version == n.version and f in n for f in forms for n in self.networks):
            return None
        article = "an" if kind[0] in "aeiou" else "a"
        return f"{address} is {article} {kind} address"


def allowed_addresses(
    host: str, port: int, policy: FetchPolicy, resolve: Callable[..., list] | None = None
) -> list[tuple]:
    """Resolve ``host`` once; the ``getaddrinfo`` entries the policy allows, in their order.

    Raises ``Refused`` (with the first address's reason) when it allows none, and what
    ``getaddrinfo`` raises when the name does not resolve.
    """
    infos = (resolve or getaddrinfo)(host, port, type=socket.SOCK_STREAM)
    allowed, reasons = [], []
    for info in infos:
        reason = policy.refusal(host, str(info[4][0]))
        if reason is None:
            allowed.append(info)
        else:
            reasons.append(reason)
    if not allowed:
        if not reasons:
            raise socket.gaierror(socket.EAI_NONAME, "no address")
        raise Refused(reasons[0])
    return allowed


def connect(host: str, port: int, policy: FetchPolicy, timeout: float) -> socket.socket:
    """A TCP connection to an allowed address of ``host`` (tried in resolver order), its peer checked.

    Raises ``Refused``, or the ``OSError`` of the last address tried.
    """
    error: OSError | None = None
    for family, kind, proto, _, sockaddr in allowed_addresses(host, port, policy):
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(sockaddr)
            reason = policy.refusal(host, sock.getpeername()[0])
            if reason is not None:
                raise Refused(reason)
            return sock
        except OSError as e:
            sock.close()
            error = e
        except BaseException:
            sock.close()
            raise
    assert error is not None  # allowed_addresses returns at least one address
    raise error


# -- time -----------------------------------------------------------------------------------------


class Clock:
    """The time budget of one try: ``deadline`` seconds in all, each wait at most ``timeout``."""

    def __init__(self, deadline: float, timeout: float) -> None:
        self.deadline, self.wait = deadline, timeout
        self.end = time.monotonic() + deadline
        self.bounded = False  # whether the last wait was cut short by the deadline

    def timeout(self) -> float:
        """Seconds the next socket operation may wait (``TooSlow`` once the deadline has passed)."""
        left = self.end - time.monotonic()
        if left <= 0:
            raise TooSlow(self.overdue())
        self.bounded = left < self.wait
        return min(self.wait, left)

    def overdue(self) -> str:
        """The message of a missed deadline."""
        return f"took longer than the {self.deadline:g} s limit (deadline)"


class MeteredSocket:
    """The few socket methods ``http.client`` uses, each wait bounded by the clock; the answer is
    read through a ``_MeteredReader``, which enforces ``min_rate`` after ``grace`` seconds."""

    def __init__(self, sock: socket.socket, clock: Clock, min_rate: float, grace: float) -> None:
        self.sock, self._clock, self._min_rate, self._grace = sock, clock, min_rate, grace
        self._readers, self._closed = 0, False

    def sendall(self, data: bytes) -> None:
        self.sock.settimeout(self._clock.timeout())
        self.sock.sendall(data)

    def makefile(self, mode: str = "rb", *args: Any, **kwargs: Any) -> io.BufferedReader:
        self._readers += 1
        return io.BufferedReader(_MeteredReader(self, self._clock, self._min_rate, self._grace))

    def close(self) -> None:
        # like a socket's: the connection may close before its response is read (Connection: close)
        self._closed = True
        self._release()

    def _reader_closed(self) -> None:
        self._readers -= 1
        self._release()

    def _release(self) -> None:
        if self._closed and self._readers == 0:
            self.sock.close()


class _MeteredReader(io.RawIOBase):
    """Reads an answer from a socket; ``TooSlow`` when, ``grace`` seconds after its first byte, it
    has come at less than ``min_rate`` bytes/s on average (0: no minimum)."""

    def __init__(self, owner: MeteredSocket, clock: Clock, min_rate: float, grace: float) -> None:
        self._owner, self._sock, self._clock = owner, owner.sock, clock
        self._min, self._grace = min_rate, grace
        self._first: float | None = None
        self._received = 0

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        if not self.closed:
            self._owner._reader_closed()
        super().close()

    def readinto(self, buffer: Any) -> int:
        self._sock.settimeout(self._clock.timeout())
        n = self._sock.recv_into(buffer)
        if n and self._min > 0:
            self._count(n)
        return n

    def _count(self, n: int) -> None:
        now = time.monotonic()
        if self._first is None:
            self._first = now
        self._received += n
        elapsed = now - self._first
        if elapsed > self._grace and self._received / elapsed < self._min:
            rate = self._received / elapsed
            raise TooSlow(f"sent {rate:.0f} bytes/s, slower than the {self._min:g} bytes/s minimum (min_rate)")
