"""`nemori` run through its real entry point in-process, for tests that need its exit codes and both streams."""

from __future__ import annotations

import sys


def run_nemori(args: list[str], env: dict, stdin: bytes | None = None) -> tuple[int, str, str]:
    """`nemori ARGS` through its real entry point (app.main: where errors become exit codes) in a CliRunner."""
    from typer.testing import CliRunner

    from nemori_cli.cli.app import main

    runner = CliRunner()
    saved = sys.argv
    with runner.isolation(input=stdin, env=env) as (out, err, _):
        sys.argv = ["nemori", *args]
        try:
            main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        finally:
            sys.argv = saved
            sys.stdout.flush()
            sys.stderr.flush()
        return code, out.getvalue().decode("utf-8", "replace"), err.getvalue().decode("utf-8", "replace")
