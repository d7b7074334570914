"""Rows written straight into a store for the forget and inspect tests: episodes, facts, summaries, a filled user.

Each writes through the store's own SQL modules where one exists; the caller holds the transaction.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np

from nemori_cli.domain import CallRecord
from nemori_cli.store import episodes as episode_sql
from nemori_cli.store import facts as fact_sql
from nemori_cli.store import messages as message_sql
from nemori_cli.store import telemetry
from nemori_cli.store.clock import now_iso
from tests.conftest import make_messages

_start = iter(datetime(2023, 5, 8) + timedelta(days=i) for i in range(10**4))


def odd_vector(seed: int, dims: int = 64) -> np.ndarray:
    """A unit vector whose float32 bytes occur nowhere else in the file."""
    v = np.random.default_rng(seed).uniform(0.1, 1.0, dims).astype(np.float32)
    return (v / np.linalg.norm(v)).astype(np.float32)


def add_episode(db, embedder, user, title, narrative, topic, n=2, vector=None) -> int:
    """An episode owning n fresh messages; caller holds the transaction."""
    message_sql.insert_messages(db, user, make_messages(n, start=next(_start), topic=topic))
    ids = tuple(m.id for m in message_sql.pending(db, user))[-n:]
    draft = episode_sql.EpisodeDraft(title, narrative, datetime(2023, 1, 1), datetime(2023, 1, 1), "model", ids)
    vec = embedder.embed_query(narrative) if vector is None else vector
    return episode_sql.add(db, user, draft, vec)


def add_fact(db, embedder, user, text, sources, vector=None) -> int:
    return fact_sql.add(db, user, text, embedder.embed_query(text) if vector is None else vector, sources)


def supersede(db, table, old, new) -> None:
    db.conn.execute(
        f"UPDATE {table} SET status = 'superseded', superseded_by = ?, superseded_reason = 'replaced', superseded_at = ? WHERE id = ?",
        (new, now_iso(), old),
    )


def add_summary(db, user, text, episode_id) -> int:
    db.conn.execute("INSERT INTO summaries(user_id, text, episode_id, created_at) VALUES (?, ?, ?, ?)", (user, text, episode_id, now_iso()))
    return db.conn.last_insert_rowid()


def fill_user(db, embedder, user, word, vector_seed=None):
    """Messages, two episodes, a pending message, facts (one superseded), telemetry, summaries."""
    vec = (lambda k: odd_vector(vector_seed + k)) if vector_seed is not None else (lambda k: None)
    with db.transaction():
        e1 = add_episode(db, embedder, user, f"{word} picnic", f"{user} planned a {word} picnic by the lake", word, vector=vec(0))
        e2 = add_episode(db, embedder, user, f"{word} concert", f"{user} went to a {word} concert", f"{word}b", vector=vec(1))
        message_sql.insert_messages(db, user, make_messages(1, start=next(_start), topic=f"{word}pending"))
        old = add_fact(db, embedder, user, f"{user} likes {word} tea", [e1], vector=vec(2))
        new = add_fact(db, embedder, user, f"{user} loves {word} coffee now", [e1, e2], vector=vec(3))
        supersede(db, "facts", old, new)
        telemetry.write(
            db,
            user,
            [CallRecord("episode", "fake", 10, 5, 1.0, 1, "ok")],
            [telemetry.EventRecord("episode", "repaired", f"{word} json repaired")],
        )
        add_summary(db, user, f"{user} enjoys {word} picnics", e1)
        add_summary(db, user, f"{user} enjoys {word} picnics and concerts", e2)
