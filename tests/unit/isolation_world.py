"""A fake model and readers for the isolation tests: every user's words carry a marker, and the model echoes markers.

Each user's messages carry one made-up word (its marker). The fake model
answers every stage by schema and repeats every marker its prompt contains,
so a prompt that mixed two users' memories would carry the other user's
marker into the narratives, facts, notes and summaries written from it, and
a later read would show it. The readers here collect everything the store
functions give back for one user, as `inspect` and `stats` read it, and
HALF_MADE lists, as plain queries, what a unit of work cut in two would
leave behind (test_readers_during_writes.py, test_full_disk.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from nemori_cli.domain import IncomingMessage
from nemori_cli.store import episodes as episode_sql
from nemori_cli.store import facts as fact_sql
from nemori_cli.store import messages as message_sql
from nemori_cli.store import notes as note_sql
from nemori_cli.store import stats, summaries, telemetry
from nemori_cli.store.sqlite import SqliteStore
from tests.unit.fakeworld import is_self_check

# Made-up words that FTS5's porter stemmer keeps as they are, with first two
# letters no English word and no other marker starts with: FTS5 stores a term
# after the prefix it shares with the term before it, so marker[1:] is what a
# page holds even then.
MARKERS = ("qjvorlk", "zxmirdt", "vkdusp")
TOPICS = ("kayak trip", "piano lesson", "garden plan", "chess club")


# Single statements: each reads one snapshot, so what they find half-made was committed half-made.
HALF_MADE = {
    "active episode without messages": "SELECT count(*) AS n FROM episodes e WHERE e.status = 'active'"
    " AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.episode_id = e.id)",
    "episode without its index rows": "SELECT count(*) AS n FROM episodes e WHERE e.status = 'active'"
    " AND (e.id NOT IN (SELECT rowid FROM episode_fts) OR e.id NOT IN (SELECT rowid FROM episode_vec))",
    "fact without a source episode": "SELECT count(*) AS n FROM facts f WHERE NOT EXISTS"
    " (SELECT 1 FROM fact_sources s JOIN episodes e ON e.id = s.episode_id WHERE s.fact_id = f.id)",
    "message of a missing episode": "SELECT count(*) AS n FROM messages m WHERE m.episode_id IS NOT NULL"
    " AND NOT EXISTS (SELECT 1 FROM episodes e WHERE e.id = m.episode_id)",
    "note without its message": "SELECT count(*) AS n FROM notes n WHERE n.message_id IS NOT NULL"
    " AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = n.message_id)",
    "link to a missing note": "SELECT count(*) AS n FROM note_links l WHERE NOT EXISTS (SELECT 1 FROM notes n WHERE n.id = l.linked_id)",
    "message without its index rows": "SELECT count(*) AS n FROM messages m"
    " WHERE m.id NOT IN (SELECT rowid FROM message_fts) OR m.id NOT IN (SELECT rowid FROM message_vec)",
}


def half_made(db: SqliteStore) -> list[str]:
    """What of HALF_MADE the file holds now (an empty list when every unit of work in it is whole)."""
    return [what for what, sql in HALF_MADE.items() if db.one(sql)["n"]]


def tails(marker: str) -> tuple[bytes, ...]:
    """What the file may hold of a marker: the word, or the word without its first letter (FTS5 prefix compression)."""
    return (marker.encode(), marker[1:].encode())


def markers_in(text: str) -> list[str]:
    return [m for m in MARKERS if m in text]


def messages_for(marker: str, topic: str, n: int, start: datetime, first_id: int) -> list[IncomingMessage]:
    """n messages a minute apart, every one with the user's marker; ids are a per-user counter (the same ids for every user)."""
    return [
        IncomingMessage(
            speaker="Ann" if i % 2 == 0 else "Bob",
            content=f"we talked about the {topic} and {marker} again",
            timestamp=start + timedelta(minutes=i),
            source_id=f"m{first_id + i}",
        )
        for i in range(n)
    ]


def prompt_text(messages) -> str:
    return "\n".join(m["content"] for m in messages)


def _ids(messages) -> list[int]:
    """The note ids offered in a link prompt."""
    user = messages[-1]["content"].split("Nearby memories:\n", 1)[1]
    return [int(line[1:].split("]", 1)[0]) for line in user.splitlines() if line.startswith("[")]


