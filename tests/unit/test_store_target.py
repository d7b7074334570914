"""store/target.py: one value names the store. Parsing, the name shown, the lock key, the refusals, the registry; and the bars it keeps.

Bars: nothing outside store/ and config.py names ``db_url`` or compares an
engine's name; no module of cli/ or mcp_server/ imports nemori_cli.store
(found by parsing the imports, type-only ones included).
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

from nemori_cli.config import Settings
from nemori_cli.errors import StoreError
from nemori_cli.store import engines
from nemori_cli.store.engines import is_store_url, parse_target
from nemori_cli.store.pg_target import PgTarget
from nemori_cli.store.sqlite_target import SqliteTarget
from nemori_cli.store.target import StoreTarget
from tests.conftest import REPO

PACKAGE = REPO / "nemori_cli"


# -- parsing and the registry ------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["postgresql://u@h/db", "postgres://h/db", "PostgreSQL://h/db", "POSTGRES://h/db?options=-csearch_path%3Dx"]
)
def test_a_postgresql_url_is_a_server(text):
    target = parse_target(text)
    assert isinstance(target, PgTarget) and target.engine == "postgresql" and is_store_url(text)
    assert target.spec == text  # parsed back to the same target


@pytest.mark.parametrize("text", ["nemori.db", "/tmp/a.db", "~/notes.db", "postgresx://h/db", "sqlite://x.db", "dir/postgresql://x"])
def test_anything_else_is_a_sqlite_file(text):
    target = parse_target(text)
    assert isinstance(target, SqliteTarget) and target.engine == "sqlite" and not is_store_url(text)
    assert target.path == Path(text).expanduser() and target.name == str(Path(text).expanduser())


def test_a_path_object_parses_as_its_text(tmp_path):
    assert parse_target(tmp_path / "m.db") == parse_target(str(tmp_path / "m.db"))


def test_a_third_engine_is_one_class_and_one_registration(monkeypatch, tmp_path):
    class Duck(StoreTarget):
        engine = "duck"

        @property
        def name(self):
            return "duck:" + self.text.split("://", 1)[1]

        @property
        def spec(self):
            return self.text

        def open(self, *, create=True, read_only=False, schema=None):
            raise StoreError("no duck here")

        def peek(self):
            return None

        def lock_key(self):
            return self.name

        def kv_cache_dir(self, cache_dir):
            return cache_dir / "duck"

    monkeypatch.setitem(engines.URL_ENGINES, "duckdb", Duck)
    monkeypatch.setenv("NEMORI_CACHE_DIR", str(tmp_path))
    settings = Settings.from_env(db="duckdb://m")
    assert isinstance(settings.store, Duck) and settings.store_name == "duck:m"
    assert settings.store.kv_cache_dir(tmp_path) == tmp_path / "duck"
    settings.store.refuse(create=True, write=True)  # nothing to refuse before it is asked
    with pytest.raises(StoreError, match="no duck here"):
        engines.open_store("duckdb://m")


# -- the name shown and what a child is told -----------------------------------------


def test_the_name_shown_hides_a_password_only():
    assert parse_target("postgresql://ann:s3cret@db.example/mem").name == "postgresql://ann:***@db.example/mem"
    assert parse_target("postgresql://ann@db.example/mem").name == "postgresql://ann@db.example/mem"
    assert parse_target("postgresql://ann:s3cret@db.example/mem").for_child() == "postgresql://ann:s3cret@db.example/mem"


def test_settings_name_the_store_as_the_target_does(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert Settings.from_env(db="./a.db").store_name == "a.db"
    assert Settings.from_env(db="postgresql://u:pw@h/d").store_name == "postgresql://u:***@h/d"
    assert Settings.from_env(db="./a.db").store.for_child() == str(tmp_path.resolve() / "a.db")


# -- the lock key and the KV cache ---------------------------------------------------


def test_a_file_is_locked_by_what_it_is(tmp_path):
    path = tmp_path / "m.db"
    assert parse_target(path).lock_key() == str(path.resolve())  # not there yet: its path
    path.write_bytes(b"")
    os.link(path, tmp_path / "linked.db")
    st = path.stat()
    assert parse_target(path).lock_key() == parse_target(tmp_path / "linked.db").lock_key() == f"sqlite-inode:{st.st_dev}:{st.st_ino}"
    assert parse_target(path).shared_lock("alice") is None  # only this machine sees a file


def test_a_server_is_locked_by_its_shown_url_and_on_the_server_too():
    a, b = parse_target("postgresql://u:one@h/d"), parse_target("postgresql://u:two@h/d")
    assert a.lock_key() == b.lock_key() == "postgresql://u:***@h/d"
    shared = a.shared_lock("alice")
    assert shared is not None and shared.user == "alice"  # type: ignore[attr-defined]


def test_the_kv_states_live_beside_a_file_and_in_the_cache_for_a_server(tmp_path):
    assert parse_target(tmp_path / "m.db").kv_cache_dir(tmp_path / "cache") == tmp_path / "m.db.kv"
    found = parse_target("postgresql://u:pw@h/d").kv_cache_dir(tmp_path / "cache")
    assert found.parent == tmp_path / "cache" / "kv" and re.fullmatch(r"[0-9a-f]{16}", found.name)


# -- refusals, before anything opens ----------------------------------------------------


def test_a_file_target_refuses_what_a_command_cannot_use(tmp_path):
    folder = tmp_path / "folder.db"
    folder.mkdir()
    with pytest.raises(StoreError, match="is a directory"):
        parse_target(folder).refuse(write=True)
    parse_target(folder).refuse()  # a read meets it when it opens, as before
    with pytest.raises(StoreError, match="is a character device"):
        parse_target("/dev/null").refuse()
    with pytest.raises(StoreError, match="no database at"):
        parse_target(tmp_path / "missing.db").refuse(write=True)
    parse_target(tmp_path / "missing.db").refuse(create=True)  # an ingest makes it
    parse_target(tmp_path / "missing.db").refuse_unservable()  # the first `remember` makes it
    with pytest.raises(StoreError, match="is a directory"):
        parse_target(folder).refuse_unservable()


def test_a_server_target_refuses_nothing_before_it_is_asked():
    target = parse_target("postgresql://u@127.0.0.1:1/d")
    target.refuse(create=True, write=True)
    target.refuse_unservable()
    assert target.exists() and not target.cannot_write()


def test_a_missing_or_empty_file_is_not_peeked_at_and_a_stand_in_is_in_memory(tmp_path):
    assert parse_target(tmp_path / "none.db").peek() is None
    (tmp_path / "empty.db").write_bytes(b"")
    assert parse_target(tmp_path / "empty.db").peek() is None
    for target in (parse_target(tmp_path / "none.db"), parse_target("postgresql://u@127.0.0.1:1/d")):
        stand_in = target.stand_in()
        try:
            assert stand_in.engine == "sqlite" and str(stand_in.path) == ":memory:" and stand_in.get_meta("profile") is None
        finally:
            stand_in.close()
    assert not (tmp_path / "none.db").exists()


# -- the bars ---------------------------------------------------------------------------


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), path.read_text()


def test_only_the_store_and_the_settings_name_db_url():
    found = [name for name, text in _modules() if "db_url" in text and not (name.startswith("store/") or name == "config.py")]
    assert found == []


def test_no_module_outside_the_store_compares_an_engine_name():
    found = []
    for name, text in _modules():
        if name.startswith("store/"):
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                if any(isinstance(o, ast.Attribute) and o.attr == "engine" for o in operands):
                    found.append(f"{name}:{node.lineno}")
    assert found == []


def _imported(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):  # every import: at the top, in a function, under TYPE_CHECKING
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_the_interfaces_never_import_the_store():
    found = [
        f"{name}: {module}"
        for name, text in _modules()
        if name.startswith(("cli/", "mcp_server/"))
        for module in sorted(_imported(ast.parse(text)))
        if module == "nemori_cli.store" or module.startswith("nemori_cli.store.")
    ]
    assert found == []
