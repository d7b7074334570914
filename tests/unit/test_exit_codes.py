"""Exit codes as the README's table says (issue 42, defects 14 and 16): a background build that stops at once, a closed pipe.

Real processes: `python -m nemori_cli` writing into a pipe whose reader is
gone, and `build --background` starting a worker process that refuses at
once (a stand-in for `nemori build` that answers as it does on a read-only
database, so that no model is needed).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nemori_cli.api import BuildRunning
from nemori_cli.errors import NemoriError
from tests.conftest import REPO
from tests.unit.fake_ingest import ingested, nemori


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["models"], ["models", "--json"], ["ingest", "--help"]])
def test_output_to_a_closed_pipe_exits_0_and_says_nothing(args):
    reader, writer = os.pipe()
    os.close(reader)  # `nemori ... | head -1` once head has its line
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("NEMORI_")}
        run = subprocess.run(
            [sys.executable, "-m", "nemori_cli", *args], stdout=writer, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env, timeout=120
        )
    finally:
        os.close(writer)
    assert (run.returncode, run.stderr) == (0, "")


@pytest.fixture
def pending(tmp_path, monkeypatch):
    """A database whose messages are stored, none built."""
    return ingested(tmp_path, monkeypatch, "--build", "later")


def _worker(tmp_path, monkeypatch, line: str, code: int) -> None:
    """The process `build --background` starts answers ``line`` on stderr and exits ``code``, as `nemori build` refusing at once."""
    script = tmp_path / "worker"
    script.write_text(f"#!/bin/sh\necho {line!r} >&2\nexit {code}\n")
    script.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(script))


@pytest.mark.parametrize(
    ("code", "line"), [(4, "nemori: error: /x/m.db is read-only; nothing was written"), (3, "nemori: error: model m: no GGUF file")]
)
def test_a_background_build_that_stops_at_once_exits_with_its_code_and_its_line_once(pending, tmp_path, monkeypatch, code, line):
    _worker(tmp_path, monkeypatch, line, code)
    run = nemori("build", "--background", "--db", pending)
    assert isinstance(run.exception, NemoriError) and run.exception.exit_code == code
    assert run.exception.message == "the background build stopped at once: " + line.removeprefix("nemori: error: ")


def test_a_build_refused_by_the_lock_exits_4():
    assert BuildRunning("m.db", "alice", 42).exit_code == 4
