"""A changed source writes again only its documents that changed: an unchanged document (same
content hash, owner, effective ACL, chunks and family) keeps its stored rows and takes the
source's new hash (``kbctl.ingest.writer``)."""

from __future__ import annotations

import kbctl
from kbctl.acl import Principal

from .test_ingest import _feed, _message, _rss


def _ids(kb, name: str) -> dict[str, tuple[int, tuple[int, ...], str]]:
    """Per document URI: its row id, its chunks' ids in order, and its source hash."""
    ns = kb.namespace(name)
    conn = kb.connection()
    docs = {
        uri: (did, sh)
        for uri, did, sh in conn.execute(
            "SELECT uri, id, source_hash FROM kbctl.documents WHERE namespace_id = %s", (ns.id,)
        )
    }
    chunks: dict[int, list[int]] = {}
    for did, cid in conn.execute(
        "SELECT document_id, id FROM kbctl.chunks WHERE namespace_id = %s ORDER BY document_id, position", (ns.id,)
    ):
        chunks.setdefault(did, []).append(cid)
    return {uri: (did, tuple(chunks.get(did, ())), sh) for uri, (did, sh) in docs.items()}


def test_a_feed_that_gained_an_entry_writes_only_the_new_entry(kb, tmp_path):
    feeds, feed = _feed(tmp_path)
    assert kb.ingest([str(feeds)], "news", verify=False).documents["new"] == 3
    before = _ids(kb, "news")
    feed.write_text(_rss([4, 1, 2, 3]))
    again = kb.ingest([str(feeds)], "news")
    assert again.documents == {"new": 1, "changed": 0, "unchanged": 3, "removed": 0, "failed": 0}, again.to_json()
    assert again.chunks["embedded"] == 1 and again.chunks["reused"] == 3, again.to_json()  # as before
    assert again.verify is not None and again.verify["ok"]
    after = _ids(kb, "news")
    assert set(after) - set(before) and len(set(after) - set(before)) == 1
    for uri, (did, cids, _) in before.items():
        assert after[uri][:2] == (did, cids), uri  # not deleted and inserted again
    assert len({sh for _, _, sh in after.values()}) == 1  # all of the feed's documents hold its new hash
    assert {sh for _, _, sh in after.values()} != {sh for _, _, sh in before.values()}
    # the same bytes again: the source is skipped before extraction, nothing is read or written
    third = kb.ingest([str(feeds)], "news", verify=False)
    assert third.documents["unchanged"] == 4 and third.documents["new"] == 0, third.to_json()
    assert third.chunks["reused"] == 0 and third.chunks["embedded"] == 0, third.to_json()
    assert _ids(kb, "news") == after
    # the skipped documents are still found
    assert {h.title for h in kb.search("quaffle2 switch", "news", k=3).hits} >= {"Release 2"}
    conn = kb.connection()
    ns = kb.namespace("news")
    stats = conn.execute("SELECT sum(chunk_count) FROM kbctl.documents WHERE namespace_id = %s", (ns.id,)).fetchone()[0]
    assert stats == 4
    assert kb.verify("news").ok


def test_an_entry_that_left_the_feed_goes_with_sync_while_the_others_are_kept(kb, tmp_path):
    feeds, feed = _feed(tmp_path)
    kb.ingest([str(feeds)], "news", verify=False)
    before = _ids(kb, "news")
    feed.write_text(_rss([1, 2]))
    rep = kb.ingest([str(feeds)], "news", sync=True, verify=False)
    assert rep.documents == {"new": 0, "changed": 0, "unchanged": 2, "removed": 1, "failed": 0}, rep.to_json()
    after = _ids(kb, "news")
    assert len(after) == 2 and all(after[u][:2] == before[u][:2] for u in after)
    assert not kb.search("quaffle3", "news", k=3).hits or all(
        h.title != "Release 3" for h in kb.search("quaffle3", "news", k=3).hits
    )
    again = kb.ingest([str(feeds)], "news", sync=True, verify=False)
    assert again.chunks["reused"] == 0 and again.documents["unchanged"] == 2, again.to_json()  # skipped whole


