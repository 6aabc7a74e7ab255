"""``kbctl``: the entry point, global options and the one error boundary."""

from __future__ import annotations

import os
import sys
import warnings

import typer
from typer.core import TyperGroup

from . import config_cmd, evals, ingest, namespaces, reembed, runs, search, serve, show, stages, tenants, workers
from . import db as db_cmd
from .state import STATE, err, setup_logging
from .terminal import flush_stdout


class _PipeClosed(Exception):
    """stdout's reader left (``kbctl … | head -1``); not an ``OSError``, so typer lets it through."""


class _Group(TyperGroup):
    """The root command: a closed pipe reaches ``main`` as ``_PipeClosed``.

    typer's own boundary catches every ``EPIPE`` and exits 1 before ``main`` sees it, even with
    ``standalone_mode=False``; for kbctl a reader that has read what it wanted is not an error."""

    def make_context(self, info_name, args, parent=None, **extra):
        try:  # the root's own help (kbctl -h | head -1) is printed while its context is made
            return super().make_context(info_name, args, parent=parent, **extra)
        except BrokenPipeError as e:
            raise _PipeClosed from e

    def invoke(self, ctx):
        words = [*getattr(ctx, "_protected_args", ()), *ctx.args]  # the command's words, before typer takes them
        try:
            return super().invoke(ctx)
        except BrokenPipeError as e:
            raise _PipeClosed from e
        except _click_exceptions().UsageError as e:
            if e.ctx is None:  # the parser's own ("option '--mode' requires an argument"): whose command it is
                e.ctx = _command_context(ctx, words)
            raise


def _command_context(ctx, words: list[str]):
    """A context of the (sub)command ``words`` name below the root's ``ctx``: what a usage error's
    hint points at (``kbctl db start -h``)."""
    command = ctx.command
    for word in words:
        sub = command.get_command(ctx, word) if hasattr(command, "get_command") else None
        if sub is None:
            break
        ctx, command = type(ctx)(sub, parent=ctx, info_name=word), sub
    return ctx


app = typer.Typer(
    cls=_Group,
    name="kbctl",
    help="Ingest documents into PostgreSQL + pgvector and search them: dense, BM25, hybrid.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _global(
    config: str | None = typer.Option(
        None, "--config", "-c", help="User config file (default: ./kbctl.toml, or KBCTL_CONFIG)."
    ),
    dsn: str | None = typer.Option(
        None, "--dsn", help="PostgreSQL DSN (default: KBCTL_DSN, else the embedded server)."
    ),
    home: str | None = typer.Option(
        None, "--home", help="Data directory for the embedded server (default: KBCTL_HOME or the user data dir)."
    ),
    tenant: str | None = typer.Option(
        None, "--tenant", help="Tenant that scopes namespace names (default: 'default')."
    ),
    profile: str | None = typer.Option(
        None, "--profile", "-p", help="Embedding profile for new namespaces (default: defaults.profile)."
    ),
    verbose: int = typer.Option(0, "--verbose", "-v", count=True, help="More log output on stderr (-vv for debug)."),
    quiet: bool = typer.Option(
        False,
        "--quiet",
        "-q",
        help="Only errors on stderr (and serve's listening line when the system picked its port).",
    ),
) -> None:
    """Global options: where the store is and which tenant/profile to use.

    An empty ``--home``, ``--dsn`` or ``--config`` (``--home "$DIR"`` with DIR unset) is refused:
    taken as "not given", it sent a cron job to the user's default store, the embedded server or
    ``./kbctl.toml``."""
    for option, value in (("--home", home), ("--dsn", dsn), ("--config", config)):
        if value is not None and not value.strip():
            from ..errors import UsageError

            raise UsageError(f"{option} is empty", hint=f"name one, or leave {option} out to use the default")
    STATE.config, STATE.dsn, STATE.home, STATE.tenant, STATE.profile = config, dsn, home, tenant, profile
    STATE.verbose, STATE.quiet = verbose, quiet
    setup_logging(verbose, quiet)


