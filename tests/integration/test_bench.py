"""`nemori bench` on the real stack: the tiny GGUF, MiniLM, real SQLite files, resumed runs, bad flags."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import SHARED_DATA
from tests.integration.conftest import REPO, run_nemori
from tests.support.signals import interruptible

pytestmark = pytest.mark.integration

LOCOMO = SHARED_DATA / "locomo" / "locomo-dev.json"
LONGMEMEVAL = SHARED_DATA / "longmemeval" / "longmemeval-oracle-dev.json"


def _needs(path):
    if not path.is_file():
        pytest.skip(f"development data not found at {path}")


def test_locomo_bench_reports_every_system_and_a_rerun_resumes(tmp_path):
    _needs(LOCOMO)
    out = tmp_path / "out"
    args = (
        "bench",
        "locomo",
        str(LOCOMO),
        "--sample",
        "conv-26",
        "--sessions",
        "1",
        "--questions",
        "2",
        "--systems",
        "nemori,full-context,rag-256",
        "--judge-model",
        "tiny",
        "--out",
        str(out),
        "--json",
    )
    first = run_nemori(*args)
    assert first.returncode == 0, first.stderr.decode()
    report = json.loads(first.stdout)
    assert list(report["systems"]) == ["nemori", "full-context", "rag-256"]
    for system in report["systems"].values():
        overall = system["overall"]
        assert overall["questions"] == 2 and overall["judged"] <= 2
        for key in ("set_f1", "official_f1", "bleu1"):
            assert 0.0 <= overall[key] <= 1.0
        assert system["costs"]["db_bytes"] > 0 and system["costs"]["answer_ms_p50"] > 0
    nemori = report["systems"]["nemori"]["costs"]
    assert nemori["llm_calls"] > 0 and "narration" in nemori["stages"]
    assert report["config"]["model"]["sha256"] and report["config"]["data"]["sha256"]
    assert (out / "report.md").read_text().count("| `") >= 6
    lines = (out / "results.jsonl").read_text().splitlines()
    # three memories built, each system's storage, two answers per system, each judged
    assert len(lines) == 3 + 3 + 3 * 2 + 3 * 2

    again = run_nemori(*args)
    assert again.returncode == 0, again.stderr.decode()
    assert (out / "results.jsonl").read_text().splitlines() == lines  # nothing redone
    assert json.loads(again.stdout)["systems"] == report["systems"]

    other = run_nemori(*args, "--model", "small")
    assert other.returncode == 2
    assert "another model" in other.stderr.decode() and len(other.stderr.decode().splitlines()) == 1

    # Another answer model on the same memories: rows of their own, nothing rebuilt.
    tiny_file = _tiny_gguf()
    answered = run_nemori(*args[:-5], "--out", str(out), "--answer-model", str(tiny_file), "--json")
    assert answered.returncode == 0, answered.stderr.decode()
    rows = json.loads(answered.stdout)["systems"]
    suffix = f"@{tiny_file}"
    assert {f"nemori{suffix}", f"full-context{suffix}", f"rag-256{suffix}"} <= set(rows)
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sum(r["kind"] == "build" for r in records) == 3  # the memories were reused
    assert sum(r["kind"] == "answer" and r["system"].endswith(suffix) for r in records) == 3 * 2


def _tiny_gguf():
    """The tiny model's assembled file, as a path: a preset of its own, so it counts as another model."""
    from nemori_cli.config import load_presets, resolve_llm
    from nemori_cli.modelfiles import gguf_path

    return gguf_path(resolve_llm(load_presets(), "tiny"), Path(os.environ["NEMORI_CACHE_DIR"]))


def test_longmemeval_bench_gives_each_question_its_own_memory(tmp_path):
    _needs(LONGMEMEVAL)
    out = tmp_path / "lme"
    proc = run_nemori(
        "bench", "longmemeval", str(LONGMEMEVAL), "--questions", "2", "--systems", "full-context,rag-256", "--out", str(out), "--json"
    )
    assert proc.returncode == 0, proc.stderr.decode()
    report = json.loads(proc.stdout)
    full = report["systems"]["full-context"]
    assert full["overall"]["questions"] == 2 and "knowledge-update" in full["groups"]
    assert full["overall"]["evidence_recall"] == 1.0 or full["costs"]["notes"]  # all kept, or the cut is reported
    assert len(list((out / "memories").iterdir())) == 2
    assert full["overall"]["judged"] == 0

    judged = run_nemori("bench", "judge", str(out), "--judge-model", "tiny", "--json")
    assert judged.returncode == 0, judged.stderr.decode()
    after = json.loads(judged.stdout)
    assert after["judge"] == "tiny" and all(s["overall"]["judged"] == 2 for s in after["systems"].values())
    rebuilt = run_nemori("bench", "report", str(out), "--json")
    assert json.loads(rebuilt.stdout)["systems"] == after["systems"]


