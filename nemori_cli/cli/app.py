"""The `nemori` command: wiring, and the one place errors become exit codes.

Only typer is imported at start-up; each command imports what it needs, so
`nemori --help` does not pay for torch or llama.cpp.
"""

from __future__ import annotations

import sys

import typer

from nemori_cli import __version__
from nemori_cli.cli import (
    bench_cmd,
    build_cmd,
    doctor_cmd,
    export_cmd,
    forget_cmd,
    ingest,
    inspect_cmd,
    mcp_cmd,
    models_cmd,
    query,
    view_cmd,
)
from nemori_cli.cli.help import App, examples
from nemori_cli.errors import NemoriError

app = App(
    name="nemori",
    help="Local-first episodic memory for chats and agents: ingest messages, then search and ask.",
    no_args_is_help=True,
    epilog=examples(
        "nemori ingest chat.jsonl",
        'nemori search "climbing gym"',
        'nemori ask "When did Priya go climbing?"',
        "nemori inspect episodes",
        "nemori COMMAND --help           # each command's options and examples",
    ),
    pretty_exceptions_enable=False,
    add_completion=True,
)


def _version(value: bool) -> None:
    if value:
        print(f"nemori {__version__}")
        raise typer.Exit()


@app.callback()
def root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version.")) -> None:
    """Local-first episodic memory for chats and agents: ingest messages, then search and ask."""


app.command("ingest", epilog=ingest.EXAMPLES)(ingest.ingest)
app.command("build", epilog=build_cmd.EXAMPLES)(build_cmd.build_cmd)
# `flush` is build's older name: it still works, but one step has one name in the list and in every message.
app.command("flush", epilog=build_cmd.FLUSH_EXAMPLES, hidden=True)(build_cmd.flush_cmd)
app.command("search", epilog=query.SEARCH_EXAMPLES)(query.search_cmd)
app.command("ask", epilog=query.ASK_EXAMPLES)(query.ask_cmd)
app.add_typer(inspect_cmd.inspect_app, name="inspect")
app.add_typer(forget_cmd.forget_app, name="forget")
app.command("stats", epilog=inspect_cmd.STATS_EXAMPLES)(inspect_cmd.stats_cmd)
app.command("export", epilog=export_cmd.EXAMPLES)(export_cmd.export_cmd)
app.command("import-memory", epilog=export_cmd.IMPORT_EXAMPLES)(export_cmd.import_cmd)
app.add_typer(models_cmd.models_app, name="models")
app.command("doctor", epilog=doctor_cmd.EXAMPLES)(doctor_cmd.doctor_cmd)
app.add_typer(bench_cmd.bench_app, name="bench")
app.command("mcp", epilog=mcp_cmd.EXAMPLES)(mcp_cmd.mcp_cmd)
app.command("view", epilog=view_cmd.EXAMPLES)(view_cmd.view_cmd)


def _click_exceptions():
    # Recent typer releases vendor click as typer._click; older ones use click itself.
    try:
        from typer._click import exceptions
    except ImportError:  # pragma: no cover - depends on the installed typer
        from click import exceptions
    return exceptions


def _fail(message: str, code: int) -> None:
    sys.stderr.write(f"nemori: error: {message}\n")
    sys.exit(code)


def main() -> None:
    click_errors = _click_exceptions()
    try:
        code = app(standalone_mode=False)
    except NemoriError as e:
        _fail(e.message, e.exit_code)
    except click_errors.UsageError as e:
        if type(e).__name__ == "NoArgsIsHelpError" and e.ctx is not None:
            print(e.ctx.get_help())
            sys.exit(0)
        # "search: No such option" after "nemori: error: ", not "nemori search: ..." (the prefix once).
        where = f"{e.ctx.command_path.partition(' ')[2]}: " if e.ctx and " " in e.ctx.command_path else ""
        _fail(where + e.format_message().replace("\n", " ") + " (see --help)", 2)
    except typer.Abort:
        _fail("interrupted", 130)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except BrokenPipeError:
        _reader_gone()
    except SystemExit as e:
        # typer and rich answer a write to a closed pipe with a silent exit 1, raised while handling
        # the BrokenPipeError: the same reader gone.
        if isinstance(e.__context__, BrokenPipeError):
            _reader_gone()
        raise
    sys.exit(code if isinstance(code, int) else 0)


def _reader_gone() -> None:
    """The reader of the output closed it (`nemori ... | head -1`): it has what it wanted, so exit 0 and say nothing.

    What is still buffered goes to /dev/null, so that the interpreter's last flush
    adds no "Exception ignored ... BrokenPipeError" to stderr.
    """
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file behind stdout: nothing will be flushed to one either
        pass
    sys.exit(0)
