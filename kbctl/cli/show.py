"""``kbctl show CHUNK``: one stored chunk, where it is, and its page with the passage boxed."""

from __future__ import annotations

from pathlib import Path

import typer

from .render import print_json
from .state import STATE, info


def register(app: typer.Typer) -> None:
    app.command("show")(show)


def show(
    chunk_id: int = typer.Argument(..., help="The chunk's id (chunk_id of a search hit)."),
    namespace: list[str] = typer.Option(..., "--namespace", "-n", help="Namespace(s) the chunk may be in."),
    highlight: Path | None = typer.Option(
        None, "--highlight", help="Write the chunk's PDF page to this PNG file with the passage boxed."
    ),
    json_: bool = typer.Option(False, "--json", help="JSON on stdout."),
) -> None:
    """A chunk's text, source, page and line boxes; --highlight renders its PDF page with the passage boxed."""
    c = STATE.kb().chunk(chunk_id, namespace, highlight=highlight)
    if json_:
        print_json(c)
        return
    where = f"p. {c['page']}" if c["page"] else " > ".join(c["heading_path"] or [])
    typer.echo(f"{c['title']} — {c['uri']}" + (f" ({where})" if where else ""))
    typer.echo("")
    typer.echo(c["text"])
    if c.get("highlight"):
        h = c["highlight"]
        info(f"wrote {h['path']}: page {h['page']}, {h['boxes']} line(s) boxed")
