"""A tenant's life: made (``kbctl tenants create``; embedded, also on a name's first use), deleted
(``kbctl tenants delete``: its rows, its registration, its role), and then gone. No later use of
its name (the library, the CLI, a server's borrow, a worker) makes it again with an empty store:
only ``kbctl tenants create`` does (docs/hardening.md, "A deleted tenant stays deleted")."""

from __future__ import annotations

import json
import time

import psycopg
import pytest

import kbctl
from kbctl.errors import NamespaceNotFound, TenantNotFound
from kbctl.store import tenants
from tests.conftest import TEST_DSN


class _Steps:
    """A race driven step by step: ``holder`` holds a lock, ``watcher`` (its own connection: the
    holder's transaction would keep one view of the activity) counts who waits on it; ``run``
    keeps each thread's result or exception by name."""

    def __init__(self, holder, watcher) -> None:
        self.holder, self.watcher = holder, watcher
        self.results: dict[str, object] = {}

    def run(self, name, fn) -> None:
        try:
            self.results[name] = fn()
        except Exception as e:  # the test inspects it
            self.results[name] = e

    def blocked(self) -> int:
        return self.watcher.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
            (self.holder.info.backend_pid,),
        ).fetchone()[0]

    def wait_for(self, cond) -> None:
        deadline = time.monotonic() + 60
        while not cond():
            assert time.monotonic() < deadline, self.results
            time.sleep(0.01)


def _delete_racing(admin: kbctl.KnowledgeBase, tenant: str, name: str, action) -> dict[str, object]:
    """Drive ``admin.delete_tenant(tenant)`` against ``action`` step by step: a third connection
    holds T's lock, the delete waits on it, then ``action`` runs (and either finishes or waits on the
    lock too), then the lock is let go. The results by name: ``"delete"`` and ``name``."""
    import threading

    from kbctl.store.queries import query

    holder = psycopg.connect(admin.dsn(), autocommit=True)
    watcher = psycopg.connect(admin.dsn(), autocommit=True)
    steps = _Steps(holder, watcher)
    try:
        holder.execute("BEGIN")
        holder.execute(query("tenants/lock"), (tenant,))
        delete = threading.Thread(target=steps.run, args=("delete", lambda: admin.delete_tenant(tenant)))
        delete.start()
        steps.wait_for(lambda: steps.blocked() == 1)  # the delete waits for T's lock
        other = threading.Thread(target=steps.run, args=(name, action))
        other.start()
        steps.wait_for(lambda: not other.is_alive() or steps.blocked() == 2)  # done, or waiting too
        holder.execute("COMMIT")
        delete.join(60)
        other.join(60)
    finally:
        holder.close()
        watcher.close()
    return steps.results


def _registered(k: kbctl.KnowledgeBase) -> set[str]:
    return {t["name"] for t in k.tenants()}


def _roles(k: kbctl.KnowledgeBase, role: str) -> int:
    with psycopg.connect(k.dsn()) as c:
        return c.execute("SELECT count(*) FROM pg_roles WHERE rolname = %s", (role,)).fetchone()[0]


def test_a_deleted_tenant_is_not_made_again_by_its_next_use(kb_home, tenant):
    """Another process's (or a later command's) first use of a deleted tenant's name made it anew,
    role and id key, as a freshly started embedded server does for a name never used."""
    with kbctl.open(home=kb_home, tenant=tenant, profile="hash-384") as k:
        k.create_namespace("docs")
        role = next(t["role"] for t in k.tenants() if t["name"] == tenant)
    with kbctl.open(home=kb_home, tenant=tenant + "_admin", profile="hash-384") as admin:
        assert admin.delete_tenant(tenant)["namespaces"] == 1
    with kbctl.open(home=kb_home, tenant=tenant, profile="hash-384") as k:
        with pytest.raises(TenantNotFound) as e:
            k.namespaces()
        with pytest.raises(TenantNotFound):
            k.ingest_records([{"id": "a", "title": "a", "text": "a refund"}], "docs", verify=False)
    assert e.value.exit_code == 2
    assert e.value.message == f"tenant {tenant!r} was deleted"
    assert e.value.hint is not None and f"kbctl tenants create {tenant}" in e.value.hint
    with kbctl.open(home=kb_home, tenant=tenant + "_admin", profile="hash-384") as admin:
        assert tenant not in _registered(admin)
        assert _roles(admin, role) == 0
        admin.delete_tenant(admin.tenant)


