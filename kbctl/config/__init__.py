"""Layered TOML configuration and embedding profiles.

Layers, lowest first: the packaged ``default.toml`` < the user file (``./kbctl.toml`` or an explicit
path) < ``KBCTL_*`` environment variables < explicit overrides (command-line flags). Every key must
exist in the packaged defaults; an unknown key is a ``ConfigError`` that suggests the closest one.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import hashlib
import json
import os
import re
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from .. import plugins
from ..errors import ConfigError

__all__ = [
    "Settings",
    "AccessSettings",
    "Profile",
    "ChunkSettings",
    "HnswSettings",
    "LexicalSettings",
    "SearchSettings",
    "RerankSettings",
    "load_settings",
    "default_config_path",
    "FINGERPRINT_KEYS",
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

ENV_KEYS = {
    "KBCTL_DSN": ("database", "dsn"),
    "KBCTL_HOME": ("database", "home"),
    "KBCTL_TENANT": ("defaults", "tenant"),
    "KBCTL_PROFILE": ("defaults", "profile"),
    "KBCTL_MODEL_CACHE": ("models", "cache_dir"),
    "KBCTL_SERVER": ("server", "url"),
}


def default_config_path() -> Path:
    """The packaged defaults: inside the wheel, or ``configs/`` in a source checkout."""
    here = Path(__file__).resolve().parent.parent
    for p in (here / "default.toml", here.parent / "configs" / "default.toml"):
        if p.exists():
            return p
    raise ConfigError("packaged default.toml is missing", hint="reinstall kbctl")


# The enums of the profile's parts (a unit test keeps them equal to the search modules' own).
CHUNK_STRATEGIES = ("structure", "semantic")
SEARCH_MODES = ("auto", "dense", "lexical", "hybrid")
FUSIONS = ("rrf", "convex")
# Pseudo-relevance feedback: off, or hybrid (RM3 for the lexical lane and Rocchio for the dense one,
# both from the fused first round; kbctl.search.prf).
PRF_MODES = ("off", "hybrid")
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
        _range(where, "chunk.size", self.size, 16)
        _range(where, "chunk.overlap", self.overlap, 0)
        if self.overlap >= self.size:
            raise ConfigError(f"{where}: chunk.overlap ({self.overlap}) must be less than chunk.size ({self.size})")
        _one_of(where, "chunk.strategy", self.strategy, CHUNK_STRATEGIES)
        _range(where, "chunk.semantic_threshold", self.semantic_threshold, -1, 1)
        _range(where, "chunk.max_document_chars", self.max_document_chars, 1)


@dataclass(frozen=True)
class HnswSettings:
    """``[profile.hnsw]``: pgvector HNSW build and query parameters, within pgvector's limits."""

    m: int
    ef_construction: int
    ef_search: int
    exact_threshold: int
    max_scan_tuples: int

    def _check(self, where: str) -> None:
        _range(where, "hnsw.m", self.m, 2, 100)
        _range(where, "hnsw.ef_construction", self.ef_construction, 4, 1000)
        if self.ef_construction < 2 * self.m:
            raise ConfigError(
                f"{where}: hnsw.ef_construction ({self.ef_construction}) must be at least 2 * hnsw.m ({2 * self.m})",
                hint="pgvector refuses to build the index otherwise",
            )
        _range(where, "hnsw.ef_search", self.ef_search, 1, 1000)
        _range(where, "hnsw.exact_threshold", self.exact_threshold, 0)
        _range(where, "hnsw.max_scan_tuples", self.max_scan_tuples, 1)


