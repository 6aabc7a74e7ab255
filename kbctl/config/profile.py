"""Embedding profiles: a model pin plus its chunk, HNSW, lexical, search and rerank settings.

A profile is ``[profile]`` (shared by every profile) overridden by ``[profiles.NAME]``, resolved by
``Settings.profile``; each part is a frozen dataclass checked when the profile is built.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from .. import plugins
from ..errors import ConfigError
from .tables import check_range, one_of, part, typed

__all__ = [
    "Profile",
    "ChunkSettings",
    "HnswSettings",
    "LexicalSettings",
    "SearchSettings",
    "RerankSettings",
    "FINGERPRINT_KEYS",
    "CHUNK_STRATEGIES",
    "SEARCH_MODES",
    "FUSIONS",
    "PRF_MODES",
    "RERANK_KINDS",
]

# Keys whose values decide what a vector means: two profiles that agree on them make compatible vectors.
FINGERPRINT_KEYS = (
    "embedder",
    "model",
    "revision",
    "dimension",
    "distance",
    "normalize",
    "query_prefix",
    "document_prefix",
    "max_tokens",
)

# The enums of the profile's parts (a unit test keeps them equal to the search modules' own).
CHUNK_STRATEGIES = ("structure", "semantic")
SEARCH_MODES = ("auto", "dense", "lexical", "hybrid")
FUSIONS = ("rrf", "convex")
# Pseudo-relevance feedback (RM3 for the lexical lane and Rocchio for the dense one, both from the
# fused first round; kbctl.search.prf): rescore (the default: the first round's candidates scored again
# by both lanes, where the lanes' agreement is in a band); hybrid (both lanes run again: the deeper,
# costlier quality mode); off (plain hybrid).
PRF_MODES = ("off", "rescore", "hybrid")
# Reranker kinds a profile may name ("" is off); ``kbctl.search.rerank.register_reranker`` adds to it.
RERANK_KINDS = {"", "cross-encoder"}


@dataclass(frozen=True)
class ChunkSettings:
    """``[profile.chunk]``: how documents are cut into chunks (part of every source's hash)."""

    size: int
    overlap: int
    strategy: str
    semantic_threshold: float
    max_document_chars: int

    def _check(self, where: str) -> None:
        check_range(where, "chunk.size", self.size, 16)
        check_range(where, "chunk.overlap", self.overlap, 0)
        if self.overlap >= self.size:
            raise ConfigError(
                f"{where}: chunk.overlap ({self.overlap}) must be less than chunk.size ({self.size})",
                key="chunk.overlap",
            )
        one_of(where, "chunk.strategy", self.strategy, CHUNK_STRATEGIES)
        check_range(where, "chunk.semantic_threshold", self.semantic_threshold, -1, 1)
        check_range(where, "chunk.max_document_chars", self.max_document_chars, 1)


@dataclass(frozen=True)
class HnswSettings:
    """``[profile.hnsw]``: pgvector HNSW build and query parameters, within pgvector's limits."""

    m: int
    ef_construction: int
    ef_search: int
    exact_threshold: int
    max_scan_tuples: int
    build_memory_mb: int

    def _check(self, where: str) -> None:
        check_range(where, "hnsw.m", self.m, 2, 100)
        check_range(where, "hnsw.ef_construction", self.ef_construction, 4, 1000)
        if self.ef_construction < 2 * self.m:
            raise ConfigError(
                f"{where}: hnsw.ef_construction ({self.ef_construction}) must be at least 2 * hnsw.m ({2 * self.m})",
                hint="pgvector refuses to build the index otherwise",
                key="hnsw.ef_construction",
            )
        check_range(where, "hnsw.ef_search", self.ef_search, 1, 1000)
        check_range(where, "hnsw.exact_threshold", self.exact_threshold, 0)
        check_range(where, "hnsw.max_scan_tuples", self.max_scan_tuples, 1)
        check_range(where, "hnsw.build_memory_mb", self.build_memory_mb, 1, 2**20)


@dataclass(frozen=True)
class LexicalSettings:
    """``[profile.lexical]``: BM25 parameters and text analysis."""

    k1: float
    b: float
    language: str
    title_weight: float
    max_edit_distance: int

    def _check(self, where: str) -> None:
        check_range(where, "lexical.k1", self.k1, 0)
        check_range(where, "lexical.b", self.b, 0, 1)
        if self.language != "none":
            import Stemmer

            try:
                Stemmer.Stemmer(self.language)
            except KeyError:
                raise ConfigError(
                    f"{where}: lexical.language {self.language!r} has no Snowball stemmer",
                    hint=f"use 'none' or one of: {', '.join(Stemmer.algorithms())}",
                ) from None
        check_range(where, "lexical.title_weight", self.title_weight, 0)
        check_range(where, "lexical.max_edit_distance", self.max_edit_distance, 0)


@dataclass(frozen=True)
class SearchSettings:
    """``[profile.search]``: the defaults of every query (``SearchOptions`` overrides them per query)."""

    mode: str
    k: int
    candidates: int
    fusion: str
    rrf_k: int
    dense_weight: float
    per_doc: int
    dedupe_threshold: float
    prf: str
    prf_docs: int
    prf_terms: int
    prf_query_weight: float
    prf_vector_docs: int
    prf_vector_weight: float
    prf_max_postings: int
    prf_candidates: int
    prf_min_agreement: float
    prf_max_agreement: float
    prf_dense_weight: float

    def _check(self, where: str) -> None:
        one_of(where, "search.mode", self.mode, SEARCH_MODES)
        check_range(where, "search.k", self.k, 1)
        check_range(where, "search.candidates", self.candidates, 1)
        one_of(where, "search.fusion", self.fusion, FUSIONS)
        check_range(where, "search.rrf_k", self.rrf_k, 1)  # 1/(k + rank): k = 0 is degenerate, as for --rrf-k
        check_range(where, "search.dense_weight", self.dense_weight, 0, 1)
        check_range(where, "search.per_doc", self.per_doc, 0)
        check_range(where, "search.dedupe_threshold", self.dedupe_threshold, 0, 1)
        one_of(where, "search.prf", self.prf, PRF_MODES)
        check_range(where, "search.prf_docs", self.prf_docs, 1, 100)
        check_range(where, "search.prf_terms", self.prf_terms, 1, 200)
        check_range(where, "search.prf_query_weight", self.prf_query_weight, 0, 1)
        check_range(where, "search.prf_vector_docs", self.prf_vector_docs, 0, 100)
        check_range(where, "search.prf_vector_weight", self.prf_vector_weight, 0, 1)
        check_range(where, "search.prf_max_postings", self.prf_max_postings, 0)
        check_range(where, "search.prf_candidates", self.prf_candidates, 1, 1000)
        check_range(where, "search.prf_min_agreement", self.prf_min_agreement, 0, 1)
        check_range(where, "search.prf_max_agreement", self.prf_max_agreement, 0, 1)
        if self.prf_min_agreement > self.prf_max_agreement:
            raise ConfigError(
                f"{where}: search.prf_min_agreement ({self.prf_min_agreement}) must not exceed"
                f" search.prf_max_agreement ({self.prf_max_agreement})",
                hint='the band is where bounded feedback is taken; prf = "off" turns it off',
                key="search.prf_min_agreement",
            )
        check_range(where, "search.prf_dense_weight", self.prf_dense_weight, 0, 1)


@dataclass(frozen=True)
class RerankSettings:
    """``[profile.rerank]``: the optional reranker of the fused candidates."""

    kind: str
    model: str
    top_n: int

    def _check(self, where: str) -> None:
        one_of(where, "rerank.kind", self.kind, sorted(RERANK_KINDS))
        if self.kind == "cross-encoder" and not self.model:
            raise ConfigError(
                f"{where}: rerank.kind is 'cross-encoder' but rerank.model is empty",
                hint="name a cross-encoder model or a local path",
                key="rerank.kind",
            )
        check_range(where, "rerank.top_n", self.top_n, 1)


@dataclass(frozen=True)
class Profile:
    """A resolved embedding profile: model pin plus chunk/search settings."""

    name: str
    embedder: str
    model: str
    revision: str
    dimension: int
    distance: str
    normalize: bool
    query_prefix: str
    document_prefix: str
    max_tokens: int
    batch_size: int
    precision: str
    allow_download: bool
    chunk: ChunkSettings
    hnsw: HnswSettings
    lexical: LexicalSettings
    search: SearchSettings
    rerank: RerankSettings
    # How a generation of this profile stores its vectors: "vector" (4 bytes a dimension) or
    # "halfvec" (2). Not part of the fingerprint: the same model's vectors, stored at another width.
    storage: str = "vector"
    # Where this machine keeps the profile's exported models and ``auto`` decision (``<home>/models``
    # when resolved from settings). Not part of the pin: it says where, not what a vector means.
    cache_dir: str = field(default="", compare=False)

    @property
    def pin(self) -> dict[str, Any]:
        """The values that define vector compatibility."""
        return {k: getattr(self, k) for k in FINGERPRINT_KEYS}

    @property
    def fingerprint(self) -> str:
        """A short stable hash of the pin; equal fingerprints mean compatible vectors."""
        blob = json.dumps(self.pin, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @classmethod
    def from_table(cls, name: str, t: Mapping[str, Any], *, embedder: bool = True) -> Profile:
        """Build a profile from a merged TOML table, checking types and values (``embedder=False``:
        all but whether its embedder is installed here)."""
        where = f"profile {name!r}"
        p = cls(
            name=name,
            embedder=typed(where, "embedder", str, t["embedder"]),
            model=typed(where, "model", str, t["model"]),
            revision=typed(where, "revision", str, t["revision"]),
            # whole numbers stay whole: int(384.5) was 384, silently
            dimension=typed(where, "dimension", int, t["dimension"]),
            distance=typed(where, "distance", str, t["distance"]),
            normalize=typed(where, "normalize", bool, t["normalize"]),
            query_prefix=typed(where, "query_prefix", str, t["query_prefix"]),
            document_prefix=typed(where, "document_prefix", str, t["document_prefix"]),
            max_tokens=typed(where, "max_tokens", int, t["max_tokens"]),
            batch_size=typed(where, "batch_size", int, t["batch_size"]),
            precision=typed(where, "precision", str, t["precision"]),
            allow_download=typed(where, "allow_download", bool, t["allow_download"]),
            chunk=part(ChunkSettings, where, "chunk", t["chunk"]),
            hnsw=part(HnswSettings, where, "hnsw", t["hnsw"]),
            lexical=part(LexicalSettings, where, "lexical", t["lexical"]),
            search=part(SearchSettings, where, "search", t["search"]),
            rerank=part(RerankSettings, where, "rerank", t["rerank"]),
            storage=typed(where, "storage", str, t.get("storage", "vector")),
        )
        p._check(embedder=embedder)
        return p

    def _check(self, *, embedder: bool = True) -> None:
        """The profile's own rules; ``embedder=False`` leaves out whether its embedder is installed
        here (the loader checks every profile of a file, some of which may be used elsewhere only)."""
        where = f"profile {self.name!r}"
        if embedder and not plugins.known(plugins.EMBEDDERS, self.embedder):  # names only: nothing imported
            raise ConfigError(
                f"{where}: {plugins.unknown_message(plugins.EMBEDDERS, self.embedder)}",
                hint=plugins.unknown_hint(plugins.EMBEDDERS, self.embedder),
                key="embedder",
            )
        if not 1 <= self.dimension <= 16000:
            raise ConfigError(f"{where}: dimension {self.dimension} is out of range 1..16000", key="dimension")
        one_of(where, "distance", self.distance, ("cosine", "l2", "ip"))
        one_of(where, "storage", self.storage, ("vector", "halfvec"))
        one_of(where, "precision", self.precision, ("fp32", "bf16", "onnx-int8", "onnx-fp32", "auto"))
        check_range(where, "max_tokens", self.max_tokens, 1)
        check_range(where, "batch_size", self.batch_size, 1)
        size = self.chunk.size
        if size > self.max_tokens:
            raise ConfigError(
                f"{where}: chunk.size {size} exceeds max_tokens {self.max_tokens}",
                hint="chunks longer than the model's input would be truncated; lower chunk.size",
                key="chunk.size",
            )
