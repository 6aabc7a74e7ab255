"""``kbctl reembed``: move a namespace to another profile or vector storage (docs/lifecycle.md)."""

from __future__ import annotations

import sys

import typer

from ..errors import CheckFailed
from .render import human_size, print_json, table
from .state import STATE, err, info, warn


def register(app: typer.Typer) -> None:
    app.command("reembed")(reembed)


def reembed(
    namespace: str = typer.Argument(..., help="Namespace to move."),
    profile: str = typer.Option(
        None,
        "--profile",
        "-p",
        help="Profile of the shadow to build (omitted: with --storage, the namespace's own; else resume the shadow).",
    ),
    storage: str = typer.Option(
        None,
        "--storage",
        help="vector or halfvec (default: the profile's storage; alone: the namespace's own profile).",
    ),
    plan: bool = typer.Option(False, "--plan", help="Print the chunks to embed and the time it takes; build nothing."),
    eval_: str = typer.Option(
        None, "--eval", help="Evaluate DATASET on the active and the shadow generation, side by side."
    ),
    limit: int = typer.Option(None, "--limit", help="With --eval: only the first N queries."),
    swap: bool = typer.Option(
        False,
        "--swap",
        help="Make the shadow generation active (one transaction); with --eval, compared first (the dataset read before any build).",
    ),
    require: list[str] = typer.Option(
        [], "--require", help="With --swap --eval: a gate such as hybrid:ndcg@10>=active (exit 3 and no swap)."
    ),
    rollback: bool = typer.Option(False, "--rollback", help="Make the previous generation active again."),
    drop_old: bool = typer.Option(False, "--drop-old", help="Delete the previous generation (no rollback after)."),
    drop_shadow: bool = typer.Option(False, "--drop-shadow", help="Delete the shadow generation being built."),
    status: bool = typer.Option(False, "--status", help="List the namespace's generations."),
    batch: int = typer.Option(256, "--batch", help="Chunks embedded and committed at a time."),
    json_: bool = typer.Option(False, "--json", help="The summary as JSON on stdout."),
) -> None:
    """Build a shadow generation of another profile (or storage), compare it, swap to it, roll back."""
    actions = [a for a, on in (("swap", swap), ("rollback", rollback), ("drop-old", drop_old),
                               ("drop-shadow", drop_shadow), ("status", status)) if on]  # fmt: skip
    if len(actions) > 1 or (actions and (plan or (actions != ["swap"] and (profile or storage or eval_)))):
        raise typer.BadParameter(
            "give one action (--swap, --rollback, --drop-old, --drop-shadow, --status) at a time;"
            " --profile and --storage go with a build or --swap, --plan with a build only"
        )
    if (limit is not None or require) and not eval_:
        raise typer.BadParameter("--limit and --require go with --eval DATASET")
    if eval_ and not swap and (profile or storage or plan):  # it compared the shadow there was, built nothing
        raise typer.BadParameter(
            "--eval without --swap compares the shadow already built: it takes no --profile, --storage or --plan"
            " (build first, or build, compare and swap at once with --swap)"
        )
    kb = STATE.kb()
    progress, finish = _bar()
    try:
        if swap:
            try:
                out = kb.swap_generation(
                    namespace, require=require, dataset=eval_, limit=limit, progress=progress,
                    profile=profile, storage=storage, batch=batch,
                )  # fmt: skip
            except CheckFailed as e:  # a gate failed: what it was checked on, then the error
                finish()
                if e.report is not None:
                    print_json(e.report) if json_ else _side_by_side(e.report["eval"], False)
                raise
            finish()
            for note in out.get("eval", {}).get("notes", []):
                warn(note)
            if "build" in out and not json_:
                _summary(out["build"], False, False, then_swap=True)
            if "eval" in out and not json_:  # what the swap was checked on
                _side_by_side(out["eval"], False)
            _done(out, json_, f"swapped {namespace}: generation {out['active']} is active, {out['previous']} kept")
        elif rollback:
            out = kb.rollback_generation(namespace)
            _done(out, json_, f"rolled back {namespace}: generation {out['active']} is active again")
        elif drop_old or drop_shadow:
            out = kb.drop_generation(namespace, "previous" if drop_old else "shadow")
            _done(out, json_, f"dropped the {out['state']} generation {out['dropped']} of {namespace}")
        elif status:
            rows = kb.generations(namespace)
            columns = ["id", "state", "profile", "model", "dimension", "storage", "vectors", "size"]
            print_json(rows) if json_ else table([{**r, "size": human_size(r["bytes"])} for r in rows], columns)
        elif eval_:
            side = kb.compare_generations(namespace, eval_, limit=limit, require=require)
            for note in side["notes"]:  # what the dataset held that was not evaluated
                warn(note)
            _side_by_side(side, json_)
            failures = side.get("gates", {}).get("failures")
            if failures:
                raise CheckFailed("gate failed: " + "; ".join(failures), hint="see the comparison above")
        else:
            report = kb.reembed(namespace, profile, storage=storage, plan=plan, batch=batch, progress=progress)
            finish()
            _summary(report.to_json(), json_, plan)
    finally:
        finish()