@dataclass(frozen=True)
class LexicalSettings:
    """``[profile.lexical]``: BM25 parameters and text analysis."""

    k1: float
    b: float
    language: str
    title_weight: float
    max_edit_distance: int

    def _check(self, where: str) -> None:
        _range(where, "lexical.k1", self.k1, 0)
        _range(where, "lexical.b", self.b, 0, 1)
        if self.language != "none":
            import Stemmer

            try:
                Stemmer.Stemmer(self.language)
            except KeyError:
                raise ConfigError(
                    f"{where}: lexical.language {self.language!r} has no Snowball stemmer",
                    hint=f"use 'none' or one of: {', '.join(Stemmer.algorithms())}",
                ) from None
        _range(where, "lexical.title_weight", self.title_weight, 0)
        _range(where, "lexical.max_edit_distance", self.max_edit_distance, 0)


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

    def _check(self, where: str) -> None:
        _one_of(where, "search.mode", self.mode, SEARCH_MODES)
        _range(where, "search.k", self.k, 1)
        _range(where, "search.candidates", self.candidates, 1)
        _one_of(where, "search.fusion", self.fusion, FUSIONS)
        _range(where, "search.rrf_k", self.rrf_k, 0)
        _range(where, "search.dense_weight", self.dense_weight, 0, 1)
        _range(where, "search.per_doc", self.per_doc, 0)
        _range(where, "search.dedupe_threshold", self.dedupe_threshold, 0, 1)
        _one_of(where, "search.prf", self.prf, PRF_MODES)
        _range(where, "search.prf_docs", self.prf_docs, 1, 100)
        _range(where, "search.prf_terms", self.prf_terms, 1, 200)
        _range(where, "search.prf_query_weight", self.prf_query_weight, 0, 1)
        _range(where, "search.prf_vector_docs", self.prf_vector_docs, 0, 100)
        _range(where, "search.prf_vector_weight", self.prf_vector_weight, 0, 1)
        _range(where, "search.prf_max_postings", self.prf_max_postings, 0)
        _range(where, "search.prf_candidates", self.prf_candidates, 1, 1000)


@dataclass(frozen=True)
class RerankSettings:
    """``[profile.rerank]``: the optional reranker of the fused candidates."""

    kind: str
    model: str
    top_n: int

    def _check(self, where: str) -> None:
        _one_of(where, "rerank.kind", self.kind, sorted(RERANK_KINDS))
        if self.kind == "cross-encoder" and not self.model:
            raise ConfigError(
                f"{where}: rerank.kind is 'cross-encoder' but rerank.model is empty",
                hint="name a cross-encoder model or a local path",
            )
        _range(where, "rerank.top_n", self.top_n, 1)


_TYPES: dict[str, type] = {"int": int, "float": float, "str": str, "bool": bool}


def _part(cls: type, where: str, part: str, table: Any) -> Any:
    """One settings dataclass from its merged TOML table, every key present and of its field's type.

    An int is accepted where a float is expected and kept as written, so what hashes it (a source's
    version) is the same as when the parts were plain tables.
    """
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: '{part}' must be a table")
    names = [f.name for f in fields(cls)]
    for key in table:
        if key not in names:
            raise ConfigError(f"{where}: unknown key '{part}.{key}'", hint=_suggest(key, names))
    values = {}
    for f in fields(cls):
        if f.name not in table:
            raise ConfigError(f"{where}: missing key '{part}.{f.name}'")
        values[f.name] = _typed(where, f"{part}.{f.name}", _TYPES[str(f.type)], table[f.name])
    settings = cls(**values)
    settings._check(where)
    return settings


def _typed(where: str, key: str, want: type, value: Any) -> Any:
    ok = isinstance(value, (int, float) if want is float else want)
    if want is not bool and isinstance(value, bool):
        ok = False
    if not ok:
        raise ConfigError(f"{where}: '{key}' must be {want.__name__}, got {type(value).__name__}")
    return value


def _range(where: str, key: str, value: float, lo: float | None = None, hi: float | None = None) -> None:
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        span = f"in {lo}..{hi}" if lo is not None and hi is not None else f">= {lo}" if lo is not None else f"<= {hi}"
        raise ConfigError(f"{where}: {key} must be {span}, got {value}")


