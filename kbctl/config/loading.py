"""Reading the layers: the packaged ``default.toml``, the user file, ``KBCTL_*`` variables, flags.

Every key of the user file must exist in the packaged defaults; an unknown key is a ``ConfigError``
that suggests the closest one. The merged tables become a ``Settings``, whose sections are typed
and checked once, there.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Mapping

from ..errors import ConfigError
from .sections import AgentSettings, NamespaceSettings
from .settings import Settings
from .tables import merge, same_type, set_dotted, suggest

__all__ = ["load_settings", "default_config_path", "ENV_KEYS"]

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
        data = merge(data, layer)
        sources.append(str(user))
    for var, (section, key) in ENV_KEYS.items():
        if env.get(var):
            data[section][key] = env[var]
    for dotted, value in (overrides or {}).items():
        if value is None:
            continue
        set_dotted(data, dotted, value)
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
            NamespaceSettings.from_table(where, dotted, value)
            continue
        if prefix == "agents.":
            AgentSettings.from_table(where, dotted, value)
            continue
        if key not in defaults:
            hint = suggest(key, defaults)
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
        elif not same_type(expected, value):
            raise ConfigError(f"{where}: '{dotted}' must be {type(expected).__name__}, got {type(value).__name__}")
