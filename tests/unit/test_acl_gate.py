"""The access gate as a pure function: a property test against a reference model, and ACL parsing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbctl.acl import AclPolicy, Gate, lift_acl, normalize_acl
from kbctl.config import AccessSettings
from kbctl.errors import ConfigError
from kbctl.types import Block, Document, Principal

_IDS = st.sampled_from(["u1", "u2", "eng", "hr", "x"])
_ENTRIES = st.one_of(
    st.just("public"),
    st.builds(lambda i: f"user:{i}", _IDS),
    st.builds(lambda i: f"group:{i}", _IDS),
    st.sampled_from(["eng", "", "user:", "group:a b", "role:admin", "?int", " public"]),  # malformed
)
_ACLS = st.one_of(st.none(), st.lists(_ENTRIES, max_size=4), st.sampled_from([42, "public", {"a": 1}]))
_PRINCIPALS = st.one_of(
    st.none(), st.builds(Principal, st.one_of(st.none(), _IDS), st.lists(_IDS, max_size=3).map(tuple))
)


def _reference(principal, acl, default) -> bool:
    if acl is None:
        return default == "public"
    if not isinstance(acl, list):
        return False
    valid = all(
        e == "public"
        or (
            e.split(":", 1)[0] in ("user", "group")
            and e.split(":", 1)[1:] != [""]
            and " " not in e
            and e.count(":") == 1
        )
        for e in acl
    )
    if not valid:
        return False
    mine = {"public"}
    if principal is not None:
        mine |= {f"user:{principal.user}"} if principal.user else set()
        mine |= {f"group:{g}" for g in principal.groups}
    return bool(mine & set(acl))


@settings(max_examples=500, deadline=None)
@given(principal=_PRINCIPALS, acl=_ACLS, default=st.sampled_from(["public", "deny"]), known=st.booleans())
def test_gate_matches_the_reference_model(principal, acl, default, known):
    gate = Gate(principal, {1: default} if known else {})
    expected = _reference(principal, acl, default if known else "deny")  # an unknown namespace is deny
    assert gate.allows(1, acl) is expected
    assert Gate(principal, {}, unrestricted=True).allows(1, acl) is True


@given(acl=_ACLS)
def test_normalized_acls_never_widen(acl):
    """Whatever front matter holds, normalising it never makes a document visible to anyone new."""
    norm = normalize_acl(acl)
    gate = Gate(Principal("u1", ("eng",)), {1: "deny"})
    if acl is None:
        assert norm is None
    elif isinstance(acl, list) and norm is not None:
        assert gate.allows(1, list(norm)) is _reference(
            Principal("u1", ("eng",)), [str(a).strip() if isinstance(a, str) else "?" for a in acl], "deny"
        )
    else:
        assert norm is not None


def test_lift_acl_moves_it_out_of_the_content_hash():
    a = Document.from_blocks("mem://a", "A", [Block("text")], "markdown", {"acl": ["group:eng"], "k": 1})
    b = Document.from_blocks("mem://a", "A", [Block("text")], "markdown", {"acl": ["group:hr"], "k": 1})
    la, lb = lift_acl(a), lift_acl(b)
    assert la.acl == ("group:eng",) and "acl" not in la.metadata
    assert la.content_hash == lb.content_hash != a.content_hash
    assert Document.from_json(la.to_json()) == la


def test_rules_and_recipients():
    policy = AclPolicy.of(
        AccessSettings.from_table(
            "t",
            {
                "acl_rules": [
                    {"glob": "hr/**", "principals": ["group:hr"]},
                    {"glob": "https://wiki.x/private/*", "principals": ["user:u1"]},
                ],
                "acl_from_recipients": True,
            },
        )
    )
    assert policy.derived("file:///srv/c/hr/a.md", {"path": "/srv/c/hr/a.md"}, "markdown") == ("group:hr",)
    assert policy.derived("https://wiki.x/private/p", {}, "html") == ("user:u1",)
    assert policy.derived("file:///srv/c/a.md", {"path": "/srv/c/a.md"}, "markdown") is None
    mail = policy.derived("mbox#1", {"from": "A <A@x.org>", "to": "b@x.org, c@x.org"}, "email")
    assert mail == ("user:a@x.org", "user:b@x.org", "user:c@x.org")


@pytest.mark.parametrize(
    "table",
    [
        {"acl_default": "open"},
        {"acl_rules": [{"glob": "hr/**"}]},
        {"acl_rules": [{"glob": "hr/**", "principals": ["hr"]}]},
        {"acl_rules": [{"glob": "hr/**", "principals": ["group:hr"], "extra": 1}]},
    ],
)
def test_bad_access_settings_are_config_errors(table):
    with pytest.raises(ConfigError):
        AccessSettings.from_table("namespaces.x", table)


def test_principal_parse():
    assert Principal.parse(None, ()) is None
    assert Principal.parse("user:u1", ["group:eng", "ops"]) == Principal("u1", ("eng", "ops"))
    assert str(Principal("u1", ("eng",))) == "user:u1 group:eng"
    with pytest.raises(ValueError):
        Principal("a:b")
    # an empty user id is a mistake, not "anonymous" (--as user: searched as no one, exit 0)
    for empty in ("user:", ""):
        with pytest.raises(ValueError, match="user"):
            Principal.parse(empty, ())
    assert Principal.parse(None, ["eng"]) == Principal(None, ("eng",))
