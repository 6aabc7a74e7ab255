"""``kbctl show CHUNK``: one stored chunk, where it is, and its page with the passage boxed."""

from __future__ import annotations

import re
from pathlib import Path

import typer
from typer.core import TyperCommand

from ..types import place
from .render import print_json
from .state import STATE, info
from .terminal import printable


def register(app: typer.Typer) -> None:
    app.command("show", cls=_Command)(show)


# what the parser took for short options: "-1" of "-1", "-12" or "-1.5" (a negative number)
_NUMBER_AS_OPTION = re.compile(r"-\d")


class _Command(TyperCommand):
    """``kbctl show``'s command: a negative number where the chunk id goes (``kbctl show -1``) is a
    chunk id typed wrong, refused as ``abc`` is, where the parser said ``no such option: -1``."""

    def parse_args(self, ctx, args):
        try:  # typer vendors its own click (typer._click); an older typer runs on click
            from typer._click.exceptions import NoSuchOption
        except ImportError:
            from click.exceptions import NoSuchOption

        given = list(args)  # the parser consumes its list
        try:
            return super().parse_args(ctx, args)
        except NoSuchOption as e:
            # the word it was cut from: "-12" for "-1" (the parser reads -12 as -1 and -2); none when
            # the digit followed other letters (-h1): that stays the parser's error
            words = (
                [a for a in given if a.startswith(e.option_name)] if _NUMBER_AS_OPTION.fullmatch(e.option_name) else []
            )
            if not words:
                raise
            raise _not_a_chunk_id(e.option_name if e.option_name in words else words[0]) from None


def show(
    chunk_id: str = typer.Argument(
        ..., help="The chunk's id (chunk_id of a search hit), or the opaque c_… id an agent or a forwarded search gave."
    ),
    namespace: list[str] = typer.Option(..., "--namespace", "-n", help="Namespace(s) the chunk may be in."),
    highlight: Path | None = typer.Option(
        None, "--highlight", help="Write the chunk's PDF page to this PNG file with the passage boxed."
    ),
    json_: bool = typer.Option(False, "--json", help="JSON on stdout."),
) -> None:
    """A chunk's text, source, page and line boxes; --highlight renders its PDF page with the passage boxed."""
    c = STATE.kb().chunk(_raw(chunk_id), namespace, highlight=highlight)
    if json_:
        print_json(c)
        return
    where = place(c["page"], c["heading_path"])  # as the hit's citation writes it (kbctl.types.place)
    # stored text is data: its control characters are shown as escapes, never acted on (as search does)
    typer.echo(printable(f"{c['title']} — {c['uri']}" + (f" ({where})" if where else ""), keep=""))
    typer.echo("")
    typer.echo(printable(c["text"]))
    if c.get("highlight"):
        h = c["highlight"]
        info(f"wrote {h['path']}: page {h['page']}, {h['boxes']} line(s) boxed")


def _raw(chunk_id: str) -> int:
    """A chunk's row id: a number as given, else the opaque id of this tenant's chunk it opens to.

    What is neither (a person's typo: ``abc``, ``28.0``, ``٣``) is told so, with the forms taken;
    what is shaped as an opaque id (a lowercase kind, ``_``) is told as one that did not open."""
    from ..errors import UsageError

    typed = chunk_id.strip()
    if typed.isascii() and typed.isdecimal():
        return int(typed)
    if not (len(typed) > 2 and typed[0] in "abcdefghijklmnopqrstuvwxyz" and typed[1] == "_"):
        raise _not_a_chunk_id(chunk_id)
    found = STATE.kb().open_id(chunk_id)
    if found["kind"] != "chunk":
        raise UsageError(
            f"{chunk_id[:100]!r} is a {found['kind']}'s id, not a chunk's",
            hint="kbctl show takes a chunk_id (a search hit's chunk_id, not its doc_id)",
        )
    return int(found["id"])


def _not_a_chunk_id(typed: str) -> Exception:
    """The refusal of what is neither a chunk's number nor shaped as an opaque id."""
    from ..errors import UsageError

    return UsageError(
        f"{typed[:100]!r} is not a chunk id: kbctl show takes a chunk's number or its opaque id (c_…)",
        hint="a hit's chunk_id in `kbctl search QUERY -n NS --json` is one (the number; the c_… id of a search "
        "forwarded to a server)",
    )
