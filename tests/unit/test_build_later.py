"""Searchable first, built behind: `ingest --build later`, `nemori build`, its lock, the build state and the window plan.

With the fake LLM and embedder on real SQLite files; the real model and the
detached worker are in tests/integration/test_build_later.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest

from nemori_cli import deps
from nemori_cli.api import BuildRunning
from nemori_cli.pipeline import lock, plan
from nemori_cli.services import ingest as ingest_service
from tests.unit.fake_ingest import TOPICS, conversation, isolate, nemori, use_fake_answers, use_fakes, write_jsonl


@pytest.fixture()
def world(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    built = use_fakes(monkeypatch)
    use_fake_answers(monkeypatch)
    return tmp_path, built


def one_stretch(n: int = 46) -> list[dict]:
    """n messages a minute apart (no time gap), all alike: where a window is cut depends only on where the window starts."""
    start = datetime(2023, 5, 8, 10, 0)
    return [
        {
            "id": f"m{i}",
            "speaker": "Ann" if i % 2 == 0 else "Bob",
            "content": "We talked about the weekend plans again.",
            "timestamp": (start + timedelta(minutes=i)).isoformat(),
        }
        for i in range(n)
    ]


def _episodes(memory) -> list[tuple[str, tuple[str, ...]]]:
    return [(e.boundary, tuple(m.key for m in e.messages)) for e in memory.episodes(with_messages=True)]


# -- the API -----------------------------------------------------------------------


def test_ingest_without_building_stores_searchable_messages_and_loads_no_model(world, monkeypatch):
    from nemori_cli import Memory

    tmp_path, built = world
    with Memory(tmp_path / "m.db") as memory:
        result = memory.ingest(conversation(), build=False)
        assert (result.added, result.episodes, result.pending) == (16, 0, 16)
        assert built == []  # no LLM was built for it
        assert any("kayak" in h.text for h in memory.search("kayak"))
        state = memory.build_state()
        assert (state.pending, state.built_through, state.pending_from.date().isoformat()) == (16, None, "2023-05-08")
        assert state.eta_seconds > 0 and state.eta_source and state.worker_pid is None
        assert "16 messages" in state.line()
        memory.build()
        after = memory.build_state()
        assert (after.pending, after.pending_from, after.line()) == (0, None, "")
        assert after.built_through == datetime(2023, 5, 11, 10, 3, tzinfo=UTC)  # naive times are UTC; both moments are aware
        assert len(memory.episodes()) == 4


def test_the_built_part_is_the_oldest_and_built_through_is_its_last_message(world):
    from nemori_cli import Memory

    tmp_path, _ = world
    with Memory(tmp_path / "m.db") as memory:
        memory.ingest(conversation(), max_tokens=1)  # the first episode, then the budget stops it
        state = memory.build_state(eta=False)
        assert state.pending == 12 and state.eta_seconds is None
        assert state.built_through == datetime(2023, 5, 8, 10, 3, tzinfo=UTC) and state.pending_from.date().isoformat() == "2023-05-09"
        assert state.built_through < state.pending_from


def test_a_build_stopped_from_another_thread_keeps_the_rest_pending(world):
    import threading

    from nemori_cli import Memory

    tmp_path, _ = world
    stop = threading.Event()
    stop.set()  # set before the run: no episode is started
    with Memory(tmp_path / "m.db") as memory:
        memory.ingest(conversation(), build=False)
        result = memory.build(stop=stop)
        assert (result.episodes, result.pending) == (0, 16)
        assert memory.build().pending == 0


# -- the window plan: a resumed build equals an uninterrupted one ---------------------


def _stopped_and_resumed(tmp_path, name: str) -> list:
    from nemori_cli import Memory

    with Memory(tmp_path / name, partition="similarity") as memory:
        memory.ingest(one_stretch(), build=False)
        for _ in range(20):  # a budget of one token: one episode a run, each run resuming the last
            if memory.build(max_tokens=1).pending == 0:
                break
        return _episodes(memory)


def test_a_build_resumed_episode_by_episode_makes_the_episodes_of_an_uninterrupted_one(world):
    from nemori_cli import Memory

    tmp_path, _ = world
    with Memory(tmp_path / "whole.db", partition="similarity") as memory:
        memory.ingest(one_stretch(), build=False)
        memory.build()
        whole = _episodes(memory)
    assert len(whole) >= 4
    assert _stopped_and_resumed(tmp_path, "resumed.db") == whole


def test_without_the_plan_a_resumed_build_would_cut_other_episodes(world, monkeypatch):
    """What the plan is for: with it switched off, resuming mid-window cuts the rest again, differently."""
    from nemori_cli import Memory

    tmp_path, _ = world
    with Memory(tmp_path / "whole.db", partition="similarity") as memory:
        memory.ingest(one_stretch(), build=False)
        memory.build()
        whole = _episodes(memory)
    monkeypatch.setattr(plan, "left", lambda db, user: [])
    assert _stopped_and_resumed(tmp_path, "unplanned.db") != whole


def test_a_plan_that_is_no_longer_the_head_of_the_pending_messages_is_dropped(world):
    from nemori_cli import Memory

    tmp_path, _ = world
    with Memory(tmp_path / "m.db", partition="similarity") as memory:
        memory.ingest(one_stretch(), max_tokens=1)
        session = memory._session("write")
        assert plan.left(session.db, "default")  # the rest of the first window, as it was cut
        earlier = [{"id": "early", "speaker": "Ann", "content": "An older message.", "timestamp": "2023-05-01T09:00:00"}]
        memory.ingest(earlier, build=False)  # now the oldest pending message is not in the plan
        assert plan.left(session.db, "default") == []
        assert memory.build().pending == 0
        assert session.db.get_meta("window_plan:default") is None  # nothing left behind once built


# -- the lock ----------------------------------------------------------------------------


def test_one_build_lock_per_store_and_a_killed_holder_frees_it(tmp_path):
    path = tmp_path / "locks" / "x.lock"
    first, second = lock.BuildLock(path), lock.BuildLock(path)
    assert first.acquire(user="ann") and not second.acquire(user="bob")
    assert second.holder() == lock.Holder(os.getpid(), "ann", "loading")
    first.release()
    assert second.holder() is None
    holder = subprocess.Popen(
        [sys.executable, "-c", f"from nemori_cli.pipeline.lock import BuildLock; from pathlib import Path; import time\n"
         f"assert BuildLock(Path({str(path)!r})).acquire(user='w'); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    assert holder.stdout.readline().strip() == b"held"
    assert second.holder() == lock.Holder(holder.pid, "w", "loading") and not second.acquire(user="bob")
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert second.holder() is None and second.acquire(user="bob")  # the kernel dropped the dead holder's lock
    second.release()


def test_lock_files_are_keyed_by_the_store_and_live_in_one_folder_whatever_the_cache(tmp_path, monkeypatch):
    from nemori_cli.config import Settings

    monkeypatch.setenv("NEMORI_CACHE_DIR", str(tmp_path / "cache"))
    a = lock.path_for(Settings.from_env(db=str(tmp_path / "a.db")))
    monkeypatch.chdir(tmp_path)
    assert lock.path_for(Settings.from_env(db="a.db")) == a  # the same file by another name
    assert lock.path_for(Settings.from_env(db=str(tmp_path / "b.db"))) != a
    assert a.parent == lock.lock_dir()  # not the cache directory: a second NEMORI_CACHE_DIR sees the same lock
    assert lock.path_for(Settings.from_env(db="a.db", user="bob")) != a  # one build per memory: a store and a user


# -- the CLI ---------------------------------------------------------------------------


def test_ingest_build_auto_stores_only_when_the_estimate_is_over_its_bar(world, monkeypatch):
    tmp_path, built = world
    chat = write_jsonl(tmp_path / "chat.jsonl", conversation())
    monkeypatch.setattr(ingest_service, "AUTO_BUILD_NOW_S", 0.0)
    later = nemori("ingest", chat, "--db", tmp_path / "a.db", "--json")
    data = json.loads(later.stdout)
    assert (data["build"], data["episodes"], data["built"]["pending"]) == ("later", 0, 16) and built == []
    monkeypatch.setattr(ingest_service, "AUTO_BUILD_NOW_S", 1e9)
    now = json.loads(nemori("ingest", chat, "--db", tmp_path / "b.db", "--json").stdout)
    assert "build" not in now and now["episodes"] == 4 and now["pending"] == 0


def test_ingest_later_says_it_is_searchable_and_how_to_build(world):
    tmp_path, _ = world
    chat = write_jsonl(tmp_path / "chat.jsonl", conversation())
    out = nemori("ingest", chat, "--db", tmp_path / "m.db", "--build", "later").stdout
    assert "searchable now" in out and "16 messages are pending" in out and "`nemori build`" in out
    stats = nemori("stats", "--db", tmp_path / "m.db").stdout
    assert "nothing built yet; 16 messages (said from 2023-05-08 on) are searchable as raw turns" in stats


def test_ask_says_when_it_read_turns_that_are_not_built_yet(world):
    tmp_path, _ = world
    chat = write_jsonl(tmp_path / "chat.jsonl", conversation())
    nemori("ingest", chat, "--db", tmp_path / "m.db", "--build", "later")
    before = nemori("ask", "What about the kayak?", "--db", tmp_path / "m.db").stdout
    assert "raw turns not built into episodes and facts yet; 16 messages said from 2023-05-08 on are pending" in before
    nemori("build", "--db", tmp_path / "m.db")
    after = nemori("ask", "What about the kayak?", "--db", tmp_path / "m.db").stdout
    assert "not built" not in after


def test_build_refuses_while_another_process_builds_the_same_database(world):
    from nemori_cli.config import Settings

    tmp_path, _ = world
    chat = write_jsonl(tmp_path / "chat.jsonl", conversation())
    nemori("ingest", chat, "--db", tmp_path / "m.db", "--build", "later")
    path = lock.path_for(Settings.from_env(db=str(tmp_path / "m.db")))
    holder = subprocess.Popen(
        [sys.executable, "-c", f"from nemori_cli.pipeline.lock import BuildLock; from pathlib import Path; import time\n"
         f"assert BuildLock(Path({str(path)!r})).acquire(user='default'); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == b"held"
        refused = nemori("build", "--db", tmp_path / "m.db")
        assert isinstance(refused.exception, BuildRunning) and f"already running (pid {holder.pid})" in str(refused.exception)
        assert refused.exception.exit_code == 4  # docs/REFERENCE.md's exit-code table: the database (its memory) is in use
        running = json.loads(nemori("stats", "--db", tmp_path / "m.db", "--json").stdout)["built"]
        assert running["building"] is True and running["worker_pid"] == holder.pid
        started = time.monotonic()
        stopped = json.loads(nemori("build", "--stop", "--db", tmp_path / "m.db", "--json").stdout)
        assert stopped == {"stopped": True, "running": False, "pid": holder.pid, "db": str(tmp_path / "m.db")}
        assert time.monotonic() - started < 30  # SIGTERM ended it (no episode was in hand)
    finally:
        holder.kill()
        holder.wait()
    assert json.loads(nemori("build", "--db", tmp_path / "m.db", "--json").stdout)["pending"] == 0


def test_build_with_background_and_stop_together_is_refused(world):
    tmp_path, _ = world
    from nemori_cli.errors import ConfigError

    refused = nemori("build", "--background", "--stop", "--db", tmp_path / "m.db")
    assert isinstance(refused.exception, ConfigError) and "do not go together" in str(refused.exception)


def test_the_dry_run_gives_the_time_to_searchable_and_to_built(world):
    tmp_path, _ = world
    chat = write_jsonl(tmp_path / "chat.jsonl", conversation())
    plan_json = json.loads(nemori("ingest", chat, "--db", tmp_path / "m.db", "--dry-run", "--json").stdout)
    assert plan_json["searchable_seconds"] > 0 and plan_json["build_seconds"] > 0
    text = nemori("ingest", chat, "--db", tmp_path / "m.db", "--dry-run").stdout
    assert "time: searchable after about" in text and "built after about" in text


def test_a_build_eta_uses_this_databases_rates_once_it_has_some(world, monkeypatch):
    from nemori_cli import Memory

    tmp_path, _ = world
    use_fakes(monkeypatch, model_id="small")  # the calls are logged under the default model's id, which `build` would use
    with Memory(tmp_path / "m.db") as memory:
        memory.ingest(conversation(), build=False)
        assert memory.build_state().eta_source != "this database"
        memory.build(max_tokens=1)
        assert memory.build_state().eta_source == "this database"


def test_deps_build_eta_is_zero_for_nothing_pending(world):
    from nemori_cli.config import Settings
    from nemori_cli.domain import Backlog
    from nemori_cli.memory.profile import DEFAULT

    tmp_path, _ = world
    eta = deps.build_eta(Settings.from_env(db=str(tmp_path / "x.db")), None)
    assert eta(Backlog(0, 0), DEFAULT)[0] == 0.0 and eta(Backlog(10, 2000), DEFAULT)[0] > 0


def _hold(path) -> subprocess.Popen:
    """Another process holding a build lock until killed."""
    holder = subprocess.Popen(
        [sys.executable, "-c", f"from nemori_cli.pipeline.lock import BuildLock; from pathlib import Path; import time\n"
         f"assert BuildLock(Path({str(path)!r})).acquire(user='default'); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    assert holder.stdout.readline().strip() == b"held"
    return holder


def test_an_ingest_that_would_build_while_another_process_builds_only_stores(world):
    from nemori_cli import Memory
    from nemori_cli.config import Settings

    tmp_path, _ = world
    with Memory(tmp_path / "m.db", user="carol") as carol:  # the file first: its lock is keyed by what it is (device, inode)
        carol.ingest(conversation())
    holder = _hold(lock.path_for(Settings.from_env(db=str(tmp_path / "m.db"))))
    try:
        with Memory(tmp_path / "m.db") as memory:
            result = memory.ingest(conversation())
            assert (result.added, result.episodes, result.pending, result.report.left_to_running_build) == (16, 0, 16, True)
            with pytest.raises(BuildRunning):
                memory.build()
            with Memory(tmp_path / "m.db", user="bob") as bob:  # another user's memory in the same file is not held
                assert bob.ingest(conversation()).episodes == 4
    finally:
        holder.kill()
        holder.wait()
    with Memory(tmp_path / "m.db") as memory:
        assert memory.build().pending == 0


def test_forget_user_drops_a_part_way_plan_and_exports_leave_plans_out(world):
    from nemori_cli import Memory
    from nemori_cli.store.export import meta

    tmp_path, _ = world
    with Memory(tmp_path / "m.db", partition="similarity") as memory:
        memory.ingest(one_stretch(), max_tokens=1)
        db = memory._session("write").db
        assert db.get_meta("window_plan:default") is not None
        assert not any(k.startswith("window_plan:") for k in meta(db))
        memory.forget("user")
        assert memory._session("write").db.get_meta("window_plan:default") is None


def test_no_flush_with_a_build_later_is_refused_and_auto_builds_now(world):
    from nemori_cli.errors import ConfigError

    tmp_path, _ = world
    chat = write_jsonl(tmp_path / "chat.jsonl", conversation())
    refused = nemori("ingest", chat, "--db", tmp_path / "m.db", "--build", "later", "--no-flush")
    assert isinstance(refused.exception, ConfigError) and "--no-flush" in str(refused.exception)
    assert not (tmp_path / "m.db").exists()
    longer = write_jsonl(tmp_path / "longer.jsonl", conversation(TOPICS, per_topic=5))  # 30 messages: one full window of 20
    kept = json.loads(nemori("ingest", longer, "--db", tmp_path / "m.db", "--no-flush", "--json").stdout)
    assert kept["episodes"] > 0 and kept["pending"] > 0 and "build" not in kept


def test_an_unknown_model_leaves_the_estimate_out_and_nothing_else(world, monkeypatch):
    from nemori_cli import Memory

    tmp_path, _ = world
    with Memory(tmp_path / "m.db") as memory:
        memory.ingest(conversation(), build=False)
    monkeypatch.setenv("NEMORI_MODEL", "no-such-model")
    with Memory(tmp_path / "m.db") as memory:
        state = memory.build_state()
        assert state.pending == 16 and state.eta_seconds is None
