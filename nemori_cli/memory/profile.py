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
from nemori_cli.store.db import Database

META_KEY = "profile"

MEMORY_MODES = ("native", "summary", "naive-rag", "amem", "nemori+amem")
NOTE_MODES = ("amem", "nemori+amem")  # A-MEM notes: from raw messages, or from Nemori's facts
DISTILL_MODES = ("prediction", "direct")
INDEX_MODES = ("narrative", "messages")


@dataclass(frozen=True)
class Profile:
    # native: facts by prediction error, consolidated (new / merge / conflict);
    # naive-rag: the same facts appended with no consolidation;
    # summary: one running summary instead of facts;
    # amem: A-MEM notes from raw messages (one per message), no episodes;
    # nemori+amem: Nemori's episodes, its facts stored as A-MEM notes.
    memory: str = "native"
    # prediction: keep what the prediction missed (Nemori); direct: extract
    # facts from the raw episode with no prediction ("Nemori-s").
    distill: str = "prediction"
    integrate: bool = True  # associative integration of episodes (merge continuations)
    facts: bool = False  # set from memory/--no-facts in resolve(); stored explicitly
    index: str = "narrative"  # what episodes are embedded and full-text indexed on (N / P variants)

    def describe(self) -> str:
        parts = [f"--memory {self.memory}"]
        if self.memory == "amem":
            return parts[0]  # one note per message: no episodes, so no other flag applies
        if self.memory != "summary":
            parts.append("--facts" if self.facts else "--no-facts")
        if self.facts:
            parts.append(f"--distill {self.distill}")
        parts.append("--integrate" if self.integrate else "--no-integrate")
        parts.append(f"--index {self.index}")
        return " ".join(parts)


DEFAULT = Profile(facts=True)


def _validate(p: Profile) -> Profile:
    for value, allowed, flag in ((p.memory, MEMORY_MODES, "--memory"), (p.distill, DISTILL_MODES, "--distill"), (p.index, INDEX_MODES, "--index")):
        if value not in allowed:
            raise ConfigError(f"{flag} {value!r}: expected one of {', '.join(allowed)}")
    if p.memory == "summary" and p.facts:
        p = replace(p, facts=False)  # a running summary takes the place of facts
    if p.memory == "amem":
        p = replace(DEFAULT, memory="amem", facts=False)  # no episodes, so no episode flags
    if p.memory == "nemori+amem" and not p.facts:
        raise ConfigError("--memory nemori+amem stores Nemori's facts as notes; drop --no-facts")
    return p


def stored(db: Database) -> Profile | None:
    raw = db.get_meta(META_KEY)
    if raw is None:
        return None
    data = json.loads(raw)
    known = {f.name for f in fields(Profile)}
    return Profile(**{k: v for k, v in data.items() if k in known})


def resolve(db: Database, requested: dict) -> Profile:
    """The profile to run with: the stored one, with explicit flags checked against it.

    ``requested`` holds only the flags the user gave (None means not given).
    A database with no profile yet gets the defaults overridden by the flags.
    """
    given = {k: v for k, v in requested.items() if v is not None}
    if given.get("memory") in ("summary", "amem"):
        if given.get("facts"):
            raise ConfigError(f"--memory {given['memory']} distils no facts; drop --facts")
        given["facts"] = False
    current = stored(db)
    if current is None:
        return _validate(replace(DEFAULT, **given))
    wanted = _validate(replace(current, **given))
    if wanted != current:
        raise ConfigError(
            f"{db.path} was built with `{current.describe()}`; this run asks for `{wanted.describe()}`. "
            "Mixing methods in one memory is refused: drop those flags, or use a new --db"
        )
    return current


def record(db: Database, profile: Profile) -> None:
    """Store the profile (caller holds the transaction); a no-op when it is already there."""
    if stored(db) != profile:
        db.set_meta(META_KEY, json.dumps(asdict(profile), sort_keys=True))