def _with_attachment(n: int) -> str:
    return (
        f"From sender{n}@example.org Mon Oct 21 08:0{n}:00 2024\n"
        f"Message-ID: <a{n}@example.org>\nFrom: Sender {n} <sender{n}@example.org>\nSubject: Report {n}\n"
        f"Date: Mon, 21 Oct 2024 08:0{n}:00 +0000\nMIME-Version: 1.0\n"
        'Content-Type: multipart/mixed; boundary="XYZ"\n\n'
        "--XYZ\nContent-Type: text/plain\n\n"
        f"The report {n} is attached: see the wumpus{n} figures.\n\n"
        '--XYZ\nContent-Type: text/plain\nContent-Disposition: attachment; filename="figures.txt"\n\n'
        f"The wumpus{n} figures: 12, 14 and 19.\n\n--XYZ--\n\n"
    )


def test_an_mbox_that_gained_a_message_keeps_its_families(kb, tmp_path):
    box = tmp_path / "mail"
    box.mkdir()
    mbox = box / "inbox.mbox"
    mbox.write_text(_with_attachment(1) + _message(2, message_id=True))
    first = kb.ingest([str(box)], "mail", verify=False)
    assert first.documents["new"] == 3, first.to_json()
    before = _ids(kb, "mail")
    assert any("#attachment/" in u for u in before)
    mbox.write_text(_with_attachment(1) + _message(2, message_id=True) + _message(3, message_id=True))
    again = kb.ingest([str(box)], "mail")
    assert again.documents == {"new": 1, "changed": 0, "unchanged": 3, "removed": 0, "failed": 0}, again.to_json()
    assert again.verify is not None and again.verify["ok"]
    after = _ids(kb, "mail")
    assert len(after) == 4
    for uri, (did, cids, _) in before.items():
        assert after[uri][:2] == (did, cids), uri
    assert len({sh for _, _, sh in after.values()}) == 1
    assert kb.ingest([str(box)], "mail", verify=False).chunks["reused"] == 0  # the next run skips the mbox
    assert any("12, 14 and 19" in h.text for h in kb.search("wumpus1 figures", "mail", k=5).hits)
    # the attachment's text changes: its family (the message and its attachment) is written again
    mbox.write_text(
        _with_attachment(1).replace("12, 14 and 19", "12, 14 and 21")
        + _message(2, message_id=True)
        + _message(3, message_id=True)
    )
    third = kb.ingest([str(box)], "mail")
    assert third.documents["changed"] == 1 and third.documents["unchanged"] == 3, third.to_json()
    now = _ids(kb, "mail")
    family = [u for u in before if "a1@example.org" in u or "a1%40example.org" in u]
    assert len(family) == 2, before
    assert all(now[u][0] != after[u][0] for u in family)  # both written again, the unchanged parent too
    assert all(now[u][:2] == after[u][:2] for u in after if u not in family)


def test_a_feed_entry_whose_acl_changed_is_written_again(tmp_path, kb_home, tenant):
    cfg = tmp_path / "kbctl.toml"
    rule = '[namespaces.news]\nacl_default = "public"\nacl_rules = [{{glob = "**", principals = ["{p}"]}}]\n'
    cfg.write_text(rule.format(p="group:eng"))
    feeds, feed = _feed(tmp_path)
    with kbctl.open(config=cfg, home=kb_home, tenant=tenant, profile="hash-384") as kb:
        kb.ingest([str(feeds)], "news", verify=False)
        before = _ids(kb, "news")
        assert not kb.search("quaffle2", "news", principal=Principal("x", ("sales",))).hits
    cfg.write_text(rule.format(p="group:sales"))
    feed.write_text(_rss([4, 1, 2, 3]))
    with kbctl.open(config=cfg, home=kb_home, tenant=tenant, profile="hash-384") as kb:
        rep = kb.ingest([str(feeds)], "news", verify=False)
        assert rep.documents["unchanged"] == 3 and rep.chunks["embedded"] == 1, rep.to_json()
        after = _ids(kb, "news")
        assert all(after[u][0] != before[u][0] for u in before)  # the rows were written again
        conn = kb.connection()
        acls = {
            tuple(a)
            for (a,) in conn.execute(
                "SELECT acl FROM kbctl.documents WHERE namespace_id = %s", (kb.namespace("news").id,)
            )
        }
        assert acls == {("group:sales",)}
        assert kb.search("quaffle2", "news", principal=Principal("x", ("sales",))).hits


