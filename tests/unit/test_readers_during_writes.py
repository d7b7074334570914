"""Readers while a writer ingests: every read is whole, never an error, and a forget from another connection waits its turn.

A writer thread ingests with a fake model that sleeps on every call, so each
episode's (or note's) transaction lasts. Meanwhile reader threads, each on a
connection of its own as another process would be, loop over what `search`,
`ask`, `stats` and `inspect` read, and a third connection forgets another
user's episode (or A-MEM note) in the middle of the ingest. Checked:

- no reader ever raises (no "database is locked", nothing half-made);
- no reader sees an episode without its messages, a fact without a source
  episode, a message pointing at an episode that is not there, a note without
  its message or a link to a missing note: both in single plain queries and
  in what the store functions give back (several queries each);
- what stats counts (rows ever made: messages, episodes merged or not, facts
  superseded or not, notes, links) only grows from one read to the next;
- the forget waits for the writer's unit of work and succeeds.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta

import pytest

from nemori_cli.embed.fake import FakeEmbedder
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.llm.fake import FakeBackend
from nemori_cli.memory import modes
from nemori_cli.memory.method import resolve
from nemori_cli.pipeline.runner import Pipeline
from nemori_cli.retrieval.search import PROFILES, SearchOptions, search
from nemori_cli.store import episodes as episode_sql
from nemori_cli.store import facts as fact_sql
from nemori_cli.store import forget, stats
from nemori_cli.store import messages as message_sql
from nemori_cli.store import notes as note_sql
from nemori_cli.store.sqlite import SqliteStore
from tests.unit.isolation_world import HALF_MADE as BROKEN
from tests.unit.isolation_world import MARKERS, TOPICS, echo, messages_for

WRITER, OTHER = "alice", "bob"
SLEEP_S = 0.02  # per model call
HOLD_S = 0.3  # the first unit of work of the ingest that a forget meets lasts this much longer
EVERYTHING = SearchOptions(k=10, facts=20, notes=10, messages=30, turns=2, raw_for_top=10, context="messages")

GROWING = ("messages", "episodes+merged", "facts+superseded", "notes", "note_links")


def slow_echo(messages, schema):
    time.sleep(SLEEP_S)
    return echo(messages, schema)


def seed(path, mode: str) -> tuple[str, int]:
    """bob's memory and the first of alice's; returns what of bob's to forget later: ("episode", id), or ("note", id) without episodes."""
    db = SqliteStore(path)
    profile = resolve(db, {"memory": mode})
    for user, marker in ((OTHER, MARKERS[1]), (WRITER, MARKERS[0])):
        pipe = Pipeline(db, user, StructuredLLM(FakeBackend(default=echo)), FakeEmbedder(), window=4, profile=profile)
        pipe.add_messages(messages_for(marker, TOPICS[1], 3, datetime(2023, 5, 1, 9), 0))
        pipe.process(flush=True)
    episode = db.one("SELECT max(id) AS id FROM episodes WHERE user_id = ? AND status = 'active'", (OTHER,))["id"]
    note = db.one("SELECT max(id) AS id FROM notes WHERE user_id = ?", (OTHER,))["id"]
    db.close()
    return ("episode", episode) if episode is not None else ("note", note)


def growing(counts: dict) -> dict:
    return {
        "messages": counts["messages"],
        "episodes+merged": counts["episodes"] + counts["merged_episodes"],
        "facts+superseded": counts["facts"] + counts["superseded_facts"],
        "notes": counts["notes"],
        "note_links": counts["note_links"],
    }


