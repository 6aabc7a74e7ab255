"""Layered TOML configuration and embedding profiles.

Layers, lowest first: the packaged ``default.toml`` < the user file (``./kbctl.toml`` or an explicit
path) < ``KBCTL_*`` environment variables < explicit overrides (command-line flags). Every key must
exist in the packaged defaults; an unknown key is a ``ConfigError`` that suggests the closest one.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["Settings", "Profile", "load_settings", "default_config_path", "FINGERPRINT_KEYS"]

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
}


def default_config_path() -> Path:
    """The packaged defaults: inside the wheel, or ``configs/`` in a source checkout."""
    here = Path(__file__).resolve().parent
    for p in (here / "default.toml", here.parent / "configs" / "default.toml"):
        if p.exists():
            return p
    raise ConfigError("packaged default.toml is missing", hint="reinstall kbctl")


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
    chunk: Mapping[str, Any] = field(default_factory=dict)
    hnsw: Mapping[str, Any] = field(default_factory=dict)
    lexical: Mapping[str, Any] = field(default_factory=dict)
    search: Mapping[str, Any] = field(default_factory=dict)
    rerank: Mapping[str, Any] = field(default_factory=dict)

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
    def from_table(cls, name: str, t: Mapping[str, Any]) -> "Profile":
        """Build a profile from a merged TOML table, checking types and values."""
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
            chunk=dict(t["chunk"]),
            hnsw=dict(t["hnsw"]),
            lexical=dict(t["lexical"]),
            search=dict(t["search"]),
            rerank=dict(t["rerank"]),
        )
        p._check()
        return p

    def _check(self) -> None:
        where = f"profile {self.name!r}"
        if self.embedder not in ("sentence-transformers", "hash"):
            raise ConfigError(f"{where}: unknown embedder {self.embedder!r}", hint="use 'sentence-transformers' or 'hash'")
        if not 1 <= self.dimension <= 16000:
            raise ConfigError(f"{where}: dimension {self.dimension} is out of range 1..16000")
        if self.distance not in ("cosine", "l2", "ip"):
            raise ConfigError(f"{where}: distance must be cosine, l2 or ip, not {self.distance!r}")
        if self.precision not in ("fp32", "bf16", "onnx-int8", "onnx-fp32", "auto"):
            raise ConfigError(f"{where}: precision must be fp32, bf16, onnx-int8, onnx-fp32 or auto")
        size, overlap = int(self.chunk["size"]), int(self.chunk["overlap"])
        if size < 16 or overlap < 0 or overlap >= size:
            raise ConfigError(f"{where}: chunk size must be >= 16 and overlap in [0, size)")
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
    def tenant(self) -> str:
        return str(self.data["defaults"]["tenant"])

    def profile(self, name: str | None = None) -> Profile:
        """Resolve a named profile (default: ``defaults.profile``)."""
        name = name or str(self.data["defaults"]["profile"])
        profiles = self.data.get("profiles", {})
        if name not in profiles:
            raise ConfigError(f"unknown profile {name!r}", hint=_suggest(name, profiles) or f"known: {', '.join(profiles)}")
        merged = _merge(copy.deepcopy(dict(self.data["profile"])), profiles[name])
        return Profile.from_table(name, merged)

    def profile_names(self) -> list[str]:
        return list(self.data.get("profiles", {}))

    def namespace_profile(self, namespace: str) -> str | None:
        """The profile a namespace is declared with in the config, if any."""
        ns = self.data.get("namespaces", {}).get(namespace)
        return str(ns["profile"]) if ns and ns.get("profile") else None


NAMESPACE_KEYS = {"profile": str, "tenant": str, "description": str}


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
        if key not in defaults:
            hint = _suggest(key, defaults)
            raise ConfigError(f"{where}: unknown key '{dotted}'", hint=hint or "see `kbctl config show`")
        expected = defaults[key]
        if dotted in ("profiles", "namespaces"):
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
            raise ConfigError(f"{where}: '{dotted}.{k}' must be a string")


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