def test_a_document_chunked_differently_is_written_again(tmp_path, kb_home, tenant):
    """The chunk settings are part of every source's hash but not of a document's: with new
    settings an unchanged document is cut into other chunks, and those must be stored."""
    docs = tmp_path / "docs"
    docs.mkdir()
    words = " ".join(f"word{n}" for n in range(400))
    (docs / "long.md").write_text(f"# Long\n\n{words}\n")
    cfg = tmp_path / "kbctl.toml"
    cfg.write_text("[profiles.hash-384.chunk]\nsize = 256\noverlap = 0\n")
    with kbctl.open(config=cfg, home=kb_home, tenant=tenant, profile="hash-384") as kb:
        kb.ingest([str(docs)], "pages", verify=False)
        before = _ids(kb, "pages")
    cfg.write_text("[profiles.hash-384.chunk]\nsize = 64\noverlap = 0\n")
    with kbctl.open(config=cfg, home=kb_home, tenant=tenant, profile="hash-384") as kb:
        rep = kb.ingest([str(docs)], "pages")
        assert rep.documents["unchanged"] == 1, rep.to_json()
        assert rep.verify is not None and rep.verify["ok"], rep.verify
        after = _ids(kb, "pages")
    ((uri, (did, cids, _)),) = before.items()
    assert after[uri][0] != did and len(after[uri][1]) > len(cids)


def test_kept_documents_keep_their_vectors_of_a_shadow_generation(tmp_path, kb_home, tenant):
    """During a re-embed an ingest writes the shadow's vectors of the chunks it writes; a kept
    document's chunks are not written again and keep those the build gave them, so the swap finds
    nothing missing and the namespace verifies after it."""
    cfg = tmp_path / "kbctl.toml"
    cfg.write_text('[profiles.hash-768]\nembedder = "hash"\nmodel = "hash"\ndimension = 768\n')
    feeds, feed = _feed(tmp_path)
    with kbctl.open(config=cfg, home=kb_home, tenant=tenant, profile="hash-384") as kb:
        kb.ingest([str(feeds)], "news", verify=False)
        kb.reembed("news", "hash-768")  # a shadow with the vectors of every chunk
        before = _ids(kb, "news")
        feed.write_text(_rss([4, 1, 2, 3]))
        rep = kb.ingest([str(feeds)], "news", verify=False)
        assert rep.documents["new"] == 1 and rep.documents["unchanged"] == 3, rep.to_json()
        after = _ids(kb, "news")
        assert all(after[u][:2] == before[u][:2] for u in before)
        conn = kb.connection()
        ns = kb.namespace("news")
        missing = conn.execute(
            "SELECT g.state, count(*) FILTER (WHERE v.chunk_id IS NULL) FROM kbctl.generations g"
            " JOIN kbctl.chunks c ON c.namespace_id = g.namespace_id"
            " LEFT JOIN kbctl.vectors v ON v.generation_id = g.id AND v.chunk_id = c.id"
            " WHERE g.namespace_id = %s GROUP BY g.state",
            (ns.id,),
        ).fetchall()
        assert dict(missing) == {"active": 0, "shadow": 0}, missing
        kb.swap_generation("news")
        report = kb.verify("news")
        assert report.ok, [c for c in report.checks if not c.ok]
        assert {h.title for h in kb.search("quaffle2 switch", "news", k=3).hits} >= {"Release 2"}


