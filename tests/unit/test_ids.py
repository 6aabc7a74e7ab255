"""``kbctl.ids``: the keyed permutation behind the server's opaque ids. Every id opens back to itself,
and only under its own key and as its own kind; anything else (forged, garbled, respelled) is None."""

from __future__ import annotations

import base64
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbctl.ids import KINDS, Ids

ids = st.integers(min_value=0, max_value=2**63 - 1)
keys = st.binary(min_size=16, max_size=64)
kinds = st.sampled_from(sorted(KINDS))


@settings(max_examples=300)
@given(key=keys, kind=kinds, n=ids)
def test_an_id_opens_back_to_itself(key, kind, n):
    box = Ids(key)
    token = box.seal(kind, n)
    assert re.fullmatch(rf"{kind}_[A-Za-z0-9_-]{{22}}", token)
    assert box.open(kind, token) == n and box.which(token) == (kind, n)
    assert Ids(key).seal(kind, n) == token  # the same key: the same id, after a restart or on another server


@settings(max_examples=300)
@given(key=keys, other=keys, kind=kinds, n=ids)
def test_an_id_does_not_open_as_another_kind_or_under_another_key(key, other, kind, n):
    token = Ids(key).seal(kind, n)
    for k in KINDS:
        if k != kind:
            assert Ids(key).open(k, token) is None
            assert Ids(key).open(k, k + token[1:]) is None  # its letter changed: not an id of that kind
    if other != key:
        assert Ids(other).which(token) is None


@settings(max_examples=200)
@given(key=keys, n=ids, junk=st.text(max_size=40))
def test_garbled_and_forged_ids_open_to_nothing(key, n, junk):
    box = Ids(key)
    token = box.seal("d", n)
    assert box.which(junk) is None or box.seal(*box.which(junk)) == junk
    flipped = token[:5] + ("A" if token[5] != "A" else "B") + token[6:]
    assert box.which(flipped) is None
    for bad in (token[:-1], token + "A", token.upper(), str(n), n, None, " " + token, token.replace("_", "-", 1)):
        assert box.which(bad) is None


def test_one_spelling_per_id():
    """The last base64 digit carries 4 unused bits: a string that decodes to the same block but spells
    them otherwise is not the id (a cache or a comparison of ids as strings can trust the string)."""
    box = Ids(b"k" * 32)
    token = box.seal("c", 7)
    alias = (
        token[:-1]
        + "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".index(token[-1]) + 1
        ]
    )
    assert base64.urlsafe_b64decode(alias[2:] + "==") == base64.urlsafe_b64decode(token[2:] + "==")
    assert box.which(alias) is None and box.which(token) == ("c", 7)


def test_consecutive_ids_look_unrelated():
    box = Ids(b"k" * 32)
    sealed = [box.seal("d", n) for n in range(1000)]
    assert len(set(sealed)) == 1000
    assert sorted(sealed) != sealed  # not ordered as the ids are
    assert len({t[:4] for t in sealed}) > 100  # no shared prefix of neighbours


def test_the_key_is_never_shown_and_must_be_long_enough():
    key = bytes(range(32))
    box = Ids(key)
    assert key.hex() not in repr(box) and "key" in repr(box)
    with pytest.raises(ValueError):
        Ids(b"short")
    with pytest.raises(ValueError):
        box.seal("x", 1)
    with pytest.raises(ValueError):
        box.seal("d", -1)


def test_two_ids_are_equal_when_their_keys_are_the_same():
    """What a server compares the key it holds with (``Service._check_key``), without showing either."""
    a, b = b"k" * 32, b"j" * 32
    assert Ids(a) == Ids(a) and hash(Ids(a)) == hash(Ids(a))
    assert Ids(a) != Ids(b) and Ids(a) != "Ids(<key withheld>)"
    assert "k" not in repr(Ids(a)).replace("key", "")
