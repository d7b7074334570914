"""How a database's memory is built, recorded once so that runs never mix methods.

The paper's ablations only mean something if one database is built one way
from start to end: facts consolidated in one run and appended blindly in the
next would make both measurements meaningless. So the first ingest records the
profile in the database's meta table, later runs inherit it, and an explicit
flag that disagrees with it is refused with a message naming both.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace

from nemori_cli.errors import ConfigError
from nemori_cli.memory import modes
from nemori_cli.memory.mode import MemoryMode
from nemori_cli.store.contract import Store

META_KEY = "profile"

DISTILL_MODES = ("prediction", "direct")
INDEX_MODES = ("narrative", "messages")
PARTITION_MODES = ("model", "similarity")


@dataclass(frozen=True)
class Profile:
    memory: str = "native"  # the memory mode's name (memory/modes.py); `.mode` is the mode itself
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

    @property
    def mode(self) -> MemoryMode:
        """The memory mode this profile builds with (memory/modes.py)."""
        return modes.for_profile(self)

    def describe(self) -> str:
        return " ".join(self.mode.flags(self))


DEFAULT = Profile(facts=True)


def _validate(p: Profile) -> Profile:
    mode = modes.by_name(p.memory)  # an unknown --memory is refused here
    for value, allowed, flag in (
        (p.distill, DISTILL_MODES, "--distill"),
        (p.index, INDEX_MODES, "--index"),
        (p.partition, PARTITION_MODES, "--partition"),
    ):
        if value not in allowed:
            raise ConfigError(f"{flag} {value!r}: expected one of {', '.join(allowed)}")
    return mode.normalise(p)


def stored(db: Store) -> Profile | None:
    raw = db.get_meta(META_KEY)
    if raw is None:
        return None
    data = json.loads(raw)
    known = {f.name for f in fields(Profile)}
    return Profile(**{k: v for k, v in data.items() if k in known})


def mode_of(db: Store) -> MemoryMode:
    """The mode a database was built with; the default one before its first ingest."""
    return (stored(db) or DEFAULT).mode


def resolve(db: Store, requested: dict, *, new: dict | None = None) -> Profile:
    """The profile to run with: the stored one, with explicit flags checked against it.

    ``requested`` holds only the flags the user gave (None means not given).
    A database with no profile yet gets the defaults, then ``new`` (what the
    model preset chooses, e.g. its partition), then the flags.
    """
    given = {k: v for k, v in requested.items() if v is not None}
    if "memory" in given and not modes.by_name(given["memory"]).distils_facts:
        if given.get("facts"):
            raise ConfigError(f"--memory {given['memory']} distils no facts; drop --facts")
        given["facts"] = False
    current = stored(db)
    if current is None:
        return _validate(replace(DEFAULT, **{**(new or {}), **given}))
    wanted = _validate(replace(current, **given))
    if wanted != current:
        raise ConfigError(
            f"{db.path} was built with `{current.describe()}`; this run asks for `{wanted.describe()}`. "
            "Mixing methods in one memory is refused: drop those flags, or use a new --db"
        )
    return current


def record(db: Store, profile: Profile) -> None:
    """Store the profile (caller holds the transaction); a no-op when it is already there."""
    if stored(db) != profile:
        db.set_meta(META_KEY, json.dumps(asdict(profile), sort_keys=True))
