"""Reading the layers: the packaged ``default.toml``, the user file, ``KBCTL_*`` variables, flags.

Every key of the user file must exist in the packaged defaults; an unknown key is a ``ConfigError``
that suggests the closest one. The merged tables become a ``Settings``, whose sections are typed
and checked once, there.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from .. import plugins, validate
from ..errors import ConfigError, KbctlError
from .sections import AgentSettings, NamespaceSettings
from .settings import Settings
from .tables import key_line, merge, same_type, set_dotted, suggest

__all__ = ["load_settings", "check_settings", "ConfigCheck", "default_config_path", "ENV_KEYS"]

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
    The user file and each ``KBCTL_*`` variable are checked as they are laid on (every profile the
    file defines or changes is resolved then): a mistake names the file and line, or the variable.
    """
    env = os.environ if env is None else env
    defaults_path = default_config_path()
    data = _read_toml(defaults_path)
    sources = [str(defaults_path)]
    user = Path(config_path) if config_path else _find_user_file(env, cwd)
    if user is not None:
        if not user.exists():
            raise ConfigError(
                f"config file not found: {user}",
                hint="--config and KBCTL_CONFIG name a TOML file (configs/default.toml documents every key)",
            )
        text = _read_text(user)
        layer = _parse(user, text)
        with _located(str(user), text, copy.deepcopy(data)):
            _validate(layer, data, str(user))
            data = merge(data, layer)
            _check_layer(data, layer)
        sources.append(str(user))
    for var, (section, key) in ENV_KEYS.items():
        if env.get(var):
            data[section][key] = env[var]
            with _named(var):
                _check_layer(data, {section: {key: env[var]}})
    for dotted, value in (overrides or {}).items():
        if value is None:
            continue
        set_dotted(data, dotted, value)
    return Settings(data=data, sources=tuple(sources))