def test_a_document_not_kept_under_the_lock_is_written_with_its_family(kb, tmp_path, monkeypatch):
    """What the writer read before taking the write lock may be stale (another writer, an ACL
    re-applied): a row the update under the lock does not keep is written, with its family."""
    import kbctl.ingest.writer as writer_mod

    box = tmp_path / "mail"
    box.mkdir()
    mbox = box / "inbox.mbox"
    mbox.write_text(_with_attachment(1) + _message(2, message_id=True))
    kb.ingest([str(box)], "mail", verify=False)
    before = _ids(kb, "mail")
    real = writer_mod.keep_documents

    def lose_the_attachment(conn, ns, rows):
        return {u for u in real(conn, ns, rows) if "#attachment/" not in u}

    monkeypatch.setattr(writer_mod, "keep_documents", lose_the_attachment)
    mbox.write_text(_with_attachment(1) + _message(2, message_id=True) + _message(3, message_id=True))
    rep = kb.ingest([str(box)], "mail")
    assert rep.documents == {"new": 1, "changed": 0, "unchanged": 3, "removed": 0, "failed": 0}, rep.to_json()
    assert rep.verify is not None and rep.verify["ok"], rep.verify
    after = _ids(kb, "mail")
    family = {u for u in before if "a1@example.org" in u}
    assert len(family) == 2 and all(after[u][0] != before[u][0] for u in family)  # written again, whole
    assert all(after[u][:2] == before[u][:2] for u in before if u not in family)  # the other message kept
    assert len({sh for _, _, sh in after.values()}) == 1
    monkeypatch.undo()
    assert kb.ingest([str(box)], "mail", verify=False).chunks["reused"] == 0  # the next run skips the mbox


def _facts(kb, name: str) -> tuple[dict[str, dict], dict[str, list[dict]]]:
    """Per document URI: the fetch facts ``kbctl show`` gives, and those of each of its chunks."""
    from kbctl.types import FETCH_FACTS

    ns = kb.namespace(name)
    conn = kb.connection()
    docs = {
        uri: {k: v for k, v in kb.searching.document(did, [name])["metadata"].items() if k in FETCH_FACTS}
        for uri, did in conn.execute("SELECT uri, id FROM kbctl.documents WHERE namespace_id = %s", (ns.id,))
    }
    chunks: dict[str, list[dict]] = {}
    for uri, meta in conn.execute(
        "SELECT d.uri, c.metadata FROM kbctl.chunks c JOIN kbctl.documents d ON d.id = c.document_id"
        " WHERE c.namespace_id = %s ORDER BY c.id",
        (ns.id,),
    ):
        chunks.setdefault(uri, []).append({k: v for k, v in meta.items() if k in FETCH_FACTS})
    return docs, chunks


