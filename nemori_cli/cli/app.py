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
from nemori_cli.errors import NemoriError

app = typer.Typer(
    name="nemori",
    help="Local-first episodic memory for chats and agents: ingest messages, then search and ask.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
)


def _version(value: bool) -> None:
    if value:
        print(f"nemori {__version__}")
        raise typer.Exit()


@app.callback()
def root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version.")) -> None:
    """Local-first episodic memory for chats and agents."""


app.command("ingest")(ingest.ingest)
app.command("build")(build_cmd.build_cmd)
app.command("flush")(ingest.flush_cmd)
app.command("search")(query.search_cmd)
app.command("ask")(query.ask_cmd)
app.add_typer(inspect_cmd.inspect_app, name="inspect")
app.add_typer(forget_cmd.forget_app, name="forget")
app.command("stats")(inspect_cmd.stats_cmd)
app.command("export")(export_cmd.export_cmd)
app.command("import-memory")(export_cmd.import_cmd)
app.add_typer(models_cmd.models_app, name="models")
app.command("doctor")(doctor_cmd.doctor_cmd)
app.add_typer(bench_cmd.bench_app, name="bench")
app.command("mcp")(mcp_cmd.mcp_cmd)
app.command("view")(view_cmd.view_cmd)


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
        where = f"{e.ctx.command_path}: " if e.ctx else ""
        _fail(where + e.format_message().replace("\n", " ") + " (see --help)", 2)
    except typer.Abort:
        _fail("interrupted", 130)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except BrokenPipeError:
        sys.exit(0)
    sys.exit(code if isinstance(code, int) else 0)
