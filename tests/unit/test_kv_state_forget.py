"""Forgetting a user and the saved KV states beside the database (issue 42, defects 6 and 7).

A real SQLite file made with the fakes; the state files are written by
llm/state_files.save, the code `ask` saves with, under the names
retrieval/core_cache.CoreCache gives them. The user is forgotten through
api.Memory.forget, what the `forget` command and the MCP tool both call.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from nemori_cli.api import Memory
from nemori_cli.cli import options as opt
from nemori_cli.llm import state_files
from nemori_cli.llm.prefix_states import Snapshot
from nemori_cli.retrieval.core_cache import CoreCache
from tests.unit.fake_ingest import conversation, isolate, nemori, use_fakes, write_jsonl

SECRET_TOKENS = np.arange(1000, 1064, dtype=np.intc)


@pytest.fixture
def memory(tmp_path, monkeypatch):
    """alice and bob in one file, each with a saved state."""
    isolate(monkeypatch, tmp_path)
    use_fakes(monkeypatch)
    db = tmp_path / "m.db"
    for user in ("alice", "bob"):
        assert nemori("ingest", write_jsonl(tmp_path / f"{user}.jsonl", conversation()), "--db", db, "--user", user).exit_code == 0
    cache = CoreCache(db.with_name(db.name + ".kv"))
    for user in ("alice", "bob"):
        state_files.save(cache.path(user, "small"), Snapshot("k", SECRET_TOKENS, b"kv" * 64), {}, "d")
    return db, cache


def _forget_alice(db) -> dict[str, int]:
    with Memory.from_settings(opt.settings(str(db), "alice")) as memory:
        return memory.forget("user")


def _left(cache: CoreCache, user: str) -> list[str]:
    stem = cache.path(user, "m").name.split("-")[0]
    return sorted(p.name for p in cache.directory.iterdir() if p.name.startswith(stem))


def test_a_killed_saves_temporary_file_is_forgotten_too(memory):
    db, cache = memory
    finished = cache.path("alice", "small")
    for pid in (4242, os.getpid()):  # what a save killed between its write and its rename leaves
        (finished.parent / f"{finished.name}.tmp{pid}").write_bytes(finished.read_bytes())
    assert len(_left(cache, "alice")) == 3
    assert _forget_alice(db)["episodes"] >= 1
    assert _left(cache, "alice") == []
    assert cache.path("bob", "small").exists()  # bob's state is bob's


def test_a_folder_where_a_state_file_goes_is_forgotten_not_a_traceback(memory):
    db, cache = memory
    folder = cache.path("alice", "base")
    folder.mkdir()
    (folder / "inside").write_bytes(SECRET_TOKENS.tobytes())
    assert _forget_alice(db)["episodes"] >= 1
    assert _left(cache, "alice") == [] and cache.path("bob", "small").exists()


def test_a_state_that_cannot_be_removed_is_one_store_error_and_the_file_is_scrubbed_all_the_same(memory, monkeypatch):
    from nemori_cli.errors import StoreError
    from nemori_cli.store import forget as forget_sql

    db, cache = memory
    scrubbed = []
    real = forget_sql.make_physical
    monkeypatch.setattr(forget_sql, "make_physical", lambda *a, **k: scrubbed.append(1) or real(*a, **k))

    def refused(path, missing_ok=False):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(type(cache.path("alice", "small")), "unlink", refused)
    with pytest.raises(StoreError) as refused:
        _forget_alice(db)
    assert refused.value.exit_code == 4 and "Permission denied" in refused.value.message
    assert refused.value.message.startswith("could not remove the saved model state ")
    assert scrubbed == [1]
