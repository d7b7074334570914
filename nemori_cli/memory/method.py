"""The method a database is built with: its stored profile (memory/profile.py) checked against a run's flags, and the mode it names."""

from __future__ import annotations

from dataclasses import replace

from nemori_cli.errors import ConfigError
from nemori_cli.memory import modes
from nemori_cli.memory.mode import MemoryMode
from nemori_cli.memory.profile import DEFAULT, DISTILL_MODES, INDEX_MODES, PARTITION_MODES, TURN_VECTORS, Profile, stored
from nemori_cli.store.contract import Store


def describe(profile: Profile) -> str:
    """The profile as the flags that would ask for it (the mode says which apply)."""
    return " ".join(modes.for_profile(profile).flags(profile))


def _validate(p: Profile) -> Profile:
    mode = modes.by_name(p.memory)  # an unknown --memory is refused here
    for value, allowed, flag in (
        (p.distill, DISTILL_MODES, "--distill"),
        (p.index, INDEX_MODES, "--index"),
        (p.partition, PARTITION_MODES, "--partition"),
        (p.turn_vectors, TURN_VECTORS, "turn vectors"),
    ):
        if value not in allowed:
            raise ConfigError(f"{flag} {value!r}: expected one of {', '.join(allowed)}")
    return mode.normalise(p)


def mode_of(db: Store) -> MemoryMode:
    """The mode a database was built with; the default one before its first ingest."""
    return modes.for_profile(stored(db) or DEFAULT)


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
            f"{db.path} was built with `{describe(current)}`; this run asks for `{describe(wanted)}`. "
            "Mixing methods in one memory is refused: drop those flags, or use a new --db"
        )
    return current
