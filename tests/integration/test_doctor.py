"""`nemori doctor` on the real stack: the tiny GGUF through llama.cpp, MiniLM, a temporary SQLite file."""

from __future__ import annotations

import json

import pytest

from tests.integration.conftest import run_nemori

pytestmark = pytest.mark.integration

STAGES = ["partition", "narration", "integration", "prediction", "distillation", "consolidation", "answer"]


def test_doctor_probes_every_stage_of_the_tiny_model(tmp_path):
    user_db = tmp_path / "users-own.db"
    cache = tmp_path / "cache"  # its own cache, so the rates it saves stay out of other tests
    proc = run_nemori("doctor", "--model", "tiny", "--json", env={"NEMORI_DB": str(user_db), "NEMORI_CACHE_DIR": str(cache)})
    print(proc.stdout.decode())  # the figures, for whoever runs this with -s
    report = json.loads(proc.stdout)
    assert all(c["ok"] for c in report["checks"]), report["checks"]
    assert list(report["stages"]) == STAGES
    for name, stage in report["stages"].items():
        assert stage["status"] not in ("crashed", "skipped"), (name, stage)
        assert stage["calls"] >= 1 and stage["prompt_tokens"] > 0 and stage["seconds"] > 0, (name, stage)
    assert report["verdict"] in ("fit for ingesting", "usable with fallbacks", "not fit")
    assert proc.returncode == (1 if report["verdict"] == "not fit" else 0), proc.stderr.decode()
    assert report["overall"]["seconds_per_100_messages"] > 0
    assert not user_db.exists()  # the probe never opens the user's database
    if report["verdict"] != "not fit":
        assert (cache / "rates.json").is_file()
