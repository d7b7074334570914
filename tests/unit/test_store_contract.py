"""Every engine offers the whole store contract (store/contract.py), with the same parameters.

mypy checks the types (store/engines.open_store returns a Store, so each engine
class must satisfy it); this test checks at run time what mypy cannot see
through: that a method takes the contract's parameters by the same names, so a
call written for one engine works on the other.
"""

from __future__ import annotations

import inspect

import pytest

from nemori_cli.store.contract import Connection, Store, members
from nemori_cli.store.pg import PgStore
from nemori_cli.store.pg_connection import PgConnection
from nemori_cli.store.readonly import ReadOnlySqliteStore
from nemori_cli.store.sqlite import SqliteStore

ENGINES = [SqliteStore, ReadOnlySqliteStore, PgStore]
_ATTRIBUTES = {"engine", "path", "conn", "one_write_lock", "read_only", "errors"}  # data, not methods


def _has(cls: type, name: str) -> bool:
    annotated = any(name in getattr(k, "__annotations__", {}) for k in cls.__mro__)
    return hasattr(cls, name) or annotated


@pytest.mark.parametrize("engine", ENGINES, ids=lambda c: c.__name__)
def test_each_engine_has_every_member_of_the_contract(engine):
    missing = sorted(n for n in members(Store) if not _has(engine, n))
    assert not missing, f"{engine.__name__} lacks {missing} of store/contract.Store"


@pytest.mark.parametrize("engine", ENGINES, ids=lambda c: c.__name__)
def test_each_method_takes_the_contracts_parameters_by_name(engine):
    for name in sorted(members(Store) - _ATTRIBUTES):
        wanted = list(inspect.signature(getattr(Store, name)).parameters)
        have = list(inspect.signature(getattr(engine, name)).parameters)
        assert have[: len(wanted)] == wanted, f"{engine.__name__}.{name}{have} is not Store.{name}{wanted}"
        extra = [p for p in inspect.signature(getattr(engine, name)).parameters.values()][len(wanted) :]
        assert all(p.default is not inspect.Parameter.empty for p in extra), (
            f"{engine.__name__}.{name}: a parameter beyond the contract needs a default"
        )


def test_both_connections_offer_what_the_store_modules_call():
    for name in members(Connection):
        assert hasattr(PgConnection, name), f"PgConnection lacks {name}"


def test_a_sqlite_store_is_a_store_at_run_time(tmp_path):
    db = SqliteStore(tmp_path / "m.db")
    try:
        assert {n for n in members(Store) if not hasattr(db, n)} == set()
        assert db.scalar("SELECT count(*) AS n FROM messages") == 0
    finally:
        db.close()