def _one_of(where: str, key: str, value: str, allowed: Any) -> None:
    if value not in allowed:
        raise ConfigError(f"{where}: {key} must be one of {', '.join(repr(a) for a in allowed)}, got {value!r}")


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
    def from_table(cls, name: str, t: Mapping[str, Any]) -> Profile:
        """Build a profile from a merged TOML table, checking types and values."""
        where = f"profile {name!r}"
        p = cls(
            name=name,
            embedder=str(t["embedder"]),
            model=str(t["model"]),
            revision=str(t["revision"]),
            dimension=int(t["dimension"]),
            distance=str(t["distance"]),
            normalize=bool(t["normalize"]),
            query_prefix=str(t["query_prefix"]),
            document_prefix=str(t["document_prefix"]),
            max_tokens=int(t["max_tokens"]),
            batch_size=int(t["batch_size"]),
            precision=str(t["precision"]),
            allow_download=bool(t["allow_download"]),
            chunk=_part(ChunkSettings, where, "chunk", t["chunk"]),
            hnsw=_part(HnswSettings, where, "hnsw", t["hnsw"]),
            lexical=_part(LexicalSettings, where, "lexical", t["lexical"]),
            search=_part(SearchSettings, where, "search", t["search"]),
            rerank=_part(RerankSettings, where, "rerank", t["rerank"]),
            storage=str(t.get("storage", "vector")),
        )
        p._check()
        return p

    def _check(self) -> None:
        where = f"profile {self.name!r}"
        if not plugins.known(plugins.EMBEDDERS, self.embedder):  # names only: no plugin is imported here
            raise ConfigError(f"{where}: {plugins.unknown_message(plugins.EMBEDDERS, self.embedder)}")
        if not 1 <= self.dimension <= 16000:
            raise ConfigError(f"{where}: dimension {self.dimension} is out of range 1..16000")
        if self.distance not in ("cosine", "l2", "ip"):
            raise ConfigError(f"{where}: distance must be cosine, l2 or ip, not {self.distance!r}")
        if self.storage not in ("vector", "halfvec"):
            raise ConfigError(f"{where}: storage must be vector or halfvec, not {self.storage!r}")
        if self.precision not in ("fp32", "bf16", "onnx-int8", "onnx-fp32", "auto"):
            raise ConfigError(f"{where}: precision must be fp32, bf16, onnx-int8, onnx-fp32 or auto")
        size = self.chunk.size
        if size > self.max_tokens:
            raise ConfigError(
                f"{where}: chunk.size {size} exceeds max_tokens {self.max_tokens}",
                hint="chunks longer than the model's input would be truncated; lower chunk.size",
            )


@dataclass(frozen=True)
class Settings:
    """The resolved configuration of one invocation."""

    data: Mapping[str, Any]
    sources: tuple[str, ...] = ()

    @property
    def dsn(self) -> str:
        db = self.data["database"]
        if db["dsn"]:
            return str(db["dsn"])
        if db["dsn_env"]:
            return os.environ.get(str(db["dsn_env"]), "")
        return ""

    @property
    def home(self) -> Path:
        h = self.data["database"]["home"]
        if h:
            return Path(h).expanduser().resolve()
        import platformdirs

        return Path(platformdirs.user_data_dir("kbctl")).resolve()

    @property
    def model_cache(self) -> Path:
        """Where exported models and ``precision = "auto"`` decisions live: ``models.cache_dir``, else ``<home>/models``."""
        d = self.data.get("models", {}).get("cache_dir", "")
        return Path(d).expanduser().resolve() if d else self.home / "models"

    @property
    def tenant(self) -> str:
        return str(self.data["defaults"]["tenant"])

    def profile(self, name: str | None = None) -> Profile:
        """Resolve a named profile (default: ``defaults.profile``)."""
        name = name or str(self.data["defaults"]["profile"])
        profiles = self.data.get("profiles", {})
        if name not in profiles:
            raise ConfigError(
                f"unknown profile {name!r}", hint=_suggest(name, profiles) or f"known: {', '.join(profiles)}"
            )
        merged = _merge(copy.deepcopy(dict(self.data["profile"])), profiles[name])
        return dataclasses.replace(Profile.from_table(name, merged), cache_dir=str(self.model_cache))

    def profile_names(self) -> list[str]:
        return list(self.data.get("profiles", {}))

    def namespace_profile(self, namespace: str) -> str | None:
        """The profile a namespace is declared with in the config, if any."""
        ns = self.data.get("namespaces", {}).get(namespace)
        return str(ns["profile"]) if ns and ns.get("profile") else None

    def namespace_acl(self, namespace: str) -> AccessSettings:
        """A namespace's access settings (``kbctl.acl``): its ACL default, path rules, recipients flag."""
        return AccessSettings.from_table(
            f"namespaces.{namespace}", self.data.get("namespaces", {}).get(namespace) or {}
        )


