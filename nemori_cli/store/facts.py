"""SQL for facts (semantic memory): rows, sources, and both indexes kept in step."""

from __future__ import annotations

from datetime import datetime

import numpy as np

from nemori_cli.domain import Fact
from nemori_cli.store import asof, index
from nemori_cli.store.base import children
from nemori_cli.store.clock import now_iso
from nemori_cli.store.contract import Row, Store


def add(
    db: Store,
    user: str,
    text: str,
    embedding: np.ndarray,
    source_episode_ids: list[int],
    origin: str = "new",
    *,
    episode_id: int | None = None,
) -> int:
    """Insert a fact with its sources and index it. Caller holds the transaction.

    ``episode_id`` is the episode it was distilled from (default: the newest
    source); the fact is valid from that episode's end, in conversation time.
    """
    conn = db.conn
    made_from = max(source_episode_ids) if episode_id is None else episode_id
    conn.execute(
        "INSERT INTO facts(user_id, text, created_at, origin, episode_id, valid_from, valid_from_epoch) VALUES (?, ?, ?, ?, ?,"
        " (SELECT end_ts FROM episodes WHERE id = ?), (SELECT end_epoch FROM episodes WHERE id = ?))",
        (user, text, now_iso(), origin, made_from, made_from, made_from),
    )
    fact_id = conn.last_insert_rowid()
    conn.executemany(
        "INSERT OR IGNORE INTO fact_sources(fact_id, episode_id) VALUES (?, ?)",
        [(fact_id, e) for e in source_episode_ids],
    )
    conn.execute("INSERT INTO fact_fts(rowid, text, user_id) VALUES (?, ?, ?)", (fact_id, text, user))
    db.insert_vector("fact_vec", fact_id, user, np.asarray(embedding, dtype=np.float32).tobytes())
    return fact_id


def add_sources(db: Store, fact_id: int, episode_ids: list[int]) -> None:
    db.conn.executemany("INSERT OR IGNORE INTO fact_sources(fact_id, episode_id) VALUES (?, ?)", [(fact_id, e) for e in episode_ids])


def supersede(db: Store, user: str, old_ids: list[int], new_id: int, reason: str) -> None:
    """Facts replaced by ``new_id`` leave retrieval but keep their row: the audit trail.

    They stay in the indexes (filtered out at search time), so forgetting their
    successor can bring them back without re-embedding. In conversation time
    they were valid until their successor became known (its valid_from);
    superseded_at is the ingest's clock.
    """
    db.conn.executemany(
        "UPDATE facts SET status = 'superseded', superseded_by = ?, superseded_reason = ?, superseded_at = ?,"
        " valid_until = (SELECT n.valid_from FROM facts n WHERE n.id = ?),"
        " valid_until_epoch = (SELECT n.valid_from_epoch FROM facts n WHERE n.id = ?)"
        " WHERE user_id = ? AND id = ? AND status = 'active'",
        [(new_id, reason, now_iso(), new_id, new_id, user, old) for old in old_ids],
    )


def replaced(db: Store, user: str, fact_id: int) -> list[Fact]:
    """The facts this one superseded (its history), oldest first."""
    rows = db.query(f"SELECT {_COLUMNS} FROM facts WHERE user_id = ? AND superseded_by = ? ORDER BY id", (user, fact_id))
    sources = _sources(db, [r["id"] for r in rows])
    return [_fact(r, sources.get(r["id"], ())) for r in rows]


def _sources(db: Store, ids: list[int]) -> dict[int, tuple[int, ...]]:
    return children(db, "fact_sources", "fact_id", "episode_id", ids)


def _fact(row: Row, sources: tuple[int, ...]) -> Fact:
    return Fact(
        id=row["id"],
        user=row["user_id"],
        text=row["text"],
        created_at=row["created_at"],
        status=row["status"],
        source_episode_ids=sources,
        superseded_by=row["superseded_by"],
        superseded_reason=row["superseded_reason"],
        superseded_at=row["superseded_at"],
        origin=row["origin"],
        episode_id=row["episode_id"],
        valid_from=_time(row["valid_from"]),
        valid_until=_time(row["valid_until"]),
    )


def _time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


