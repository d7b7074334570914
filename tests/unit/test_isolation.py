"""Users never see each other's memories: random interleavings of two or three users on one SQLite file (hypothesis).

Every user's messages carry a marker word of its own, and the fake model
repeats every marker its prompt holds (tests/unit/isolation_world.py). Each
user has its own connection to the file, as separate processes would. An
example is a memory mode and a list of operations, each by one user: add
messages, process them (the Pipeline), search, ask (the answer model a fake
too), read everything back as `inspect` and `stats` do, forget an episode,
try to forget another user's episode, fact or note, and forget a whole user.
After every operation:

- nothing read for a user (its hits and their messages, the prompts sent to
  the model while it ingested or asked, everything `inspect` lists, stats,
  event details) holds another user's marker, or points at another user's
  rows (a fact's source, a note's link, a message's episode);
- the store functions given another user's ids (`by_ids`, `get`) return
  nothing, and forgetting another user's item is refused, changing nothing;
- what every other user's view holds is exactly what it was: no operation of
  one user changes another's memory, counts or events;
- after `forget_user` and `make_physical`, the forgotten user's marker is not
  in the database file (free pages included) nor in its -wal file.

Examples come from the hypothesis profile (tests/conftest.py: 100 by default,
1,000 with HYPOTHESIS_PROFILE=campaign), shared evenly among the five memory modes; `--hypothesis-show-statistics` shows
how many did what.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import event as _event
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from nemori_cli.embed.fake import FakeEmbedder
from nemori_cli.errors import StoreError
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.llm.fake import FakeBackend
from nemori_cli.memory import modes
from nemori_cli.memory.method import resolve
from nemori_cli.pipeline.runner import Pipeline
from nemori_cli.retrieval.answer import ask
from nemori_cli.retrieval.search import PROFILES, SearchOptions, search
from nemori_cli.store import episodes as episode_sql
from nemori_cli.store import facts as fact_sql
from nemori_cli.store import forget, message_index, telemetry
from nemori_cli.store import messages as message_sql
from nemori_cli.store import notes as note_sql
from nemori_cli.store.sqlite import SqliteStore
from tests.unit.isolation_world import MARKERS, TOPICS, consistent, echo, markers_in, messages_for, prompt_text, tails, view

MODES = ("native", "amem", "nemori+amem", "summary", "naive-rag")
SEARCHES = {
    **PROFILES,
    # every kind at once, raw messages for every episode
    "everything": SearchOptions(k=10, facts=20, notes=10, messages=30, turns=2, raw_for_top=10, context="messages"),
}
WORDS = (*MARKERS, "kayak", "piano", "garden", "chess", "talked", "Ann")
KINDS = ("add", "add", "add", "process", "process", "process", "search", "ask", "read", "forget_episode", "forget_foreign", "forget_user")

operations = st.lists(
    st.tuples(
        st.sampled_from(KINDS),
        st.integers(0, 2),  # who (modulo the number of users)
        st.integers(1, 4),  # messages to add; an index for the forget operations
        st.sampled_from(TOPICS),
        st.booleans(),  # add: the same day (a continuation) or the next; process: flush
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),  # search / ask words
        st.sampled_from(sorted(SEARCHES)),
    ),
    min_size=3,
    max_size=16,
)


def event(what: str) -> None:
    """Counted in --hypothesis-show-statistics; nothing outside a hypothesis example."""
    if currently_in_test_context():
        _event(what)


@dataclass
class Person:
    name: str
    marker: str
    db: SqliteStore
    clock: datetime
    next_id: int = 0
    log: list[str] = field(default_factory=list)


class Leak(AssertionError):
    pass


class Run:
    """One example: a file, its users, the shared fake model and what each user's view was."""

    def __init__(self, folder: Path, mode: str, n_users: int):
        self.path = folder / "memory.db"
        self.mode_name = mode
        self.backend = FakeBackend(default=echo)
        self.embedder = FakeEmbedder()
        self.people = [
            Person(f"user-{i}", MARKERS[i], SqliteStore(self.path), datetime(2023, 5, 8, 9, 0) + timedelta(hours=i)) for i in range(n_users)
        ]
        self.profile = resolve(self.people[0].db, {"memory": mode})
        self.mode = modes.for_profile(self.profile)
        self.views = {p.name: view(p.db, p.name, self.mode) for p in self.people}

    def close(self) -> None:
        for p in self.people:
            p.db.close()

    # -- checks ---------------------------------------------------------------
    def foreign(self, person: Person, text: str) -> list[str]:
        return [m for m in markers_in(text) if m != person.marker]

    def expect_clean(self, person: Person, what: str, text: str) -> None:
        found = self.foreign(person, text)
        if found:
            raise Leak(f"{what} for {person.name} holds {found}: {text[:600]}")

    def check_hits(self, person: Person, hits, what: str) -> None:
        own = view(person.db, person.name, self.mode)
        ids = {
            "episode": {e.id for e in own["episodes"]},
            "fact": {f.id for f in own["facts"]},
            "note": {n.id for n in own["notes"]},
            "message": {m.id for m in own["messages"]},
            "summary": {s[0] for s in own["summaries"]},
        }
        for h in hits:
            self.expect_clean(person, what, " ".join([h.title, h.text, h.context, *(f"{m.speaker} {m.content}" for m in h.messages)]))
            assert h.id in ids[h.kind], f"{what} for {person.name}: {h.kind} {h.id} is not its own"
            assert all(m.user == person.name for m in h.messages), f"{what} for {person.name}: a foreign message beside {h.kind} {h.id}"

    def check_prompts(self, person: Person, since: int, what: str) -> None:
        for messages, _ in self.backend.history[since:]:
            self.expect_clean(person, f"a prompt sent to the model by {what}", prompt_text(messages))

    def check_views(self, actor: Person | None, *, unchanged: bool = False) -> None:
        for p in self.people:
            now = view(p.db, p.name, self.mode)
            self.expect_clean(p, "inspect / stats", repr(now))
            assert consistent(now, p.name) == [], (p.name, consistent(now, p.name))
            if unchanged or p is not actor:
                assert now == self.views[p.name], (
                    f"{p.name}'s memory changed by {actor.name if actor else '?'}: {actor.log[-1] if actor else ''}"
                )
            self.views[p.name] = now

    def check_foreign_ids(self, person: Person) -> None:
        """The store's id lookups, handed every other user's ids, find nothing."""
        db, user = person.db, person.name
        others = {
            table: [r["id"] for r in db.query(f"SELECT id FROM {table} WHERE user_id <> ?", (user,))]
            for table in ("episodes", "facts", "notes", "messages")
        }
        assert episode_sql.by_ids(db, user, others["episodes"], with_messages=True) == {}
        assert all(episode_sql.get(db, user, i) is None and episode_sql.message_count(db, user, i) == 0 for i in others["episodes"])
        assert all(episode_sql.parts(db, user, i) == [] for i in others["episodes"])
        assert message_sql.of_episodes(db, user, others["episodes"]) == {i: [] for i in others["episodes"]}
        assert fact_sql.by_ids(db, user, others["facts"]) == {}
        assert all(fact_sql.get(db, user, i) is None for i in others["facts"])
        assert note_sql.by_ids(db, user, others["notes"]) == {}
        assert all(note_sql.get(db, user, i) is None for i in others["notes"])
        assert message_sql.by_ids(db, user, others["messages"]) == {}
        own_words = set(markers_in(" ".join(m.content for m in message_sql.all_messages(db, user))))
        unmentioned = set(message_index.unmentioned(db, user, list(MARKERS)))
        if unmentioned != set(MARKERS) - own_words:  # a word only another user said is "mentioned"
            raise Leak(f"{user}'s messages say {sorted(own_words)}, but the index finds {sorted(set(MARKERS) - unmentioned)}")

    def on_disk(self, person: Person) -> list[bytes]:
        """What the database file (free pages included) and its -wal hold of the person's marker."""
        raw = b"".join(p.read_bytes() for p in (self.path, self.path.with_name(self.path.name + "-wal")) if p.exists())
        return [t for t in tails(person.marker) if t in raw]

    # -- operations -------------------------------------------------------------
    def do(self, op) -> None:
        kind, who, n, topic, flag, words, search_name = op
        person = self.people[who % len(self.people)]
        person.log.append(f"{kind} {n} {topic} {flag} {words} {search_name}")
        getattr(self, f"op_{kind}")(person, n, topic, flag, words, search_name)

    def op_add(self, person: Person, n, topic, same_day, words, search_name) -> None:
        person.clock += timedelta(minutes=30) if same_day else timedelta(days=1)
        incoming = messages_for(person.marker, topic, n, person.clock, person.next_id)
        person.clock += timedelta(minutes=n)
        person.next_id += n
        pipe = Pipeline(person.db, person.name, StructuredLLM(self.backend), self.embedder, window=4, profile=self.profile)
        assert pipe.add_messages(incoming) == n  # the same source ids as another user's: still new for this one
        self.check_views(person)

    def op_process(self, person: Person, n, topic, flush, words, search_name) -> None:
        since = len(self.backend.history)
        pipe = Pipeline(person.db, person.name, StructuredLLM(self.backend), self.embedder, window=4, profile=resolve(person.db, {}))
        report = pipe.process(flush=flush)
        if report.episodes or report.notes:
            event("process made memory")
        if report.merged:
            event("an episode was merged")
        self.check_prompts(person, since, "an ingest")
        self.check_views(person)

    def op_search(self, person: Person, n, topic, flag, words, search_name) -> None:
        hits, _ = search(person.db, person.name, self.embedder, " ".join(words), SEARCHES[search_name])
        if hits and self.foreign(person, " ".join(words)):
            event("a search for another user's word found something of one's own")
        self.check_hits(person, hits, f"search {words!r}")
        self.check_views(person, unchanged=True)

    def op_ask(self, person: Person, n, topic, flag, words, search_name) -> None:
        # Only words of one's own: the question is stored with the asker's call log (stage events),
        # where another user's word would be the asker's own data. Searches ask for other users' words.
        own = [person.marker if w in MARKERS else w for w in words]
        question = f"What did Ann say about {' '.join(own)}?"
        since = len(self.backend.history)
        llm = StructuredLLM(self.backend)
        answer, cited = ask(person.db, person.name, self.embedder, llm, question, SEARCHES[search_name])
        if len(self.backend.history) > since:
            event("ask called the model")
        self.check_hits(person, answer.hits, f"ask {question!r}")
        self.check_prompts(person, since, f"ask {question!r}")
        own = {e.id for e in view(person.db, person.name, self.mode)["episodes"]}
        assert set(cited) <= own
        with person.db.transaction():  # as `nemori ask` does: the call log under the asking user
            telemetry.write(person.db, person.name, *llm.log.drain())
        self.check_views(person)

    def op_read(self, person: Person, n, topic, flag, words, search_name) -> None:
        self.check_foreign_ids(person)
        self.check_views(person, unchanged=True)

    def op_forget_episode(self, person: Person, n, topic, flag, words, search_name) -> None:
        live = episode_sql.list_all(person.db, person.name)
        if not live:
            return
        target = live[n % len(live)].id
        with person.db.transaction():
            forget.forget_episode(person.db, person.name, target, reembed=lambda t: self.embedder.embed_documents([t])[0])
        assert forget.make_physical(person.db)
        event("forgot an episode")
        self.check_views(person)

    def op_forget_foreign(self, person: Person, n, topic, flag, words, search_name) -> None:
        """Forgetting another user's episode, fact or note by its id is refused and changes nothing."""
        rows = [
            (kind, r["id"])
            for kind, table in (("episode", "episodes"), ("fact", "facts"), ("note", "notes"))
            for r in person.db.query(f"SELECT id FROM {table} WHERE user_id <> ? ORDER BY id", (person.name,))
        ]
        if not rows:
            return
        kind, target = rows[n % len(rows)]
        with pytest.raises(StoreError, match=f"no {kind} {target} for user {person.name}"), person.db.transaction():
            getattr(forget, f"forget_{kind}")(person.db, person.name, target)
        event("tried to forget another user's item")
        self.check_views(person, unchanged=True)

    def op_forget_user(self, person: Person, n=0, topic="", flag=False, words=(), search_name="") -> None:
        if message_sql.all_messages(person.db, person.name):
            assert self.on_disk(person), "the marker is not in the file before forget: the check after it would prove nothing"
        try:
            with person.db.transaction():
                forget.forget_user(person.db, person.name)
        except StoreError as e:
            assert "nothing stored" in e.message
            return
        assert forget.make_physical(person.db, vacuum=True)  # every other user's connection is open, none reading
        event("forgot a whole user")
        left = self.on_disk(person)
        assert not left, f"{person.name} was forgotten, but the file still holds {left}"
        self.check_views(person)
        assert all(not v for k, v in self.views[person.name]["counts"].items())