def test_kept_documents_take_the_fetch_facts_of_the_latest_fetch_of_their_source(kb, tmp_path):
    """A kept entry of a feed that gained one showed the facts of the fetch that first stored it
    (the feed file's old size and mtime) though its row held the feed's new hash,
    beside the new entry showing the new ones. Its document now takes the new fetch's facts, which
    its hits show and filters read (from the row: since migration 023 a chunk carries none of its
    source's facts); its chunks, postings and vectors are not written again."""
    feeds = tmp_path / "feeds"
    feeds.mkdir()
    feed = feeds / "releases.rss"
    feed.write_text(_rss([1, 2, 3]))
    kb.ingest([str(feeds)], "news", verify=False)
    first, _ = _facts(kb, "news")
    assert {"size", "mtime"} <= set(next(iter(first.values())))
    before = _ids(kb, "news")
    feed.write_text(_rss([4, 1, 2, 3]))
    again = kb.ingest([str(feeds)], "news", verify=False)
    assert again.documents["unchanged"] == 3 and again.documents["new"] == 1, again.to_json()
    after = _ids(kb, "news")
    assert all(after[u][:2] == before[u][:2] for u in before)  # still kept, not written again
    docs, chunks = _facts(kb, "news")
    assert len({tuple(sorted(f.items())) for f in docs.values()}) == 1, docs  # one fetch, one set of facts
    facts = next(iter(docs.values()))
    assert facts["size"] == feed.stat().st_size != next(iter(first.values()))["size"]
    for uri, per_chunk in chunks.items():
        assert per_chunk and all(c == {} for c in per_chunk), uri  # kept on the row only (migration 023)
    hits = kb.search("quaffle switch", "news", k=10, mode="lexical").hits  # what a hit's metadata says
    assert len(hits) == 4 and all({k: h.metadata[k] for k in facts} == facts for h in hits), hits
    hits = kb.search("", "news", k=10, filters=[f"size={facts['size']}"]).hits  # a filter on the facts
    assert len(hits) == 4, [h.metadata.get("size") for h in hits]
    assert kb.verify("news").ok


def _chunk_versions(kb, name: str) -> dict[int, str]:
    """Per chunk id, the transaction that wrote its row's current version (``xmin``)."""
    ns = kb.namespace(name)
    rows = kb.connection().execute("SELECT id, xmin::text FROM kbctl.chunks WHERE namespace_id = %s", (ns.id,))
    return {int(cid): x for cid, x in rows}


def _two_message_mailbox(kb, tmp_path):
    """An mbox of two messages (the first with an attachment) in a folder, ingested into ``mail``:
    the folder, the mbox and how many chunks the first ingest stored."""
    box = tmp_path / "mail"
    box.mkdir()
    mbox = box / "inbox.mbox"
    mbox.write_text(_with_attachment(1) + _message(2, message_id=True))
    first = kb.ingest([str(box)], "mail", verify=False)
    return box, mbox, first.chunks["embedded"] + first.chunks["reused"]


def test_kept_documents_neither_read_their_vectors_back_nor_rewrite_chunks_whose_facts_did_not_change(
    kb, tmp_path, monkeypatch
):
    """A message of an mbox that gained one carries none of the mbox file's facts (its own size
    only), so keeping it rewrites none of its chunk rows; and its chunks keep their stored vectors,
    which the writer never reads back from the embed cache (it read every kept chunk's vector, to
    throw it away: 20,000 for an mbox of 10,000 messages). They are counted reused."""
    import kbctl.ingest.writer as writer_mod

    box, mbox, stored = _two_message_mailbox(kb, tmp_path)
    before, rows = _ids(kb, "mail"), _chunk_versions(kb, "mail")
    asked: list[str] = []
    real = writer_mod.store_lookup

    def recording(conn, ns, generation=None):
        lookup = real(conn, ns, generation)

        def looked_up(hashes):
            hashes = list(hashes)
            asked.extend(hashes)
            return lookup(hashes)

        return looked_up

    monkeypatch.setattr(writer_mod, "store_lookup", recording)
    mbox.write_text(_with_attachment(1) + _message(2, message_id=True) + _message(3, message_id=True))
    again = kb.ingest([str(box)], "mail")
    assert again.documents == {"new": 1, "changed": 0, "unchanged": 3, "removed": 0, "failed": 0}, again.to_json()
    assert again.chunks == {"embedded": 1, "reused": stored, "deleted": 0}, again.to_json()
    assert again.verify is not None and again.verify["ok"], again.verify
    kept = {
        h
        for (h,) in kb.connection().execute(
            "SELECT content_hash FROM kbctl.chunks WHERE id = ANY(%s)",
            ([c for _, cids, _ in before.values() for c in cids],),
        )
    }
    assert asked and not kept & set(asked), asked  # only the new message's chunk was looked up
    after = _chunk_versions(kb, "mail")
    assert {c: after[c] for c in rows} == rows  # no kept chunk row written again


