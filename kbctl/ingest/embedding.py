"""The one way a chunk gets a vector: the store's embed cache first, then the profile's model.

``Embedding`` serves one profile: ``cached`` looks chunk hashes up in the embed cache (a vector the
profile made for the same text in any generation of the tenant), ``held`` only asks which of them it
holds (no vector read: a plan, the writer's check before the model runs), ``embed`` runs the model,
loaded on the first text it has to read (and, for ``kbctl store``, the profile prepared first). ``vectors`` does both. ``DualWrites`` gives the namespace's other
generations (a shadow being built, the previous one kept for rollback) their vectors for the
chunks an ingest writes, each through its own ``Embedding``.

Used by the writer (``kbctl ingest``, ``kbctl store``), the NDJSON ``kbctl embed`` and re-embedding
(``reembed.build``), so a vector is found or made the same way on every path.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterable, Mapping

from ..config import Profile
from ..store import Namespace, cached_hashes, cached_vectors
from ..store import generations as gstore
from ..store.generations import Generation, stored_profile
from ..types import Chunk

__all__ = ["Embedding", "DualWrites", "Lookup", "Held", "store_lookup", "store_held"]

#: ``lookup(hashes) -> {hash: vector}``: the embed cache's vectors of these chunk hashes.
Lookup = Callable[[Iterable[str]], Mapping[str, Any]]
#: ``held(hashes) -> {hash}``: which of these chunk hashes the embed cache holds a vector of.
Held = Callable[[Iterable[str]], set[str]]


class Embedding:
    """The vectors of one profile for chunk texts, from the cache (``lookup``), else from the model."""

    def __init__(
        self, profile: Profile, lookup: Lookup | None = None, held: Held | None = None, *, prepare: bool = False
    ) -> None:
        self.profile, self.lookup, self._held = profile, lookup, held
        # the profile made ready on this machine (``kbctl.embed.prepare``) before its model loads, when
        # the caller did not do it ahead (``kbctl store``: most often every vector came from upstream)
        self._prepare = prepare
        self._model: Any = None  # the Embedder, loaded when a text needs a vector
        self.embedded = 0  # texts the model read
        # One call at a time (the writer calls from a thread while it writes): two calls at once
        # share the cores and each runs slower, and the model is loaded once.
        self._lock = threading.Lock()

    def cached(self, hashes: Iterable[str]) -> dict[str, Any]:
        """``{hash: vector}`` of the hashes the cache holds a vector of this profile for."""
        return dict(self.lookup(hashes)) if self.lookup is not None else {}

    def held(self, hashes: Iterable[str]) -> set[str]:
        """The hashes ``cached`` would give a vector for, without reading the vectors when the cache
        can say so (``held``)."""
        if self._held is not None:
            return self._held(hashes)
        return set(self.cached(hashes))

    def embed(self, texts: Mapping[str, str]) -> dict[str, Any]:
        """``{hash: vector}`` of ``texts`` (``{hash: text}``), from the model."""
        with self._lock:
            if self._model is None:
                from ..embed import get_embedder, prepare

                if self._prepare:
                    prepare(self.profile)
                self._model = get_embedder(self.profile)
            vectors = self._model.embed_documents(list(texts.values()))
            self.embedded += len(texts)
        return dict(zip(texts, vectors))

    @property
    def backend(self) -> str | None:
        """The backend that embedded (``kbctl.embed.backend_name``), ``None`` while the model is not loaded."""
        if self._model is None:
            return None
        from ..embed import backend_name

        return backend_name(self._model)

    def vectors(self, texts: Mapping[str, str]) -> dict[str, Any]:
        """``{hash: vector}`` of every one of ``texts``: the cache's, the model's for the others."""
        have = self.cached(texts)
        missing = {h: t for h, t in texts.items() if h not in have}
        if missing:
            have.update(self.embed(missing))
        return have


def store_lookup(conn, ns: Namespace, generation: Generation | None = None) -> Lookup:
    """The embed cache of ``ns``'s tenant for the profile of its active generation (or of ``generation``)."""
    return lambda hashes: cached_vectors(conn, ns, hashes, generation=generation)


def store_held(conn, ns: Namespace, generation: Generation | None = None) -> Held:
    """Which hashes ``store_lookup`` would find, asked without reading the vectors."""
    return lambda hashes: cached_hashes(conn, ns, hashes, generation=generation)


class DualWrites:
    """The vectors an ingest writes into the namespace's other generations (a shadow being built,
    the previous one kept for rollback), per batch: the generations are read again for each batch, so
    a shadow created while an ingest runs gets its vectors from the next batch on (the build, and
    the swap's final pass under the lock, fill in the batch in flight)."""

    def __init__(self, conn, ns: Namespace, like: Profile) -> None:
        self.conn, self.ns, self.like = conn, ns, like
        self._profiles: dict[int, Profile] = {}  # profile id -> the profile as recorded

    def vectors(self, chunks: Iterable[Chunk]) -> list[tuple[Generation, dict[str, Any]]]:
        """(generation, {chunk hash: vector}) for every non-active generation, for ``chunks``."""
        texts = {c.content_hash: c.embed_text for c in chunks}
        out = []
        for g in gstore.generations(self.conn, self.ns.id):
            if g.state == "active":
                continue
            out.append((g, Embedding(self._profile(g), store_lookup(self.conn, self.ns, g)).vectors(texts)))
        return out

    def _profile(self, g: Generation) -> Profile:
        if g.profile_id not in self._profiles:
            self._profiles[g.profile_id] = stored_profile(self.conn, g.profile_id, self.like)
        return self._profiles[g.profile_id]
