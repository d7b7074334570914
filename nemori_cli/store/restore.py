"""Restoring an export (store/export.py) into an empty or new database, all or nothing.

The rows keep their ids, so everything that points at them (messages at
episodes, facts at the facts that replaced them, notes at their links, the
indexes at their rows) still points at the same thing: the restored memory
answers `inspect` and `search` exactly as the original did.

Nothing is written where the user pointed until the whole export has been
read and checked. The rows go first into a scratch file beside the target,
created at the export's own schema; each line is checked as it is inserted,
and a bad one is named by its line number. The foreign keys are checked once
at the end (a fact may point at a later fact that replaced it), and so are the
closing line's counts, which catch a file cut at a line boundary. Only then is
the scratch file upgraded to this nemori's schema by the ordinary migrations
(so an export from an older nemori is restored as that nemori's file would
have been upgraded), and put in place: linked to the target's name when
there was no file, or copied into an existing empty one in one transaction.

Refused, with one line: a target that already holds memory (anyone's: the
ids would collide), a target built with another embedder or method, and a
malformed export (not an export, another format version, a schema newer than
this code, a line that is not JSON or names a table or column the schema
lacks, a row of another user, a cut file).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from nemori_cli.errors import ImportRefused, InputError, StoreError
from nemori_cli.store import export
from nemori_cli.store.contract import Store
from nemori_cli.store.engines import parse_target
from nemori_cli.store.migrations import MIGRATIONS
from nemori_cli.store.readonly import ReadOnlySqliteStore
from nemori_cli.store.sqlite import SqliteStore
from nemori_cli.store.sqlite_files import refuse_read_only, refuse_unusable
from nemori_cli.store.sqlite_target import SqliteTarget
from nemori_cli.store.target import StoreTarget

NEWEST = max(m[0] for m in MIGRATIONS)


@dataclass(frozen=True)
class Header:
    user: str
    schema: int
    meta: dict[str, str]


@dataclass(frozen=True)
class Restored:
    user: str
    counts: dict[str, int]  # rows per table
    schema: int  # the export's schema; the file is at NEWEST now


def restore(source: Path, where: StoreTarget | Path | str) -> Restored:
    """Restore the export at ``source`` into ``where`` (absent, empty, or a nemori file without memory; or a server's store).

    A SQLite file is built beside it and put in its place; any other store
    gets the same file's rows copied in, in one transaction.
    """
    found = where if isinstance(where, StoreTarget) else parse_target(where)
    if not isinstance(found, SqliteTarget):
        return _restore_to_server(source, found)
    target = found.file
    existing = _existing(target)
    reader = _Reader(source)
    header = reader.header()
    scratch = target.with_name(f".{target.name}.import-{os.getpid()}.tmp")
    made = [p for p in (target.parent, *target.parent.parents) if not p.exists()]  # folders this run creates, removed again on failure
    placed = False
    _remove(scratch)  # left by a run killed midway
    try:
        counts = _build(scratch, header, reader)
        if header.schema < NEWEST:
            SqliteStore(scratch).close()  # the ordinary upgrade, on the scratch copy
        if existing:
            _copy_into(scratch, target, header)
        else:
            _place(scratch, target)
        placed = True
    finally:
        _remove(scratch)
        if not placed:
            for folder in made:  # deepest first; a folder someone else filled meanwhile stays
                try:
                    folder.rmdir()
                except OSError:
                    break
    return Restored(header.user, counts, header.schema)


def _restore_to_server(source: Path, target: StoreTarget) -> Restored:
    """Into a store on a server (PostgreSQL): the same scratch file, built and checked the same way, then copied in one transaction."""
    import tempfile

    store = target.open()  # a dead server or another application's tables fail here, before the export is read
    try:
        _refuse_occupied(store, store.path)
    finally:
        store.close()
    reader = _Reader(source)
    header = reader.header()
    with tempfile.TemporaryDirectory(prefix="nemori-import-") as folder:
        scratch = Path(folder) / "scratch.db"
        counts = _build(scratch, header, reader)
        if header.schema < NEWEST:
            SqliteStore(scratch).close()
        _copy_into(scratch, target, header)
    return Restored(header.user, counts, header.schema)


# -- the target ---------------------------------------------------------------


def _existing(target: Path) -> bool:
    """Whether there is a file to restore into; refuses one that holds memory, before the export is even read. Never writes."""
    refuse_unusable(target, create=True)
    refuse_read_only(target)
    wal = target.with_name(target.name + "-wal")
    if not target.exists():
        return False
    if target.stat().st_size == 0 and not (wal.exists() and wal.stat().st_size):
        return True  # an empty file: it becomes the database
    # No migration, no side files (db.refuse_foreign's read-only open would make a WAL file's -wal and -shm):
    # a refused target stays byte for byte as it was. Another application's file is refused here too.
    peek = ReadOnlySqliteStore(target)
    try:
        _refuse_occupied(peek, target)
    finally:
        peek.close()
    return True


def _refuse_occupied(db: Store, target: Path | str) -> None:
    """Anyone's rows refuse the target: the export's ids would collide with theirs."""
    owners: set[str] = set()
    for name in sorted(db.plain_tables()):
        if "user_id" in db.columns(name):
            owners.update(r["u"] for r in db.query(f'SELECT DISTINCT user_id AS u FROM "{name}"'))
    if owners:
        raise ImportRefused(
            f"{target} already holds memory (of {', '.join(sorted(owners))}); import-memory restores only into an empty or new database, "
            "where every id can stay what it was: give another --db"
        )


def _check_meta(db: Store, header: Header, target: Path | str) -> None:
    """An empty database may already be bound to an embedder or a method; the export must agree with it."""
    for key, value in header.meta.items():
        have = db.get_meta(key)
        if have is not None and have != value:
            raise ImportRefused(f"{target} records {key} {have}, the export {value}; restore into a new --db")


def _place(scratch: Path, target: Path) -> None:
    """The finished file takes the target's name, unless a file appeared there meanwhile (never overwritten)."""
    try:
        os.link(scratch, target)
    except FileExistsError:
        raise ImportRefused(f"{target} appeared while the export was read; nothing was written to it") from None
    except OSError:  # a file system without hard links
        if target.exists():
            raise ImportRefused(f"{target} appeared while the export was read; nothing was written to it") from None
        os.replace(scratch, target)


def _remove(scratch: Path) -> None:
    for path in (scratch, scratch.with_name(scratch.name + "-wal"), scratch.with_name(scratch.name + "-shm")):
        path.unlink(missing_ok=True)


# -- reading the export ---------------------------------------------------------


class _Reader:
    """The export's lines as (line number, record), every problem one InputError naming the line."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self._file = path.open("rb")
        except OSError as e:
            raise InputError(f"cannot read {path}: {e.strerror}") from None
        self._lines = self._records()
        self.end: tuple[int, dict[str, Any]] | None = None  # the closing line, once rows() has reached it

    def fail(self, line: int, why: str) -> InputError:
        return InputError(f"{self.path}:{line}: {why}; nothing was imported")

    def _records(self) -> Iterator[tuple[int, dict[str, Any]]]:
        with self._file:
            for number, raw in enumerate(self._file, 1):
                try:
                    record = json.loads(raw.decode("utf-8"))
                except UnicodeDecodeError:
                    raise self.fail(number, "not UTF-8 text") from None
                except json.JSONDecodeError as e:
                    raise self.fail(number, f"not JSON ({e.msg}, column {e.colno})") from None
                if not isinstance(record, dict):
                    raise self.fail(number, "not a JSON object")
                yield number, record

    def header(self) -> Header:
        first = next(self._lines, None)
        if first is None:
            raise InputError(f"{self.path} is empty, not a nemori export; nothing was imported")
        _, h = first
        if "nemori_export" not in h:
            raise self.fail(1, "not a nemori export (the first line is no export header)")
        if h["nemori_export"] != export.FORMAT:
            raise self.fail(
                1, f"export format {h['nemori_export']!r}; this nemori reads format {export.FORMAT} (a newer nemori may read it)"
            )
        schema, user, meta = h.get("schema"), h.get("user"), h.get("meta")
        if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
            raise self.fail(1, f"the header's schema is {schema!r}, not a schema number")
        if schema > NEWEST:
            raise self.fail(1, f"the export is of schema {schema}, newer than this nemori's {NEWEST}: upgrade nemori to import it")
        if not isinstance(user, str) or not user.strip():
            raise self.fail(1, "the header names no user")
        if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
            raise self.fail(1, "the header's meta is not an object of strings")
        embedder = meta.get("embedder")
        if embedder is not None and not _dimensions(embedder):
            raise self.fail(1, f"the header's embedder {embedder!r} has no dimensions (name:N)")
        return Header(user, schema, meta)

    def rows(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """Every row record, then the check that the closing line came and nothing follows it."""
        last = 1
        for number, record in self._lines:
            last = number
            if "nemori_export_end" in record:
                for extra, _ in self._lines:
                    raise self.fail(extra, "a line after the export's closing line")
                self.end = (number, record)
                return
            yield number, record
        raise InputError(
            f"{self.path}: ends at line {last} without the export's closing line: the file was cut short; nothing was imported"
        )


def _dimensions(identity: str) -> int | None:
    tail = identity.rsplit(":", 1)[-1]
    return int(tail) if ":" in identity and tail.isdigit() and int(tail) > 0 else None


def _decode(value: Any) -> Any:
    """A JSON value back to the SQLite value: {"base64": ...} is a BLOB; lists and other objects are nothing an export writes."""
    if isinstance(value, dict) and set(value) == {"base64"} and isinstance(value["base64"], str):
        return base64.b64decode(value["base64"], validate=True)
    if isinstance(value, (dict, list)):
        raise ValueError("a list or an object is no column value")
    return value


# -- writing ----------------------------------------------------------------------


class _Inserter:
    """Inserts export records into one database, checking each against its schema."""

    def __init__(self, db: Store, user: str):
        self.db, self.user = db, user
        self.tables = {t.name: t for t in export.tables(db)}
        self.lines: dict[tuple[str, int], int] = {}  # (table, rowid) -> line, to name the line a dangling reference came from
        self.counts: dict[str, int] = {name: 0 for name in self.tables}
        self._sql: dict[tuple[str, tuple[str, ...]], str] = {}

    def insert(self, record: dict[str, Any], line: int, fail: Callable[[str], Exception]) -> None:
        """One record, read at ``line``; ``fail(why)`` makes the error that names it."""
        name, row = record.get("table"), record.get("row")
        if not isinstance(name, str) or not isinstance(row, dict):
            raise fail('not a row of an export (it needs "table" and "row")')
        table = self.tables.get(name)
        if table is None:
            raise fail(f"no table {name!r} to restore rows into (not in this schema, or derived from other tables)")
        unknown = [c for c in row if c not in table.columns]
        if unknown:
            raise fail(f"table {name} has no column {unknown[0]!r}")
        if "user_id" in table.columns and row.get("user_id") != self.user:
            raise fail(f"a row of user {row.get('user_id')!r} in an export of user {self.user!r}")
        if table.rowid and table.kind != "rows" and not isinstance(record.get("rowid"), int):
            raise fail(f"a row of {name} needs its integer rowid")
        # An ordinary table's hidden rowid (SQLite's fact_sources) names nothing: a PostgreSQL export has none to give.
        with_rowid = table.rowid and isinstance(record.get("rowid"), int)
        columns = tuple(row)
        try:
            values = [_decode(v) for v in row.values()]
        except (ValueError, binascii.Error) as e:
            raise fail(f"a value of {name} is not a column value ({e})") from None
        if with_rowid:
            columns, values = ("rowid", *columns), [record["rowid"], *values]
        key = (name, columns)
        if key not in self._sql:
            quoted = ", ".join(export._q(c) for c in columns)  # names checked against the schema above
            self._sql[key] = f"INSERT INTO {table.quoted}({quoted}) VALUES ({', '.join('?' * len(columns))})"
        try:
            self.db.conn.execute(self._sql[key], values)
        except self.db.errors as e:
            raise fail(f"{name} refused the row ({str(e).splitlines()[0].split(': ', 1)[-1]})") from None
        if table.kind == "rows" and table.order == "ORDER BY rowid":
            self.lines[(name, self.db.conn.last_insert_rowid())] = line
        self.counts[name] += 1

    def dangling(self) -> tuple[int | None, str] | None:
        """The first row whose foreign key points at nothing: (its line, what it misses)."""
        found = self.db.dangling_reference()
        if found is None:
            return None
        if found.table is None:  # the engine names no row (PostgreSQL: the first refused reference)
            return None, f"a restored row refers to a row that is not in the export ({found.detail})"
        line = self.lines.get((found.table, found.rowid)) if found.rowid is not None else None
        return line, f"this {found.table} row refers to a row of {found.parent} that is not in the export"


def _prepare(db: Store, header: Header, target: Path | str) -> None:
    """The file-wide settings the export carries: its embedder (which makes the vector tables) and the method it was built with."""
    _check_meta(db, header, target)
    embedder = header.meta.get("embedder")
    dimensions = _dimensions(embedder) if embedder is not None else None
    if embedder is not None and dimensions is not None:  # the header's reader refused an embedder without dimensions
        db.bind_embedder(embedder, dimensions)
    for key, value in header.meta.items():
        if key != "embedder":
            db.set_meta(key, value)
    # A fact points at the later fact that replaced it: the references are checked at the end, not row by row.
    db.defer_foreign_keys()


def _build(scratch: Path, header: Header, reader: _Reader) -> dict[str, int]:
    """Every line into a new file at the export's schema, in one transaction; returns rows per table."""
    db = SqliteStore(scratch, schema=header.schema)
    try:
        with db.transaction():
            _prepare(db, header, scratch)
            inserter = _Inserter(db, header.user)
            for number, record in reader.rows():
                inserter.insert(record, number, partial(reader.fail, number))
            missing = inserter.dangling()
            if missing is not None:
                line, why = missing
                raise reader.fail(line, why) if line else InputError(f"{reader.path}: {why}; nothing was imported")
            _check_counts(reader, inserter.counts)
        return {k: v for k, v in inserter.counts.items() if v}
    finally:
        db.close()


def _check_counts(reader: _Reader, counts: dict[str, int]) -> None:
    """The closing line's counts: a file cut between two lines, or lines removed, shows here."""
    if reader.end is None:  # rows() returns only once it has read the closing line
        raise InputError(f"{reader.path}: no closing line; nothing was imported")
    number, end = reader.end
    said = end.get("rows")
    if not isinstance(said, dict):
        raise reader.fail(number, "the closing line has no row counts")
    for name in sorted(set(said) | {k for k, v in counts.items() if v}):
        if said.get(name, 0) != counts.get(name, 0):
            raise reader.fail(
                number,
                f"the closing line counts {said.get(name, 0)} rows of {name}, the file holds {counts.get(name, 0)}: lines are missing or were added",
            )


def _copy_into(scratch: Path, where: StoreTarget | Path, header: Header) -> None:
    """The restored rows into an existing empty database, in one transaction (checked empty again under the write lock)."""
    src, dst = SqliteStore(scratch), (where if isinstance(where, StoreTarget) else parse_target(where)).open()
    target = dst.path
    try:
        with dst.transaction():
            _refuse_occupied(dst, target)
            _prepare(dst, header, target)
            inserter = _Inserter(dst, header.user)
            for table in export.tables(src):
                for record in export.rows(src, header.user, table):
                    inserter.insert(record, 0, lambda why: StoreError(f"{target}: {why}; nothing was imported"))
            if inserter.dangling() is not None:
                raise StoreError(f"{target}: the restored rows do not fit together; nothing was imported")
            dst.ids_restored()
    finally:
        src.close()
        dst.close()
