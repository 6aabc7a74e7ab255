"""A namespace of a ``hash`` profile whose Chinese document was chunked while the word tokenizer
counted a CJK run as one token (before session 41): its next ingest chunks that document again to
the profile's size, keeps the English one as it is stored, and needs no re-embed (the vectors'
fingerprint did not change)."""

from __future__ import annotations

import re

from kbctl.embed import tokens
from tests.conftest import write_folder
from tests.unit.test_word_tokenizer import CHINESE

DOCS = {
    "long.md": "# 长文\n\n" + CHINESE + "\n",
    "refunds.md": "# Refunds\n\nRefunds are processed within five business days; see LMN-4012.\n",
}


def _chunks(kb, name: str) -> dict[str, list[tuple[int, int]]]:
    """Per document (its file name): its chunks' ids and text lengths, in order."""
    ns = kb.namespace(name)
    out: dict[str, list[tuple[int, int]]] = {}
    for uri, cid, n in kb.connection().execute(
        "SELECT d.uri, c.id, length(c.text) FROM kbctl.chunks c JOIN kbctl.documents d ON d.id = c.document_id"
        " WHERE c.namespace_id = %s ORDER BY d.uri, c.position",
        (ns.id,),
    ):
        out.setdefault(uri.rsplit("/", 1)[-1], []).append((cid, n))
    return out


def test_the_next_ingest_chunks_cjk_documents_again_and_keeps_the_others(kb, tmp_path, monkeypatch):
    folder = write_folder(tmp_path, "zh", DOCS)
    with monkeypatch.context() as m:  # the word count before session 41: a CJK run one token, no revision
        m.setattr(tokens, "_TOKEN", re.compile(r"\w+|[^\w\s]"), raising=False)
        m.setattr(tokens, "WORD_COUNT", "", raising=False)
        kb.ingest([folder], "zh", verify=False)
    before = _chunks(kb, "zh")
    assert [n for _, n in before["long.md"]] == [len(CHINESE)]  # one chunk of 3,612 characters
    fingerprint = kb.namespaces.get("zh").fingerprint

    again = kb.ingest([folder], "zh")
    assert again.verify is not None and again.verify["ok"], again.to_json()
    # as after a change of chunk.size: the documents' text is unchanged, the long one's chunks are new
    assert again.documents["unchanged"] == 2 and again.documents["changed"] == 0, again.to_json()
    assert again.chunks["reused"] == 1 and again.chunks["embedded"] >= len(CHINESE) // 200, again.to_json()
    after = _chunks(kb, "zh")
    size = kb.settings.profile("hash-384").chunk.size
    # each of its 300-character sentences cut to the size (at its full stops since session 42)
    sentences = [len(t) + 1 for t in CHINESE.split("。")[:-1]]
    assert len(after["long.md"]) == sum(-(-n // size) for n in sentences)
    assert all(n <= size for _, n in after["long.md"])
    assert after["refunds.md"] == before["refunds.md"]  # the same chunks: kept, not written again
    assert kb.namespaces.get("zh").fingerprint == fingerprint  # no re-embed, no refusal

    third = kb.ingest([folder], "zh", verify=False)  # and from now on skipped as unchanged
    assert third.documents["unchanged"] == 2 and third.chunks["embedded"] == 0, third.to_json()
    assert _chunks(kb, "zh") == after
    hits = kb.search(CHINESE[310:330], "zh", k=3).hits
    assert hits and hits[0].source.endswith("long.md") and len(hits[0].text) <= size
