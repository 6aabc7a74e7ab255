"""``kbctl worker`` and ``kbctl progress``: the processes that share a run's work queue, and its view."""

from __future__ import annotations

import typer

from .render import dead_runs, print_json, table
from .state import STATE, info, warn


def register(app: typer.Typer) -> None:
    app.command("worker")(worker)
    app.command("progress")(progress)


def worker(
    namespace: list[str] = typer.Option(
        [], "--namespace", "-n", help="Claim from runs of this namespace (repeatable; default: every one)."
    ),
    run: int = typer.Option(None, "--run", help="Claim from this run only, and stop when it is over."),
    lease: float = typer.Option(
        60.0, "--lease", help="Seconds a claimed item is leased (renewed while it is worked on)."
    ),
    batch: int = typer.Option(32, "--batch", help="Items claimed at a time."),
    poll: float = typer.Option(0.5, "--poll", help="Seconds between looks at an empty queue."),
    exit_idle: bool = typer.Option(False, "--exit-idle", help="Stop when no running run has items to claim."),
    json_: bool = typer.Option(
        False,
        "--json",
        help="Print what this worker did as JSON on stdout (the items it settled, as the run counts them).",
    ),
) -> None:
    """Claim and store the items of ingest runs started with `kbctl ingest --workers` (here or on other machines)."""
    totals = STATE.kb().work(
        namespace, run_id=run, lease=lease, batch=batch, poll=poll, exit_idle=exit_idle, progress=None
    )
    if json_:
        print_json(totals)
    else:
        lost = totals.get("taken_over", 0)
        info(
            f"worker: {totals['items']} item(s) in {totals['batches']} batch(es)"
            + (f" ({lost} more taken over by another worker, which counts them)" if lost else "")
            + "; "
            f"{totals.get('new', 0)} new, {totals.get('changed', 0)} changed, {totals.get('unchanged', 0)} unchanged,"
            f" {totals.get('removed', 0)} removed, {totals.get('failed', 0)} failed documents"
        )


def progress(
    namespace: str = typer.Option(None, "--namespace", "-n", help="Only this namespace."),
    run: int = typer.Option(None, "--run", help="Only this run id."),
    json_: bool = typer.Option(False, "--json", help="JSON on stdout."),
) -> None:
    """The work queues of the latest runs shared by workers: items by state, workers, documents stored."""
    rows = STATE.kb().run_progress(namespace, run)
    if json_:
        print_json(rows)
        return
    for r in rows:
        r["documents"] = " ".join(f"{k}={v}" for k, v in r["documents"].items())
    notes = dead_runs(rows)
    table(
        rows, ["run_id", "namespace", "status", "items", "queued", "claimed", "done", "failed", "workers", "documents"]
    )
    for note in notes:
        warn(note)