def _row_versions(kb, name: str) -> dict[str, str]:
    """Per document URI, the transaction that wrote its row's current version (``xmin``)."""
    ns = kb.namespace(name)
    rows = kb.connection().execute("SELECT uri, xmin::text FROM kbctl.documents WHERE namespace_id = %s", (ns.id,))
    return {uri: x for uri, x in rows}


def test_a_polled_feed_rewrites_no_chunk_of_an_entry_whose_feed_facts_did_not_change(kb, tmp_path):
    """A feed polled by cron: the same bytes write no row at all; bytes that changed while the facts
    its entries carry (the feed file's size and mtime) did not leave the chunk rows of the unchanged
    entries as they were (only their document rows take the feed's new hash); facts that changed go
    onto every kept entry's document row only (they were written into every kept entry's chunks
    until migration 023), where hits and a metadata filter find them."""
    import os

    feeds, feed = _feed(tmp_path)
    kb.ingest([str(feeds)], "news", verify=False)
    chunks, docs = _chunk_versions(kb, "news"), _row_versions(kb, "news")
    again = kb.ingest([str(feeds)], "news", verify=False)
    assert again.documents["unchanged"] == 3, again.to_json()
    assert (_chunk_versions(kb, "news"), _row_versions(kb, "news")) == (chunks, docs)  # nothing written

    st = feed.stat()  # entry 2's text edited, the file's size and mtime as they were
    feed.write_text(_rss([1, 2, 3]).replace("quaffle2", "quaffleZ"))
    os.utime(feed, ns=(st.st_atime_ns, st.st_mtime_ns))
    edited = kb.ingest([str(feeds)], "news", verify=False)
    assert edited.documents == {"new": 0, "changed": 1, "unchanged": 2, "removed": 0, "failed": 0}, edited.to_json()
    ids, after = _ids(kb, "news"), _chunk_versions(kb, "news")
    kept = {c for uri, (_, cids, _) in ids.items() if not uri.endswith("#entry-2") for c in cids}
    assert len(kept) == 2 and {c: after[c] for c in kept} == {c: chunks[c] for c in kept}

    feed.write_text(_rss([4, 1, 2, 3]).replace("quaffle2", "quaffleZ"))  # a new entry: every entry has the new size
    gained = kb.ingest([str(feeds)], "news", verify=False)
    assert gained.documents["unchanged"] == 3 and gained.documents["new"] == 1, gained.to_json()
    assert {c: _chunk_versions(kb, "news")[c] for c in kept} == {c: after[c] for c in kept}  # no chunk row of them
    size = feed.stat().st_size
    hits = kb.search("", "news", k=10, filters=[f"size={size}"]).hits
    assert len(hits) == 4 and all(h.metadata["size"] == size for h in hits), [h.metadata.get("size") for h in hits]


def test_a_cached_vector_is_read_once_when_several_write_batches_are_embedded_together(kb, monkeypatch):
    """Before the model runs on several write batches at once (``_embed_ahead``) the writer asks the
    embed cache which of their hashes it holds; it read their vectors to learn that, and each batch
    read them again to write them (and a large feed's kept entries, one item each, had theirs read
    for nothing). Which exist is asked without a vector: each vector is read once, by the batch that
    writes it."""
    import kbctl.ingest.writer as writer_mod

    n = 200  # the first write batch (64 documents) goes alone, the other three are embedded together
    records = [
        {"id": f"r{i}", "title": f"note {i}", "text": f"entry {i} about the zorblat{i} setting"} for i in range(n)
    ]
    assert kb.ingest_records(records, "first", verify=False).chunks["embedded"] == n
    read: list[str] = []
    real = writer_mod.store_lookup

    def recording(conn, ns, generation=None):
        lookup = real(conn, ns, generation)
        return lambda hashes: lookup(read.extend(hashes := list(hashes)) or hashes)

    monkeypatch.setattr(writer_mod, "store_lookup", recording)
    again = kb.ingest_records(records, "second", verify=False)  # every vector is in the cache
    assert again.chunks == {"embedded": 0, "reused": n, "deleted": 0}, again.to_json()
    assert len(read) == len(set(read)) == n, (len(read), len(set(read)))
    assert kb.verify("second").ok  # every chunk written with its vector


