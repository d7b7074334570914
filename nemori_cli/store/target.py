"""Where a store is: one value for a SQLite file or a PostgreSQL server, and what depends on which it is.

``--db`` / ``NEMORI_DB`` is parsed once (config.Settings.from_env, through
store/engines.parse_target) into a ``StoreTarget``, and everything above the
store asks the target rather than which engine it names:

- opening it (to write, to create, or read-only), and what a command refuses
  before anything opens or loads (a SQLite path that is a device, a folder,
  another application's file);
- the key of its build lock (pipeline/lock.py), and the lock that other
  machines see (PostgreSQL's advisory lock; a file has none);
- where the KV states of its core context are saved (retrieval/core_cache.py);
- a dry run's look at it (read-only, or nothing where an ingest would create
  it), and the stand-in for a store that does not exist yet;
- the name shown to the user, and how a process started by this one is told
  where the store is.

Each engine's target is a class in its own module (store/sqlite_target.py,
store/pg_target.py), registered in store/engines.py by URL scheme (or as the
file engine). This module is imported with the settings, by every command:
it imports nothing heavy; an engine's driver is imported when a store opens.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:
    from nemori_cli.store.contract import Store


class SharedLock(Protocol):
    """A build lock that other machines see (store/pg_build_lock.ServerLock): held on a connection of its own."""

    def acquire(self) -> bool | None: ...

    def note(self, state: str) -> None: ...

    def release(self) -> None: ...

    def holder_record(self) -> tuple[int | None, str | None, str | None] | None: ...


class StoreTarget(ABC):
    """One store, before it is opened: a SQLite file or a server's URL (``text``, as given)."""

    engine: ClassVar[str]  # "sqlite" | "postgresql": what a bench run's record calls it

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and isinstance(other, StoreTarget) and other.spec == self.spec

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.spec))

    # -- names ----------------------------------------------------------------
    @property
    @abstractmethod
    def name(self) -> str:
        """What messages call the store: the file's path, or the server's URL without its password."""

    @property
    def path(self) -> Path | str:
        """As ``Store.path``: the file's Path, or the shown URL."""
        return self.name

    @property
    @abstractmethod
    def spec(self) -> str:
        """What parses back to this target in this process (a URL keeps its password)."""

    def for_child(self) -> str:
        """NEMORI_DB for a process this one starts (a file by its absolute path: the child may start elsewhere)."""
        return self.spec

    # -- before opening ---------------------------------------------------------
    def exists(self) -> bool:
        """Whether the store is there already (a server is asked only when the store is opened: it counts as there)."""
        return True

    def cannot_write(self) -> bool:
        """Whether this process may not write the store (a server decides for itself when written to)."""
        return False

    def refuse(self, *, create: bool = False, write: bool = False) -> None:  # noqa: B027 - a server has nothing to refuse before it is asked
        """Refuse, as one StoreError line and before a model loads, a store this command cannot use; ``create``/``write``: the command would."""

    def refuse_unservable(self) -> None:  # noqa: B027 - as above
        """Refuse a store that can never work for a server (`nemori mcp`); a missing one is fine (the first write creates it)."""

    # -- opening ----------------------------------------------------------------
    @abstractmethod
    def open(self, *, create: bool = True, read_only: bool = False, schema: int | None = None) -> Store:
        """The store, migrated to ``schema`` (None: the newest); ``read_only``: looked at, never changed."""

    @abstractmethod
    def peek(self) -> Store | None:
        """The store opened read-only for a dry run, or None where an ingest would create it."""

    def stand_in(self) -> Store:
        """An empty store for what a new one would hold (its defaults), with nothing written anywhere.

        An in-memory SQLite database: an engine that has no in-memory form of
        its own (PostgreSQL) is stood in for by it, which is honest for what
        it is used for (the meta a new store would get, read through the
        contract), not for engine-specific behaviour.
        """
        from nemori_cli.store.sqlite import SqliteStore

        return SqliteStore(Path(":memory:"))

    # -- what lives beside the store --------------------------------------------
    @abstractmethod
    def lock_key(self) -> str:
        """What names this store for its build locks: the same store reached two ways gives the same key."""

    def shared_lock(self, user: str) -> SharedLock | None:
        """A build lock other machines see, for a store they can reach too; None for a store only this machine has."""
        return None

    @abstractmethod
    def kv_cache_dir(self, cache_dir: Path) -> Path:
        """Where the KV states of this store's core context are saved (``cache_dir``: the settings' cache folder)."""


def shown_url(url: str) -> str:
    """A store URL as messages show it: without its password."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if not parts.password:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