ingest.register(app)
search.register(app)
namespaces.register(app)
reembed.register(app)
runs.register(app)
show.register(app)
stages.register(app)
serve.register(app)
workers.register(app)
app.add_typer(db_cmd.app, name="db")
app.add_typer(config_cmd.app, name="config")
app.add_typer(evals.app, name="eval")
app.add_typer(tenants.app, name="tenants")


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; every KbctlError becomes one line (and a hint) on stderr with its exit code.

    A psycopg error is converted here too (``errors.from_psycopg``): ``KnowledgeBase`` converts those
    leaving its methods, but a stage's records are produced lazily, after the method returned.
    """
    from ..errors import KbctlError, from_psycopg

    click = _click_exceptions()

    warnings.filterwarnings("ignore")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    code = 0
    try:
        rv = app(args=argv, standalone_mode=False, prog_name="kbctl")
        code = rv if isinstance(rv, int) else 0
        if code == 130:  # typer answers Ctrl-C (and SIGTERM, kbctl.interrupts) with a silent exit 130
            _interrupted(argv)
    except click.exceptions.Exit as e:
        code = e.exit_code
    except click.exceptions.Abort:
        err.print("aborted")
        code = 130
    except click.UsageError as e:  # typer's own checks: a range, a type, an unknown or missing option
        if isinstance(e, click.NoArgsIsHelp):  # "kbctl db": the group's help is the answer
            e.show(file=sys.stderr)
        else:
            _report(_usage_error(e))
        code = e.exit_code
    except click.ClickException as e:
        _report(_usage_error(e, hint=False))
        code = e.exit_code
    except KbctlError as e:
        _report(e)
        code = e.exit_code
    except KeyboardInterrupt:
        _interrupted(argv)
        code = 130
    except (BrokenPipeError, _PipeClosed):
        code = 0
    except Exception as e:  # after BrokenPipeError: only a psycopg error is handled here
        if not _is_psycopg_error(e):
            raise
        kb_error = from_psycopg(e)
        _report(kb_error)
        code = kb_error.exit_code
    finally:
        STATE.close()
        flush_stdout()  # a reader that left before the last flush: not an error either
    sys.exit(code)


def _click_exceptions():
    """typer vendors its own click (typer._click) and its own Exit/Abort; catch whichever are in use."""
    import types

    try:
        from typer import exceptions as tex
        from typer._click import exceptions as ex

        exc = types.SimpleNamespace(Exit=tex.Exit, Abort=tex.Abort)
    except ImportError:  # an older typer on the real click
        from click import exceptions as ex

        exc = ex
    return types.SimpleNamespace(
        exceptions=exc,
        ClickException=ex.ClickException,
        UsageError=ex.UsageError,
        NoArgsIsHelp=getattr(ex, "NoArgsIsHelpError", ()),  # () where click has none: isinstance is False
    )


def _usage_error(e, hint: bool = True):
    """A click error as kbctl's own: one ``error:`` line and a ``hint:`` (click printed its usage
    block, a blank line and ``Error: …``; kbctl's errors are one line and a hint). The hint is the
    option's help when the error is about one, and where to read the command's options."""
    from ..errors import KbctlError

    message = e.format_message().strip().rstrip(".")
    if message[1:2].islower():  # "Invalid value for …" as kbctl writes: "invalid value for …"
        message = message[0].lower() + message[1:]
    ctx = getattr(e, "ctx", None)
    where = f"see '{ctx.command_path if ctx is not None else 'kbctl'} -h'"
    param = getattr(e, "param", None)
    if param is not None and getattr(param, "help", None):
        names = " / ".join(getattr(param, "opts", ())) or param.human_readable_name
        where = f"{names}: {param.help.strip().rstrip('.')}; {where}"
    error = KbctlError(message, hint=where if hint else None)
    error.exit_code = e.exit_code
    return error


def _is_psycopg_error(e: BaseException) -> bool:
    """Without importing psycopg (``kbctl --help`` stays fast): if it is not loaded, ``e`` is not its error."""
    psycopg = sys.modules.get("psycopg")
    return psycopg is not None and isinstance(e, psycopg.Error)


#: The commands whose stopped run the same command goes on with: what they stored is kept whole
#: (documents, a shadow's vectors, a worker's settled batches), and the next run does the rest.
_RESUMABLE = ("ingest", "store", "reembed", "worker")


def _interrupted(argv: list[str] | None) -> None:
    """Say that the command was interrupted, and for one that stores, that running it again goes on."""
    err.print("interrupted")
    args = sys.argv[1:] if argv is None else argv
    command = next((a for a in args if a in app_commands()), None)
    if command in _RESUMABLE:
        err.print("hint: run the same command again: it goes on from what was stored (nothing is stored twice)")


def app_commands() -> set[str]:
    """The names of the top-level commands and groups."""
    names = {c.name for c in app.registered_commands if c.name} | {g.name for g in app.registered_groups if g.name}
    return names | {c.callback.__name__.replace("_", "-") for c in app.registered_commands if c.callback and not c.name}


def _report(e) -> None:
    """The error line (and its hint): one line each, inert on a terminal (they may quote stored names)."""
    from .terminal import printable

    print(f"error: {printable(e.message, keep='')}", file=sys.stderr)
    if e.hint:
        print(f"hint: {printable(e.hint, keep='')}", file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    main()
