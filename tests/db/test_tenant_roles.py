"""No two tenants share a PostgreSQL role (issue 26, item 9; migration 012), and tenants with a
role named the old way are moved to the new name on upgrade."""

from __future__ import annotations

import uuid

import psycopg
import pytest

import kbctl
from kbctl.config import load_settings
from kbctl.store.db import Database
from kbctl.validate import NAME_PATTERN
from tests.db.test_migrations import _db, fresh_dsn  # noqa: F401  (a fixture)


def _role(k, name: str) -> str:
    return next(t["role"] for t in k.tenants() if t["name"] == name)


def _long_pair() -> tuple[str, str]:
    stem = "t" + uuid.uuid4().hex[:10] + "_" + "x" * 44  # 55 characters in common
    return stem + "_alpha", stem + "_bravo"


def test_long_names_sharing_their_first_55_characters_get_two_roles(kb_home):
    a, b = _long_pair()
    with (
        kbctl.open(home=kb_home, tenant=a, profile="hash-384") as ka,
        kbctl.open(home=kb_home, tenant=b, profile="hash-384") as kb_,
    ):
        ka.create_namespace("docs")
        kb_.create_namespace("other")
        ra, rb = _role(ka, a), _role(ka, b)
        assert ra != rb and len(ra.encode()) <= 63 and len(rb.encode()) <= 63
        assert [n["name"] for n in ka.namespaces()] == ["docs"]
        assert [n["name"] for n in kb_.namespaces()] == ["other"]
        ka.delete_tenant(a)
        kb_.delete_tenant(b)


def test_a_name_shaped_like_a_hashed_role_gets_its_own_role(kb_home):
    """A 55-character name that spells a long-named tenant's shortened role: the two forms must
    never meet (it was the long tenant's role, and `tenants create` failed with a wrong hint)."""
    long_name = "t" + uuid.uuid4().hex[:10] + "_" + "y" * 60
    with kbctl.open(home=kb_home, tenant=long_name, profile="hash-384") as k:
        k.create_namespace("docs")
        role = _role(k, long_name)
        mimic = role.removeprefix("kbctl_t_")
        if not NAME_PATTERN.match(mimic):
            mimic = mimic.replace("+", "_")  # the new long form holds a character no name may hold
        made = k.create_tenant(mimic)
        assert made["role"] != role
        with kbctl.open(home=kb_home, tenant=mimic, profile="hash-384") as m:
            assert m.namespaces() == []  # nothing of the long-named tenant's
        assert [n["name"] for n in k.namespaces()] == ["docs"]
        k.delete_tenant(mimic)
        k.delete_tenant(long_name)


def _old_role(name: str) -> str:
    """Migration 009's name for a tenant's role."""
    import hashlib

    if len(name.encode()) <= 55:
        return "kbctl_t_" + name
    return "kbctl_t_" + name[:38] + "_" + hashlib.md5(name.encode()).hexdigest()[:16]


def test_upgrade_renames_the_roles_of_long_named_tenants(fresh_dsn):  # noqa: F811
    db = _db(fresh_dsn)
    db.migrate(target=11)
    long_name = "t" + uuid.uuid4().hex[:10] + "_" + "z" * 60
    short = "t" + uuid.uuid4().hex[:10]
    with psycopg.connect(fresh_dsn, autocommit=True) as c:
        for name in (long_name, short):
            c.execute("SELECT kbctl.create_tenant(%s)", (name,))
        old = dict(c.execute("SELECT name, role FROM kbctl.tenants").fetchall())
        assert old[long_name] == _old_role(long_name) and old[short] == _old_role(short)
    try:
        applied = db.migrate()
        assert [m.version for m in applied][:1] == [12]
        with psycopg.connect(fresh_dsn, autocommit=True) as c:
            new = dict(c.execute("SELECT name, role FROM kbctl.tenants").fetchall())
            assert new[short] == old[short]  # short names keep their role
            assert new[long_name] != old[long_name] and "+" in new[long_name]
            roles = {r for (r,) in c.execute("SELECT rolname FROM pg_roles WHERE rolname LIKE 'kbctl_t_%'")}
            assert new[long_name] in roles and old[long_name] not in roles
            # the renamed role is still its tenant's: the policies read the tenant from it
            c.execute(f'SET ROLE "{new[long_name]}"')
            assert c.execute("SELECT kbctl.current_tenant()").fetchone()[0] == long_name
            c.execute("RESET ROLE")
        with psycopg.connect(fresh_dsn) as c:
            c.execute(_migration_path().read_text())  # idempotent: a second run changes nothing
            assert dict(c.execute("SELECT name, role FROM kbctl.tenants").fetchall()) == new
    finally:
        with psycopg.connect(fresh_dsn, autocommit=True) as c:
            for name in (long_name, short):
                for role in {_old_role(name), _new_role(c, name)}:
                    c.execute(f'DROP ROLE IF EXISTS "{role}"')


def _new_role(c, name: str) -> str:
    return c.execute("SELECT kbctl.tenant_role(%s)", (name,)).fetchone()[0]


def _migration_path():
    from pathlib import Path

    return Path(__file__).resolve().parents[2] / "sql" / "migrations" / "012-tenant-role-names.sql"


@pytest.mark.parametrize("n", [55, 56, 128])
def test_every_role_name_fits_postgresql(kb_home, n):
    settings = load_settings(overrides={"database.home": str(kb_home)})
    with psycopg.connect(Database(settings).dsn()) as c:
        role = c.execute("SELECT kbctl.tenant_role(%s)", ("a" * n,)).fetchone()[0]
        assert len(role.encode()) <= 63 and role.startswith("kbctl_t_a")