def _done(out: dict, as_json: bool, line: str) -> None:
    if as_json:
        print_json(out)
    else:
        typer.echo(line)


def _summary(d: dict, as_json: bool, plan: bool, *, then_swap: bool = False) -> None:
    if as_json:
        print_json(d)
    elif plan:
        eta = (
            f"{_eta(d['seconds'])} at {d['texts_per_second']} texts/s" if d["seconds"] is not None else "no model calls"
        )
        typer.echo(
            f"would re-embed {d['namespace']} with {d['profile']} ({d['storage']}): {d['chunks']} chunks,"
            f" {d['texts']} texts, {d['reused']} from the cache, {d['to_embed']} to embed; {eta}"
        )
    else:
        state = "complete" if d["complete"] else f"{d['missing']} chunks still missing"
        dropped = f", {d['discarded']} discarded (their chunks changed meanwhile)" if d.get("discarded") else ""
        typer.echo(
            f"shadow generation {d['generation']} of {d['namespace']} ({d['profile']}, {d['storage']}):"
            f" {d['chunks']} chunks given a vector, {d['embedded']} texts embedded, {d['reused']} reused{dropped};"
            f" {state}; {d['seconds']:.1f}s"
        )
        if d["complete"] and not then_swap:
            info(f"next: kbctl reembed {d['namespace']} --eval DATASET, then --swap")


def _eta(seconds: float) -> str:
    """An estimate as it reads: ``<1s`` under a second (2 texts said ``~0s``), one decimal under ten."""
    if seconds < 1:
        return "<1s"
    return f"~{seconds:.1f}s" if seconds < 10 else f"~{seconds:.0f}s"


def _side_by_side(side: dict, as_json: bool) -> None:
    if as_json:
        print_json(side)
        return
    rows = []
    for state in ("active", "shadow"):
        g = side[state]["generation"]
        for mode, m in side[state]["modes"].items():
            rows.append(
                {
                    "generation": f"{state} {g['id']}",
                    "profile": f"{g['profile']} ({g['storage']})",
                    "mode": mode,
                    f"ndcg@{side['k']}": m.get(f"ndcg@{side['k']}"),
                    f"recall@{side['k']}": m.get(f"recall@{side['k']}"),
                    "p50 ms": m.get("latency_ms_p50"),
                    "p95 ms": m.get("latency_ms_p95"),
                    "size": human_size(g["bytes"]),
                }
            )
    table(rows)


def _bar():
    """A progress bar of the chunks embedded, on stderr when it is a terminal (stdout keeps the
    summary, --json or not), and the function that ends it."""
    if STATE.quiet or not sys.stderr.isatty():
        return None, lambda: None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(TextColumn("embed"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), console=err)
    task = bar.add_task("embed", total=None)
    bar.start()

    def on(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return on, bar.stop
