"""``kbctl config``: show the resolved configuration."""

from __future__ import annotations

import typer

from .render import print_json
from .state import STATE, out

app = typer.Typer(help="Show the resolved configuration.", no_args_is_help=True)


@app.command("show")
def show(
    json_: bool = typer.Option(False, "--json", help="JSON on stdout."),
    profile: str = typer.Option(None, "--profile", "-p", help="Also resolve this profile (default: defaults.profile)."),
) -> None:
    """Print the settings after every layer (defaults, user file, environment, flags)."""
    s = STATE.settings()
    prof = s.profile(profile or STATE.profile)
    from ..embed.precision import cached_decision

    decision = cached_decision(prof)  # as recorded on this machine; never measured here
    data = {"sources": list(s.sources), "settings": s.data, "profile": {"name": prof.name, "fingerprint": prof.fingerprint, **prof.pin},
            "precision": _decision_json(prof.precision, decision)}
    if json_:
        print_json(data)
        return
    import tomllib  # noqa: F401  (TOML is read-only in the stdlib; print a TOML-like view)

    out.print(f"# layers: {' < '.join(s.sources)} < KBCTL_* < flags", markup=False, highlight=False)
    _toml(s.data)
    out.print(f"\n# resolved profile {prof.name}: fingerprint {prof.fingerprint}", markup=False, highlight=False)
    for line in _decision_lines(prof.precision, decision, s.model_cache):
        out.print(f"# {line}", markup=False, highlight=False)


def _decision_json(precision: str, d) -> dict:
    if d is None:
        return {"setting": precision, "decided": False}
    return {"setting": precision, "decided": True, "throughput": d.precision, "throughput_reason": d.reason,
            "query": d.for_purpose("query"), "query_reason": d.query_reason or d.reason, "cpu_flags": list(d.cpu_flags)}


def _decision_lines(precision: str, d, cache) -> list[str]:
    if d is None:
        return [f"precision {precision}: not decided on this machine yet (kbctl ingest decides it, in {cache})"]
    lines = [f"precision {precision}: throughput (ingest, embed) -> {d.precision}: {d.reason}",
             f"precision {precision}: queries (search) -> {d.for_purpose('query')}: {d.query_reason or d.reason}"]
    if d.cpu_flags:
        lines.append(f"decided on a CPU with {', '.join(d.cpu_flags)}")
    return lines


def _toml(d: dict, prefix: str = "") -> None:
    import json

    scalars = {k: v for k, v in d.items() if not isinstance(v, dict)}
    tables = {k: v for k, v in d.items() if isinstance(v, dict)}
    if prefix and (scalars or not tables):
        out.print(f"\n[{prefix}]", markup=False, highlight=False)
    for k, v in scalars.items():
        out.print(f"{k} = {json.dumps(v)}", markup=False, highlight=False)
    for k, v in tables.items():
        _toml(v, f"{prefix}.{k}" if prefix else k)
