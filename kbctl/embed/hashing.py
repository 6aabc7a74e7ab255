"""A deterministic feature-hashing embedder for tests and experiments.

Each lower-cased word and word bigram is hashed (blake2b) to a dimension and a sign; the vector is
L2-normalised. Texts that share words get similar vectors, so search behaves sensibly in tests,
with no model to load. Registered as the ``hash`` embedder (``factory``); it ignores precision.

The profile's ``revision`` says which words: ``"2"`` (what ``hash-384`` pins) cuts a run of Han,
Kana or Hangul into its character bigrams (``kbctl.textutil.analyze.plain_words``), so two Chinese
texts that share most words get close vectors; any other revision (``""``, what every pin recorded
before has, or a free-text tag) keeps a CJK run one word. Text without a CJK character gets the same
vector, bit for bit, under every revision. A revision is part of the fingerprint: a namespace
embedded before keeps its pin and is searched with its own features (the profile rebuilt from the
pin), and the embed cache never hands a vector of one revision to the other.
"""

from __future__ import annotations

import hashlib
import re
from itertools import pairwise
from pathlib import Path
from typing import Sequence

import numpy as np

from ..config import Profile
from ..textutil.analyze import plain_words

_WORD = re.compile(r"\w+", re.UNICODE)

#: The revision whose words are CJK bigrams; every other revision's are ``\w+`` runs.
CJK_BIGRAMS = "2"


class HashEmbedder:
    """Feature hashing into ``profile.dimension`` dimensions."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.dimension = profile.dimension
        self._words = plain_words if profile.revision == CJK_BIGRAMS else _runs

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return (
            np.stack([self._one(self.profile.document_prefix + t) for t in texts])
            if texts
            else np.zeros((0, self.dimension), dtype=np.float32)
        )

    def embed_query(self, text: str) -> np.ndarray:
        return self._one(self.profile.query_prefix + text)

    def _one(self, text: str) -> np.ndarray:
        v = np.zeros(self.dimension, dtype=np.float32)
        words = self._words(text)
        for feat in words + [a + " " + b for a, b in pairwise(words)]:
            h = hashlib.blake2b(feat.encode(), digest_size=8).digest()
            idx = int.from_bytes(h[:4], "little") % self.dimension
            v[idx] += 1.0 if h[4] & 1 else -1.0
        n = float(np.linalg.norm(v))
        if n == 0.0:
            v[0] = 1.0
            return v
        return v / n


def _runs(text: str) -> list[str]:
    """The words of revisions before CJK bigrams: a CJK run is one word."""
    return _WORD.findall(text.lower())


class HashPlugin:
    """The ``hash`` embedder plugin: no model, no precision. It gives no tokenizer, so its chunks are
    measured by ``kbctl.embed.tokens.WordTokenizer`` (words; a CJK or Thai character one token), and
    the word count's revision is part of its sources' hashes (``tokens.chunk_count_revision``)."""

    def __call__(self, profile: Profile, *, cache_dir: Path | None = None, purpose: str = "throughput") -> HashEmbedder:
        return HashEmbedder(profile)

    def check(self, profile: Profile) -> None:
        """Nothing to load: a hash profile can always embed."""

    def find(self, profile: Profile) -> None:
        """No model to find."""


#: The entry point ``hash`` of ``kbctl.embedders``.
factory = HashPlugin()
