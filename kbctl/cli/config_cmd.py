"""``kbctl config``: show the resolved configuration, or check it."""

from __future__ import annotations

import re
import sys

import typer

from .render import print_json
from .state import STATE, err, info, out
from .terminal import printable

app = typer.Typer(help="Show the resolved configuration, or check it.", no_args_is_help=True)


@app.command("check")
def check(
    file: str = typer.Argument(None, help="The file to check (default: --config, KBCTL_CONFIG, else ./kbctl.toml)."),
    json_: bool = typer.Option(False, "--json", help="The result, ok or the error, as JSON on stdout (for CI)."),
) -> None:
    """Load and check the configuration and every profile, its model found (not loaded), opening
    nothing: one 'ok' line on stderr and exit 0, else each error (FILE:LINE: key …) and its exit
    code; notes on what it could not check."""
    from ..config import check_settings

    result = check_settings(file or STATE.config, STATE.overrides())
    if json_:
        print_json(result.to_json())
        if result.exit_code:
            raise typer.Exit(result.exit_code)
        return
    for note in result.notes:
        info(f"note: {note}")
    if result.errors:  # one when the settings do not load; each profile whose model is missing
        for e in result.errors[:-1]:
            for line in [f"error: {e.message}"] + ([f"hint: {e.hint}"] if e.hint else []):
                print(printable(line, keep=""), file=sys.stderr)
        raise result.errors[-1]  # its line, the hint and the exit code, by the CLI's error boundary
    err.print(result.summary(), markup=False, highlight=False)


@app.command("show")
def show(
    json_: bool = typer.Option(False, "--json", help="JSON on stdout."),
    profile: str = typer.Option(None, "--profile", "-p", help="Also resolve this profile (default: defaults.profile)."),
) -> None:
    """Print the settings after every layer (defaults, user file, environment, flags)."""
    kb = STATE.kb()
    data = kb.config_report(profile or STATE.profile)
    if json_:
        print_json(data)
        return
    out.print(f"# layers: {' < '.join(data['sources'])} < KBCTL_* < flags", markup=False, highlight=False)
    _toml(data["settings"])
    prof = data["profile"]
    out.print(f"\n# resolved profile {prof['name']}: fingerprint {prof['fingerprint']}", markup=False, highlight=False)
    for line in _decision_lines(data["precision"], kb.settings.model_cache):
        out.print(f"# {line}", markup=False, highlight=False)


def _decision_lines(p: dict, cache) -> list[str]:
    setting = p["setting"]
    if not p["decided"]:
        return [f"precision {setting}: not decided on this machine yet (kbctl ingest decides it, in {cache})"]
    lines = [
        f"precision {setting}: throughput (ingest, embed) -> {p['throughput']}: {p['throughput_reason']}",
        f"precision {setting}: queries (search) -> {p['query']}: {p['query_reason']}",
    ]
    if p["cpu_flags"]:
        lines.append(f"decided on a CPU with {', '.join(p['cpu_flags'])}")
    return lines


def _toml(d: dict, prefix: str = "") -> None:
    """The tables as TOML that loads back as the same settings (``kbctl --config FILE``)."""
    scalars = {k: v for k, v in d.items() if not isinstance(v, dict)}
    tables = {k: v for k, v in d.items() if isinstance(v, dict)}
    if prefix and (scalars or not tables):
        out.print(f"\n[{prefix}]", markup=False, highlight=False)
    for k, v in scalars.items():
        out.print(f"{_key(k)} = {_value(v)}", markup=False, highlight=False)
    for k, v in tables.items():
        _toml(v, f"{prefix}.{_key(k)}" if prefix else _key(k))


_BARE = re.compile(r"[A-Za-z0-9_-]+")


def _key(k: str) -> str:
    """A bare key where TOML allows one, else a quoted one (``profiles."my model"``)."""
    return k if _BARE.fullmatch(k) else _string(k)


def _string(s: str) -> str:
    """A TOML basic string: only ``"``, ``\\`` and control characters escaped (JSON's ``\\ud83d``
    surrogate pairs are not TOML)."""
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(ch, f"\\u{ord(ch):04X}"))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + "}"
    return "[" + ", ".join(_value(x) for x in v) + "]"
