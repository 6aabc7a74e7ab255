"""Side channels around the permission gate (issue 26, items 3, 4 and the gate's smaller ones).

- The withheld count is no oracle: a filter that matches a withheld document's metadata (its title,
  its path) gives the same answer as one that matches nothing, filter-only or with a content query,
  through the library and the CLI ``--json`` (the HTTP API returns the library's result).
- Nothing a principal may not view shapes what they see: a visible hit's score and lane ranks do
  not depend on whether a withheld document matched too.
- The gate decides before near-duplicate removal: a public copy of a restricted text is returned.
- ``acl: []`` and ``acl: ""`` mean no one (fail closed), not everyone.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kbctl
from kbctl.errors import UsageError
from kbctl.types import Principal
from tests.db.test_rerank import tiny_cross_encoder  # noqa: F401  (a fixture)

MODES = ("lexical", "dense", "hybrid")


def _config(tmp_path: Path) -> Path:
    cfg = tmp_path / "kbctl.toml"
    cfg.write_text('[namespaces.gate]\nacl_default = "public"\n')
    return cfg


def _oracle_corpus(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "zoo.md").write_text("---\ntitle: Zoo notes\n---\n# Zoo notes\n\nquarterly plan for the zoo keepers\n")
    (root / "secret-merger.md").write_text(
        "---\ntitle: Zephyr merger\nacl: [group:board]\n---\n# Zephyr\n\nquarterly plan of the zephyr merger terms\n"
    )
    return root


@pytest.fixture
def oracle_kb(tmp_path, kb_home, tenant):
    kb = kbctl.open(config=_config(tmp_path), home=kb_home, tenant=tenant, profile="hash-384")
    kb.ingest([str(_oracle_corpus(tmp_path / "docs"))], "gate", verify=False)
    yield kb
    kb.close()


def _observable(result) -> dict:
    """Everything a principal sees of a result except the query itself and the timings."""
    d = result.to_json()
    d.pop("query", None)
    details = dict(d.pop("details", {}))
    details.pop("timings_ms", None)
    return {**d, "details": details}


def _pairs(root: Path):
    """(filter matching the withheld document's metadata, the same filter matching nothing)."""
    return [
        ("title~Zep", "title~Zeq"),
        ("title~Zephyr m", "title~Zephyr n"),
        ("path~secret", "path~secreu"),
        (f"abs_path~{root}/secret", f"abs_path~{root}/secreu"),
        ("title=Zephyr merger", "title=Zephyr mergeq"),
    ]


def test_withheld_count_is_no_title_oracle_filter_only(oracle_kb, tmp_path):
    root = tmp_path / "docs"
    for hit_filter, miss_filter in _pairs(root):
        for who in (None, Principal("u1", ("sales",))):
            a = oracle_kb.search("", "gate", filters=[hit_filter], principal=who)
            b = oracle_kb.search("", "gate", filters=[miss_filter], principal=who)
            assert a.strategy == "metadata" and a.hits == ()
            assert a.withheld == b.withheld == 0, (hit_filter, a.withheld, b.withheld)
            assert _observable(a) == _observable(b), (hit_filter, miss_filter)
    # the board still sees its document through the same filter
    r = oracle_kb.search("", "gate", filters=["title~Zep"], principal=Principal("u2", ("board",)))
    assert [h.title for h in r.hits] == ["Zephyr merger"]


@pytest.mark.parametrize("mode", MODES)
def test_withheld_count_is_no_title_oracle_with_content(oracle_kb, tmp_path, mode):
    root = tmp_path / "docs"
    for hit_filter, miss_filter in _pairs(root):
        a = oracle_kb.search("quarterly plan", "gate", mode=mode, filters=[hit_filter], explain=True)
        b = oracle_kb.search("quarterly plan", "gate", mode=mode, filters=[miss_filter], explain=True)
        assert a.hits == () and a.withheld == b.withheld, (mode, hit_filter, a.withheld, b.withheld)
        assert _observable(a) == _observable(b), (mode, hit_filter)


@pytest.mark.parametrize("mode", MODES)
def test_visible_hit_is_not_shaped_by_a_withheld_match(oracle_kb, mode):
    """``title~Z`` matches the public Zoo notes and the withheld Zephyr merger, ``title~Zo`` only the
    former: the public hit's score, relevance and lane ranks must not tell them apart."""
    a = oracle_kb.search("quarterly plan zephyr", "gate", mode=mode, filters=["title~Z"], explain=True)
    b = oracle_kb.search("quarterly plan zephyr", "gate", mode=mode, filters=["title~Zo"], explain=True)
    assert [h.title for h in a.hits] == [h.title for h in b.hits] == ["Zoo notes"]
    assert _observable(a) == _observable(b), mode


def test_withheld_count_is_no_oracle_through_the_cli(tmp_path, cli):
    cfg = _config(tmp_path)
    root = _oracle_corpus(tmp_path / "docs")
    env = {"KBCTL_CONFIG": str(cfg), "KBCTL_PROFILE": "hash-384"}
    cli("ingest", str(root), "-n", "gate", env=env, check=True)
    for query in ("", "quarterly plan"):
        for hit_filter, miss_filter in _pairs(root):
            outs = []
            for f in (hit_filter, miss_filter):
                p = cli("search", query, "-n", "gate", "--filter", f, "--json", env=env, check=True)
                d = json.loads(p.stdout)
                d.get("details", {}).pop("timings_ms", None)
                outs.append((d, p.stderr))
            assert outs[0][0]["withheld"] == outs[1][0]["withheld"] == (0 if not query else outs[0][0]["withheld"])
            assert outs[0] == outs[1], (query, hit_filter)


def test_unfiltered_content_query_still_counts_withheld(oracle_kb):
    r = oracle_kb.search("zephyr merger terms", "gate", mode="lexical")
    assert r.hits == () and r.withheld == 1
    assert "withheld 1 hit(s)" in " ".join(r.notes)


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_typo_correction_never_names_a_withheld_term(oracle_kb, mode):
    """The spelling corrector picks from the vocabulary of documents the principal may view: a
    near-miss of a word only a withheld document holds is not "corrected" to it (which would spell
    out the word: an attacker could enumerate a restricted document's vocabulary by typing)."""
    for who in (None, Principal("u1", ("sales",))):
        r = oracle_kb.search("zephir plan", "gate", mode=mode, principal=who)
        assert "zephyr" not in json.dumps(r.to_json()), who
        assert "zephir" not in (r.details.get("corrections") or {}), who
        # the same answer as for a word no document holds
        other = oracle_kb.search("qwxzvk plan", "gate", mode=mode, principal=who)
        assert [h.chunk_id for h in r.hits] == [h.chunk_id for h in other.hits]
        assert r.withheld == other.withheld
    # a principal who may view the document still gets the correction, and the document
    board = oracle_kb.search("zephir plan", "gate", mode=mode, principal=Principal("u2", ("board",)))
    assert board.details.get("corrections") == {"zephir": "zephyr"}
    assert any("Zephyr" in (h.title or "") for h in board.hits)


def test_typo_correction_skips_a_withheld_candidate_for_a_viewable_one(tmp_path, kb_home, tenant):
    """Of two corrections at the same distance, the more frequent one is withheld: the corrector
    takes the viewable one for a principal who may not view the other, and the frequent one for the
    board."""
    root = tmp_path / "docs"
    root.mkdir()
    (root / "public.md").write_text("# Harbour\n\nthe harbour crane report\n")
    for i in range(3):
        (root / f"board-{i}.md").write_text(
            f"---\nacl: [group:board]\n---\n# Minutes {i}\n\nthe harbor deal, note {i}\n"
        )
    kb = kbctl.open(config=_config(tmp_path), home=kb_home, tenant=tenant, profile="hash-384")
    try:
        kb.ingest([str(root)], "gate", verify=False)
        # "harbr" is one edit from "harbor" (3 documents, withheld) and two from "harbour" (1, public)
        anon = kb.search("harbr crane", "gate", mode="lexical")
        assert anon.details.get("corrections") == {"harbr": "harbour"}
        assert [h.title for h in anon.hits] == ["Harbour"]
        board = kb.search("harbr crane", "gate", mode="lexical", principal=Principal("u2", ("board",)))
        assert board.details.get("corrections") == {"harbr": "harbor"}
    finally:
        kb.close()


def test_typo_correction_reads_past_the_first_postings_and_fails_closed_at_the_cap(
    tmp_path, kb_home, tenant, monkeypatch
):
    """The corrector first reads a term's first few postings (``VIEWABLE_FIRST``), then up to
    ``VIEWABLE_POSTINGS``: a viewable document past the first few still makes the term viewable;
    one past the cap does not (fail closed: the query keeps its misspelling)."""
    from kbctl.search import lanes

    root = tmp_path / "docs"
    root.mkdir()
    for i in range(3):
        (root / f"a-board-{i}.md").write_text(f"---\nacl: [group:board]\n---\n# Minutes {i}\n\nthe harbor deal {i}\n")
    # ingested last: its posting comes last in the primary key (namespace, term, chunk id) read in order
    (root / "z-public.md").write_text("# Port\n\nthe harbor crane report\n")
    kb = kbctl.open(config=_config(tmp_path), home=kb_home, tenant=tenant, profile="hash-384")
    try:
        kb.ingest([str(root)], "gate", verify=False)
        monkeypatch.setattr(lanes, "VIEWABLE_FIRST", 2)
        monkeypatch.setattr(lanes, "VIEWABLE_POSTINGS", 10)
        anon = kb.search("harbr crane", "gate", mode="lexical")
        assert anon.details.get("corrections") == {"harbr": "harbor"}
        assert [h.title for h in anon.hits] == ["Port"]
        monkeypatch.setattr(lanes, "VIEWABLE_POSTINGS", 3)
        assert not kb.search("harbr crane", "gate", mode="lexical").details.get("corrections")
    finally:
        kb.close()


@pytest.fixture
def dup_kb(tmp_path, kb_home, tenant):
    """A public and an ACL-restricted document with the same text; the restricted one ranks first."""
    root = tmp_path / "dup"
    root.mkdir()
    body = "# Travel policy\n\nThe travel policy covers trains, hotels and the meal allowance for staff.\n"
    (root / "a-secret.md").write_text("---\ntitle: Travel policy (board)\nacl: [group:board]\n---\n" + body)
    (root / "b-public.md").write_text("---\ntitle: Travel policy\n---\n" + body)
    kb = kbctl.open(config=_config(tmp_path), home=kb_home, tenant=tenant, profile="hash-384")
    kb.ingest([str(root)], "gate", verify=False)
    yield kb
    kb.close()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("prf", ["off", "rescore", "hybrid"])
def test_public_copy_of_a_duplicate_survives_the_gate(dup_kb, mode, prf):
    every = dup_kb.search("travel policy meal allowance", "gate", mode=mode, unrestricted=True, prf=prf)
    assert len(every.hits) == 1  # near-duplicates collapse for whoever may see both
    for who in (None, Principal("u1", ("sales",))):
        r = dup_kb.search("travel policy meal allowance", "gate", mode=mode, principal=who, prf=prf)
        assert [Path(h.source).stem for h in r.hits] == ["b-public"], (mode, prf, who, r.withheld)
    r = dup_kb.search("travel policy meal allowance", "gate", mode=mode, principal=Principal("u2", ("board",)))
    assert len(r.hits) == 1


def test_public_copy_survives_reranking(tmp_path, kb_home, tenant, tiny_cross_encoder):  # noqa: F811
    root = tmp_path / "dup"
    root.mkdir()
    body = "# Travel policy\n\nThe travel policy covers trains, hotels and the meal allowance for staff.\n"
    (root / "a-secret.md").write_text("---\nacl: [group:board]\n---\n" + body)
    (root / "b-public.md").write_text(body)
    cfg = _config(tmp_path)
    cfg.write_text(
        cfg.read_text()
        + f'\n[profiles.hash-384.rerank]\nkind = "cross-encoder"\nmodel = "{tiny_cross_encoder}"\ntop_n = 10\n'
    )
    with kbctl.open(config=cfg, home=kb_home, tenant=tenant, profile="hash-384") as kb:
        kb.ingest([str(root)], "gate", verify=False)
        r = kb.search("travel policy meal allowance", "gate", rerank=True)
        assert [Path(h.source).stem for h in r.hits] == ["b-public"]
        assert r.details.get("reranked") is True


@pytest.mark.parametrize("acl", ["acl: []", 'acl: ""', "acl: ''", "acl:", "acl: [ ]"])
def test_empty_acl_means_no_one(tmp_path, kb_home, tenant, acl):
    root = tmp_path / "empty"
    root.mkdir()
    (root / "closed.md").write_text(f"---\ntitle: Closed\n{acl}\n---\n# Closed\n\nwombat ledger of nobody\n")
    with kbctl.open(config=_config(tmp_path), home=kb_home, tenant=tenant, profile="hash-384") as kb:
        kb.ingest([str(root)], "gate", verify=False)
        assert len(kb.search("wombat ledger", "gate", unrestricted=True).hits) == 1
        for who in (None, Principal("u1"), Principal("u2", ("board", "eng"))):
            r = kb.search("wombat ledger", "gate", principal=who)
            assert r.hits == (), (acl, who)
            assert kb.search("", "gate", filters=["title=Closed"], principal=who).hits == ()


@pytest.mark.parametrize("acl", [None, [], ""])
def test_a_record_given_an_empty_acl_means_no_one(tmp_path, kb_home, tenant, acl):
    """A record's ``acl`` field given without entries (``null``, ``[]``, ``""``) is an ACL of no one,
    as front matter's ``acl:`` is; only a record without the key takes the namespace's default."""
    records = [
        {"id": "closed", "title": "Closed", "text": "wombat ledger of nobody", "acl": acl},
        {"id": "open", "title": "Open", "text": "wombat ledger of everyone"},
    ]
    with kbctl.open(config=_config(tmp_path), home=kb_home, tenant=tenant, profile="hash-384") as kb:
        kb.ingestion.ingest_records(records, "gate", verify=False)
        assert len(kb.search("wombat ledger", "gate", mode="lexical", unrestricted=True).hits) == 2
        for who in (None, Principal("u1"), Principal("u2", ("board", "eng"))):
            r = kb.search("wombat ledger", "gate", mode="lexical", principal=who)
            assert [h.title for h in r.hits] == ["Open"], (acl, who)


def _numbers_kb(tmp_path, kb_home, tenant):
    root = tmp_path / "nums"
    root.mkdir()
    for i, (k, year) in enumerate([(5, 2019), (15, 2021), (30, 2024)]):
        (root / f"d{i}.md").write_text(f"---\ntitle: D{i}\nk: {k}\nyear: {year}\n---\n# D{i}\n\nnumbered note {i}\n")
    kb = kbctl.open(config=_config(tmp_path), home=kb_home, tenant=tenant, profile="hash-384")
    kb.ingest([str(root)], "gate", verify=False)
    return kb


def test_full_width_digits_compare_as_numbers(tmp_path, kb_home, tenant):
    with _numbers_kb(tmp_path, kb_home, tenant) as kb:
        for wide, ascii_ in [("k>=１２", "k>=12"), ("year>=２０２０", "year>=2020"), ("k<３０", "k<30")]:
            a = kb.search("", "gate", filters=[wide])
            b = kb.search("", "gate", filters=[ascii_])
            assert [h.title for h in a.hits] == [h.title for h in b.hits] != [], wide
        # digits of other scripts are not numbers here: compared as text, never a database error
        r = kb.search("", "gate", filters=["k>=٣"])
        assert r.hits == ()


@pytest.mark.parametrize(
    "flt",
    [
        "date>=0001-01-01T00:00:00+14:00",
        "date<0001-01-01T05:00+23:59",
        "date<=9999-12-31T23:00:00-14:00",
        "date<=9999-12-31",
        "date>9999-12-31",
    ],
)
def test_extreme_date_filter_is_a_usage_error(tmp_path, kb_home, tenant, cli, flt):
    with _numbers_kb(tmp_path, kb_home, tenant) as kb:
        with pytest.raises(UsageError) as e:
            kb.search("", "gate", filters=[flt])
        assert "date" in e.value.message
        with pytest.raises(UsageError):
            kb.search("numbered note", "gate", filters=[flt], mode="hybrid")
    p = cli("search", "", "-n", "gate", "--filter", flt, env={"KBCTL_CONFIG": str(_config(tmp_path))})
    assert p.returncode == 2, p.stderr
    lines = p.stderr.decode().strip().splitlines()
    assert lines[0].startswith("error:") and "Traceback" not in p.stderr.decode() and len(lines) <= 2


def test_nul_in_a_filter_is_a_usage_error(tmp_path, kb_home, tenant):
    """Found by the gate property (tests/db/test_gate_properties.py): it was a database error."""
    with _numbers_kb(tmp_path, kb_home, tenant) as kb:
        for flt in ("title~\x00", "title=a\x00b", "k>=\x001"):
            with pytest.raises(UsageError) as e:
                kb.search("", "gate", filters=[flt])
            assert "NUL" in e.value.message


@pytest.mark.parametrize("prf", ["hybrid", "rescore", "off"])
def test_explain_details_are_no_oracle_when_withheld_hits_fill_the_lanes(tmp_path, kb_home, tenant, prf):
    """When withheld hits fill a lane and leave the page short, the engine asks the lanes again for
    four times more candidates. The deeper round's figures reached ``details`` (``--explain``, the
    raw search): with ``prf = "hybrid"`` ``details.prf.candidates`` read 400 instead of 200 when 200
    or more withheld chunks matched the filter, so ``title~Z`` against ``title~Zo`` told whether
    withheld documents' titles start with ``Ze``. A filtered query's details are those of the depth
    it asked for, whatever the gate withheld."""
    records = [{"id": f"zoo{i}", "title": f"Zoo {i}", "text": f"budget plan for the zoo keepers {i}"} for i in range(3)]
    records += [
        {"id": f"zeta{i}", "title": f"Zeta {i}", "text": f"budget plan budget of zeta item {i}", "acl": ["group:board"]}
        for i in range(210)
    ]
    with kbctl.open(config=_config(tmp_path), home=kb_home, tenant=tenant, profile="hash-384") as kb:
        kb.ingestion.ingest_records(records, "gate", verify=False)

        def seen(flt: str) -> dict:
            r = kb.search("budget plan", "gate", filters=[flt], mode="hybrid", prf=prf, explain=True)
            d = _observable(r)
            for h in d["hits"]:  # scores: BM25 statistics span every document (README), not the filter
                h.pop("score"), h.pop("relevance"), h.pop("lanes")
            return d

        a, b = seen("title~Z"), seen("title~Zo")
        assert sorted(h["title"] for h in a["hits"]) == ["Zoo 0", "Zoo 1", "Zoo 2"]
        assert a == b
