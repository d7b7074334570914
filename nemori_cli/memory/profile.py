"""How a database's memory is built, recorded once so that runs never mix methods.

The paper's ablations only mean something if one database is built one way
from start to end: facts consolidated in one run and appended blindly in the
next would make both measurements meaningless. So the first ingest records the
profile in the database's meta table, later runs inherit it, and an explicit
flag that disagrees with it is refused with a message naming both
(memory/method.py). The record sits below the modes, which take it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields

from nemori_cli.store.contract import Store

META_KEY = "profile"

DISTILL_MODES = ("prediction", "direct")
INDEX_MODES = ("narrative", "messages")
PARTITION_MODES = ("model", "similarity")
TURN_VECTORS = ("turn", "neighbours")  # store/message_index.vectors_for says what each is made from


@dataclass(frozen=True)
class Profile:
    memory: str = "native"  # the memory mode's name (memory/modes.py); modes.for_profile gives the mode itself
    # prediction: keep what the prediction missed (Nemori); direct: extract
    # facts from the raw episode with no prediction ("Nemori-s").
    distill: str = "prediction"
    integrate: bool = True  # associative integration of episodes (merge continuations)
    facts: bool = False  # set from memory/--no-facts in resolve(); stored explicitly
    index: str = "narrative"  # what episodes are embedded and full-text indexed on (N / P variants)
    # How episodes are cut: "model" (the LLM proposes boundaries) or "similarity" (embeddings, no call).
    # A database recorded before this field existed was cut by the model, hence the default here; a new
    # one takes its model preset's choice (resolve's ``new``).
    partition: str = "model"
    # What a raw turn's search vector is made from: the turn alone, or the turn plus the turn read with its
    # neighbours (issue 41, thirteenth round). Recorded because a memory whose turns were embedded two ways would
    # rank them on two scales; a database recorded before this field existed embedded turns alone.
    turn_vectors: str = "turn"


DEFAULT = Profile(facts=True)


def stored(db: Store) -> Profile | None:
    raw = db.get_meta(META_KEY)
    if raw is None:
        return None
    data = json.loads(raw)
    known = {f.name for f in fields(Profile)}
    return Profile(**{k: v for k, v in data.items() if k in known})


def turn_vectors(db: Store) -> str:
    """What this memory's raw turns' vectors read (Profile.turn_vectors); "turn" before its first ingest."""
    return (stored(db) or Profile()).turn_vectors


def record(db: Store, profile: Profile) -> None:
    """Store the profile (caller holds the transaction); a no-op when it is already there."""
    if stored(db) != profile:
        db.set_meta(META_KEY, json.dumps(asdict(profile), sort_keys=True))
