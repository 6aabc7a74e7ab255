"""research_topic's ``withheld``: the passages the access gate kept from the agent's principal over
all of the tool's searches (the topic's and each sub-query's), each counted once. It was the sum
of the searches' counts, so a passage withheld from all four counted four times (12 for 3).
A count only: nothing of the withheld passages reaches the answer (docs/hardening.md, session 47)."""

from __future__ import annotations

from pathlib import Path

import kbctl
from kbctl.types import Principal
from tests.server.conftest import app_for

CONFIG = """
[defaults]
profile = "hash-384"

[agents.staff]
namespaces = ["staff_kb"]
principal = "user:u7"
groups = ["eng"]
"""

SECRET = "zorblatthr"  # a word only the withheld documents hold


def _corpus(root: Path) -> Path:
    """Three documents of group eng (the agent's) and three of group hr, one passage each, all about
    travel expenses, the feedback terms (hotel, receipts, mileage) in each."""
    root.mkdir()
    for group, n in (("eng", 3), ("hr", 3)):
        for i in range(n):
            extra = f" {SECRET}" if group == "hr" else ""
            (root / f"{group}{i}.md").write_text(
                f"---\ntitle: Travel {group} {i}\nacl: [group:{group}]\n---\n\n"
                f"Travel expenses policy {group} {i}: hotel receipts and mileage are reimbursed{extra}.\n"
            )
    return root


def test_research_topic_counts_each_withheld_passage_once(kb_home, tenant, tmp_path):
    from starlette.testclient import TestClient

    config = tmp_path / "kbctl.toml"
    config.write_text(CONFIG)
    principal = Principal("u7", ("eng",))
    with kbctl.open(config=config, home=kb_home, tenant=tenant) as kb:
        kb.ingest([str(_corpus(tmp_path / "docs"))], "staff_kb", verify=False)
        token = kb.create_agent_token("staff")
        found = kb.research("travel expenses", "staff_kb", principal=principal)

    with TestClient(app_for(kb_home, config, tenant), base_url="http://127.0.0.1:8765") as client:
        r = client.post(
            "/v1/tools/research_topic",
            json={"topic": "travel expenses"},
            headers={"Authorization": f"Bearer {token}"},
        )
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["withheld"] == 3, answer["withheld"]
    assert len(answer["documents"]) == 3 and SECRET not in r.text and " hr " not in r.text

    searches = [found.result, *found.sub_results]
    assert len(searches) == 4  # the topic's search and three sub-queries
    assert all(r.withheld == 3 for r in searches)  # each search withheld the same three passages
    assert found.withheld == 3  # the library's count: the distinct passages, not 12


def test_research_with_a_filter_reports_no_withheld_count(kb_home, tenant, tmp_path):
    """As a filtered search's: a count that moved with a filter would read withheld metadata."""
    config = tmp_path / "kbctl.toml"
    config.write_text(CONFIG)
    with kbctl.open(config=config, home=kb_home, tenant=tenant) as kb:
        kb.ingest([str(_corpus(tmp_path / "docs"))], "staff_kb", verify=False)
        found = kb.research("travel expenses", "staff_kb", principal=Principal("u7", ("eng",)), filters=["title~Tr"])
    assert found.result.hits and found.withheld == 0


def test_research_topic_adds_its_withheld_passages_to_the_metric_once(kb_home, tenant, tmp_path):
    """``kbctl_hits_withheld`` counted each of research_topic's searches: 3 passages withheld from
    all four added 3 under ``tool="research_topic"`` and 9 more under ``tool="search"`` for one
    call. The call adds what its answer's ``withheld`` says, once, under its own tool."""
    from prometheus_client.parser import text_string_to_metric_families
    from starlette.testclient import TestClient

    config = tmp_path / "kbctl.toml"
    config.write_text(CONFIG + "\n[server]\nmetrics_open = true\n")  # the operator's scrape
    with kbctl.open(config=config, home=kb_home, tenant=tenant) as kb:
        kb.ingest([str(_corpus(tmp_path / "docs"))], "staff_kb", verify=False)
        token = kb.create_agent_token("staff")
    headers = {"Authorization": f"Bearer {token}"}
    with TestClient(app_for(kb_home, config, tenant), base_url="http://127.0.0.1:8765") as client:
        r = client.post("/v1/tools/research_topic", json={"topic": "travel expenses"}, headers=headers)
        assert r.status_code == 200 and r.json()["withheld"] == 3, r.text
        scrape = client.get("/metrics")
    assert scrape.status_code == 200, scrape.text
    counted = {
        s.labels["tool"]: s.value
        for family in text_string_to_metric_families(scrape.text)
        for s in family.samples
        if s.name == "kbctl_hits_withheld_total"
    }
    assert counted == {"research_topic": 3}, counted