def read_once(db: SqliteStore, mode, embedder) -> tuple[list[str], dict]:
    """One round of what the commands read; returns what was found half-made, and the counts."""
    problems = [what for what, sql in BROKEN.items() if db.one(sql)["n"]]
    for e in episode_sql.list_all(db, WRITER, with_messages=True):
        if not e.messages:
            problems.append(f"inspect episodes: E{e.id} without messages")
    for e in episode_sql.by_ids(
        db, WRITER, [e.id for e in episode_sql.list_all(db, WRITER, include_superseded=True)], with_messages=True
    ).values():
        if not e.messages and e.status == "active":  # a merged part's messages belong to what it was merged into
            problems.append(f"inspect episode: E{e.id} without messages")
    for f in fact_sql.list_all(db, WRITER, include_superseded=True):
        if not f.source_episode_ids:
            problems.append(f"inspect facts: F{f.id} without a source")
    for n in note_sql.list_all(db, WRITER):
        if n.message_id is None and n.episode_id is None:
            problems.append(f"inspect notes: N{n.id} made from nothing")
    for options in (PROFILES["budget"], EVERYTHING):
        hits, _ = search(db, WRITER, embedder, f"{TOPICS[0]} {MARKERS[0]}", options)
        for h in hits:
            if h.kind == "episode" and options.context == "messages" and not h.messages:
                problems.append(f"search: E{h.id} without messages")
    counts = growing(stats.counts(db, WRITER, pending=lambda d, u: mode.backlog(d, u).messages))
    message_sql.pending(db, WRITER)
    return problems, counts