ACL_DEFAULTS = ("public", "deny")
#: An ACL entry: public, user:<id> or group:<name> (ids without spaces or ':').
ACL_ENTRY = re.compile(r"public|(user|group):[^\s:]{1,256}")


@dataclass(frozen=True)
class AccessSettings:
    """Who may view a namespace's documents (``[namespaces.NAME]``; what they mean: ``kbctl.acl``).

    ``default``: ``public`` or ``deny`` for documents without an ACL; ``rules``: (glob, principals)
    pairs, the first whose glob matches a document's path or URI gives its ACL; ``from_recipients``:
    an e-mail's From, To and Cc may view it.
    """

    default: str = "public"
    rules: tuple[tuple[str, tuple[str, ...]], ...] = ()
    from_recipients: bool = False

    @classmethod
    def from_table(cls, where: str, t: Mapping[str, Any]) -> AccessSettings:
        """The settings of one ``[namespaces.NAME]`` table; a malformed value is a ConfigError naming it."""
        default = t.get("acl_default", "public")
        _one_of(where, "acl_default", default, ACL_DEFAULTS)
        rules = []
        for i, r in enumerate(t.get("acl_rules", [])):
            glob, principals = (r.get("glob"), r.get("principals")) if isinstance(r, dict) else (None, None)
            if (
                not isinstance(glob, str)
                or not glob
                or not isinstance(principals, list)
                or set(r) - {"glob", "principals"}
                or not all(isinstance(p, str) and ACL_ENTRY.fullmatch(p) for p in principals)
            ):
                raise ConfigError(
                    f'{where}.acl_rules[{i}] must be {{glob = "…", principals = ["group:…", "user:…"]}}',
                    hint="principals are public, user:<id> or group:<name>",
                )
            rules.append((glob, tuple(principals)))
        return cls(default, tuple(rules), bool(t.get("acl_from_recipients", False)))


NAMESPACE_KEYS: dict[str, type] = {
    "profile": str,
    "tenant": str,
    "description": str,
    "acl_default": str,
    "acl_rules": list,
    "acl_from_recipients": bool,
}


def load_settings(
    config_path: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Settings:
    """Resolve settings from every layer.

    ``overrides`` maps dotted keys (``database.dsn``) to values from flags; ``None`` values are ignored.
    """
    env = os.environ if env is None else env
    defaults_path = default_config_path()
    data = _read_toml(defaults_path)
    sources = [str(defaults_path)]
    user = Path(config_path) if config_path else _find_user_file(env, cwd)
    if user is not None:
        if not user.exists():
            raise ConfigError(f"config file not found: {user}")
        layer = _read_toml(user)
        _validate(layer, data, str(user))
        data = _merge(data, layer)
        sources.append(str(user))
    for var, (section, key) in ENV_KEYS.items():
        if env.get(var):
            data[section][key] = env[var]
    for dotted, value in (overrides or {}).items():
        if value is None:
            continue
        _set_dotted(data, dotted, value)
    return Settings(data=data, sources=tuple(sources))


def _find_user_file(env: Mapping[str, str], cwd: Path | None) -> Path | None:
    if env.get("KBCTL_CONFIG"):
        return Path(env["KBCTL_CONFIG"])
    p = (cwd or Path.cwd()) / "kbctl.toml"
    return p if p.exists() else None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML: {e}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"{path}: not UTF-8 (byte {e.object[e.start]:#04x} at offset {e.start})",
            hint="TOML files are UTF-8: save the file as UTF-8",
        ) from None
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}") from None


