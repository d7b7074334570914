"""Bad input: one clear line on stderr, a non-zero exit, and the database as it was."""

from __future__ import annotations

import hashlib
import shutil

import pytest

from nemori_cli.store.sqlite import SqliteStore
from tests.integration.conftest import EXAMPLE, run_nemori

pytestmark = pytest.mark.integration


def snapshot(path) -> str:
    """A digest of every row of every real table (vector shadow tables included)."""
    db = SqliteStore(path, create=False)
    digest = hashlib.sha256()
    tables = [
        r["name"] for r in db.query("SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY name")
    ]
    for table in tables:
        rows = sorted(repr(sorted(row.items())) for row in db.query(f'SELECT * FROM "{table}"'))
        digest.update(f"{table}:{len(rows)}:".encode())
        for row in rows:
            digest.update(row.encode())
    db.close()
    return digest.hexdigest()


@pytest.fixture
def db_copy(ingested_example, tmp_path):
    copy = tmp_path / "copy.db"
    shutil.copy(ingested_example, copy)
    return copy


def assert_clean_failure(proc, *needles: str):
    err = proc.stderr.decode()
    assert proc.returncode != 0
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("nemori: error: "), err
    for needle in needles:
        assert needle in lines[0], err


CASES = {
    "malformed-json": (b'{"speaker": "A", "content": "hi", "timestamp": "2024-01-01T00:00:00"}\n{"speaker": oops}\n', [":2:", "JSON"]),
    "missing-field": (b'{"speaker": "A", "timestamp": "2024-01-01T00:00:00"}\n', [":1:", "content"]),
    "not-utf8": (b'{"speaker": "A", "content": "caf\xe9", "timestamp": "2024-01-01T00:00:00"}\n', [":1:", "UTF-8"]),
    "empty": (b"", ["no messages"]),
    "missing-timestamp": (b'{"speaker": "A", "content": "hi"}\n', [":1:", "timestamp", "--default-timestamp"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_files_change_nothing(case, db_copy, tmp_path):
    body, needles = CASES[case]
    bad = tmp_path / f"{case}.jsonl"
    bad.write_bytes(body)
    before = snapshot(db_copy)
    proc = run_nemori("ingest", str(bad), "--db", str(db_copy))
    assert_clean_failure(proc, f"{case}.jsonl", *needles)
    assert snapshot(db_copy) == before


def test_default_timestamp_makes_timeless_input_acceptable(tmp_path):
    bad = tmp_path / "t.jsonl"
    bad.write_bytes(b'{"speaker": "A", "content": "I adopted a cat yesterday"}\n')
    proc = run_nemori("ingest", str(bad), "--db", str(tmp_path / "t.db"), "--default-timestamp", "2024-02-02T10:00:00", "--json")
    assert proc.returncode == 0, proc.stderr.decode()


def test_unknown_model(db_copy):
    before = snapshot(db_copy)
    proc = run_nemori("ingest", str(EXAMPLE), "--db", str(db_copy), "--model", "gpt-17")
    assert_clean_failure(proc, "unknown model 'gpt-17'")
    assert snapshot(db_copy) == before


def test_missing_model_file(db_copy, tmp_path):
    before = snapshot(db_copy)
    proc = run_nemori("ingest", str(EXAMPLE), "--db", str(db_copy), "--model", str(tmp_path / "nope.gguf"))
    assert_clean_failure(proc, "no GGUF file", "nope.gguf")
    assert snapshot(db_copy) == before


def test_unreachable_endpoint(db_copy, tmp_path):
    presets = tmp_path / "models.toml"
    presets.write_text('[llm.dead]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "x"\n')
    before = snapshot(db_copy)
    proc = run_nemori("ingest", str(EXAMPLE), "--db", str(db_copy), "--model", "dead", env={"NEMORI_MODELS_FILE": str(presets)})
    assert_clean_failure(proc, "127.0.0.1:9", "unreachable")
    assert snapshot(db_copy) == before


def test_database_of_another_embedder(db_copy, tmp_path):
    presets = tmp_path / "models.toml"
    presets.write_text('[embedder.other]\nkind = "sentence-transformers"\nname = "other-model"\npath = "/nonexistent"\ndimensions = 768\n')
    before = snapshot(db_copy)
    proc = run_nemori("ingest", str(EXAMPLE), "--db", str(db_copy), "--embedder", "other", env={"NEMORI_MODELS_FILE": str(presets)})
    assert_clean_failure(proc, "built with embedder all-MiniLM-L6-v2:384")
    assert snapshot(db_copy) == before


def test_unknown_flag_value_and_missing_db(tmp_path):
    assert_clean_failure(run_nemori("ingest", str(EXAMPLE), "--format", "csv"), "csv")
    proc = run_nemori("search", "x", "--db", str(tmp_path / "absent.db"))
    assert_clean_failure(proc, "no database")
    assert not (tmp_path / "absent.db").exists()


def test_help_is_fast_and_imports_nothing_heavy():
    import subprocess
    import sys

    code = "import sys; from nemori_cli.cli import app; print(sorted(m for m in ('torch','llama_cpp','sentence_transformers','apsw','numpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_missing_embedder_creates_no_database(tmp_path):
    presets = tmp_path / "models.toml"
    presets.write_text('[embedder.gone]\nkind = "sentence-transformers"\nname = "gone"\npath = "/nonexistent/model"\n')
    db = tmp_path / "new.db"
    proc = run_nemori("ingest", str(EXAMPLE), "--db", str(db), "--embedder", "gone", env={"NEMORI_MODELS_FILE": str(presets)})
    assert_clean_failure(proc, "embedder gone", "/nonexistent/model")
    assert not db.exists()
