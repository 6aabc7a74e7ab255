"""The ``sentence-transformers`` embedder plugin: one name, three backends chosen by ``precision``.

Apart from ``st.py`` (torch) so that the backends (``st``, ``onnx``) and the ``auto`` decision
(``precision``), which use one another's helpers, are only ever imported by this dispatcher.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import Profile
from ..errors import EmbeddingError
from .st import SentenceTransformerEmbedder, find_model, resolve_model_path
from .tokens import HFTokenizer, Tokenizer

if TYPE_CHECKING:
    from .precision import PrecisionChoice
    from .protocol import Embedder

__all__ = ["SentenceTransformers", "factory"]

log = logging.getLogger(__name__)


class SentenceTransformers:
    """The ``sentence-transformers`` embedder plugin: picks the backend ``profile.precision`` names.

    ``fp32``/``bf16`` load ``SentenceTransformerEmbedder`` (torch), ``onnx-int8``/``onnx-fp32`` an
    ``OnnxEmbedder``; ``auto`` loads what ``kbctl.embed.precision`` decided for the purpose.
    """

    def __call__(self, profile: Profile, *, cache_dir: Path | None = None, purpose: str = "throughput") -> Embedder:
        if profile.precision == "auto":
            from . import get_embedder
            from .precision import cached_decision, choose_precision

            recorded = cached_decision(profile, cache_dir)  # read once; measured only when missing
            if recorded is not None:
                chosen = recorded.for_purpose(purpose)
            else:
                if purpose == "query":
                    log.warning(
                        "profile %r is not prepared on this machine: measuring its backends now (once); "
                        "`kbctl ingest` does this ahead of the first search",
                        profile.name,
                    )
                chosen = choose_precision(profile, cache_dir, purpose, load=get_embedder)
            return get_embedder(replace(profile, precision=chosen), cache_dir=cache_dir)
        if profile.precision in ("onnx-int8", "onnx-fp32"):
            from .onnx import OnnxEmbedder

            return OnnxEmbedder(profile, cache_dir=cache_dir)
        return SentenceTransformerEmbedder(profile, precision=profile.precision)

    def check(self, profile: Profile) -> None:
        """The model's files found offline, without loading it (``st.find_model``): every backend
        loads from them."""
        find_model(profile.model, profile.allow_download)

    def find(self, profile: Profile) -> None:
        """As ``check``: finding the files is all the check does."""
        find_model(profile.model, profile.allow_download)

    def tokenizer(self, profile: Profile) -> Tokenizer:
        """The model's fast tokenizer (``tokenizer.json``, read by ``tokenizers`` alone: no torch)."""
        path = resolve_model_path(profile.model, profile.allow_download)
        tj = Path(path) / "tokenizer.json"
        if not tj.exists():
            raise EmbeddingError(
                f"no tokenizer.json for model {profile.model!r} in {path}", hint="use a model with a fast tokenizer"
            )
        return HFTokenizer(tj)

    def prepare(self, profile: Profile, *, cache_dir: Path | None = None) -> PrecisionChoice:
        """The ``auto`` decision measured and recorded, and the ONNX export the query backend opens."""
        from . import get_embedder
        from .onnx import ensure_export
        from .precision import decide_precision

        choice = decide_precision(profile, cache_dir, load=get_embedder)
        if choice.query_precision in ("onnx-fp32", "onnx-int8"):
            ensure_export(replace(profile, precision=choice.query_precision), cache_dir)
        return choice


#: The entry point ``sentence-transformers`` of ``kbctl.embedders``.
factory = SentenceTransformers()