@pytest.mark.parametrize("mode", ["native", "amem", "nemori+amem"])
def test_readers_during_an_ingest_see_whole_units_and_a_forget_waits(tmp_path, mode):
    path = tmp_path / "memory.db"
    kind, target = seed(path, mode)
    writer_db = SqliteStore(path)
    profile = resolve(writer_db, {})
    processing = threading.Event()  # add_messages is done: the units of work of process() follow
    inside = threading.Event()  # the writer is inside one of them (its transaction open)

    def hold() -> None:
        """Called by the writer's model and embedder: the first time inside a unit of work, it lasts a while."""
        if processing.is_set() and writer_db.conn.in_transaction and not inside.is_set():
            inside.set()
            time.sleep(HOLD_S)

    def model(messages, schema):
        hold()
        return slow_echo(messages, schema)

    class HoldingEmbedder(FakeEmbedder):  # an A-MEM note makes no model call inside its transaction, but embeds there
        def embed_documents(self, texts):
            hold()
            return super().embed_documents(texts)

    pipe = Pipeline(writer_db, WRITER, StructuredLLM(FakeBackend(default=model)), HoldingEmbedder(), window=4, profile=profile)
    incoming = []
    for day in range(6):  # a continuation every other batch: merges move messages between episodes
        incoming += messages_for(
            MARKERS[0], TOPICS[day % 2], 3, datetime(2023, 5, 2, 9) + timedelta(days=day // 2, hours=day % 2), 100 + 3 * day
        )
    done = threading.Event()
    errors: list[str] = []
    report = {}

    def write():
        try:
            pipe.add_messages(incoming)
            processing.set()
            report["ingest"] = pipe.process(flush=True)
        except BaseException as e:  # noqa: BLE001 - every failure is the test's to report
            errors.append(f"writer: {type(e).__name__}: {e}")
        finally:
            done.set()

    rounds: list[int] = []
    seen: list[str] = []

    def read(index: int):
        db = SqliteStore(path, create=False)
        embedder = FakeEmbedder()
        last = None
        n = 0
        try:
            while not done.is_set() or n < 2:
                problems, counts = read_once(db, modes.for_profile(profile), embedder)
                seen.extend(f"reader {index}: {p}" for p in problems)
                if last is not None:
                    shrunk = [k for k in GROWING if counts[k] < last[k]]
                    seen.extend(f"reader {index}: {k} went from {last[k]} to {counts[k]}" for k in shrunk)
                last = counts
                n += 1
        except BaseException as e:  # noqa: BLE001
            errors.append(f"reader {index}: {type(e).__name__}: {e}")
        finally:
            rounds.append(n)
            db.close()

    forgot = {}

    def forget_bobs():
        db = SqliteStore(path, create=False)
        try:
            assert inside.wait(30), "the writer never held a unit of work open"
            started = time.perf_counter()
            with db.transaction():
                forgot["counts"] = getattr(forget, f"forget_{kind}")(db, OTHER, target, reembed=lambda t: FakeEmbedder().embed_query(t))
            forgot["waited_s"] = time.perf_counter() - started
            forgot["scrubbed"] = forget.make_physical(db)
        except BaseException as e:  # noqa: BLE001
            errors.append(f"forget: {type(e).__name__}: {e}")
        finally:
            db.close()

    threads = [
        threading.Thread(target=write),
        *(threading.Thread(target=read, args=(i,)) for i in range(2)),
        threading.Thread(target=forget_bobs),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    writer_db.close()
    assert errors == []
    assert sorted(set(seen)) == []
    assert all(n >= 2 for n in rounds), rounds
    ingest = report["ingest"]
    assert ingest.pending == 0 and (ingest.episodes or ingest.merged or ingest.notes)
    assert forgot["counts"][f"{kind}s"] == 1
    assert forgot["waited_s"] > HOLD_S / 2  # it waited for the writer's unit of work to commit
    db = SqliteStore(path, create=False)
    assert db.one("PRAGMA integrity_check")["integrity_check"] == "ok"
    assert [what for what, sql in BROKEN.items() if db.one(sql)["n"]] == []
    assert (episode_sql.get(db, OTHER, target) if kind == "episode" else note_sql.get(db, OTHER, target)) is None
    db.close()


# -- the same races, made to happen: another connection commits between two statements of one read ----------


def _merge_away(writer: SqliteStore, episode_id: int, embedder) -> None:
    """What an ingest's merge commits: a new episode that takes over this one's messages."""
    old = episode_sql.get(writer, WRITER, episode_id)
    with writer.transaction():
        draft = episode_sql.EpisodeDraft(old.title, old.narrative, old.start, old.end, "merged", ())
        merged = episode_sql.add(writer, WRITER, draft, embedder.embed_query(old.narrative))
        episode_sql.supersede(writer, WRITER, [episode_id], merged, "continued")


def _forget_away(writer: SqliteStore, episode_id: int, embedder) -> None:
    with writer.transaction():
        forget.forget_episode(writer, WRITER, episode_id)


def _search(db, embedder):
    return [
        (h.kind, h.id, len(h.messages))
        for h in search(db, WRITER, embedder, f"{TOPICS[0]} {MARKERS[0]}", EVERYTHING)[0]
        if h.kind == "episode"
    ]


def _inspect_episodes(db, embedder):
    return [(e.id, len(e.messages)) for e in episode_sql.list_all(db, WRITER, with_messages=True)]


def _inspect_facts(db, embedder):
    return [(f.id, f.source_episode_ids) for f in fact_sql.list_all(db, WRITER)]


@pytest.mark.parametrize(
    "read, between, commit",
    [
        (_search, "nemori_cli.store.episodes.by_ids", _merge_away),  # after the index lookups, before the rows
        (_inspect_episodes, "nemori_cli.store.messages.of_episodes", _merge_away),  # after the episode rows, before their messages
        (_inspect_facts, "nemori_cli.store.facts._sources", _forget_away),  # after the fact rows, before their sources
    ],
    ids=["search", "inspect-episodes", "inspect-facts"],
)
def test_a_read_of_several_statements_sees_one_committed_state(tmp_path, monkeypatch, read, between, commit):
    path = tmp_path / "memory.db"
    db = SqliteStore(path)
    embedder = FakeEmbedder()
    pipe = Pipeline(db, WRITER, StructuredLLM(FakeBackend(default=echo)), embedder, window=4, profile=resolve(db, {"memory": "native"}))
    pipe.add_messages(messages_for(MARKERS[0], TOPICS[0], 3, datetime(2023, 5, 1, 9), 0))
    pipe.process(flush=True)
    (episode,) = episode_sql.list_all(db, WRITER)
    assert fact_sql.list_all(db, WRITER), "the fake model gives the episode a fact"
    before = read(db, embedder)
    writer = SqliteStore(path)
    module, name = between.rsplit(".", 1)
    real = getattr(__import__(module, fromlist=[name]), name)
    fired = []

    def commit_first(*args, **kwargs):
        if not fired:
            fired.append(True)
            commit(writer, episode.id, embedder)  # another process's unit of work, committed midway through the read
        return real(*args, **kwargs)

    monkeypatch.setattr(between, commit_first)
    during = read(db, embedder)
    monkeypatch.undo()
    assert fired
    assert during == before  # the state the read began in, whole: not its rows with the other state's links
    assert read(db, embedder) != before  # the next read sees the commit
    writer.close()
    db.close()