def run_example(mode: str, n_users: int, ops, last: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        run = Run(Path(folder), mode, n_users)
        try:
            for op in ops:
                run.do(op)
            for person in run.people:  # every example ends with each user's memory built, read, searched, asked
                run.op_add(person, 2, TOPICS[0], True, (), "")
                run.op_process(person, 0, "", True, (), "")
                run.op_read(person, 0, "", False, (), "")
                run.op_search(person, 0, "", False, list(MARKERS), "everything")
                run.op_ask(person, 0, "", False, [person.marker, "kayak"], "everything")
                run.op_forget_foreign(person, last, "", False, (), "")
            run.op_forget_episode(run.people[0], last, "", False, (), "")
            run.op_forget_user(run.people[last % n_users])
        finally:
            run.close()


# The profile's examples shared among the modes: each mode gets its fifth (20 of 100, 200 of 1,000).
@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=max(1, settings.default.max_examples // len(MODES)))
@given(n_users=st.integers(2, 3), ops=operations, last=st.integers(0, 2))
def test_no_user_ever_reads_another_users_memory(mode, n_users, ops, last):
    event(f"{n_users} users")
    run_example(mode, n_users, ops, last)


# -- the property can fail -----------------------------------------------------------
# The same checks with the user filter taken out of the store: they must catch
# it, or they prove nothing. A vector search alone without its filter is not
# enough to leak: every caller looks the ids up again by user (by_ids), so
# both are broken together.

FILL = [("add", 0, 3, "kayak trip", False, ["x"], "budget"), ("add", 1, 3, "kayak trip", False, ["x"], "budget")]
PROCESS = [("process", 0, 1, "kayak trip", True, ["x"], "budget"), ("process", 1, 1, "kayak trip", True, ["x"], "budget")]
SEARCH = [("search", 0, 1, "", False, ["kayak"], "everything")]


def _unfiltered_vector_search(db, table, user, query, k, within=None):
    import numpy as np

    rows = db.query(
        f"SELECT rowid, distance FROM {table} WHERE embedding MATCH ? AND k = ? ORDER BY distance",
        (np.asarray(query, dtype=np.float32).tobytes(), k),
    )
    return [(int(r["rowid"]), 1.0 - float(r["distance"])) for r in rows]


def _unfiltered_episodes(db, user, ids, *, with_messages=False):
    rows = db.query(f"SELECT {episode_sql._COLUMNS} FROM episodes WHERE id IN ({','.join('?' * len(ids))})", tuple(ids)) if ids else []
    return {r["id"]: episode_sql._episode(r) for r in rows}


def _unfiltered_notes(db, user, ids, *, as_of=None):
    rows = db.query(f"SELECT {note_sql._COLUMNS} FROM notes WHERE id IN ({','.join('?' * len(ids))})", tuple(ids)) if ids else []
    return {r["id"]: note_sql._note(r, ()) for r in rows}


def _unfiltered_pending(db, user, limit=None):
    rows = db.query(
        f"SELECT {message_sql.COLUMNS} FROM messages WHERE episode_id IS NULL ORDER BY ts_epoch, id"
        + (f" LIMIT {int(limit)}" if limit else "")
    )
    return [message_sql.row_to_message(r) for r in rows]


def _unfiltered_unmentioned(db, user, words, *, as_of=None):
    return [w for w in words if db.one("SELECT 1 AS x FROM message_fts WHERE message_fts MATCH ? LIMIT 1", (f'"{w}"',)) is None]


VECTORS = ("nemori_cli.store.index.vector_search", _unfiltered_vector_search)


@pytest.mark.parametrize(
    "patches, mode, ops",
    [
        ([VECTORS, ("nemori_cli.store.episodes.by_ids", _unfiltered_episodes)], "native", FILL + PROCESS + SEARCH),
        ([VECTORS, ("nemori_cli.store.notes.by_ids", _unfiltered_notes)], "amem", FILL + PROCESS),
        ([("nemori_cli.store.messages.pending", _unfiltered_pending)], "native", FILL + PROCESS[:1]),
        (
            [("nemori_cli.store.message_index.unmentioned", _unfiltered_unmentioned)],
            "native",
            FILL + [("read", 0, 1, "", False, ["x"], "budget")],
        ),
    ],
    ids=["search", "amem-neighbours", "pending-buffer", "unmentioned"],
)
def test_a_store_without_its_user_filter_is_caught(monkeypatch, patches, mode, ops):
    for target, replacement in patches:
        monkeypatch.setattr(target, replacement)
    with pytest.raises(Leak):
        run_example(mode, 2, ops, 0)
