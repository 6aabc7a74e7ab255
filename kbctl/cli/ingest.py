"""``kbctl ingest``."""

from __future__ import annotations

import sys

import typer

from .render import print_json
from .state import STATE, err, verify_held, warn
from .terminal import printable


def register(app: typer.Typer) -> None:
    app.command("ingest")(ingest)


def ingest(
    paths: list[str] = typer.Argument(None, help="Files, folders, http(s) URLs, feed URLs, or - for stdin."),
    namespace: str = typer.Option(..., "--namespace", "-n", help="Namespace to ingest into (created on first use)."),
    profile: str = typer.Option(
        None, "--profile", "-p", help="Profile for a new namespace (an existing one keeps its pin)."
    ),
    include: list[str] = typer.Option([], "--include", help="Glob of files to take inside folders (repeatable)."),
    exclude: list[str] = typer.Option([], "--exclude", help="Glob of files to skip inside folders (repeatable)."),
    sync: bool = typer.Option(
        False, "--sync", help="Remove documents whose source is gone (and feed entries no longer listed)."
    ),
    plan: bool = typer.Option(False, "--plan", help="Print what would happen; write nothing."),
    no_wait: bool = typer.Option(False, "--no-wait", help="Fail at once if another ingest holds the namespace."),
    follow_links: bool = typer.Option(
        False, "--follow-links", help="For feed entries with only a summary, fetch the linked page."
    ),
    follow_symlinks: bool = typer.Option(
        False, "--follow-symlinks", help="Follow symlinks that lead out of the folders given (skipped otherwise)."
    ),
    retry_failed: bool = typer.Option(
        False, "--retry-failed", help="Also retry the sources that failed in the last run."
    ),
    no_verify: bool = typer.Option(False, "--no-verify", help="Skip the verify stage at the end."),
    strict: bool = typer.Option(False, "--strict", help="Exit 1 when any item failed."),
    json_: bool = typer.Option(False, "--json", help="Print the run summary as JSON on stdout."),
    workers: int = typer.Option(
        None,
        "--workers",
        help="Share the run through a work queue: start N local `kbctl worker` processes (0: only workers started elsewhere).",
    ),
    lease: float | None = typer.Option(
        None,
        "--lease",
        help="With --workers: seconds a claimed item is leased before another worker may take it (default 60).",
    ),
) -> None:
    """Fetch, extract, chunk, embed and store documents into a namespace."""
    kb = STATE.kb()
    progress, finish = _progress(json_ or not sys.stderr.isatty() or STATE.quiet)
    try:
        report = kb.ingest(
            paths or [],
            namespace,
            profile=profile or STATE.profile,
            include=include,
            exclude=exclude,
            sync=sync,
            plan=plan,
            no_wait=no_wait,
            follow_links=follow_links,
            follow_symlinks=follow_symlinks,
            retry_failed=retry_failed,
            verify=not no_verify,
            stdin=sys.stdin.buffer if "-" in (paths or []) else None,
            progress=progress,
            workers=workers,
            lease=lease,
        )
    finally:
        finish()
    _summary(report, json_ or not sys.stdout.isatty())
    for note in report.details.get("notes", []):  # a plan's: the tenant the run would make
        warn(note)
    if report.errors and report.plan:  # a plan records nothing: `kbctl errors` would show another run's
        warn(f"{len(report.errors)} item(s) would fail; listed in the plan, not recorded (a plan writes nothing)")
    elif report.errors:
        warn(f"{len(report.errors)} item(s) failed; see `kbctl errors -n {namespace}`")
    verify_held(report.verify)  # its warnings; the run is recorded failed_verify when it did not hold
    if report.errors and strict:
        raise typer.Exit(1)


def _summary(report, as_json: bool) -> None:
    if as_json:
        print_json(report.to_json())
        return
    d, c = report.documents, report.chunks
    verb = "would ingest" if report.plan else "ingested"
    typer.echo(
        f"{verb} into {report.namespace}: {d['new']} new, {d['changed']} changed, {d['unchanged']} unchanged,"
        f" {d['removed']} removed, {d['failed']} failed documents; chunks {c['embedded']} embedded,"
        f" {c['reused']} reused, {c['deleted']} deleted; {report.seconds:.1f}s"
        + (f"; {report.tokens_to_embed} tokens to embed" if report.plan else "")
    )
    for e in report.errors[:20]:
        typer.echo(f"  failed [{e.stage}] {printable(e.source, keep='')}: {printable(e.message, keep='')}", err=True)


_BARS = ("extract", "embed", "store")  # one bar per stage whose progress events this display counts


def _progress(silent: bool):
    """A Rich progress display on a terminal; nothing otherwise."""
    if silent:
        return None, lambda: None
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.text import Text

    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(bar_width=None),
        TextColumn("{task.completed}"),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        console=err,
        transient=False,
    )
    tasks = {name: bar.add_task(name, total=None, rate="") for name in _BARS}
    bar.start()

    def on(event: str, data: dict) -> None:
        if event == "extracted" or event == "unchanged":
            bar.advance(tasks["extract"], data.get("documents", 1))
        elif event == "stored":
            bar.advance(tasks["embed"], data.get("embedded", 0))
            bar.advance(tasks["store"], data.get("documents", 0))
            for name in ("embed", "store"):
                t = bar.tasks[tasks[name]]
                if t.elapsed:
                    bar.update(tasks[name], rate=f"{t.completed / t.elapsed:.1f}/s")
        elif event == "repacking":
            line = f"packing the lexical postings of {data.get('namespace')} again, whole, once: {data.get('reason')}"
            bar.console.print(Text(line))

    return on, bar.stop
