"""nemori on a real PostgreSQL server (pgvector): every command, isolation, bad targets, and four writers at once.

The server is the one tests/support/postgres.py starts; the LLM and embedder
are the fakes (tests/integration/test_postgres_real.py runs the real models).
The store tests of the `db` fixture run on both engines already; these are
the commands and guarantees around them.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nemori_cli.errors import StoreError
from nemori_cli.store.engines import open_store
from nemori_cli.store.pg_migrations import MIGRATIONS as PG_MIGRATIONS
from tests.conftest import REPO
from tests.support.postgres import new_database
from tests.unit.fake_ingest import TOPICS, conversation, isolate, nemori, use_fake_answers, use_fakes, write_jsonl


@pytest.fixture()
def world(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    use_fakes(monkeypatch)
    use_fake_answers(monkeypatch)
    return tmp_path, new_database()


def _json(result) -> dict | list:
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.output)


def test_every_command_runs_on_a_postgresql_store(world):
    tmp_path, url = world
    chat = write_jsonl(tmp_path / "chat.jsonl", conversation())

    dry = _json(nemori("ingest", chat, "--db", url, "--user", "ann", "--dry-run", "--json"))
    assert dry["db_exists"] is False and dry["new"] == 16
    made = _json(nemori("ingest", chat, "--db", url, "--user", "ann", "--json"))
    assert (made["added"], made["episodes"], made["pending"]) == (16, 4, 0)
    again = _json(nemori("ingest", chat, "--db", url, "--user", "ann", "--json"))
    assert (again["added"], again["episodes"]) == (0, 0)  # re-ingesting adds nothing, as on SQLite

    episodes = _json(nemori("inspect", "episodes", "--db", url, "--user", "ann", "--json"))["episodes"]
    assert [e["title"] for e in episodes] == [f"Ann and Bob on {t}" for t in TOPICS[:4]]
    hits = _json(nemori("search", "kayak", "--db", url, "--user", "ann", "--json"))["hits"]
    assert hits and "kayak" in json.dumps(hits[0]).lower()
    asked = _json(nemori("ask", "What about the kayak?", "--db", url, "--user", "ann", "--json"))
    assert asked["answer"] == "the kayak"
    stats = _json(nemori("stats", "--db", url, "--user", "ann", "--json"))
    assert stats["counts"]["messages"] == 16 and stats["counts"]["episodes"] == 4
    assert stats["db"] == url and stats["db_bytes"] > 0 and stats["schema_version"] == max(m[0] for m in PG_MIGRATIONS)

    first = episodes[0]["id"]
    gone = _json(nemori("forget", "episode", str(first), "--db", url, "--user", "ann", "--json"))
    assert gone["episode"] == first and gone["counts"]["episodes"] == 1
    left = _json(nemori("inspect", "episodes", "--db", url, "--user", "ann", "--json"))["episodes"]
    assert [e["id"] for e in left] == [e["id"] for e in episodes[1:]]
    _json(nemori("forget", "user", "ann", "--yes", "--db", url, "--json"))
    assert _json(nemori("stats", "--db", url, "--user", "ann", "--json"))["counts"]["messages"] == 0
    store = open_store(url)
    try:
        for table in store.table_names():
            if "user_id" in store.columns(table):
                assert store.one(f"SELECT count(*) AS n FROM {table} WHERE user_id = 'ann'")["n"] == 0, table
    finally:
        store.close()


def test_users_are_isolated_on_postgresql_as_on_sqlite(world):
    tmp_path, url = world
    write_jsonl(tmp_path / "a.jsonl", conversation(topics=TOPICS[:2]))
    write_jsonl(tmp_path / "b.jsonl", conversation(topics=TOPICS[2:4]))
    _json(nemori("ingest", tmp_path / "a.jsonl", "--db", url, "--user", "ann", "--json"))
    _json(nemori("ingest", tmp_path / "b.jsonl", "--db", url, "--user", "bob", "--json"))
    ann = _json(nemori("inspect", "episodes", "--db", url, "--user", "ann", "--json"))["episodes"]
    bob = _json(nemori("inspect", "episodes", "--db", url, "--user", "bob", "--json"))["episodes"]
    assert {e["title"] for e in ann} == {"Ann and Bob on kayak", "Ann and Bob on piano"}
    assert {e["title"] for e in bob} == {"Ann and Bob on garden", "Ann and Bob on chess"}
    assert "garden" not in json.dumps(_json(nemori("search", "garden", "--db", url, "--user", "ann", "--json"))["hits"]).lower()
    bob_episode = bob[0]["id"]
    refused = nemori("forget", "episode", str(bob_episode), "--db", url, "--user", "ann", "--json")
    assert refused.exit_code != 0  # ann cannot forget bob's episode
    assert len(_json(nemori("inspect", "episodes", "--db", url, "--user", "bob", "--json"))["episodes"]) == 2


def test_an_unreachable_server_is_one_line_and_a_nonzero_exit(world):
    tmp_path, _ = world
    chat = write_jsonl(tmp_path / "chat.jsonl", conversation(per_topic=2))
    dead = "postgresql://nemori:secret@127.0.0.1:9/nemori?connect_timeout=2"
    result = nemori("ingest", chat, "--db", dead, "--json")
    assert result.exit_code != 0
    text = str(result.exception)
    assert "cannot connect to PostgreSQL at postgresql://nemori:***@127.0.0.1:9/nemori" in text
    assert "secret" not in text and "\n" not in text


def test_another_applications_database_is_refused_and_left_alone(world):
    import psycopg

    _, url = world
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE invoices (id int)")
    with pytest.raises(StoreError, match="another application"):
        open_store(url)
    with psycopg.connect(url, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
    assert tables == ["invoices"]


def test_reading_a_store_that_does_not_exist_creates_nothing(world):
    _, url = world
    result = nemori("inspect", "episodes", "--db", url, "--json")
    assert result.exit_code != 0 and "no nemori store" in str(result.exception)
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()[0] == 0


def test_a_store_being_made_is_not_there_for_a_reader_until_it_is_whole(world, monkeypatch):
    """A reader (the dry run `ingest --build auto` runs) while another process makes the store sees none, never half of one.

    The store was once made one migration per transaction: a reader between two
    found `schema_migrations` and then no `meta` table (a CI failure of the
    four-writers test). A migration that sleeps holds the maker partway.
    """
    import threading
    import time

    import psycopg

    from nemori_cli.store import pg

    _, url = world
    slow = [*PG_MIGRATIONS[:1], (PG_MIGRATIONS[0][0] + 1000, "slow", "SELECT pg_sleep(3)")]
    monkeypatch.setattr(pg, "MIGRATIONS", slow)
    made: list = []
    maker = threading.Thread(target=lambda: made.append(open_store(url)))
    maker.start()
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(100):  # until the maker is in its slow migration
            if conn.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(3)%'").fetchone()[0]:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the maker never reached its slow migration")
    with pytest.raises(StoreError, match="no nemori store"):
        open_store(url, create=False, read_only=True)
    maker.join()
    made[0].close()
    reader = open_store(url, create=False, read_only=True)  # once made, it is there
    assert reader.schema_version() == slow[-1][0]
    reader.close()


def test_four_concurrent_ingest_processes_lose_nothing_and_make_nothing_twice(tmp_path):
    """Two users, each ingested by two processes at once with the same messages: four writers on one store.

    Different users go in parallel; the same user's two processes take turns
    per episode (an advisory lock), and the second finds the messages already
    in an episode. Every message must end in exactly one live episode, and
    each topic in exactly one episode.
    """
    url = new_database()
    files = {
        "ann": write_jsonl(tmp_path / "ann.jsonl", conversation(topics=TOPICS[:4], per_topic=5)),
        "bob": write_jsonl(tmp_path / "bob.jsonl", conversation(topics=TOPICS[2:6], per_topic=5)),
    }
    jobs = [(user, files[user]) for user in ("ann", "bob", "ann", "bob")]
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
        "NEMORI_CACHE_DIR": str(tmp_path / "cache"),
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.support.pg_ingest_worker", url, user, str(path)],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for user, path in jobs
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    for p, (_out, err) in zip(procs, outputs):
        assert p.returncode == 0, err
    store = open_store(url)
    try:
        for user, topics in (("ann", TOPICS[:4]), ("bob", TOPICS[2:6])):
            messages = store.query("SELECT id, episode_id FROM messages WHERE user_id = ?", (user,))
            assert len(messages) == 20  # none lost, none stored twice
            episodes = store.query("SELECT id, title FROM episodes WHERE user_id = ? AND status = 'active'", (user,))
            assert sorted(e["title"] for e in episodes) == sorted(f"Ann and Bob on {t}" for t in topics)  # each topic once
            live = {e["id"] for e in episodes}
            assert all(m["episode_id"] in live for m in messages)  # every message in exactly one live episode
            per_episode = store.query("SELECT episode_id, count(*) AS n FROM messages WHERE user_id = ? GROUP BY episode_id", (user,))
            assert sorted(r["n"] for r in per_episode) == [5, 5, 5, 5]
    finally:
        store.close()
    made = [json.loads(out)["episodes"] for out, _ in outputs]
    assert made[0] + made[2] == 4 and made[1] + made[3] == 4  # the two processes of a user shared the work, no episode twice


def test_an_export_moves_a_memory_between_the_engines_both_ways(world):
    """SQLite -> export -> PostgreSQL -> export -> SQLite: every id kept, the same answers, the same export."""
    tmp_path, url = world
    chat = write_jsonl(tmp_path / "chat.jsonl", conversation())
    first = tmp_path / "first.db"
    _json(nemori("ingest", chat, "--db", first, "--user", "ann", "--json"))
    out1, out2 = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    assert nemori("export", "--db", first, "--user", "ann", "--out", out1).exit_code == 0
    moved = nemori("import-memory", out1, "--db", url)
    assert moved.exit_code == 0, (moved.output, moved.exception)
    assert nemori("export", "--db", url, "--user", "ann", "--out", out2).exit_code == 0
    back = tmp_path / "back.db"
    assert nemori("import-memory", out2, "--db", back).exit_code == 0

    def rows(path):
        return [r for r in map(json.loads, path.read_text().splitlines()) if "table" in r]

    one, two = rows(out1), rows(out2)

    def strip(rs):
        return sorted(
            json.dumps({k: v for k, v in r.items() if not (r["table"] == "fact_sources" and k == "rowid")}, sort_keys=True) for r in rs
        )

    assert strip(one) == strip(two)  # the same rows, ids, texts and vectors out of either engine
    for db in (first, url, back):
        shown = _json(nemori("inspect", "episodes", "--db", db, "--user", "ann", "--json"))["episodes"]
        assert [e["id"] for e in shown] == [
            e["id"] for e in _json(nemori("inspect", "episodes", "--db", first, "--user", "ann", "--json"))["episodes"]
        ]
        hits = _json(nemori("search", "garden", "--db", db, "--user", "ann", "--json"))["hits"]
        assert "garden" in json.dumps(hits[0]).lower()
    # New rows after the import get new ids, not the restored ones.
    more = write_jsonl(tmp_path / "more.jsonl", conversation(topics=TOPICS[4:5]))
    assert _json(nemori("ingest", more, "--db", url, "--user", "ann", "--json"))["episodes"] == 1
    refused = nemori("import-memory", out1, "--db", url)
    assert refused.exit_code != 0 and "already holds memory" in str(refused.exception)


def test_bench_keeps_its_memories_in_postgresql_with_db(world, monkeypatch):
    from nemori_cli import deps
    from tests.support.bench_world import SAMPLE

    tmp_path, url = world
    monkeypatch.setattr(deps, "answer_preset", deps.llm_preset)  # the bench records the answer model's preset: the default one
    data = tmp_path / "mini_locomo.json"
    data.write_text(json.dumps([SAMPLE]))
    out = tmp_path / "out"
    args = ("bench", "locomo", data, "--systems", "full-context,rag-256", "--out", out, "--db", url, "--json")
    report = _json(nemori(*args))
    assert set(report["systems"]) == {"full-context", "rag-256"}
    assert all(s["costs"]["db_bytes"] > 0 for s in report["systems"].values())
    assert report["config"]["store"] == {"engine": "postgresql", "where": url}
    assert not (out / "memories").exists()
    lines = (out / "results.jsonl").read_text().splitlines()
    assert _json(nemori(*args))["systems"].keys() == report["systems"].keys()
    assert (out / "results.jsonl").read_text().splitlines() == lines  # resumed: nothing built or answered again

    # The same folder on SQLite files is refused in one line rather than mixed.
    mixed = nemori(*args[:-3], "--json")
    assert "another store_engine" in str(mixed.exception)
    bad = nemori("bench", "locomo", data, "--out", tmp_path / "other", "--db", tmp_path / "x.db")
    assert "postgresql:// URL" in str(bad.exception) and not (tmp_path / "other").exists()
