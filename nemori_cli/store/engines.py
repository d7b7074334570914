"""The registry of engines: which target --db names (a URL by its scheme, anything else a SQLite file), and opening one.

A third engine is one module with its target class (store/<engine>_target.py,
a subclass of store/target.StoreTarget) and its store, plus one line in
``URL_ENGINES`` here (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from nemori_cli.store.pg_target import PgTarget
from nemori_cli.store.sqlite_target import SqliteTarget
from nemori_cli.store.target import StoreTarget

if TYPE_CHECKING:
    from nemori_cli.store.contract import Store

# A URL's scheme (compared in lower case) -> its engine's target. What is not such a URL is a file.
URL_ENGINES: dict[str, type[StoreTarget]] = {
    "postgresql": PgTarget,
    "postgres": PgTarget,
}
FILE_ENGINE: type[StoreTarget] = SqliteTarget

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def engine_for(text: str) -> type[StoreTarget]:
    """The target class of --db ``text``: a registered URL scheme's engine, else the file engine."""
    m = _SCHEME.match(text)
    return URL_ENGINES.get(m.group(1).lower(), FILE_ENGINE) if m else FILE_ENGINE


def parse_target(text: str | Path) -> StoreTarget:
    """--db / NEMORI_DB as a target (config.Settings.store)."""
    return engine_for(str(text))(str(text))


def is_store_url(text: str) -> bool:
    """Whether ``text`` names a store by a URL (a server) rather than a file."""
    return engine_for(str(text)) is not FILE_ENGINE


def open_store(target: str | Path | StoreTarget, *, create: bool = True, schema: int | None = None, read_only: bool = False) -> Store:
    """The store at ``target``, migrated to the current schema (or ``schema``); ``read_only``: looked at only.

    The return type is the contract: mypy checks in each target's ``open``
    that its engine's class satisfies it.
    """
    found = target if isinstance(target, StoreTarget) else parse_target(target)
    return found.open(create=create, schema=schema, read_only=read_only)
