"""Tokenizers used to measure chunks in the profile's own tokens.

For a sentence-transformers model this is the model's fast tokenizer (``tokenizer.json``), loaded
with the ``tokenizers`` library alone: chunking does not need torch. The hash embedder counts words.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from ..config import Profile
from ..errors import EmbeddingError

_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)


class Tokenizer(Protocol):
    """Counts tokens and gives each token's character span."""

    special_tokens: int

    def count(self, text: str) -> int: ...

    def spans(self, text: str) -> list[tuple[int, int]]: ...


class WordTokenizer:
    """Words and punctuation marks; what the hash embedder reads."""

    special_tokens = 0

    def count(self, text: str) -> int:
        return len(_WORD.findall(text))

    def spans(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in _WORD.finditer(text)]


class HFTokenizer:
    """A Hugging Face fast tokenizer from a model directory's ``tokenizer.json``."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer as _Tok

        self._tok = _Tok.from_file(str(path))
        self._tok.no_truncation()
        self._tok.no_padding()
        self.special_tokens = len(self._tok.encode("").ids)  # [CLS] and [SEP] for BERT models

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def spans(self, text: str) -> list[tuple[int, int]]:
        return list(self._tok.encode(text, add_special_tokens=False).offsets)


@lru_cache(maxsize=8)
def _tokenizer_for(embedder: str, model: str, allow_download: bool) -> Tokenizer:
    if embedder == "hash":
        return WordTokenizer()
    from .st import resolve_model_path

    path = resolve_model_path(model, allow_download)
    tj = Path(path) / "tokenizer.json"
    if not tj.exists():
        raise EmbeddingError(f"no tokenizer.json for model {model!r} in {path}", hint="use a model with a fast tokenizer")
    return HFTokenizer(tj)


def get_tokenizer(profile: Profile) -> Tokenizer:
    """The tokenizer that measures chunks for this profile."""
    return _tokenizer_for(profile.embedder, profile.model, profile.allow_download)
