"""A namespace embedded by the ``hash`` embedder before CJK bigrams (revision "", the pin it
recorded) after ``hash-384`` moved to revision "2": searched with its own features, refused a write
that would mix the two, and moved by a re-embed."""

from __future__ import annotations

import pytest

from kbctl.errors import ProfileMismatchError
from tests.conftest import write_folder

DOCS = {
    "beijing.md": "# 北京\n\n北京大学的图书馆很大，藏书丰富，学生每天在那里学习。\n",
    "tokyo.md": "# 天气\n\n东京的天气今天很好，我们去公园散步吧。\n",
    "refunds.md": "# Refunds\n\nRefunds are processed within five business days; see LMN-4012.\n",
}


def _folder(tmp_path):
    return write_folder(tmp_path, "zh", DOCS)


def _top(kb, q, ns="zh"):
    hits = kb.search(q, ns, mode="dense").hits
    return hits[0].source.rsplit("/", 1)[-1], hits[0].score


def test_a_namespace_pinned_before_cjk_bigrams_keeps_its_features_until_reembedded(kb, tmp_path):
    import kbctl

    cfg = tmp_path / "kbctl.toml"
    cfg.write_text('[profiles.hash-384]\nembedder = "hash"\nmodel = "hash"\ndimension = 384\nrevision = ""\n')
    before = kbctl.open(home=kb.settings.database.home, tenant=kb.tenant, config=cfg, profile="hash-384")
    try:
        before.ingest([_folder(tmp_path)], "zh", verify=False)
        old_fp = before.settings.profile("hash-384").fingerprint
    finally:
        before.close()
    assert kb.settings.profile("hash-384").fingerprint != old_fp

    # searched with the recorded pin's features: the query's clause is a feature of the stored vector
    # (embedded with bigrams, it would share none of the old vector's)
    source, score = _top(kb, "北京大学的图书馆很大")
    assert source == "beijing.md" and score > 0.3
    assert _top(kb, "Refunds processed LMN-4012")[0] == "refunds.md"  # English: the same vectors

    with pytest.raises(ProfileMismatchError) as e:
        kb.ingest([_folder(tmp_path)], "zh", verify=False)
    assert "changed since" in str(e.value) and "kbctl reembed zh --profile hash-384" in (e.value.hint or "")

    kb["zh"].reembed("hash-384")
    kb["zh"].swap()
    assert kb.namespaces.get("zh").fingerprint == kb.settings.profile("hash-384").fingerprint
    assert _top(kb, "图书馆")[0] == "beijing.md"  # a word inside the sentence: its bigrams
    kb.ingest([_folder(tmp_path)], "zh", verify=False)  # written again
