"""The real stack: the `nemori` command in a subprocess, the tiny GGUF, MiniLM, a real file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "chat.jsonl"


def run_nemori(*args: str, env: dict | None = None, stdin: bytes | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "NEMORI_MODEL": "tiny", "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "nemori_cli", *args],
        input=stdin,
        capture_output=True,
        env=full_env,
        timeout=timeout,
        cwd=REPO,
    )


def run_json(*args: str, **kw) -> dict:
    proc = run_nemori(*args, "--json", **kw)
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    # One cache for the whole run: the assembled models are reused across tests.
    return Path(os.environ.get("NEMORI_CACHE_DIR") or tmp_path_factory.mktemp("cache"))


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path, cache_dir):
    monkeypatch.setenv("NEMORI_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no user presets leak in
    monkeypatch.delenv("NEMORI_DB", raising=False)
    monkeypatch.delenv("NEMORI_USER", raising=False)


@pytest.fixture(scope="session")
def ingested_example(tmp_path_factory, cache_dir) -> Path:
    """The bundled example ingested once with the tiny model; tests only read it."""
    db = tmp_path_factory.mktemp("example") / "example.db"
    proc = run_nemori("ingest", str(EXAMPLE), "--db", str(db), env={"NEMORI_CACHE_DIR": str(cache_dir)})
    assert proc.returncode == 0, proc.stderr.decode()
    return db
