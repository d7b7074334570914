"""SQL for the LLM call log and pipeline events, and the stats built from them."""

from __future__ import annotations

from typing import TypedDict

from nemori_cli import stages
from nemori_cli.domain import CallRecord, EventRecord
from nemori_cli.store.clock import now_iso
from nemori_cli.store.contract import Row, Store


def write(db: Store, user: str, calls: list[CallRecord], events: list[EventRecord]) -> None:
    stamp = now_iso()
    db.conn.executemany(
        "INSERT INTO llm_calls(user_id, stage, model, prompt_tokens, completion_tokens, ms, attempts, outcome, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(user, c.stage, c.model, c.prompt_tokens, c.completion_tokens, c.ms, c.attempts, c.outcome, stamp) for c in calls],
    )
    db.conn.executemany(
        "INSERT INTO stage_events(user_id, stage, kind, detail, created_at) VALUES (?, ?, ?, ?, ?)",
        [(user, e.stage, e.kind, e.detail, stamp) for e in events],
    )


def stage_stats(db: Store, user: str) -> list[Row]:
    """Per stage: calls, attempts, tokens, seconds, failed calls, repairs, fallbacks."""
    with db.snapshot():  # the calls and the events of the same units of work
        return _stage_stats(db, user)


def _stage_stats(db: Store, user: str) -> list[Row]:
    calls = db.query(
        "SELECT stage, count(*) AS calls, sum(attempts) AS attempts, sum(prompt_tokens) AS prompt_tokens,"
        " sum(completion_tokens) AS completion_tokens, round(sum(ms) / 1000.0, 2) AS seconds,"
        " sum(outcome = 'failed') AS failed"
        " FROM llm_calls WHERE user_id = ? GROUP BY stage",
        (user,),
    )
    events = db.query(
        "SELECT stage, sum(kind = 'repaired') AS repaired, sum(kind = 'fallback') AS fallbacks, sum(kind = 'decision') AS decisions"
        " FROM stage_events WHERE user_id = ? GROUP BY stage",
        (user,),
    )
    by_stage: dict[str, Row] = {}
    for row in calls:
        by_stage[row["stage"]] = {**row, "repaired": 0, "fallbacks": 0, "decisions": 0}
    empty = {"calls": 0, "attempts": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0, "failed": 0}
    for row in events:
        entry = by_stage.setdefault(row["stage"], {"stage": row["stage"], **empty})
        entry["repaired"], entry["fallbacks"] = int(row["repaired"] or 0), int(row["fallbacks"] or 0)
        entry["decisions"] = int(row["decisions"] or 0)
    return sorted(by_stage.values(), key=lambda r: stages.rank(r["stage"]))


def recent_events(db: Store, user: str, limit: int = 20) -> list[Row]:
    return db.query(
        "SELECT stage, kind, detail, created_at FROM stage_events WHERE user_id = ? ORDER BY id DESC LIMIT ?",
        (user, limit),
    )


class Usage(TypedDict):
    """What ingest_usage sums: calls, prompt and completion tokens, and milliseconds."""

    calls: int
    prompt_tokens: int
    completion_tokens: int
    ms: float


def ingest_usage(db: Store, user: str, stage_names: tuple[str, ...], model_id: str | None = None) -> Usage:
    """Calls, prompt and completion tokens and ms of this user's calls in these stages; of one model when given.

    Sums are 0 when nothing matched.
    """
    where = f"user_id = ? AND stage IN ({','.join('?' * len(stage_names))})"
    params: tuple[str, ...] = (user, *stage_names)
    if model_id is not None:
        where, params = f"{where} AND model = ?", (*params, model_id)
    row = (
        db.one(
            f"SELECT count(*) AS calls, sum(prompt_tokens) AS p, sum(completion_tokens) AS c, sum(ms) AS ms FROM llm_calls WHERE {where}",
            params,
        )
        or {}
    )
    return {
        "calls": int(row.get("calls") or 0),
        "prompt_tokens": int(row.get("p") or 0),
        "completion_tokens": int(row.get("c") or 0),
        "ms": row.get("ms") or 0,
    }
