"""A search over namespaces pinned to different profiles (docs/hardening.md, session 47).

It was refused ("namespaces … are pinned to different profiles; hint: search them one at a time"),
so an agent scoped to several namespaces got a 400 on every call once one of them was moved to
another model with ``kbctl reembed --swap``. Now each profile's group of namespaces is searched
with its own profile (query vector and analyzer: no vector of one model is compared with another's)
and the groups' ranked hits are merged by reciprocal rank fusion over their ranks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kbctl
from kbctl.types import Principal
from tests.conftest import write_folder
from tests.server.conftest import app_for

CONFIG = """
[defaults]
profile = "hash-384"

[profiles.hash-768]
embedder = "hash"
model = "hash"
dimension = 768

[agents.both]
namespaces = ["small_kb", "wide_kb"]
principal = "user:u7"
groups = ["eng"]
"""


def _doc(group: str, title: str, body: str) -> str:
    return f"---\ntitle: {title}\nacl: [group:{group}]\n---\n\n{body}\n"


def _setup(tmp_path: Path, kb_home, tenant) -> Path:
    """Two namespaces of three documents about glacier ropes (one of them of group hr, the others
    of eng, the agent's), both ingested with hash-384; ``wide_kb`` then moved to hash-768 with a
    re-embed and a swap, as ``kbctl reembed wide_kb --profile hash-768 --swap`` does."""
    config = tmp_path / "kbctl.toml"
    config.write_text(CONFIG)
    small = write_folder(
        tmp_path,
        "small",
        {
            "a.md": _doc("eng", "Small ropes", "glacier rope knots for the small team, anchors and belays"),
            "b.md": _doc("eng", "Small tents", "tents and stoves for a glacier camp of the small team"),
            "c.md": _doc("hr", "Small pay", "glacier rope allowance paid to the small team"),
        },
    )
    wide = write_folder(
        tmp_path,
        "wide",
        {
            "a.md": _doc("eng", "Wide ropes", "glacier rope rescue pulleys for the wide team, crevasse drills"),
            "b.md": _doc("eng", "Wide boots", "boots and crampons on a glacier for the wide team"),
            "c.md": _doc("hr", "Wide pay", "glacier rope bonus paid to the wide team"),
        },
    )
    with kbctl.open(config=config, home=kb_home, tenant=tenant) as kb:
        kb.ingest([small], "small_kb", verify=False)
        kb.ingest([wide], "wide_kb", verify=False)
        kb.reembed("wide_kb", "hash-768")
        kb.swap_generation("wide_kb")
        assert kb.namespace("wide_kb").profile_name == "hash-768"
        assert kb.namespace("small_kb").profile_name == "hash-384"
    return config


def test_a_search_of_namespaces_of_two_profiles_merges_them_by_rank(kb_home, tenant, tmp_path):
    config = _setup(tmp_path, kb_home, tenant)
    with kbctl.open(config=config, home=kb_home, tenant=tenant) as kb:
        alone = {
            ns: kb.search("glacier rope", ns, k=10, principal=Principal("u7", ("eng",)))
            for ns in ("small_kb", "wide_kb")
        }
        result = kb.search("glacier rope", ["small_kb", "wide_kb"], k=10, principal=Principal("u7", ("eng",)))
        # an explicit profile cannot search both: still refused, one line and a hint
        with pytest.raises(kbctl.errors.ProfileMismatchError):
            kb.search("glacier rope", ["small_kb", "wide_kb"], profile="hash-384")
        context = kb.context(result, budget=500)
        few = kb.search("glacier rope", ["small_kb", "wide_kb"], k=2, per_doc=1, principal=Principal("u7", ("eng",)))
        filtered = kb.search(
            "glacier rope",
            ["small_kb", "wide_kb"],
            filters=["title in Small ropes,Wide ropes"],
            principal=Principal("u7", ("eng",)),
        )

    assert {h.namespace for h in result.hits} == {"small_kb", "wide_kb"}
    assert "namespaces of 2 profiles searched apart, merged by rank" in result.notes
    # each group searched with its own profile: the hits of a namespace are its search alone's, in its order
    for ns, one in alone.items():
        assert [(h.doc_id, h.chunk_id) for h in result.hits if h.namespace == ns] == [
            (h.doc_id, h.chunk_id) for h in one.hits
        ]
    groups = {g["profile"]: g for g in result.details["groups"]}
    assert set(groups) == {"hash-384", "hash-768"}
    assert groups["hash-384"]["namespaces"] == ["small_kb"] and groups["hash-768"]["namespaces"] == ["wide_kb"]
    assert groups["hash-384"]["fingerprint"] != groups["hash-768"]["fingerprint"]
    assert result.details["merge"] == {"method": "rrf", "rrf_k": 60, "over": "rank in each group"}
    # the scores are the merged RRF scores, not one model's similarity set against another's
    for h in result.hits:
        own = h.lanes["group"]["rank"]
        assert own is not None and h.score is not None and h.score <= 1 / 61 + 1e-6
        assert h.relevance == pytest.approx(h.score * 61, abs=1e-3)
    assert [h.rank for h in result.hits] == list(range(1, len(result.hits) + 1))
    assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)
    # the access gate's counts add up (the namespaces are disjoint): one hr document in each
    assert alone["small_kb"].withheld == alone["wide_kb"].withheld == 1
    assert result.withheld == 2 and "withheld 2 hit(s) this principal may not view" in result.notes
    assert "pay" not in " ".join(h.title for h in result.hits).lower()
    # generations of both namespaces, for the server to seal
    assert set(result.details["generations"]) == {"small_kb", "wide_kb"}
    assert "[1]" in context and "glacier" in context
    assert len(few.hits) == 2 and {h.namespace for h in few.hits} == {"small_kb", "wide_kb"}  # the two rank-1 hits
    assert {h.title for h in filtered.hits} == {"Small ropes", "Wide ropes"} and filtered.withheld == 0


def test_the_cli_searches_namespaces_of_two_profiles(kb_home, tenant, tmp_path, cli):
    config = _setup(tmp_path, kb_home, tenant)
    env = {"KBCTL_CONFIG": str(config)}
    p = cli(
        "search",
        "glacier rope",
        "-n",
        "small_kb",
        "-n",
        "wide_kb",
        "--json",
        "--as",
        "user:u7",
        "--group",
        "eng",
        env=env,
    )
    assert p.returncode == 0, p.stderr.decode()
    out = json.loads(p.stdout)
    assert {h["namespace"] for h in out["hits"]} == {"small_kb", "wide_kb"}
    assert "namespaces of 2 profiles searched apart, merged by rank" in out["notes"]
    p = cli(
        "search", "glacier rope", "-n", "small_kb", "-n", "wide_kb", "--format", "context", "--group", "eng", env=env
    )
    assert p.returncode == 0, p.stderr.decode()
    assert "glacier" in p.stdout.decode()
    p = cli("search", "glacier rope", "-n", "small_kb", "-n", "wide_kb", "--explain", "--group", "eng", env=env)
    shown = p.stdout.decode() + p.stderr.decode()
    assert p.returncode == 0 and "group rank" in shown and "'profile': 'hash-768'" in shown, shown


def test_an_agent_scoped_to_namespaces_of_two_profiles_is_answered(kb_home, tenant, tmp_path):
    """The agent's tools search all of its namespaces when called without ``namespaces``: they were
    refused (400) as soon as one of them was moved to another model."""
    from starlette.testclient import TestClient

    config = _setup(tmp_path, kb_home, tenant)
    with kbctl.open(config=config, home=kb_home, tenant=tenant) as kb:
        token = kb.create_agent_token("both")
    headers = {"Authorization": f"Bearer {token}"}
    with TestClient(app_for(kb_home, config, tenant), base_url="http://127.0.0.1:8765") as client:
        search = client.post("/v1/tools/search_knowledge", json={"query": "glacier rope"}, headers=headers)
        claim = client.post("/v1/tools/verify_claim", json={"claim": "glacier rope rescue"}, headers=headers)
        topic = client.post("/v1/tools/research_topic", json={"topic": "glacier rope"}, headers=headers)
        raw = client.post("/v1/search", json={"query": "glacier rope", "raw": True}, headers=headers)
    for r in (search, claim, topic, raw):
        assert r.status_code == 200, r.text
    assert "small_kb" in search.text and "wide_kb" in search.text
    assert "small_kb" in topic.text and "wide_kb" in topic.text
    body = raw.json()
    assert {h["namespace"] for h in body["hits"]} == {"small_kb", "wide_kb"}
    assert body["withheld"] == 2
    # the generations are sealed, as for one profile's search: no raw id inside the groups either
    assert all(isinstance(g, str) for g in body["details"]["generations"].values())
    assert all("generations" not in g["details"] for g in body["details"]["groups"])


def _two_profiles(tmp_path: Path, kb_home, tenant, small: dict[str, str], wide: dict[str, str]) -> Path:
    """``small_kb`` ingested with hash-384 and ``wide_kb`` with hash-768, from the given files."""
    config = tmp_path / "kbctl.toml"
    config.write_text(CONFIG)
    with kbctl.open(config=config, home=kb_home, tenant=tenant) as kb:
        kb.ingest([write_folder(tmp_path, "small", small)], "small_kb", verify=False)
        kb.ingest([write_folder(tmp_path, "wide", wide)], "wide_kb", profile="hash-768", verify=False)
    return config


def test_the_same_passage_in_namespaces_of_two_profiles_shows_once(kb_home, tenant, tmp_path):
    """Near-duplicates were removed within a group only: the same text in both namespaces showed
    twice. The merged page drops them as a group's page does, the better-ranked one kept."""
    same = "Crevasse rescue uses a pulley system, a prusik knot and two ice screws as the anchor."
    config = _two_profiles(
        tmp_path,
        kb_home,
        tenant,
        {"rescue.md": _doc("eng", "Rescue", same), "tents.md": _doc("eng", "Tents", "crevasse camp tents and stoves")},
        {
            "copy.md": _doc("eng", "Rescue copy", same.upper().replace(",", ";")),
            "boots.md": _doc("eng", "Boots", "crampons for crevasse fields and ice screws in a rack"),
        },
    )
    with kbctl.open(config=config, home=kb_home, tenant=tenant) as kb:
        eng = Principal("u7", ("eng",))
        result = kb.search("crevasse rescue pulley", ["small_kb", "wide_kb"], k=3, mode="lexical", principal=eng)
        alone = kb.search("crevasse rescue pulley", "wide_kb", k=3, mode="lexical", principal=eng)
    assert alone.hits[0].title == "Rescue copy"  # first in its own group too
    titles = [h.title for h in result.hits]
    assert titles[0] == "Rescue" and "Rescue copy" not in titles, titles  # the better-ranked one kept
    assert len(result.hits) == 3 and {"Tents", "Boots"} <= set(titles)  # the page is filled from below
    assert [h.rank for h in result.hits] == [1, 2, 3]


def _zeta(group: str, title: str, text: str) -> str:
    return _doc(group, title, text)


def test_a_groups_withheld_hit_below_the_merged_page_is_not_counted(kb_home, tenant, tmp_path):
    """A group's withheld count was of the hits withheld ahead of its own last hit; the merge may
    cut the group's page shorter, and the sum then counted a withheld hit ranked below the last
    hit the merged page shows. Now a withheld hit counts when it ranks above that hit."""
    config = _two_profiles(
        tmp_path,
        kb_home,
        tenant,
        {
            "a1.md": _zeta("eng", "A1", "zeta zeta zeta zeta alpha"),
            "a2.md": _zeta("eng", "A2", "zeta alpha beta gamma delta"),
        },
        {
            "b1.md": _zeta("eng", "B1", "zeta zeta zeta zeta omega"),
            "w.md": _zeta("hr", "W", "zeta zeta zeta omega psi"),  # between B1 and B2 in its group
            "b2.md": _zeta("eng", "B2", "zeta omega psi chi phi"),
        },
    )
    eng = Principal("u7", ("eng",))
    with kbctl.open(config=config, home=kb_home, tenant=tenant) as kb:
        group = kb.search("zeta", "wide_kb", k=2, mode="lexical", principal=eng)
        found = {
            k: kb.search("zeta", ["small_kb", "wide_kb"], k=k, mode="lexical", principal=eng) for k in (2, 3, 4, 10)
        }
        research = kb.research("zeta", ["small_kb", "wide_kb"], principal=eng)
    assert [h.title for h in group.hits] == ["B1", "B2"] and group.withheld == 1  # W ranks above B2
    assert [h.title for h in found[2].hits] == ["A1", "B1"]
    assert found[2].withheld == 0, found[2].notes  # W ranks below B1, the last hit shown
    assert not any("withheld" in n for n in found[2].notes)
    assert [h.title for h in found[3].hits] == ["A1", "B1", "A2"] and found[3].withheld == 0
    assert [h.title for h in found[4].hits] == ["A1", "B1", "A2", "B2"] and found[4].withheld == 1
    assert len(found[10].hits) == 4 and found[10].withheld == 1  # a page not full: every one
    assert found[2].details["groups"][1]["withheld"] == 0  # the group's count is of the same hits
    assert research.withheld == 1


def test_a_hits_group_lane_holds_the_rank_and_score_the_merge_used(kb_home, tenant, tmp_path, cli):
    """``--explain``'s "group score" was the hit's fused score in its group: under convex fusion a
    min-max normalised score, 1.0 at the top of each group and 0.0 at the bottom, read as if it
    said how relevant the hit is across groups. It is the merge's RRF contribution now (the group
    rank, counted in documents, is what the merge ranks by); the group's own score is ``fused``, and
    what made it its group's ``scored_by``."""
    config = _setup(tmp_path, kb_home, tenant)
    with kbctl.open(config=config, home=kb_home, tenant=tenant) as kb:
        eng = Principal("u7", ("eng",))
        result = kb.search("glacier rope", ["small_kb", "wide_kb"], k=10, principal=eng)
        alone = {ns: kb.search("glacier rope", ns, k=10, principal=eng) for ns in ("small_kb", "wide_kb")}
    assert result.details["groups"][0]["details"].get("dense_path")  # hybrid: both lanes, convex fusion
    for h in result.hits:
        group = h.lanes["group"]
        own = next(o for o in alone[h.namespace].hits if (o.doc_id, o.chunk_id) == (h.doc_id, h.chunk_id))
        assert group["score"] == h.score == pytest.approx(1 / (60 + group["rank"]), abs=1e-6)
        assert group["rank"] == own.rank  # one chunk per document: its rank in documents is its rank
        assert group["fused"] == own.score
    assert {h.lanes["group"]["fused"] for h in result.hits} >= {0.0}  # the group's own min-max end
    assert [g["scored_by"] for g in result.details["groups"]] == ["convex", "convex"]
    env = {"KBCTL_CONFIG": str(config)}
    p = cli("search", "glacier rope", "-n", "small_kb", "-n", "wide_kb", "--explain", "--group", "eng", env=env)
    shown = p.stdout.decode()
    assert p.returncode == 0 and "group score" in shown and "0.0000" not in shown, shown
