"""``kbctl mcp``, ``kbctl serve``, ``kbctl agents`` and ``kbctl stats``: the agent surface."""

from __future__ import annotations

import typer

from .render import print_json, table
from .state import STATE, info

agents_app = typer.Typer(
    help="Agents that reach kbctl through kbctl mcp / kbctl serve ([agents.NAME]).", no_args_is_help=True
)
token_app = typer.Typer(help="Bearer tokens of agents (stored hashed).", no_args_is_help=True)
agents_app.add_typer(token_app, name="token")


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp)
    app.command("serve")(serve)
    app.command("stats")(stats)
    app.add_typer(agents_app, name="agents")


def mcp(
    agent: str | None = typer.Option(
        None, "--agent", "-a", help="Expose only this [agents.NAME]'s tools and namespaces."
    ),
) -> None:
    """Serve MCP over stdin/stdout (for an MCP client that starts kbctl itself)."""
    from ..server import serve_stdio

    serve_stdio(STATE.kb().settings, agent=agent)


def serve(
    host: str | None = typer.Option(
        None,
        "--host",
        help="Address to listen on (default: server.host, 127.0.0.1). Requests must name it, a loopback name "
        "or one of server.allowed_hosts in their Host header (on 0.0.0.0: any IP address too).",
    ),
    port: int | None = typer.Option(
        None, "--port", min=0, max=65535, help="Port (default: server.port, 8765); 0: a free port the system picks."
    ),
) -> None:
    """Serve MCP over streamable HTTP at /mcp, the JSON API under /v1, /healthz and /metrics; once it
    listens, says where on stderr (listening on http://HOST:PORT, the port the real one; under
    --quiet too when the port was 0)."""
    from ..server import serve_http

    settings = STATE.kb().settings
    # the port the system picks is learnt from this line alone: a message (stderr), printed under -q too
    picked = (settings.server.port if port is None else port) == 0
    serve_http(settings, host=host, port=port, on_listening=lambda url: info(f"listening on {url}", even_quiet=picked))


@agents_app.command("list")
def agents_list(json_: bool = typer.Option(False, "--json", help="A JSON array on stdout.")) -> None:
    """The configured agents: the tenant each searches, its namespaces and tools ((all): every one)
    and how many valid tokens it holds; then agents no longer configured that still hold a token."""
    rows = STATE.kb().agent_list()
    if json_:
        print_json(rows)
        return
    table(
        [
            {
                **r,
                "namespaces": " ".join(r["namespaces"]) or "(all)",
                "tools": " ".join(r["tools"]) or "(all)",
                "configured": "yes" if r["configured"] else "no",
            }
            for r in rows
        ]
    )


@token_app.command("create")
def token_create(name: str = typer.Argument(..., help="An agent configured as [agents.NAME].")) -> None:
    """Create a bearer token for an agent and print it (once: only its hash is kept)."""
    token = STATE.kb().create_agent_token(name)
    info(f"token for agent {name!r} (shown once; send it as 'Authorization: Bearer <token>'):")
    typer.echo(token)


@token_app.command("revoke")
def token_revoke(name: str = typer.Argument(..., help="The agent whose tokens to revoke.")) -> None:
    """Revoke every token of an agent (one no longer configured too); a name that is neither configured nor
    has a valid token is an error (exit 2)."""
    info(f"revoked {STATE.kb().revoke_agent_tokens(name)} token(s) of {name!r}")


def stats(json_: bool = typer.Option(False, "--json", help="One JSON object on stdout.")) -> None:
    """Ingest figures from the run ledger (the figures /metrics exports), without a server."""
    s = STATE.kb().stats()
    if json_:
        print_json(s)
        return
    table(
        [
            {
                "namespace": r["name"],
                "runs": r["runs"],
                "dead runs": r["dead_runs"],
                "documents": r["documents"],
                "chunks": r["chunks"],
                "errors": r["errors"],
            }
            for r in s["namespaces"]
        ],
        title=f"tenant {s['tenant']}",
    )
