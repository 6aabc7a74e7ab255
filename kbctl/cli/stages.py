"""The pipeline stages as separate commands talking NDJSON: fetch, extract, chunk, embed, store."""

from __future__ import annotations

import sys

import typer

from .render import print_json, print_jsonl
from .state import STATE, info, verify_held, warn


def register(app: typer.Typer) -> None:
    app.command("fetch")(fetch)
    app.command("extract")(extract)
    app.command("chunk")(chunk)
    app.command("embed")(embed)
    app.command("store")(store)


def fetch(
    paths: list[str] = typer.Argument(..., help="Files, folders, URLs, feeds, or - for stdin."),
    include: list[str] = typer.Option([], "--include", help="Glob of files to take inside folders."),
    exclude: list[str] = typer.Option([], "--exclude", help="Glob of files to skip inside folders."),
    follow_links: bool = typer.Option(False, "--follow-links", help="Fetch the pages feed entries link to."),
    follow_symlinks: bool = typer.Option(
        False, "--follow-symlinks", help="Follow symlinks that lead out of the folders given (skipped otherwise)."
    ),
) -> None:
    """Fetch sources; print one `source` (or `error`) record per line."""
    stdin = sys.stdin.buffer if "-" in paths else None
    print_jsonl(
        STATE.kb().fetch_records(
            paths,
            include=include,
            exclude=exclude,
            follow_links=follow_links,
            follow_symlinks=follow_symlinks,
            stdin=stdin,
        )
    )


def extract() -> None:
    """Read `source` records on stdin; print `document` records (one or more per source)."""
    print_jsonl(STATE.kb().extract_records(sys.stdin))


def chunk(
    namespace: str = typer.Option(None, "--namespace", "-n", help="Use this namespace's profile."),
    profile: str = typer.Option(None, "--profile", "-p", help="Use this profile."),
) -> None:
    """Read `document` records; print `chunked` records measured in the profile's tokens."""
    print_jsonl(STATE.kb().chunk_records(sys.stdin, namespace=namespace, profile=profile or STATE.profile))


def embed(
    namespace: str = typer.Option(
        None,
        "--namespace",
        "-n",
        help="Use this namespace's profile (and reuse the tenant's stored vectors of the profile used).",
    ),
    profile: str = typer.Option(None, "--profile", "-p", help="Use this profile."),
) -> None:
    """Read `chunked` records; print `embedded` records (chunks already stored are not embedded again)."""
    print_jsonl(STATE.kb().embed_records(sys.stdin, namespace=namespace, profile=profile or STATE.profile))


def store(
    namespace: str = typer.Option(..., "--namespace", "-n", help="Namespace to write into."),
    profile: str = typer.Option(None, "--profile", "-p", help="Profile for a new namespace."),
    no_verify: bool = typer.Option(False, "--no-verify", help="Skip the verify stage at the end."),
) -> None:
    """Read `embedded` records; write them (and failed items) into the namespace; print the run summary."""
    report = STATE.kb().store_records(sys.stdin, namespace, profile=profile or STATE.profile, verify=not no_verify)
    print_json(report.to_json())
    if report.run_id is None:  # no records, and no namespace to record a run in: none was made
        info(f"nothing to store: no records on stdin (namespace {namespace} not created)")
    if report.errors:
        warn(f"{len(report.errors)} item(s) failed; see `kbctl errors -n {namespace}`")
    verify_held(report.verify)  # its warnings; the run is recorded failed_verify when it did not hold
