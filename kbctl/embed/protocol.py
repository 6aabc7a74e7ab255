"""The embedder plugin protocol (described in ``kbctl.embed``) and the lookup of a registered factory."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, Sequence

import numpy as np

from .. import plugins
from ..config import Profile
from ..errors import ConfigError, EmbeddingError, ProfileMismatchError

__all__ = ["Embedder", "EmbedderFactory", "load_factory"]


class Embedder(Protocol):
    """What the pipeline and search need from an embedding model."""

    profile: Profile

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


class EmbedderFactory(Protocol):
    """What a ``kbctl.embedders`` entry point names: makes the embedder of a profile.

    ``cache_dir`` is where the plugin may keep derived files (exports, decisions), ``None`` for
    its own default; ``purpose`` is ``"throughput"`` (ingest) or ``"query"`` (one query in a
    short-lived process: load fast). A plugin may ignore both. It raises ``EmbeddingError`` when
    it cannot load. Optional attributes: ``tokenizer`` and ``prepare`` (see the module docstring).
    """

    def __call__(self, profile: Profile, *, cache_dir: Path | None = None, purpose: str = "throughput") -> Embedder: ...


def load_factory(name: str) -> EmbedderFactory:
    """The factory registered as embedder ``name`` (imported on first use)."""
    try:
        return plugins.load(plugins.EMBEDDERS, name)
    except ConfigError as e:  # configuration was checked when the profile was read: this is a load failure
        raise EmbeddingError(e.message, hint=e.hint) from None


def dimension_mismatch(profile: Profile, made: int) -> ProfileMismatchError:
    """The error of a profile whose model makes ``made``-d vectors: the model loads and embeds, it
    is the profile's pin (``dimension``) that disagrees with it, a configuration error (exit 2) like
    any other pin mismatch, not an ``EmbeddingError`` (the model could not load or embed)."""
    return ProfileMismatchError(
        f"model {profile.model!r} makes {made}-d vectors but profile {profile.name!r} says {profile.dimension}",
        hint=f"set dimension = {made} in profile {profile.name!r}, or give it the model its namespaces were made with",
    )
