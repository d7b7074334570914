"""The memory modes by name: the one place a mode's name is looked up.

Everything else holds a ``MemoryMode`` (memory/mode.py) and asks it; adding
a mode means one class and one line here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nemori_cli.domain import MEMORY_MODES
from nemori_cli.errors import ConfigError
from nemori_cli.memory.amem_modes import Amem, NemoriAmem
from nemori_cli.memory.mode import MemoryMode
from nemori_cli.memory.native import NaiveRag, Native
from nemori_cli.memory.summary import Summary

if TYPE_CHECKING:
    from nemori_cli.memory.profile import Profile

NATIVE, SUMMARY, NAIVE_RAG, AMEM, NEMORI_AMEM = Native(), Summary(), NaiveRag(), Amem(), NemoriAmem()
ALL: tuple[MemoryMode, ...] = (NATIVE, SUMMARY, NAIVE_RAG, AMEM, NEMORI_AMEM)
NAMES: tuple[str, ...] = MEMORY_MODES  # declared in domain.py; one mode each, in that order (a test holds them to it)
_BY_NAME = {m.name: m for m in ALL}


def by_name(name: str) -> MemoryMode:
    """The mode called ``name``; an unknown name is refused with the known ones."""
    mode = _BY_NAME.get(name)
    if mode is None:
        raise ConfigError(f"--memory {name!r}: expected one of {', '.join(NAMES)}")
    return mode


def for_profile(profile: Profile) -> MemoryMode:
    """The mode a database's memory is built with."""
    return by_name(profile.memory)