def test_bench_refuses_bad_flags_with_one_line(tmp_path):
    _needs(LOCOMO)
    unknown = run_nemori("bench", "locomo", str(LOCOMO), "--systems", "nemori,magic", "--out", str(tmp_path / "x"))
    assert unknown.returncode == 2 and "unknown system 'magic'" in unknown.stderr.decode()
    missing = run_nemori("bench", "locomo", str(tmp_path / "nope.json"), "--out", str(tmp_path / "x"))
    assert missing.returncode == 2 and "no such file" in missing.stderr.decode()
    sessions = run_nemori("bench", "locomo", str(LOCOMO), "--sessions", "5-1", "--out", str(tmp_path / "x"))
    assert sessions.returncode == 2 and "--sessions" in sessions.stderr.decode()
    assert not (tmp_path / "x").exists()  # nothing written for a run that cannot start


def test_ctrl_c_mid_bench_keeps_finished_work_and_the_rerun_completes_it(tmp_path):
    _needs(LOCOMO)
    out = tmp_path / "out"
    args = [
        sys.executable,
        "-m",
        "nemori_cli",
        "bench",
        "locomo",
        str(LOCOMO),
        "--sample",
        "conv-26",
        "--sessions",
        "1",
        "--questions",
        "4",
        "--systems",
        "full-context,rag-256",
        "--out",
        str(out),
        "--model",
        "tiny",
    ]
    proc = subprocess.Popen(
        interruptible(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env={**os.environ, "NEMORI_MODEL": "tiny"}
    )
    results = out / "results.jsonl"
    deadline = time.time() + 600
    while (not results.exists() or len(results.read_text().splitlines()) < 3) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    if proc.poll() is not None:
        pytest.fail(f"bench ended before it could be interrupted: {proc.stderr.read().decode()[-500:]}")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err.decode()
    assert "run the same command to resume" in err.decode()
    kept = results.read_text().splitlines()
    assert 3 <= len(kept) < 2 + 2 + 2 * 4  # not all of two builds, two storage records and eight answers
    again = run_nemori(*args[3:], "--json")
    assert again.returncode == 0, again.stderr.decode()
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert records[: len(kept)] == [json.loads(line) for line in kept]  # finished work untouched
    answers = [(r["system"], r["qid"]) for r in records if r["kind"] == "answer"]
    assert len(answers) == 8 and len(set(answers)) == 8  # nothing answered twice
    assert sum(r["kind"] == "build" for r in records) == 2


def _answered(folder: Path) -> set[str]:
    records = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    return {r["qid"] for r in records if r.get("kind") == "answer"}


def test_a_run_asks_none_of_the_questions_an_earlier_folder_answered(tmp_path):
    _needs(LOCOMO)
    base = ("bench", "locomo", str(LOCOMO), "--sample", "conv-26", "--sessions", "1", "--systems", "full-context", "--json")
    first = run_nemori(*base, "--questions", "2", "--out", str(tmp_path / "first"))
    assert first.returncode == 0, first.stderr.decode()
    read = _answered(tmp_path / "first")
    second = run_nemori(*base, "--unasked", str(tmp_path / "first"), "--out", str(tmp_path / "second"))
    assert second.returncode == 0, second.stderr.decode()
    asked = _answered(tmp_path / "second")
    assert len(read) == 2 and asked and not asked & read
    config = json.loads((tmp_path / "second" / "config.json").read_text())
    assert config["scope_key"]["left_out"]["questions"] == 2
    own = run_nemori(*base, "--unasked", str(tmp_path / "first"), "--out", str(tmp_path / "first"))
    assert own.returncode == 2 and "this run's own --out folder" in own.stderr.decode()
    bad = run_nemori(*base, "--matching", "(", "--out", str(tmp_path / "third"))
    assert bad.returncode == 2 and "--matching '(' is not a regular expression" in bad.stderr.decode()
    assert not (tmp_path / "third").exists()
