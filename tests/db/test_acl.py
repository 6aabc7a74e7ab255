"""Access control: document ACLs from every origin, principals on searches, the late fail-closed gate, audit.

The matrix: principals × documents (public, group-only, user-only, no ACL under a public and a
deny namespace, malformed ACL) × strategies (content, hybrid, metadata) × modes × output formats.
No withheld document's text, title, id, URI or citation may appear in any output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kbctl
from kbctl.cli.render import hits_markdown
from kbctl.types import Principal

DOCS = {  # name: (front matter acl line or None, the document's secret word)
    "pubdoc": ("acl: [public]", "zirconpub"),
    "engdoc": ("acl: [group:eng]", "zircongroup"),
    "userdoc": ("acl: [user:u1042]", "zirconuser"),
    "nonedoc": (None, "zirconnone"),
    "baddoc": ("acl: [eng, public]", "zirconbad"),  # "eng" is no entry: malformed, withheld from everyone
}

PRINCIPALS = {
    "anonymous": None,
    "u1042": Principal("u1042"),
    "eng": Principal("u7", ("eng",)),
    "stranger": Principal("u9", ("sales",)),
}


def visible(principal: str, namespace: str) -> set[str]:
    """The reference model: which documents each principal may view."""
    out = {"pubdoc"}
    if principal == "u1042":
        out.add("userdoc")
    if principal == "eng":
        out.add("engdoc")
    if namespace == "open":
        out.add("nonedoc")
    return out


def _corpus(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, (acl, secret) in DOCS.items():
        fm = f"---\ntitle: Handbook {name}\n{acl}\n---\n" if acl else f"---\ntitle: Handbook {name}\n---\n"
        (root / f"{name}.md").write_text(
            f"{fm}\n# Handbook {name}\n\nThe staff handbook section {secret} covers travel expenses.\n"
        )
    return root


def _config(tmp_path: Path, extra: str = "") -> Path:
    cfg = tmp_path / "kbctl.toml"
    cfg.write_text('[namespaces.open]\nacl_default = "public"\n\n[namespaces.closed]\nacl_default = "deny"\n' + extra)
    return cfg


@pytest.fixture
def acl_kb(tmp_path, kb_home, tenant):
    cfg = _config(tmp_path)
    kb = kbctl.open(config=cfg, home=kb_home, tenant=tenant, profile="hash-384")
    src = _corpus(tmp_path / "docs")
    for ns in ("open", "closed"):
        kb.ingest([str(src)], ns, verify=False)
    yield kb
    kb.close()


def _outputs(kb, result) -> str:
    """Every library rendering of a result: JSON, JSONL, markdown, context."""
    return "\n".join(
        [
            json.dumps(result.to_json(), default=str),
            *(json.dumps(h.to_json(), default=str) for h in result.hits),
            hits_markdown(result),
            kb.context(result, 4000),
        ]
    )


def _doc_of(hit) -> str:
    return Path(hit.source).stem


@pytest.mark.parametrize("who", list(PRINCIPALS))
@pytest.mark.parametrize("ns", ["open", "closed"])
def test_matrix_no_withheld_document_leaks(acl_kb, who, ns):
    principal = PRINCIPALS[who]
    allowed = visible(who, ns)
    withheld = set(DOCS) - allowed
    all_ids = {}
    for h in acl_kb.search("handbook", ns, unrestricted=True, k=20).hits:
        all_ids[_doc_of(h)] = (h.doc_id, h.chunk_id)
    assert set(all_ids) == set(DOCS)  # the unrestricted (library-only) mode sees everything
    cases = [("handbook", (), m) for m in ("dense", "lexical", "hybrid")]
    cases += [("handbook", ("source_type=markdown",), m) for m in ("dense", "lexical", "hybrid")]
    cases += [("", ("source_type=markdown",), "auto")]
    for query, filters, mode in cases:
        for explain in (False, True):
            r = acl_kb.search(
                query, ns, mode=mode, filters=filters, k=10, principal=principal, explain=explain, per_doc=1
            )
            expected_strategy = "metadata" if not query else ("hybrid" if filters else "content")
            assert r.strategy == expected_strategy
            got = {_doc_of(h) for h in r.hits}
            assert got == allowed, (query, filters, mode, got)
            # a filtered query reports no withheld count: it would be an oracle on the withheld
            # documents' metadata (tests/db/test_gate_side_channels.py)
            assert r.withheld == (0 if filters else len(withheld))
            text = _outputs(acl_kb, r)
            for name in withheld:
                assert DOCS[name][1] not in text and name not in text, (name, query, mode)
                did, cid = all_ids[name]
                assert all(h.doc_id != did and h.chunk_id != cid for h in r.hits)
            assert (f"withheld {r.withheld} hit(s)" in " ".join(r.notes)) == bool(r.withheld)
            if ns == "closed":
                assert any("acl_default" in n and "deny" in n for n in r.notes)


@pytest.mark.parametrize(
    "fmt", [("--json",), ("--jsonl",), ("--format", "markdown"), ("--format", "context"), ("--explain",), ()]
)
def test_cli_outputs_are_gated(tmp_path, cli, fmt):
    cfg = _config(tmp_path)
    src = _corpus(tmp_path / "docs")
    env = {"KBCTL_CONFIG": str(cfg), "KBCTL_PROFILE": "hash-384"}
    cli("ingest", str(src), "-n", "closed", env=env, check=True)
    for args, allowed in [
        ((), {"pubdoc"}),
        (("--as", "user:u7", "--group", "eng"), {"pubdoc", "engdoc"}),
        (("--as", "u1042"), {"pubdoc", "userdoc"}),
    ]:
        p = cli("search", "handbook travel", "-n", "closed", *args, *fmt, env=env, check=True)
        out = p.stdout.decode() + p.stderr.decode()
        for name, (_, secret) in DOCS.items():
            assert (secret in out) == (name in allowed), (name, args, fmt, out)
        assert (
            f"withheld: {5 - len(allowed)}" in out
            or f"withheld {5 - len(allowed)}" in out
            or f'"withheld": {5 - len(allowed)}' in out
        )


def test_gate_error_withholds_everything(acl_kb, monkeypatch):
    from kbctl.acl import Gate

    def broken(self, ns, acl):
        raise RuntimeError("policy store down")

    monkeypatch.setattr(Gate, "_allows", broken)
    for q, f in (("handbook", ()), ("", ("source_type=markdown",))):
        r = acl_kb.search(q, "open", filters=f, principal=Principal("u1042"))
        assert r.hits == () and r.withheld == (0 if f else 5)  # filtered: no count (no oracle)


def test_over_fetch_returns_k_viewable(tmp_path, kb_home, tenant):
    cfg = _config(tmp_path)
    root = tmp_path / "many"
    root.mkdir()
    for i in range(40):  # secret documents that rank above the public ones
        (root / f"s{i:02d}.md").write_text(
            f"---\nacl: [group:board]\n---\n# Board {i}\n\nmerger merger merger merger plan {i}\n"
        )
    for i in range(4):
        (root / f"p{i}.md").write_text(
            f"# Public {i}\n\nmerger plan notes for everyone, week {i} of the quarter report\n"
        )
    with kbctl.open(config=cfg, home=kb_home, tenant=tenant, profile="hash-384") as kb:
        kb.ingest([str(root)], "open", verify=False)
        for mode in ("lexical", "dense", "hybrid"):
            r = kb.search("merger plan", "open", mode=mode, k=3, candidates=5)
            assert len(r.hits) == 3 and all(Path(h.source).stem.startswith("p") for h in r.hits), mode
            assert r.withheld > 0
        r = kb.search("merger plan", "open", k=3, candidates=5, principal=Principal("x", ("board",)))
        assert len(r.hits) == 3 and r.withheld == 0
        m = kb.search("", "open", filters=["source_type=markdown"], k=3)
        assert len(m.hits) == 3 and all(Path(h.source).stem.startswith("p") for h in m.hits)


def test_acl_change_updates_without_embedding(tmp_path, kb_home, tenant):
    cfg = _config(tmp_path)
    src = _corpus(tmp_path / "docs")
    with kbctl.open(config=cfg, home=kb_home, tenant=tenant, profile="hash-384") as kb:
        kb.ingest([str(src)], "open", verify=False)
        sales = Principal("u9", ("sales",))
        assert "engdoc" not in {_doc_of(h) for h in kb.search("handbook", "open", principal=sales).hits}
        p = src / "engdoc.md"
        p.write_text(p.read_text().replace("acl: [group:eng]", "acl: [group:eng, group:sales]"))
        rep = kb.ingest([str(src)], "open", verify=False)
        # the file was re-read (its bytes changed), its chunks' vectors reused: nothing is embedded;
        # its content hash is the same (an ACL is not part of it, nor is the file's size) but its ACL
        # is not: it is reported changed and its row written again, with the new ACL
        assert rep.chunks["embedded"] == 0, rep.to_json()
        assert rep.documents["unchanged"] == 4 and rep.documents["changed"] == 1, rep.to_json()
        assert "engdoc" in {_doc_of(h) for h in kb.search("handbook", "open", principal=sales).hits}


def test_rules_recipients_and_records(tmp_path, kb_home, tenant):
    root = tmp_path / "tree"
    (root / "hr").mkdir(parents=True)
    (root / "hr" / "leave.md").write_text("# Leave\n\nParental leave policy quokka details.\n")
    (root / "general.md").write_text("# General\n\nOffice policy quokka hours.\n")
    (root / "mail.eml").write_text(
        "From: Alice <alice@example.com>\nTo: bob@example.com\nSubject: Salary quokka\n"
        "Message-ID: <m1@example.com>\n\nYour salary quokka review.\n"
    )
    extra = (
        '\n[namespaces.tree]\nacl_rules = [{glob = "hr/**", principals = ["group:hr"]}]\nacl_from_recipients = true\n'
    )
    cfg = _config(tmp_path, extra)
    with kbctl.open(config=cfg, home=kb_home, tenant=tenant, profile="hash-384") as kb:
        kb.ingest([str(root)], "tree", verify=False)

        def seen(p):
            return {_doc_of(h) for h in kb.search("quokka policy salary", "tree", k=10, principal=p).hits}

        assert seen(None) == {"general"}
        assert seen(Principal("x", ("hr",))) == {"general", "leave"}
        assert seen(Principal("bob@example.com")) == {"general", "mail"}
        # the rule changes: no source changed, the stored ACLs follow, nothing is embedded
        cfg.write_text(cfg.read_text().replace('"group:hr"', '"group:people"'))
    with kbctl.open(config=cfg, home=kb_home, tenant=tenant, profile="hash-384") as kb:
        rep = kb.ingest([str(root)], "tree", verify=False)
        assert rep.chunks["embedded"] == 0 and rep.documents["unchanged"] == 3
        assert "leave" not in {
            _doc_of(h) for h in kb.search("quokka policy", "tree", principal=Principal("x", ("hr",))).hits
        }
        assert "leave" in {
            _doc_of(h) for h in kb.search("quokka policy", "tree", principal=Principal("x", ("people",))).hits
        }
        kb.ingest_records(
            [
                {"id": "r1", "title": "Rec", "text": "record wombat text", "acl": ["group:x"]},
                {"id": "r2", "title": "Rec2", "text": "record wombat open"},
            ],
            "recs",
            verify=False,
        )
        assert {h.source for h in kb.search("wombat", "recs").hits} == {"r2"}
        assert {h.source for h in kb.search("wombat", "recs", principal=Principal("y", ("x",))).hits} == {"r1", "r2"}


def test_audit_log(tmp_path, kb_home, tenant):
    cfg = _config(tmp_path, "\n[audit]\nenabled = true\nretention_days = 30\n")
    src = _corpus(tmp_path / "docs")
    with kbctl.open(config=cfg, home=kb_home, tenant=tenant, profile="hash-384") as kb:
        kb.ingest([str(src)], "open", verify=False)
        kb.search("handbook", "open")  # anonymous: not audited
        kb.search("handbook", "open", principal=Principal("u1042", ("eng",)))
        rows = kb.audit()
        assert len(rows) == 1
        row = rows[0]
        assert row["principal"] == "user:u1042" and row["groups"] == ["eng"]
        assert row["returned"] == 4 and row["withheld"] == 1 and "handbook" not in row["query_hash"]
        assert kb.prune_audit() == 0


def test_principal_and_unrestricted_are_checked(acl_kb):
    from kbctl.errors import UsageError

    with pytest.raises(UsageError):
        acl_kb.search("handbook", "open", principal=Principal("u1"), unrestricted=True)
    with pytest.raises(UsageError):
        acl_kb.principal("user:has space")
    assert acl_kb.principal("user:u1", ["group:eng", "ops"]) == Principal("u1", ("eng", "ops"))
    r = acl_kb.retriever("open", principal=Principal("u1042"))
    assert "userdoc" in {_doc_of(h) for h in r.search("handbook").hits}


def test_eval_run_as_principal(tmp_path, acl_kb):
    golden = tmp_path / "q.jsonl"
    golden.write_text(
        json.dumps(
            {"id": "q1", "query": "handbook zirconuser", "namespace": "open", "relevant": {"docs/userdoc.md": 2}}
        )
        + "\n"
    )
    anon = acl_kb.evaluate(golden, modes=["lexical"], k=10)
    as_user = acl_kb.evaluate(golden, modes=["lexical"], k=10, principal=Principal("u1042"))
    assert anon.to_json()["modes"]["lexical"]["metrics"]["ndcg@10"] == 0
    assert as_user.to_json()["modes"]["lexical"]["metrics"]["ndcg@10"] > 0


def test_eval_run_as_a_principal_audits_each_query_and_mode_once(tmp_path, cli, kb_home, tenant):
    """``kbctl eval run --as`` wrote two audit rows per query and mode: the search timed for its
    latency (as ``kbctl search`` makes it) and the search at ``--depth`` the metrics are computed
    from. The second is what the run reads (its hits are scored); the first's hits are discarded.
    One row per query and mode, as the ``--depth`` search returned them."""
    cfg = _config(tmp_path, "\n[audit]\nenabled = true\n")
    env = {"KBCTL_CONFIG": str(cfg), "KBCTL_PROFILE": "hash-384"}
    cli("ingest", str(_corpus(tmp_path / "docs")), "-n", "closed", env=env, check=True)
    golden = tmp_path / "q.jsonl"
    golden.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "query": q, "namespace": "closed", "relevant": {"docs/userdoc.md": 2}}) + "\n"
            for i, q in enumerate(("handbook zirconuser", "travel expenses", "staff handbook"))
        )
    )
    p = cli("eval", "run", str(golden), "--modes", "lexical,hybrid", "--as", "u1042", env=env)
    assert p.returncode == 0, p.stderr.decode()
    with kbctl.open(config=cfg, home=kb_home, tenant=tenant) as kb:
        rows = kb.audit()
    assert len(rows) == 3 * 2, [(r["query_hash"][:8], r["returned"]) for r in rows]
    assert {r["principal"] for r in rows} == {"user:u1042"}
    assert len({r["query_hash"] for r in rows}) == 3
    # the rows are the scored searches' (--depth 100: every viewable chunk), 3 withheld each
    assert {(r["returned"], r["withheld"]) for r in rows} == {(2, 3)}