def _validate(layer: Mapping[str, Any], defaults: Mapping[str, Any], where: str, prefix: str = "") -> None:
    """Every key in ``layer`` must exist in ``defaults``; profiles and namespaces are free-named tables."""
    for key, value in layer.items():
        dotted = f"{prefix}{key}"
        if prefix == "profiles.":
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: [{dotted}] must be a table")
            _validate(value, defaults["profile"], where, f"{dotted}.")
            continue
        if prefix == "namespaces.":
            _validate_namespace(dotted, value, where)
            continue
        if prefix == "agents.":
            _validate_agent(dotted, value, where)
            continue
        if key not in defaults:
            hint = _suggest(key, defaults)
            raise ConfigError(f"{where}: unknown key '{dotted}'", hint=hint or "see `kbctl config show`")
        expected = defaults[key]
        if dotted in ("profiles", "namespaces", "agents"):
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: [{dotted}] must be a table")
            _validate(value, defaults, where, f"{dotted}.")
        elif isinstance(expected, dict):
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: '{dotted}' must be a table")
            _validate(value, expected, where, f"{dotted}.")
        elif not _same_type(expected, value):
            raise ConfigError(f"{where}: '{dotted}' must be {type(expected).__name__}, got {type(value).__name__}")


def _validate_namespace(dotted: str, value: Any, where: str) -> None:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: [{dotted}] must be a table")
    for k, v in value.items():
        if k not in NAMESPACE_KEYS:
            raise ConfigError(f"{where}: unknown key '{dotted}.{k}'", hint=_suggest(k, NAMESPACE_KEYS))
        if not isinstance(v, NAMESPACE_KEYS[k]):
            raise ConfigError(f"{where}: '{dotted}.{k}' must be a {_TYPE_NAMES[NAMESPACE_KEYS[k]]}")
    AccessSettings.from_table(f"{where}: {dotted}", value)  # acl_default and acl_rules, checked now


_TYPE_NAMES = {str: "string", list: "list", bool: "boolean", int: "whole number"}

# ``[agents.NAME]``: what an agent reaching kbctl through ``kbctl mcp`` / ``kbctl serve`` may use
# (``kbctl.server.agents``): its namespaces and tools (empty: all), default k and token budget
# (0: the server's), the tenant it searches (empty: the server's) and who it searches as.
AGENT_KEYS: dict[str, type] = {
    "namespaces": list,
    "tools": list,
    "k": int,
    "budget": int,
    "tenant": str,
    "principal": str,
    "groups": list,
    "description": str,
}


def _validate_agent(dotted: str, value: Any, where: str) -> None:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: [{dotted}] must be a table")
    for k, v in value.items():
        if k not in AGENT_KEYS:
            raise ConfigError(f"{where}: unknown key '{dotted}.{k}'", hint=_suggest(k, AGENT_KEYS))
        want = AGENT_KEYS[k]
        if (
            not isinstance(v, want)
            or (want is int and isinstance(v, bool))
            or (isinstance(v, list) and not all(isinstance(x, str) for x in v))
        ):
            raise ConfigError(
                f"{where}: '{dotted}.{k}' must be a {_TYPE_NAMES[want]}{' of strings' if want is list else ''}"
            )


def _same_type(expected: Any, value: Any) -> bool:
    if isinstance(expected, bool) or isinstance(value, bool):
        return isinstance(expected, bool) and isinstance(value, bool)
    if isinstance(expected, (int, float)):
        return isinstance(value, (int, float))
    return isinstance(value, type(expected))


def _suggest(key: str, known: Any) -> str | None:
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else None


def _merge(base: dict[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    for k, v in layer.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            base[k] = _merge(base[k], v)
        else:
            base[k] = copy.deepcopy(v)
    return base


def _set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = data
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value
