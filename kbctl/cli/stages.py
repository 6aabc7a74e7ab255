"""The pipeline stages as separate commands talking NDJSON: fetch, extract, chunk, embed, store."""

from __future__ import annotations

import sys

import typer

from .render import print_json
from .state import STATE, warn


def register(app: typer.Typer) -> None:
    app.command("fetch")(fetch)
    app.command("extract")(extract)
    app.command("chunk")(chunk)
    app.command("embed")(embed)
    app.command("store")(store)


def _stdin_lines():
    return (line for line in sys.stdin)


def fetch(
    paths: list[str] = typer.Argument(..., help="Files, folders, URLs, feeds, or - for stdin."),
    include: list[str] = typer.Option([], "--include", help="Glob of files to take inside folders."),
    exclude: list[str] = typer.Option([], "--exclude", help="Glob of files to skip inside folders."),
    follow_links: bool = typer.Option(False, "--follow-links", help="Fetch the pages feed entries link to."),
    follow_symlinks: bool = typer.Option(False, "--follow-symlinks", help="Follow symlinks that lead out of the folders given (skipped otherwise)."),
) -> None:
    """Fetch sources; print one `source` (or `error`) record per line."""
    from ..fetch import FetchOptions
    from ..fetch import fetch as do_fetch
    from ..stages import source_records, write_records

    stdin = sys.stdin.buffer if "-" in paths else None
    opts = FetchOptions.from_config(STATE.settings().data.get("fetch", {}), follow_symlinks=follow_symlinks)
    fetched = do_fetch(paths, include=include, exclude=exclude, follow_links=follow_links, options=opts, stdin=stdin)
    write_records(source_records(fetched), sys.stdout)


def extract() -> None:
    """Read `source` records on stdin; print `document` records (one or more per source)."""
    from ..stages import extract_records, read_records, write_records

    write_records(extract_records(read_records(_stdin_lines())), sys.stdout)


def chunk(
    namespace: str = typer.Option(None, "--namespace", "-n", help="Use this namespace's profile."),
    profile: str = typer.Option(None, "--profile", "-p", help="Use this profile."),
) -> None:
    """Read `document` records; print `chunked` records measured in the profile's tokens."""
    from ..stages import chunk_records, read_records, write_records

    prof = _profile(namespace, profile)
    write_records(chunk_records(read_records(_stdin_lines()), prof), sys.stdout)


def embed(
    namespace: str = typer.Option(None, "--namespace", "-n", help="Use this namespace's profile (and reuse its stored vectors)."),
    profile: str = typer.Option(None, "--profile", "-p", help="Use this profile."),
) -> None:
    """Read `chunked` records; print `embedded` records (chunks already stored are not embedded again)."""
    from ..stages import embed_records, read_records, write_records

    prof = _profile(namespace, profile)
    write_records(embed_records(read_records(_stdin_lines()), prof, cache=_cache(namespace, prof)), sys.stdout)


def store(
    namespace: str = typer.Option(..., "--namespace", "-n", help="Namespace to write into."),
    profile: str = typer.Option(None, "--profile", "-p", help="Profile for a new namespace."),
    no_verify: bool = typer.Option(False, "--no-verify", help="Skip the verify stage at the end."),
) -> None:
    """Read `embedded` records; write them (and failed items) into the namespace; print the run summary."""
    from ..stages import read_records, store_items

    kb = STATE.kb()
    prof = kb.profile_for(namespace, profile or STATE.profile)
    items = store_items(read_records(_stdin_lines()), prof)
    report = kb.store(items, namespace, profile=prof.name, verify=not no_verify)
    print_json(report.to_json())
    if report.errors:
        warn(f"{len(report.errors)} item(s) failed; see `kbctl errors -n {namespace}`")
    if report.verify is not None and not report.verify["ok"]:
        raise typer.Exit(3)


def _profile(namespace: str | None, profile: str | None):
    kb = STATE.kb()
    if namespace:
        return kb.profile_for(namespace, profile or STATE.profile)
    return kb.settings.profile(profile or STATE.profile)


def _cache(namespace: str | None, prof):
    """Stored vectors of the namespace's profile, when the namespace exists."""
    if not namespace:
        return None
    from ..store import cached_vectors, get_namespace

    kb = STATE.kb()
    ns = get_namespace(kb.connection(), namespace, kb.tenant, required=False)
    if ns is None:
        return None
    return lambda hashes: cached_vectors(kb.connection(), ns, hashes)
