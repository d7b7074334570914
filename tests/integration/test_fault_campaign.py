"""A short run of the crash and concurrency campaign (scripts/fault_campaign.py; `make faults` runs the full one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.integration.conftest import REPO

pytestmark = pytest.mark.integration


def test_kills_and_concurrent_writers_lose_and_double_nothing(tmp_path, cache_dir):
    out = tmp_path / "faults.json"
    proc = subprocess.run(
        [sys.executable, "scripts/fault_campaign.py", "--quick", "--seed", "7", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1500,
        env={**os.environ, "NEMORI_CACHE_DIR": str(cache_dir)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads(out.read_text())
    summary = record["summary"]
    assert summary["kill_trials"] == 4 and summary["kill_trials_with_problems"] == 0
    assert summary["writer_trials"] == 2 and summary["writer_trials_with_problems"] == 0
    for trial in record["kills"] + record["writers"]:
        assert trial["integrity"] == "ok" and trial["pending"] == 0