def test_a_knowledge_base_that_deleted_its_own_tenant_does_not_make_it_again(kb_home, tenant):
    with kbctl.open(home=kb_home, tenant=tenant, profile="hash-384") as k:
        k.create_namespace("docs")
        k.delete_tenant(tenant)
        with pytest.raises(TenantNotFound):
            k.create_namespace("again")
        with pytest.raises(TenantNotFound):
            k.search("refund", "docs")
        assert tenant not in _registered(k)


def test_tenants_create_makes_a_deleted_tenant_again_empty(kb_home, tenant):
    with kbctl.open(home=kb_home, tenant=tenant, profile="hash-384") as k:
        k.ingest_records([{"id": "a", "title": "a", "text": "a refund of old"}], "docs", verify=False)
        key = k.ids().seal("d", 1)
        k.delete_tenant(tenant)
        made = k.create_tenant(tenant)
        assert made["tenant"] == tenant and tenant in _registered(k)
        assert k.namespaces() == []
        k.ingest_records([{"id": "b", "title": "b", "text": "a refund of new"}], "docs", verify=False)
        assert [h.title for h in k.search("refund", "docs").hits] == ["b"]
        assert k.ids().seal("d", 1) != key  # a new id key: the old tenant's ids do not open
        k.delete_tenant(tenant)  # and deleted again: gone again
        with pytest.raises(TenantNotFound):
            k.namespaces()