@dataclass(frozen=True)
class ConfigCheck:
    """What ``check_settings`` found: the user file checked (``None``: the packaged defaults alone),
    the layers read and what they define, or the error that refused them (``error``, the first of
    ``errors``: one when the settings do not load, one a profile whose model is not on this
    machine when they do), and ``notes`` on what the check could not tell or need not refuse."""

    file: str | None
    sources: tuple[str, ...] = ()
    default_profile: str = ""
    profiles: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    agents: tuple[str, ...] = ()
    error: KbctlError | None = None
    errors: tuple[KbctlError, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def exit_code(self) -> int:
        """0, or the error's exit code (2 for a configuration error)."""
        return 0 if self.error is None else self.error.exit_code

    def summary(self) -> str:
        """One line: ``ok: FILE: 6 profiles (default minilm), 1 namespace, 0 agents`` (ok only)."""

        def n(count: int, noun: str) -> str:
            return f"{count} {noun}{'' if count == 1 else 's'}"

        return (
            f"ok: {self.file or 'the packaged defaults'}: {n(len(self.profiles), 'profile')}"
            f" (default {self.default_profile}), {n(len(self.namespaces), 'namespace')}, {n(len(self.agents), 'agent')}"
        )

    def to_json(self) -> dict[str, Any]:
        def as_json(e: KbctlError) -> dict[str, Any]:
            return {
                "message": e.message,
                "hint": e.hint,
                "key": getattr(e, "key", None),
                "file": getattr(e, "file", None),
                "line": getattr(e, "line", None),
                "exit_code": e.exit_code,
            }

        return {
            "ok": self.ok,
            "file": self.file,
            "sources": list(self.sources),
            "default_profile": self.default_profile,
            "profiles": list(self.profiles),
            "namespaces": list(self.namespaces),
            "agents": list(self.agents),
            "error": as_json(self.error) if self.error is not None else None,
            "errors": [as_json(e) for e in self.errors],
            "notes": list(self.notes),
        }


def check_settings(
    config_path: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> ConfigCheck:
    """Load the settings as every command does (``load_settings``), then resolve every profile they
    hold, the built-in ones the file does not name too, with their embedders (whether each is
    installed here) and their models (``_find_models``): what a command would refuse only when it
    uses the profile is found now, at its line in the file. Nothing is opened (no store, no home,
    no model). A refusal is the check's ``error``."""
    env = os.environ if env is None else env
    user = Path(config_path) if config_path else _find_user_file(env, cwd)
    file = str(user) if user is not None else None
    try:
        settings = load_settings(user, overrides, env, cwd)
        where = str(user if user is not None else default_config_path())
        text = _read_text(Path(where))
        defaults = _read_toml(default_config_path())
        with _located(where, text, defaults):
            for name in settings.profile_names():
                settings.profile(name)
            settings.profile()
        used = {settings.defaults.profile, *(ns.profile for ns in settings.namespaces.values() if ns.profile)}
        if user is not None:  # the profiles the user's file defines or changes
            used.update(_parse(user, text).get("profiles") or {})
        errors, notes = _find_models(settings, used, lambda e: _at_line(e, where, text, defaults))
    except KbctlError as e:
        return ConfigCheck(file, error=e, errors=(e,))
    return ConfigCheck(
        file,
        settings.sources,
        settings.defaults.profile,
        tuple(settings.profile_names()),
        tuple(settings.namespaces),
        tuple(settings.agents),
        error=errors[0] if errors else None,
        errors=tuple(errors),
        notes=tuple(notes),
    )


def _find_models(
    settings: Settings, used: set[str], locate: Callable[[ConfigError], ConfigError]
) -> tuple[list[ConfigError], list[str]]:
    """Whether each profile's model is on this machine, asked of its built-in embedder's ``find``
    (``kbctl.embed``: files found, nothing loaded, no network). A profile ``used`` (the default,
    a namespace's, one the user's file defines) whose model is missing is an error at its ``model``
    line (``locate``); another one (a built-in nothing uses: ``e5-small`` without ``kbctl[e5]``)
    is a note, as is a plugin's profile: its model waits for its first use."""
    errors: list[ConfigError] = []
    notes: list[str] = []
    for name in settings.profile_names():
        profile = settings.profile(name)
        if profile.embedder not in plugins.BUILTIN[plugins.EMBEDDERS]:
            notes.append(
                f"profile {name!r}: the model of embedder {profile.embedder!r} (a plugin) is not checked here;"
                " the first command that uses the profile loads it"
            )
            continue
        find = getattr(plugins.load(plugins.EMBEDDERS, profile.embedder), "find", None)
        if find is None:
            continue
        try:
            find(profile)
        except KbctlError as e:
            if name in used:
                errors.append(locate(ConfigError(f"profile {name!r}: {e.message}", hint=e.hint, key="model")))
            else:
                notes.append(f"profile {name!r}: {e.message} (nothing here uses it; to use it: {e.hint})")
    return errors, notes


def _at_line(e: ConfigError, where: str, text: str, defaults: Mapping[str, Any]) -> ConfigError:
    """``e`` as ``_located`` words it: the file and the line of its key."""
    try:
        with _located(where, text, defaults):
            raise e
    except ConfigError as located:
        return located
    raise AssertionError("unreachable")  # pragma: no cover


def _find_user_file(env: Mapping[str, str], cwd: Path | None) -> Path | None:
    if env.get("KBCTL_CONFIG"):
        return Path(env["KBCTL_CONFIG"])
    p = (cwd or Path.cwd()) / "kbctl.toml"
    return p if p.exists() else None


def _read_toml(path: Path) -> dict[str, Any]:
    return _parse(path, _read_text(path))


def _read_text(path: Path) -> str:
    """The file's text: UTF-8, a byte-order mark at its start dropped (editors on Windows write one)."""
    try:
        raw = path.read_bytes()
    except IsADirectoryError:
        raise ConfigError(
            f"cannot read {path}: it is a directory", hint="--config and KBCTL_CONFIG name a file"
        ) from None
    except OSError as e:
        raise ConfigError(
            f"cannot read {path}: {e.strerror}", hint="check the file's permissions (kbctl reads it as this user)"
        ) from None
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise ConfigError(
            f"{path}:{line}: not UTF-8 (byte {raw[e.start]:#04x} at offset {e.start})",
            hint="TOML files are UTF-8: save the file as UTF-8",
            file=str(path),
            line=line,
        ) from None


def _parse(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"\(at line (\d+)", str(e))
        # "at end of document" (an unterminated string, array or table ran to the end): its last
        # line with text, where the reader looks, as FILE:LINE like every other error of the file
        line = int(m.group(1)) if m else max(1, len(text.rstrip().splitlines()))
        raise ConfigError(
            f"{path}:{line}: invalid TOML: {e}",
            hint="see https://toml.io (strings in quotes, one [table] header a line)",
            file=str(path),
            line=line,
        ) from None


def _check_layer(data: dict[str, Any], layer: Mapping[str, Any]) -> None:
    """What ``layer`` changed in ``data``, checked now: the typed sections, the default tenant and
    profile, and every profile the layer defines or changes (``[profiles.NAME]``, and the default
    profile when it changes ``[profile]``), whether or not this command uses it; not whether its
    embedder is installed here."""
    settings = Settings(data=data)
    tenant = settings.defaults.tenant
    try:
        validate.name("tenant", tenant)
    except KbctlError as e:
        raise ConfigError(e.message, hint=e.hint, key="defaults.tenant") from None
    names = settings.profile_names()
    if settings.defaults.profile not in names:
        try:
            settings.profile()
        except ConfigError as e:
            e.key = "defaults.profile"
            raise
    touched = list(layer.get("profiles") or {})
    if "profile" in layer:  # the shared table: the default profile too (a built-in one the file does
        touched.append(settings.defaults.profile)  # not name is checked when it is used)
    for name in dict.fromkeys(touched):
        settings.profile(name, embedder=False)


@contextlib.contextmanager
def _located(where: str, text: str, defaults: Mapping[str, Any]) -> Iterator[None]:
    """A ConfigError raised inside names ``where`` and the line of its key in ``text``; without a
    hint of its own, the hint gives the key's packaged default."""
    try:
        yield
    except ConfigError as e:
        message = e.message.removeprefix(f"{where}: ").removeprefix(f"{_SETTINGS}: ")
        candidates = _candidates(e.key, message)
        line = next((n for n in (key_line(text, c) for c in candidates) if n), None)
        prefix = f"{where}:{line}: " if line else f"{where}: "
        hint = e.hint or _default_hint(defaults, candidates)
        raise ConfigError(prefix + message, hint=hint, key=e.key, file=where, line=line) from None


@contextlib.contextmanager
def _named(var: str) -> Iterator[None]:
    """A ConfigError raised inside names the environment variable ``var`` (its message, the value)."""
    try:
        yield
    except ConfigError as e:
        message = e.message.removeprefix(f"{_SETTINGS}: ")
        raise ConfigError(f"{var}: {message}", hint=e.hint, key=e.key) from None


_SETTINGS = "settings"  # how Settings names a value it refuses (kbctl.config.settings._WHERE)
_PROFILE_WHERE = re.compile(r"profile '([^']*)': ")


def _candidates(key: str | None, message: str) -> list[str]:
    """The dotted keys of the user's file an error about ``key`` may be found at: a profile's part is
    in ``[profiles.NAME]`` or in the shared ``[profile]``."""
    if not key:
        return []
    m = _PROFILE_WHERE.match(message)
    if m is None:
        return [key]
    return [f"profiles.{m.group(1)}.{key}", f"profile.{key}", f"profiles.{m.group(1)}"]


def _default_hint(defaults: Mapping[str, Any], candidates: list[str]) -> str | None:
    for dotted in candidates:
        node: Any = defaults
        for part in dotted.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        if node is not None and not isinstance(node, Mapping):
            return f"the default is {json.dumps(node)} (configs/default.toml documents every key)"
    return None


def _validate(layer: Mapping[str, Any], defaults: Mapping[str, Any], where: str, prefix: str = "") -> None:
    """Every key in ``layer`` must exist in ``defaults``; profiles and namespaces are free-named tables."""
    for key, value in layer.items():
        dotted = f"{prefix}{key}"
        if prefix == "profiles.":
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: [{dotted}] must be a table", key=dotted)
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
            raise ConfigError(f"{where}: unknown key '{dotted}'", hint=hint or "see `kbctl config show`", key=dotted)
        expected = defaults[key]
        if dotted in ("profiles", "namespaces", "agents"):
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: [{dotted}] must be a table", key=dotted)
            _validate(value, defaults, where, f"{dotted}.")
        elif isinstance(expected, dict):
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: '{dotted}' must be a table", key=dotted)
            _validate(value, expected, where, f"{dotted}.")
        elif not same_type(expected, value):
            raise ConfigError(
                f"{where}: '{dotted}' must be {type(expected).__name__}, got {type(value).__name__}", key=dotted
            )