def test_a_document_not_kept_under_the_lock_gets_its_vectors_from_the_model_when_the_store_has_none(
    kb, tmp_path, monkeypatch
):
    """A family the update under the lock did not keep is written after all: its chunks, counted
    reused with the kept ones, get their vectors then, from the store's cache or, when it holds
    none (here removed), from the model, and are counted embedded."""
    import kbctl.ingest.writer as writer_mod

    box, mbox, stored = _two_message_mailbox(kb, tmp_path)
    real = writer_mod.keep_documents

    def lose_the_first_family(conn, ns, rows):
        kept = real(conn, ns, rows)
        conn.execute(
            "DELETE FROM kbctl.vectors v USING kbctl.chunks c, kbctl.documents d"
            " WHERE v.namespace_id = c.namespace_id AND v.chunk_id = c.id AND d.namespace_id = c.namespace_id"
            " AND d.id = c.document_id AND d.namespace_id = %s AND d.uri LIKE %s",
            (ns.id, "%a1@example.org%"),
        )
        return {u for u in kept if "a1@example.org" not in u}

    monkeypatch.setattr(writer_mod, "keep_documents", lose_the_first_family)
    mbox.write_text(_with_attachment(1) + _message(2, message_id=True) + _message(3, message_id=True))
    rep = kb.ingest([str(box)], "mail")
    assert rep.documents == {"new": 1, "changed": 0, "unchanged": 3, "removed": 0, "failed": 0}, rep.to_json()
    # the new message's chunk and the family's two (a message and its attachment) were embedded
    assert rep.chunks == {"embedded": 3, "reused": stored - 2, "deleted": 0}, rep.to_json()
    assert rep.verify is not None and rep.verify["ok"], rep.verify
    monkeypatch.undo()
    assert any("12, 14 and 19" in h.text for h in kb.search("wumpus1 figures", "mail", k=5).hits)


def test_a_touched_file_takes_its_new_mtime_on_its_document_row_and_writes_no_chunk(kb, tmp_path):
    """A file touched (its mtime changed, its bytes the same) is skipped before extraction, and its
    document kept the ``mtime`` of the fetch that stored it: ``kbctl show``, a hit and a filter
    ``mtime=…`` gave the old one. A skipped source's fetch facts (but ``fetched_at``) now go onto its
    documents' rows, in one statement a write batch; no chunk row is written, a document whose facts
    did not change is not written, and a front matter's own ``mtime`` stays the document's."""
    import os

    from kbctl.textutil.dates import iso_utc

    docs = tmp_path / "docs"
    docs.mkdir()
    page, own = docs / "page.md", docs / "own.md"
    page.write_text("# Page\n\nThe frobnitz dial turns left.\n")
    own.write_text("---\nmtime: 2001-02-03\n---\n# Own\n\nThe frobnitz lever turns right.\n")
    assert kb.ingest([str(docs)], "pages", verify=False).documents["new"] == 2
    chunks, rows = _chunk_versions(kb, "pages"), _row_versions(kb, "pages")
    page_uri = next(u for u in rows if u.endswith("/page.md"))
    own_uri = next(u for u in rows if u.endswith("/own.md"))

    later = int(page.stat().st_mtime) + 3 * 86400
    for path in (page, own):
        os.utime(path, (later, later))
    again = kb.ingest([str(docs)], "pages", verify=False)
    assert again.documents == {"new": 0, "changed": 0, "unchanged": 2, "removed": 0, "failed": 0}, again.to_json()
    assert again.chunks == {"embedded": 0, "reused": 0, "deleted": 0}, again.to_json()
    assert _chunk_versions(kb, "pages") == chunks  # no chunk row written
    after = _row_versions(kb, "pages")
    assert after[page_uri] != rows[page_uri] and after[own_uri] == rows[own_uri]

    touched = iso_utc(later)
    ids = _ids(kb, "pages")
    assert kb.searching.document(ids[page_uri][0], ["pages"])["metadata"]["mtime"] == touched  # kbctl show
    (hit,) = kb.search("frobnitz dial", "pages", k=1, mode="lexical").hits
    assert hit.metadata["uri"] == page_uri and hit.metadata["mtime"] == touched, hit.metadata
    assert [h.metadata["uri"] for h in kb.search("", "pages", k=5, filters=[f"mtime={touched}"]).hits] == [page_uri]
    (mine,) = kb.search("frobnitz lever", "pages", k=1, mode="lexical").hits
    assert mine.metadata["mtime"] == "2001-02-03" and mine.metadata["size"] == own.stat().st_size, mine.metadata
    assert [h.metadata["uri"] for h in kb.search("", "pages", k=5, filters=["mtime=2001-02-03"]).hits] == [own_uri]

    third = kb.ingest([str(docs)], "pages", verify=False)  # not touched since: nothing written
    assert third.documents["unchanged"] == 2, third.to_json()
    assert (_chunk_versions(kb, "pages"), _row_versions(kb, "pages")) == (chunks, after)