def test_a_deleted_tenant_stays_deleted_when_several_processes_use_it_at_once(kb_home, tenant):
    """The first uses of a name are serialized (a lock), and a deleted name is refused under that
    lock: none of several commands at once makes it again."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    with kbctl.open(home=kb_home, tenant=tenant, profile="hash-384") as k:
        k.create_namespace("docs")
        k.delete_tenant(tenant)
    env = dict(os.environ, KBCTL_HOME=str(kb_home), KBCTL_TENANT=tenant, PYTHONWARNINGS="ignore")
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "kbctl", "namespaces", "--json"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [2, 2, 2], outs
    for _, err in outs:
        lines = err.decode().strip().splitlines()
        assert lines[0] == f"error: tenant {tenant!r} was deleted", lines
        assert lines[1].startswith("hint: ") and f"kbctl tenants create {tenant}" in lines[1], lines
        assert len(lines) == 2 and "Traceback" not in err.decode(), lines
    with kbctl.open(home=kb_home, tenant=tenant + "_admin", profile="hash-384") as admin:
        assert tenant not in _registered(admin)
        admin.delete_tenant(admin.tenant)


def test_the_cli_refuses_a_deleted_tenant_until_tenants_create(kb, tenant, cli_process, tmp_path):
    (tmp_path / "a.md").write_text("# Refunds\n\nRefunds take five days.\n")
    kb.create_namespace("docs")
    kb.delete_tenant(tenant)
    for args in (
        ("namespaces", "--json"),
        ("search", "refund", "-n", "docs"),
        ("ingest", str(tmp_path), "-n", "docs"),
        ("worker", "--run", "1"),
    ):
        p = cli_process(*args)
        err = p.stderr.decode()
        assert p.returncode == 2, (args, err)
        assert err.splitlines()[0] == f"error: tenant {tenant!r} was deleted", (args, err)
        assert "Traceback" not in err and p.stdout == b"", (args, err)
    assert tenant not in _registered(kb)
    made = cli_process("tenants", "create", tenant)
    assert made.returncode == 0, made.stderr
    again = cli_process("namespaces", "--json")
    assert again.returncode == 0 and again.stdout.strip() == b"[]", again.stderr


def test_a_tenant_never_made_is_refused_where_first_use_may_not_make_it(kb):
    """With a DSN a tenant is made by ``kbctl tenants create`` only (the docs' rule, kept): its
    first use is refused, in one line with the command that makes it. Embedded, a name never used
    is made on first use (nothing to set up), a deleted one never."""
    role_for_use = getattr(tenants.role_for_use, "__wrapped__", tenants.role_for_use)  # a DSN run makes them
    name = kb.tenant + "_never"
    kb.connection()  # migrated (run alone, this test is the server's first)
    conn = kb.db.connect(register=False)
    try:
        with pytest.raises(TenantNotFound) as e:
            role_for_use(conn, name, create=False)
        assert e.value.message == f"tenant {name!r} does not exist"
        assert e.value.hint is not None and f"kbctl tenants create {name}" in e.value.hint
        assert name not in _registered(kb)
        role = role_for_use(conn, name, create=True)
        assert role.startswith("kbctl_t_") and name in _registered(kb)
        kb.delete_tenant(name)
        with pytest.raises(TenantNotFound) as gone:
            role_for_use(conn, name, create=True)
        assert gone.value.message == f"tenant {name!r} was deleted"
    finally:
        conn.close()
    assert name not in _registered(kb)
    if not TEST_DSN:
        with kbctl.open(home=kb.settings.database.home, tenant="x" + name, profile="hash-384") as fresh:
            fresh.create_namespace("docs")  # embedded: a new name's first write makes it
            assert [n["name"] for n in fresh.namespaces()] == ["docs"]
            fresh.delete_tenant(fresh.tenant)


_READS = [
    ["stats"],
    ["search", "refund", "-n", "docs"],
    ["runs"],
    ["errors"],
    ["progress"],
    ["verify", "-n", "docs"],
    ["show", "1", "-n", "docs"],
    ["namespaces"],
    ["namespaces", "--json"],
]


@pytest.mark.embedded_only  # with a DSN no use makes a tenant (and this suite makes every one it uses)
def test_a_read_of_a_tenant_never_made_is_refused_and_makes_nothing(kb, cli, tenant):
    """``kbctl --tenant acmee stats`` (a typo of acme) registered tenant acmee, role and all, and
    answered for an empty store: a read makes no tenant now. Each read command is refused in one
    line naming the known tenants, exit 2; the library too. A command that writes still makes it."""
    kb.create_namespace("docs")
    typo = "x" + tenant  # not ``t_…``: kbctl's own rule, not the suite's (tests/conftest.py)
    for args in _READS:
        p = cli(*args, tenant_override=typo)
        err = p.stderr.decode()
        assert p.returncode == 2 and p.stdout == b"" and "Traceback" not in err, (args, err)
        lines = err.splitlines()
        assert lines[0] == f"error: tenant {typo!r} does not exist", (args, err)
        assert lines[1].startswith(f"hint: create it: kbctl tenants create {typo}; known tenants: default"), err
    with kbctl.open(home=kb.settings.database.home, tenant=typo, profile="hash-384") as other:
        with pytest.raises(TenantNotFound):
            other.stats()
        with pytest.raises(TenantNotFound):
            other.search("refund", "docs")
    assert typo not in _registered(kb)
    made = cli("namespaces", "create", "docs", "-p", "hash-384", tenant_override=typo)
    assert made.returncode == 0, made.stderr
    assert typo in _registered(kb)
    assert cli("stats", tenant_override=typo).returncode == 0
    kb.delete_tenant(typo)


@pytest.mark.embedded_only  # with a DSN no use makes a tenant: a plan of one never made is refused as a read
def test_a_plan_of_a_tenant_never_made_makes_nothing(kb, cli, tenant, tmp_path):
    """``kbctl --tenant NEWT ingest --plan FOLDER -n docs`` registered NEWT (role and all): the plan
    said writing() as the run does. A plan writes nothing: it reads as no tenant (every document
    new), says the tenant would be made, and leaves no tenant, role, namespace or run behind;
    ``reembed --plan`` of it is refused as the build is (no such namespace). The run itself still
    makes the tenant."""
    folder = tmp_path / "docs"
    folder.mkdir()
    for name in ("refunds.md", "invoices.md"):
        (folder / name).write_text(f"# {name}\n\nHow {name[:-3]} are handled, in full.\n")
    kb.create_namespace("docs")  # the suite's own tenant has a namespace of that name: not read
    newt = "x" + tenant
    p = cli("ingest", "--plan", str(folder), "-n", "docs", "-p", "hash-384", "--json", tenant_override=newt)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["plan"] is True and out["run_id"] is None
    assert out["documents"] == dict(new=2, changed=0, unchanged=0, removed=0, failed=0)
    assert out["notes"] == [f"tenant {newt!r} does not exist yet: the ingest would create it"]
    assert f"tenant {newt!r} does not exist yet" in p.stderr.decode()
    assert newt not in _registered(kb) and _roles(kb, "kbctl_t_" + newt) == 0
    r = cli("reembed", "docs", "--profile", "hash-384", "--plan", tenant_override=newt)
    assert r.returncode == 2 and r.stderr.decode().startswith(
        f"error: namespace 'docs' does not exist (tenant {newt!r})"
    )
    assert newt not in _registered(kb) and _roles(kb, "kbctl_t_" + newt) == 0
    with kbctl.open(home=kb.settings.database.home, tenant=newt, profile="hash-384") as k:
        planned = k.ingest([str(folder)], "docs", plan=True, verify=False)
        assert planned.documents["new"] == 2 and newt not in _registered(kb)
        done = k.ingest([str(folder)], "docs", verify=False)  # the same session: now as the tenant made
        assert done.run_id is not None and done.documents["new"] == 2 and "notes" not in done.to_json()
        assert newt in _registered(kb)
        again = k.ingest([str(folder)], "docs", plan=True, verify=False)
        assert again.documents["unchanged"] == 2 and "notes" not in again.to_json()
    kb.delete_tenant(newt)
    gone = cli("ingest", "--plan", str(folder), "-n", "docs", tenant_override=newt)
    assert gone.returncode == 2 and gone.stderr.decode().startswith(f"error: tenant {newt!r} was deleted"), gone.stderr


@pytest.mark.embedded_only  # with a DSN no use makes a tenant: each is refused as a read
def test_a_refused_reembed_or_store_of_a_tenant_never_made_makes_nothing(kb, cli, tenant):
    """``kbctl --tenant NEWT reembed docs -p P`` registered NEWT (role and all) before refusing: a
    tenant never made has no namespace to reembed. ``kbctl store`` registered it before a refusal
    too (a profile not configured, a malformed first record) or with nothing on stdin. Each now
    refuses (or does nothing) in one line with a hint and leaves no tenant, role or run; a store of
    records still makes the tenant, and a session that was refused writes on. So for a name no
    namespace can have given to ``ingest`` or ``store``, and a refused ``namespaces create``."""
    from tests.db.test_store_records import _record

    kb.create_namespace("docs")  # the suite's own tenant has a namespace of that name: not read
    newt = "x" + tenant
    refused = [
        ["reembed", "docs", "--profile", "hash-384"],
        ["reembed", "docs", "--profile", "hash-384", "--plan"],
        ["reembed", "docs", "--storage", "halfvec"],
        ["reembed", "docs", "--profile", "hash-384", "--swap"],
    ]
    for args in refused:
        p = cli(*args, tenant_override=newt)
        lines = p.stderr.decode().strip().splitlines()
        assert p.returncode == 2 and p.stdout == b"", (args, p.stderr)
        assert lines == [
            f"error: namespace 'docs' does not exist (tenant {newt!r})",
            "hint: ingest something first: kbctl ingest PATH -n NAME",
        ], (args, p.stderr)
        assert newt not in _registered(kb) and _roles(kb, "kbctl_t_" + newt) == 0, args
    others = [
        (["store", "-n", "docs", "-p", "no-such-profile"], b"", 2),
        (["store", "-n", "docs", "-p", "hash-384"], b'{"type": "embedded", "source": 1}\n', 2),
        (["store", "-n", "docs", "-p", "hash-384"], b"", 0),
        (["store", "-n", "bad name", "-p", "hash-384"], json.dumps(_record("file:///a.md")).encode(), 2),
        (["ingest", "-", "-n", "bad name", "-p", "hash-384"], b"gardens", 2),
        (["namespaces", "create", "docs", "-p", "no-such-profile"], b"", 2),
        (["namespaces", "create", "bad/name", "-p", "hash-384"], b"", 2),
    ]
    for args, records, code in others:
        p = cli(*args, input=records, tenant_override=newt)
        lines = p.stderr.decode().strip().splitlines()
        assert p.returncode == code and len(lines) == (1 if code == 0 else 2), (args, records, p.stderr)
        assert newt not in _registered(kb) and _roles(kb, "kbctl_t_" + newt) == 0, (args, records)
    with kbctl.open(home=kb.settings.database.home, tenant=newt, profile="hash-384") as k:
        with pytest.raises(NamespaceNotFound):
            k.generations.reembed("docs", "hash-384")
        assert newt not in _registered(kb)
        line = json.dumps(_record("file:///a.md")).encode()
        stored = k.store_records([line.decode()], "docs", profile="hash-384", verify=False)
        assert stored.run_id is not None and stored.documents["new"] == 1 and newt in _registered(kb)
        assert k.generations.reembed("docs", "hash-384", storage="halfvec").complete
    kb.delete_tenant(newt)


@pytest.mark.embedded_only  # with a DSN no use makes a tenant: a stage of one never made is refused as a read
def test_the_chunk_and_embed_stages_of_a_tenant_never_made_make_nothing(kb, cli, tenant, tmp_path):
    """``kbctl --tenant NEWT chunk -n docs`` (and ``embed -n docs``) registered NEWT, role and all: they
    said ``writing()`` as ``kbctl store`` does, though they only read (the namespace's profile, its
    stored vectors). They read a tenant not made yet as one with no namespace (the profile of the
    settings, no vectors to reuse), so the first pipe into a new tenant works and only its ``store``
    makes it; a deleted tenant is refused as any read refuses it."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "refunds.md").write_text("# Refunds\n\nHow refunds are handled, in full.\n")
    kb.create_namespace("docs")  # the suite's own tenant has a namespace of that name: not read
    newt = "x" + tenant
    env = {"KBCTL_PROFILE": "hash-384"}  # the settings' profile: no -p, so the namespace's is looked up
    documents = cli("extract", input=cli("fetch", str(folder), check=True).stdout, check=True).stdout
    chunked = cli("chunk", "-n", "docs", input=documents, env=env, tenant_override=newt)
    assert chunked.returncode == 0, chunked.stderr
    assert [json.loads(ln)["type"] for ln in chunked.stdout.splitlines()] == ["chunked"]
    embedded = cli("embed", "-n", "docs", input=chunked.stdout, env=env, tenant_override=newt)
    assert embedded.returncode == 0, embedded.stderr
    assert [json.loads(ln)["type"] for ln in embedded.stdout.splitlines()] == ["embedded"]
    assert newt not in _registered(kb) and _roles(kb, "kbctl_t_" + newt) == 0
    stored = cli("store", "-n", "docs", input=embedded.stdout, env=env, tenant_override=newt)
    assert stored.returncode == 0 and json.loads(stored.stdout)["documents"]["new"] == 1, stored.stderr
    assert newt in _registered(kb)
    again = cli("embed", "-n", "docs", input=chunked.stdout, env=env, tenant_override=newt)
    assert again.stdout == embedded.stdout, again.stderr  # the tenant made: read as itself
    kb.delete_tenant(newt)
    for stage, records in (("chunk", documents), ("embed", chunked.stdout)):
        gone = cli(stage, "-n", "docs", input=records, env=env, tenant_override=newt)
        assert gone.returncode == 2 and gone.stderr.decode().startswith(f"error: tenant {newt!r} was deleted"), (
            gone.stderr
        )
    assert newt not in _registered(kb)


def test_a_token_is_looked_up_as_the_login_whatever_became_of_the_tenant_asking(kb_home, tenant):
    """``kb.agent_of_token`` (what a server looks every bearer token up with, on its own tenant's
    knowledge base) ran as that tenant's role, so it failed once that tenant was deleted, for every
    tenant's token. It runs as the login now, on its own connection: another tenant's token is
    found, a deleted tenant's tokens (gone with it) are not, and no tenant connection is opened."""
    other = tenant + "_tok"
    agents = {"agents.bot": {}}
    with kbctl.open(home=kb_home, tenant=other, profile="hash-384") as b:
        b.settings = b.settings.with_overrides(agents)
        token_b = b.create_agent_token("bot")
    with kbctl.open(home=kb_home, tenant=tenant, profile="hash-384") as a:
        a.settings = a.settings.with_overrides(agents)
        token_a = a.create_agent_token("bot")
        a.delete_tenant(tenant)
        assert a.agent_of_token(token_b) == (other, "bot")
        assert a.agent_of_token(token_a) is None
        assert a.agent_of_token("kb_not_a_token") is None
        assert a.session.conn is None  # the tenant's connection was not needed (closed by the delete)
        owner = a.session.owner_connection()
        assert owner.execute("SELECT current_user = session_user").fetchone()[0]
        with pytest.raises(TenantNotFound):
            a.namespaces()
    with kbctl.open(home=kb_home, tenant=other, profile="hash-384") as b:
        b.delete_tenant(other)


def test_a_token_made_while_its_tenant_is_deleted_does_not_outlive_the_delete(kb_home, tenant):
    """``kbctl tenants delete T`` removed T's tokens in one transaction and unregistered T in a
    later one, under T's lock; a token made in between (``agents token create``, which took no lock)
    survived, and authenticated again once T was made anew: an old tenant's token reaching a new,
    empty tenant. Driven step by step: a third connection holds T's lock, the delete waits on it,
    then the token is made; the token is made under the lock too now, and the delete removes T's
    tokens under it, so whichever comes first, no token of the deleted T is left."""
    agents = {"agents.bot": {}}
    with (
        kbctl.open(home=kb_home, tenant=tenant, profile="hash-384") as k,
        kbctl.open(home=kb_home, tenant=tenant + "_admin", profile="hash-384") as admin,
    ):
        k.settings = k.settings.with_overrides(agents)
        k.create_namespace("docs")  # the tenant's connection is open, acting as its role
        results = _delete_racing(admin, tenant, "token", lambda: k.create_agent_token("bot"))
        assert isinstance(results["delete"], dict), results
        token = results["token"]
        if isinstance(token, Exception):  # it waited, and found T deleted
            assert isinstance(token, TenantNotFound) and token.message == f"tenant {tenant!r} was deleted", token
        admin.create_tenant(tenant)  # T made anew: empty
        try:
            if isinstance(token, str):
                assert admin.agent_of_token(token) is None
            with psycopg.connect(admin.dsn()) as c:
                left = c.execute("SELECT count(*) FROM kbctl.agent_tokens WHERE tenant = %s", (tenant,)).fetchone()[0]
            assert left == 0
        finally:
            admin.delete_tenant(tenant)
            admin.delete_tenant(admin.tenant)


@pytest.mark.parametrize("namespace", ["docs", "late"])
def test_an_ingest_while_its_tenant_is_deleted_leaves_nothing_of_it(kb_home, tenant, namespace):
    """``kbctl tenants delete T`` deleted T's namespaces one by one, then unregistered T under T's
    lock in a later transaction; an ingest of T in between made its namespace (a new one, or the
    one just deleted) again and wrote its documents, rows keyed by T's name that outlived the delete
    and were T's again once T was made anew. Driven step by step, as the token's test above: a third
    connection holds T's lock, the delete waits on it, then T's ingest runs. The delete is one
    transaction under T's lock now, and a writer takes that lock (shared) before it writes: the
    ingest lands wholly before the delete (and goes with it) or is refused after it."""
    with (
        kbctl.open(home=kb_home, tenant=tenant, profile="hash-384") as k,
        kbctl.open(home=kb_home, tenant=tenant + "_admin", profile="hash-384") as admin,
    ):
        k.ingest_records([{"id": "a", "title": "a", "text": "a refund policy"}], "docs", verify=False)
        records = [{"id": "b", "title": "b", "text": "a late shipment"}]
        results = _delete_racing(admin, tenant, "ingest", lambda: k.ingest_records(records, namespace, verify=False))
        assert isinstance(results["delete"], dict), results
        done = results["ingest"]
        if isinstance(done, Exception):  # it waited, and found T deleted
            assert isinstance(done, TenantNotFound) and done.message == f"tenant {tenant!r} was deleted", repr(done)
        admin.create_tenant(tenant)  # T made anew: empty (its role sees every row keyed by T's name)
        try:
            with kbctl.open(home=kb_home, tenant=tenant, profile="hash-384") as again:
                assert again.namespaces() == []
        finally:
            admin.delete_tenant(tenant)
            admin.delete_tenant(admin.tenant)


def test_a_token_left_by_the_old_delete_race_does_not_reach_its_tenant_made_again(kb_home, tenant):
    """Before session 41 a token made while ``kbctl tenants delete T`` ran could outlive the delete
    (a row keyed by T's name only), and it authenticated on T made again under the name. A token
    now names the tenant it was made for (``tenant_instance``, migration 021), and the lookup and the
    borrow's check refuse one of another tenant of the name, or of none known. The slipped row is
    built in SQL as such a database holds it (migration 021 leaves it unlinked: it was made before
    the tenant of its name was registered)."""
    from kbctl.store import agents as store_agents

    agents = {"agents.bot": {}}
    slipped = "kb_slipped_" + tenant
    with kbctl.open(home=kb_home, tenant=tenant + "_admin", profile="hash-384") as admin:
        admin.create_tenant(tenant)
        admin.delete_tenant(tenant)
        with psycopg.connect(admin.dsn(), autocommit=True) as c:  # the login: agent_tokens is not forced
            c.execute(
                "INSERT INTO kbctl.agent_tokens (tenant, agent, token_hash) VALUES (%s, 'bot', %s)",
                (tenant, store_agents.token_hash(slipped)),
            )
        admin.create_tenant(tenant)  # T made again: the slipped row is keyed by its name
        try:
            assert admin.agent_of_token(slipped) is None
            with kbctl.open(home=kb_home, tenant=tenant, profile="hash-384") as k:
                k.settings = k.settings.with_overrides(agents)
                key, valid = store_agents.id_key_with_token(k.connection(), tenant, slipped)  # the borrow's check
                assert not valid
                fresh = k.create_agent_token("bot")  # the new T's own tokens are served
                assert admin.agent_of_token(fresh) == (tenant, "bot")
                assert store_agents.id_key_with_token(k.connection(), tenant, fresh) == (key, True)
        finally:
            admin.delete_tenant(tenant)
            admin.delete_tenant(admin.tenant)


def test_the_lexical_packer_of_a_deleted_tenant_says_the_tenant_was_deleted(kb_home, tenant):
    """The packer (``lexical.pack``: a run's end, ``kbctl db optimize``) took the namespace's locks
    without the tenant's: on a connection of a tenant deleted meanwhile it failed with a database
    error about a role, where every other writer says the tenant was deleted."""
    from kbctl.store import lexical

    with (
        kbctl.open(home=kb_home, tenant=tenant, profile="hash-384") as k,
        kbctl.open(home=kb_home, tenant=tenant + "_admin", profile="hash-384") as admin,
    ):
        k.ingest_records([{"id": "a", "title": "a", "text": "a refund policy"}], "docs", verify=False)
        conn = k.connection()
        ns_id = next(i for i, name, _ in lexical.all_namespaces(conn) if name == "docs")
        admin.delete_tenant(tenant)
        for pack in (
            lambda: lexical.pack(conn, ns_id, tenant=tenant),
            lambda: lexical.repack(conn, ns_id, tenant=tenant),
            lambda: lexical.maintain(conn, ns_id, tenant=tenant),
        ):
            with pytest.raises(TenantNotFound) as e:
                pack()
            assert e.value.message == f"tenant {tenant!r} was deleted"
        admin.delete_tenant(admin.tenant)


def test_every_call_of_the_lexical_packer_takes_its_tenants_lock(kb_home, tenant):
    """``lexical.pack``, ``repack`` and ``maintain`` took the tenant's lock only when given
    ``tenant=``: called without it (as the tests and a bench did), a pack neither waited for the
    tenant's delete nor said the tenant was deleted. The tenant is required now; a pack racing the
    delete waits for it and is refused, as every writer of the tenant's documents is."""
    from kbctl.store import lexical

    with (
        kbctl.open(home=kb_home, tenant=tenant, profile="hash-384") as k,
        kbctl.open(home=kb_home, tenant=tenant + "_admin", profile="hash-384") as admin,
    ):
        k.ingest_records([{"id": "a", "title": "a", "text": "a refund policy"}], "docs", verify=False)
        conn = k.connection()
        ns_id = k.namespace("docs").id
        for unlocked in (lexical.pack, lexical.repack, lexical.maintain):
            with pytest.raises(TypeError, match="tenant"):
                unlocked(conn, ns_id)  # type: ignore[call-arg]
        results = _delete_racing(admin, tenant, "pack", lambda: lexical.pack(conn, ns_id, tenant=tenant))
        assert isinstance(results["delete"], dict) and results["delete"]["namespaces"] == 1, results
        assert isinstance(results["pack"], TenantNotFound), results
        assert results["pack"].message == f"tenant {tenant!r} was deleted"
        admin.delete_tenant(admin.tenant)


def test_an_ingest_whose_tenant_is_deleted_before_its_lexical_pass_says_the_tenant_was_deleted(
    kb_home, tenant, monkeypatch
):
    """The end of a run (ACLs, unused terms, the packer) after its writes: a delete that lands just
    then is reported as the tenant deleted, not as a database error."""
    import kbctl.store.acl as store_acl

    with (
        kbctl.open(home=kb_home, tenant=tenant, profile="hash-384") as k,
        kbctl.open(home=kb_home, tenant=tenant + "_admin", profile="hash-384") as admin,
    ):
        k.create_namespace("docs")
        admin.namespaces()  # its connection is open before the ingest's end
        original = store_acl.reapply_acls

        def delete_first(*args, **kwargs):
            admin.delete_tenant(tenant)
            return original(*args, **kwargs)

        monkeypatch.setattr(store_acl, "reapply_acls", delete_first)
        records = [{"id": str(i), "title": str(i), "text": f"a refund policy number {i}"} for i in range(3)]
        with pytest.raises(TenantNotFound) as e:
            k.ingest_records(records, "docs", verify=False)
        assert e.value.message == f"tenant {tenant!r} was deleted"
        monkeypatch.undo()
        admin.delete_tenant(admin.tenant)
