"""The systems `--systems` accepts, by name, and the groups that stand for several.

Each module of systems lists what it offers (systems.Listing); this module
imports those modules and registers their systems, Nemori's first (listed
first). A new memory mode adds its systems to nemori_systems.py's listing, a
new kind of system adds its module here (A-MEM's are in amem_systems.py; rows that measure a change to `ask`
beyond the window before it ships, in beyond_systems.py).
"""

from __future__ import annotations

from nemori_cli.bench import amem_systems, baselines, beyond_systems, nemori_systems
from nemori_cli.bench.systems import Listing, System
from nemori_cli.errors import ConfigError

_REGISTRY: dict[str, System] = {}
# Names that stand for several systems.
_GROUPS: dict[str, tuple[str, ...]] = {}


def register(system: System) -> System:
    if system.name in _REGISTRY:
        raise ValueError(f"system {system.name!r} registered twice")
    _REGISTRY[system.name] = system
    return system


def register_group(name: str, members: tuple[str, ...]) -> None:
    _GROUPS[name] = members


def _register_all(*listings: Listing) -> None:
    for listing in listings:
        for system in listing.systems:
            register(system)
        for name, members in listing.groups.items():
            register_group(name, members)


_register_all(nemori_systems.OFFERED, beyond_systems.OFFERED, amem_systems.OFFERED, baselines.OFFERED)


def available() -> dict[str, System]:
    return dict(_REGISTRY)


def groups() -> dict[str, tuple[str, ...]]:
    return dict(_GROUPS)


def resolve(names: str) -> list[System]:
    """'nemori,rag' -> the systems, groups expanded, order kept, each once; unknown names refused."""
    systems = available()
    chosen: list[str] = []
    for raw in names.split(","):
        name = raw.strip()
        if not name:
            continue
        members = _GROUPS.get(name, (name,))
        for member in members:
            if member not in systems:
                known = ", ".join([*systems, *_GROUPS])
                raise ConfigError(f"--systems: unknown system {name!r}; known: {known}")
            if member not in chosen:
                chosen.append(member)
    if not chosen:
        raise ConfigError("--systems: no system named")
    return [systems[n] for n in chosen]