def echo(messages, schema) -> dict:
    """FakeBackend.default: a valid answer for every stage, naming every marker the prompt holds."""
    title = schema.get("title")
    text = prompt_text(messages)
    found = markers_in(text)
    said = " and ".join(found) or "small talk"
    if title == "Partition":
        return {"boundaries": []}
    if title in ("Narrative", "MergedEpisode"):
        return {"title": f"Ann and Bob on {said}", "narrative": f"On 8 May 2023 Ann and Bob talked about {said}."}
    if title == "Continuation":
        if is_self_check(messages):
            return {"same_event": "Lisbon" in messages[-1]["content"].split("NEW episode:")[1]}
        return {"same_event": True}  # merge whenever a candidate is offered: a foreign one would show
    if title == "Outdated":
        if "Sam works as a nurse" in text:  # the consolidation self-check's fixed pairs
            return {"outdated": "pilot" in text}
        return {"outdated": True}
    if title == "Prediction":
        return {"prediction": f"Ann and Bob talked about {said}."}
    if title == "Distilled":
        return {"facts": [f"Ann talked about {m} with Bob." for m in found]}
    if title == "Summary":
        return {"summary": f"Ann and Bob talked about {said} over time."}
    if title == "NoteAttributes":
        return {"keywords": found[:5], "context": f"Ann talks with Bob about {said}.", "tags": ["talk"]}
    if title == "LinkDecision":
        ids = _ids(messages)
        return {"links": ids, "updates": [{"id": ids[0], "context": f"Ann later also spoke of {said} here.", "tags": ["talk"]}]}
    if title == "Answer":
        return {"answer": f"About {said}."}
    raise AssertionError(f"unscripted {title}")


def view(db: SqliteStore, user: str, mode) -> dict:
    """Everything the store gives back for one user: inspect's lists (merged and superseded rows too), stats, events."""
    episodes = episode_sql.list_all(db, user, with_messages=True, include_superseded=True)
    return {
        "episodes": episodes,
        "parts": {e.id: episode_sql.parts(db, user, e.id) for e in episodes},
        "facts": fact_sql.list_all(db, user, include_superseded=True),
        "notes": note_sql.list_all(db, user),
        "history": {n.id: (note_sql.history(db, n.id), note_sql.caused_by(db, n.id)) for n in note_sql.list_all(db, user)},
        "messages": message_sql.all_messages(db, user),
        "pending": message_sql.pending(db, user),
        "summaries": [(s["id"], s["text"], s["episode_id"]) for s in summaries.history(db, user)],
        "events": [(e["stage"], e["kind"], e["detail"]) for e in telemetry.recent_events(db, user, limit=10_000)],
        "stages": telemetry.stage_stats(db, user),
        "counts": stats.counts(db, user, pending=lambda d, u: mode.backlog(d, u).messages),
    }


def consistent(v: dict, user: str) -> list[str]:
    """What in one user's view points outside that user's memory (an empty list when nothing does)."""
    problems = []
    episode_ids = {e.id for e in v["episodes"]}
    note_ids = {n.id for n in v["notes"]}
    message_ids = {m.id for m in v["messages"]}
    problems += [f"episode E{e.id} of {e.user}" for e in v["episodes"] if e.user != user]
    problems += [f"message {m.id} of {m.user}" for m in v["messages"] if m.user != user]
    problems += [
        f"message {m.id} in foreign episode E{m.episode_id}"
        for m in v["messages"]
        if m.episode_id is not None and m.episode_id not in episode_ids
    ]
    problems += [f"fact F{f.id} sourced by foreign E{s}" for f in v["facts"] for s in f.source_episode_ids if s not in episode_ids]
    problems += [f"note N{n.id} linked to foreign N{i}" for n in v["notes"] for i in n.links if i not in note_ids]
    problems += [
        f"note N{n.id} of foreign message {n.message_id}"
        for n in v["notes"]
        if n.message_id is not None and n.message_id not in message_ids
    ]
    problems += [
        f"note N{n.id} of foreign episode E{n.episode_id}"
        for n in v["notes"]
        if n.episode_id is not None and n.episode_id not in episode_ids
    ]
    problems += [
        f"note N{note_id} changed by foreign N{c.made_by}"
        for note_id, (changes, caused) in v["history"].items()
        for c in (*changes, *caused)
        if c.made_by is not None and (c.made_by not in note_ids or c.note_id not in note_ids)
    ]
    problems += [f"summary {s[0]} of foreign E{s[2]}" for s in v["summaries"] if s[2] is not None and s[2] not in episode_ids]
    return problems
