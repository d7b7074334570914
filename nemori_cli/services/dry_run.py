"""`nemori ingest --dry-run`'s look at the store: what an ingest would do and cost, with nothing written and no model loaded.

The input has already been read and validated by the same code as a real
ingest. Here the store is only looked at (StoreTarget.peek: a SQLite file
read-only without a trace, store/readonly.py; a missing store is not
created), the messages that would be new are found with the same identity
key insert_messages uses, and the cost is estimated (estimate.py) at the
best rates known for the model (rates.py). Presets are read from
models.toml, but no model file or embedder is opened. cli/dry_run.py says it.
"""

from __future__ import annotations

from collections.abc import Callable

from nemori_cli import measured
from nemori_cli.config import Settings, load_presets, resolve_embedder, resolve_llm
from nemori_cli.domain import Backlog, IncomingMessage
from nemori_cli.estimate import Estimate, estimate
from nemori_cli.memory import modes
from nemori_cli.memory.method import describe
from nemori_cli.memory.profile import Profile
from nemori_cli.stages import MESSAGE_CHARS_READ
from nemori_cli.store import messages as message_sql
from nemori_cli.store.contract import Store


def plan(
    settings: Settings,
    incoming: list[IncomingMessage],
    namespace: str,
    *,
    window: int,
    profile_of: Callable[[Store], Profile],
    max_tokens: int | None = None,
    check_embedder: bool = True,
) -> dict:
    """Everything the dry run reports, as one JSON-ready dict; raises the errors an ingest would (the embedder's, unless not ``check_embedder``)."""
    from nemori_cli import rates

    presets = load_presets()
    llm = resolve_llm(presets, settings.model)  # an unknown --model fails here as in ingest
    embedder = resolve_embedder(presets, settings.embedder)
    db = settings.store.peek()  # read only; None where an ingest would create the store
    try:
        if check_embedder and db is not None and embedder.dimensions:
            db.check_embedder(f"{embedder.model_name}:{embedder.dimensions}")
        # A new store would get the defaults overridden by the flags; an empty
        # in-memory one stands in for it (nothing touches the disk or the server).
        stand_in: Store = db if db is not None else settings.store.stand_in()
        try:
            profile = profile_of(stand_in)
        finally:
            if stand_in is not db:
                stand_in.close()

        # Keys as insert_messages computes them; were two lines to share one,
        # it would keep the first (the readers refuse repeated ids, so they don't).
        first: dict[str, int] = {}
        for msg, key in zip(incoming, message_sql.keys_for(incoming, namespace)):
            first.setdefault(key, min(len(msg.content), MESSAGE_CHARS_READ))  # as the prompts read it
        stored = message_sql.stored_keys(db, settings.user, list(first)) if db is not None else set()
        changed = message_sql.changed_keys(db, settings.user, incoming, namespace) if db is not None else []
        new = {k: chars for k, chars in first.items() if k not in stored}
        pending = modes.for_profile(profile).backlog(db, settings.user) if db is not None else Backlog(0, 0)
        model_id = rates.model_id(llm)
        found = rates.best(db, settings.user, model_id, llm.name, cache_dir=settings.cache_dir)
    finally:
        if db is not None:
            db.close()

    est = estimate(
        len(new) + pending.messages,
        sum(new.values()) + pending.characters,
        window=window,
        profile=profile,
        rates=found,
    )
    searchable = measured.STORE_START_SECONDS + len(new) / measured.STORE_MESSAGES_PER_SECOND
    data = {
        "dry_run": True,
        "db": settings.store_name,
        "db_exists": db is not None,
        "user": settings.user,
        "model": model_id,
        "method": describe(profile),
        "read": len(incoming),
        "new": len(new),
        "already_stored": len(stored),
        "changed": len(changed),  # of those, stored under their id with other content: the stored text stays
        "changed_ids": [key.removeprefix(f"id:{namespace}") for key in changed[:5]],  # for the stderr note
        "pending": pending.messages,
        **_estimate_json(est),
        # Two times a user waits for: until `ingest --build later` returns (stored and indexed, so searchable), and until the memory is built.
        "searchable_seconds": round(searchable, 1),
        "build_seconds": round(est.seconds, 1),
    }
    if max_tokens is not None:
        per_message = est.tokens / est.messages if est.messages else 0
        within = est.messages if per_message == 0 else min(est.messages, int(max_tokens // per_message))
        data.update(max_tokens=max_tokens, messages_within_budget=within)
    return data


def build_seconds(
    settings: Settings, incoming: list[IncomingMessage], namespace: str, *, window: int, profile_of: Callable[[Store], Profile]
) -> float:
    """The model time building these messages (the new ones, and what is pending already) would take: what `--build auto` decides on."""
    # The embedder is not checked here: the ingest that follows checks the one it really loads.
    return float(plan(settings, incoming, namespace, window=window, profile_of=profile_of, check_embedder=False)["build_seconds"])


def _estimate_json(est: Estimate) -> dict:
    r = est.rates
    return {
        "messages": est.messages,
        "characters": est.characters,
        "windows": est.windows,
        "episodes": est.episodes,
        "calls": est.calls,
        "total_calls": est.total_calls,
        "prompt_tokens": est.prompt_tokens,
        "output_tokens": est.output_tokens,
        "tokens": est.tokens,
        # Two decimals under a minute: a short chat without a partition call costs seconds, not "0.0".
        "minutes": round(est.seconds / 60, 1 if est.seconds >= 60 else 2),
        "rates": {
            "source": r.source,
            "prompt_tps": round(r.prompt_tps, 1),
            "output_tps": round(r.output_tps, 1),
            "prompt_tokens_per_char": round(r.prompt_tokens_per_char, 4),
            "output_tokens_per_char": round(r.output_tokens_per_char, 4),
            "seconds_per_char": round(r.seconds_per_char, 5),
        },
    }
