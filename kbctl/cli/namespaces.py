"""``kbctl namespaces``: list, create, bind and delete namespaces."""

from __future__ import annotations

import typer

from .render import human_size, print_json, table
from .state import STATE, confirm_delete, info

app = typer.Typer(help="List, create, bind and delete namespaces.", no_args_is_help=False, invoke_without_command=True)


def register(parent: typer.Typer) -> None:
    parent.add_typer(app, name="namespaces")


@app.callback(invoke_without_command=True)
def namespaces(
    ctx: typer.Context,
    json_: bool = typer.Option(False, "--json", help="JSON on stdout."),
    all_tenants: bool = typer.Option(False, "--all-tenants", help="Every tenant's namespaces."),
) -> None:
    """List namespaces with their profile and counts."""
    if ctx.invoked_subcommand:
        return
    rows = STATE.kb().namespaces(all_tenants=all_tenants)
    if json_:
        print_json(rows)
    else:
        table(
            [{**r, "generations": _generations(r)} for r in rows],
            ["tenant", "name", "profile", "model", "dimension", "analyzer", "documents", "chunks", "generations"],
        )


def _generations(row: dict) -> str:
    """A namespace's generations on one line: id, state, profile/storage, vectors, size on disk."""
    return "; ".join(
        f"{g['id']} {g['state']} {g['profile']}/{g['storage']} {g['vectors']} ({human_size(g['bytes'])})"
        for g in row.get("generations") or []
    )


@app.command("create")
def create(
    name: str = typer.Argument(..., help="Namespace name."),
    profile: str = typer.Option(None, "--profile", "-p", help="Profile to pin (default: defaults.profile)."),
    description: str = typer.Option("", "--description", help="Free text."),
) -> None:
    """Create a namespace pinned to a profile."""
    ns = STATE.kb().create_namespace(name, profile or STATE.profile, description)
    info(f"namespace {ns.name} (tenant {ns.tenant}) pinned to {ns.profile_name} [{ns.model}, {ns.dimension}-d]")


@app.command("bind")
def bind(
    name: str = typer.Argument(..., help="Namespace name."),
    profile: str = typer.Option(..., "--profile", "-p", help="Profile to pin."),
) -> None:
    """Pin an existing namespace to another profile (refused when it holds vectors of another model)."""
    ns = STATE.kb().bind_namespace(name, profile)
    info(f"namespace {ns.name} pinned to {ns.profile_name} [{ns.model}, {ns.dimension}-d]")


@app.command("delete")
def delete(
    name: str = typer.Argument(..., help="Namespace name."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask."),
) -> None:
    """Delete a namespace with all its documents (one that does not exist is an error before any question)."""
    STATE.kb().namespace(name)  # a typo is exit 2 naming the known ones, not a question first
    if not yes:
        confirm_delete("namespace", name, f"delete namespace {name} and all its documents?")
    n = STATE.kb().delete_namespace(name)
    info(f"deleted namespace {name} ({n} documents)")