def test_chunks_stored_with_their_fetch_facts_before_migration_023_lose_them_once(kb, tmp_path):
    """Rows written before the fetch facts moved to the document row: chunks that carry the facts and
    a document whose ``fact_keys`` are not known (NULL). The first time the document is kept its
    chunks lose the facts (written once) and it learns its keys; from then on a kept entry writes no
    chunk row. Hits show the row's facts meanwhile, never the chunks' stale ones."""
    import os

    feeds, feed = _feed(tmp_path)
    kb.ingest([str(feeds)], "news", verify=False)
    ns = kb.namespace("news")
    conn = kb.connection()
    conn.execute(  # as a release before migration 023 wrote them
        "UPDATE kbctl.chunks c SET metadata = c.metadata || jsonb_build_object('size', 1, 'mtime', 'then')"
        " WHERE namespace_id = %s",
        (ns.id,),
    )
    conn.execute("UPDATE kbctl.documents SET fact_keys = NULL WHERE namespace_id = %s", (ns.id,))
    hits = kb.search("quaffle switch", "news", k=10, mode="lexical").hits
    assert len(hits) == 3 and {h.metadata["size"] for h in hits} == {feed.stat().st_size}, hits
    touched = feed.stat().st_mtime + 3600
    os.utime(feed, (touched, touched))
    rows = _row_versions(kb, "news")
    assert kb.ingest([str(feeds)], "news", verify=False).documents["unchanged"] == 3
    assert _row_versions(kb, "news") == rows  # keys not known: a skipped source's facts are not given

    chunks = _chunk_versions(kb, "news")
    feed.write_text(_rss([4, 1, 2, 3]))
    assert kb.ingest([str(feeds)], "news", verify=False).documents["new"] == 1
    after = _chunk_versions(kb, "news")
    assert all(after[c] != x for c, x in chunks.items())  # the kept entries' chunks lost the facts, once
    stale = conn.execute(
        "SELECT count(*) FROM kbctl.chunks WHERE namespace_id = %s AND metadata ?| array['size', 'mtime']", (ns.id,)
    ).fetchone()[0]
    assert stale == 0
    hits = kb.search("quaffle switch", "news", k=10, mode="lexical").hits
    assert len(hits) == 4 and {h.metadata["size"] for h in hits} == {feed.stat().st_size}, hits
    feed.write_text(_rss([5, 4, 1, 2, 3]))
    kb.ingest([str(feeds)], "news", verify=False)
    final = _chunk_versions(kb, "news")
    assert {c: final[c] for c in after} == after  # no kept chunk row written any more