_COLUMNS = (
    "id, user_id, text, created_at, status, superseded_by, superseded_reason, superseded_at, origin, episode_id, valid_from, valid_until"
)


def by_ids(db: Store, user: str, ids: list[int]) -> dict[int, Fact]:
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    with db.snapshot():  # the rows and their sources as of one commit
        rows = db.query(f"SELECT {_COLUMNS} FROM facts WHERE user_id = ? AND id IN ({marks})", (user, *ids))
        sources = _sources(db, [r["id"] for r in rows])
    return {r["id"]: _fact(r, sources.get(r["id"], ())) for r in rows}


def get(db: Store, user: str, fact_id: int) -> Fact | None:
    return by_ids(db, user, [fact_id]).get(fact_id)


def list_all(
    db: Store, user: str, *, include_superseded: bool = False, limit: int | None = None, as_of: datetime | None = None
) -> list[Fact]:
    """Facts by id; with ``as_of``, those valid then (store/asof.py), superseded since or not."""
    where = "user_id = ?" + ("" if include_superseded or as_of else " AND status = 'active'")
    params: tuple[str | float, ...] = (user,)
    if as_of is not None:
        where += f" AND {asof.FACT_VALID}"
        params += (asof.epoch(as_of),) * 2
    sql = f"SELECT {_COLUMNS} FROM facts WHERE {where} ORDER BY id"
    with db.snapshot():  # a fact whose episode was forgotten between the two reads would show without a source
        rows = db.query(sql + (" LIMIT ?" if limit else ""), (*params, limit) if limit else params)
        sources = _sources(db, [r["id"] for r in rows])
    return [_fact(r, sources.get(r["id"], ())) for r in rows]


def count(db: Store, user: str) -> int:
    row = db.one("SELECT count(*) AS n FROM facts WHERE user_id = ? AND status = 'active'", (user,))
    return int(row["n"]) if row else 0


def vector_search(db: Store, user: str, query: np.ndarray, k: int, *, as_of: datetime | None = None) -> list[tuple[int, float]]:
    """(fact id, cosine similarity), best first; superseded facts never come back.

    With ``as_of``: the facts valid then (store/asof.py), a superseded one
    included while its successor was not yet known.
    """
    if as_of is not None:
        return index.vector_search(db, "fact_vec", user, query, k, asof.facts(user, as_of))
    return _active(db, user, index.vector_search(db, "fact_vec", user, query, k + _superseded(db, user)))[:k]


def text_search(db: Store, user: str, query: str, k: int, *, as_of: datetime | None = None) -> list[tuple[int, float]]:
    if as_of is not None:
        return index.text_search(db, index.FACT_TEXT, user, query, k, asof.facts(user, as_of))
    return _active(db, user, index.text_search(db, index.FACT_TEXT, user, query, k + _superseded(db, user)))[:k]


def _superseded(db: Store, user: str) -> int:
    """How many more rows to ask the indexes for, so k active ones survive the filter."""
    row = db.one("SELECT count(*) AS n FROM facts WHERE user_id = ? AND status != 'active'", (user,))
    return min(int(row["n"]) if row else 0, 2000)


def _active(db: Store, user: str, hits: list[tuple[int, float]]) -> list[tuple[int, float]]:
    if not hits:
        return hits
    marks = ",".join("?" * len(hits))
    live = {
        r["id"]
        for r in db.query(
            f"SELECT id FROM facts WHERE user_id = ? AND status = 'active' AND id IN ({marks})", (user, *[h[0] for h in hits])
        )
    }
    return [h for h in hits if h[0] in live]


def evoke(db: Store, user: str, query: np.ndarray, *, k: int, threshold: float) -> list[Fact]:
    """What the store already knows about something: top k facts above a cosine threshold."""
    hits = [(i, s) for i, s in vector_search(db, user, query, k) if s > threshold]
    found = by_ids(db, user, [i for i, _ in hits])
    return [found[i] for i, _ in hits if i in found]


def active_texts(db: Store, user: str) -> list[str]:
    """The text of every active fact."""
    return [r["text"] for r in db.query("SELECT text FROM facts WHERE user_id = ? AND status = 'active'", (user,))]
