"""``kbctl tenants``: create, list and delete tenants (a PostgreSQL role per tenant), and open the
opaque ids a tenant's agents were given (``id-of``)."""

from __future__ import annotations

import typer

from ..errors import UsageError
from .render import print_json, table
from .state import STATE, confirm_delete, info

app = typer.Typer(
    help="Create, list and delete tenants: each one a role that row-level security holds to its rows.",
    no_args_is_help=False,
    invoke_without_command=True,
)


@app.callback(invoke_without_command=True)
def tenants(ctx: typer.Context, json_: bool = typer.Option(False, "--json", help="JSON on stdout.")) -> None:
    """List the registered tenants and their roles."""
    if ctx.invoked_subcommand:
        return
    rows = STATE.kb().tenants()
    if json_:
        print_json(rows)
    else:
        table(rows, ["name", "role", "created_at"])


@app.command("create")
def create(name: str = typer.Argument(None, help="Tenant name (default: --tenant / defaults.tenant).")) -> None:
    """Register a tenant and create its NOLOGIN role (run as the database owner); a deleted tenant is made again, empty."""
    t = STATE.kb().create_tenant(name)
    info(f"tenant {t['tenant']} (role {t['role']})")


@app.command("delete")
def delete(
    name: str = typer.Argument(..., help="Tenant name."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask."),
) -> None:
    """Delete a tenant with all its namespaces, audit rows, agent tokens and query log, and its role.

    It stays deleted: no later use of its name makes it again, only `kbctl tenants create`. One that
    does not exist is an error (exit 2) before any question."""
    STATE.kb().tenants.get(name)  # a typo is exit 2 naming the known ones, not a question first
    if not yes:
        confirm_delete("tenant", name, f"delete tenant {name} and all its data?")
    gone = STATE.kb().delete_tenant(name)
    if gone is None:  # not found: exit 2, as for a namespace (NamespaceNotFound), never 1 (a failure)
        raise UsageError(f"tenant {name!r} does not exist", hint="`kbctl tenants` lists the registered tenants")
    info(f"deleted tenant {name} ({gone['namespaces']} namespaces) and role {gone['role']}")


@app.command("id-of")
def id_of(
    token: str = typer.Argument(..., help="An opaque id an agent was given (d_…, c_…, q_…, g_…)."),
    json_: bool = typer.Option(False, "--json", help="JSON on stdout."),
) -> None:
    """The kind and raw id (the row's) of an opaque id the server gave an agent of this tenant (--tenant)."""
    found = STATE.kb().open_id(token)
    if json_:
        print_json(found)
    else:
        typer.echo(f"{found['kind']} {found['id']}")
