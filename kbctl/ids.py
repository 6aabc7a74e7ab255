"""Opaque ids: a keyed pseudo-random permutation between (kind, integer id) and a short string.

Document, chunk, query-log and generation ids come from sequences every tenant shares, so the raw
numbers would tell an agent of one tenant how much another tenant ingested or searched between two
of its own calls, and they can be guessed. The server (``kbctl.server``) hands agents only these
strings, sealed under its tenant's own secret key (``kbctl.tenants.id_key``, migration 018): two
tenants' ids cannot be correlated, and they stay the same across restarts and across servers on one
database. The CLI, for operators, keeps the raw ids (``kbctl tenants id-of`` opens a sealed one).

A sealed id is ``<kind>_<22 characters of base64url>``: a 128-bit block (the kind's byte, the id as
8 bytes big-endian, 7 zero bytes) enciphered by an 8-round Feistel network on its 64-bit halves,
whose round function is HMAC-SHA256(round key, round number || half) cut to 64 bits (Luby and
Rackoff: 4 such rounds already make a strong pseudo-random permutation). Opening deciphers it and
checks the kind's byte and the zero bytes: a forged or mistyped string, one of another kind, or one
sealed under another tenant's key opens to None (a random guess passes with odds of 2^-64), and so
does any spelling but the one ``seal`` writes. Only the standard library.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re

__all__ = ["KINDS", "Ids"]

KINDS = {"d": "document", "c": "chunk", "q": "query", "g": "generation"}
"""The kinds of id a sealed one names (its first letter) and what each is called in messages."""

_ROUNDS = 8
_SHAPE = re.compile(r"[a-z]_[A-Za-z0-9_-]{22}")
_CONTEXT = b"kbctl opaque ids v1"  # the tenant's key serves this and nothing else: round keys derive from it
_HIGH = 1 << 64
_LAST = frozenset("AQgw")  # base64url digits whose low 4 bits are zero


class Ids:
    """Seals and opens one tenant's ids under its key (which no repr, message or answer shows)."""

    __slots__ = ("_check", "_macs")

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, (bytes, bytearray, memoryview)) or len(key) < 16:
            raise ValueError("an id key is at least 16 bytes")
        root = hmac.digest(bytes(key), _CONTEXT, "sha256")
        keys = (hmac.digest(root, bytes([r]), "sha256") for r in range(_ROUNDS))
        self._macs = tuple(hmac.new(k, digestmod=hashlib.sha256) for k in keys)  # keyed once, copied per use
        self._check = hmac.digest(root, b"same key", "sha256")  # compared, never shown: see __eq__

    def __repr__(self) -> str:
        return "Ids(<key withheld>)"

    def __eq__(self, other: object) -> bool:
        """Whether ``other`` seals under the same key (a server checks the key it holds against the
        database's: a tenant deleted and made again under its name has a new one)."""
        if not isinstance(other, Ids):
            return NotImplemented
        return hmac.compare_digest(self._check, other._check)

    def __hash__(self) -> int:
        return hash(self._check)

    def seal(self, kind: str, n: int) -> str:
        """The opaque string of id ``n`` (0 <= n < 2^64) of ``kind`` (a key of ``KINDS``)."""
        if kind not in KINDS:
            raise ValueError(f"unknown id kind {kind!r}")
        n = int(n)
        if not 0 <= n < _HIGH:
            raise ValueError("an id is between 0 and 2^64 - 1")
        left = (ord(kind) << 56) | (n >> 8)
        right = (n & 0xFF) << 56
        for mac in self._macs:
            left, right = right, left ^ _round(mac, right)
        block = left.to_bytes(8, "big") + right.to_bytes(8, "big")
        return f"{kind}_{base64.urlsafe_b64encode(block).rstrip(b'=').decode('ascii')}"

    def open(self, kind: str, token: object) -> int | None:
        """The id ``token`` names if it is a ``kind`` id sealed under this key, else None."""
        found = self.which(token)
        return found[1] if found is not None and found[0] == kind else None

    def which(self, token: object) -> tuple[str, int] | None:
        """``(kind, id)`` of a string sealed under this key, else None."""
        if not isinstance(token, str) or not _SHAPE.fullmatch(token) or token[0] not in KINDS:
            return None
        if token[-1] not in _LAST:  # 22 characters hold 132 bits: the last 4 are zero in the one spelling
            return None
        try:
            block = base64.urlsafe_b64decode(token[2:] + "==")
        except (binascii.Error, ValueError):
            return None
        left, right = int.from_bytes(block[:8], "big"), int.from_bytes(block[8:], "big")
        for mac in reversed(self._macs):
            left, right = right ^ _round(mac, left), left
        kind = chr(left >> 56)
        if kind != token[0] or right & ((1 << 56) - 1):
            return None
        n = ((left & ((1 << 56) - 1)) << 8) | (right >> 56)
        return kind, n


def _round(mac: hmac.HMAC, half: int) -> int:
    h = mac.copy()
    h.update(half.to_bytes(8, "big"))
    return int.from_bytes(h.digest()[:8], "big")
