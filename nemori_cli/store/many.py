"""Many memories in one place, one per key: a SQLite file each under a folder (the default), or a PostgreSQL schema each.

Where `nemori bench` keeps the memories it builds (bench/stores.py).

The bench builds one memory per unit (a LoCoMo sample, a LongMemEval
question) and build (systems that share a build share one memory). By
default each is a SQLite file under the output folder. With ``--db
postgresql://...`` each is a schema of its own in that database: a schema
needs only the CREATE right on the database (no CREATEDB, which managed
servers rarely grant), and the store code already keeps to its
connection's current schema. A schema's name comes from the output folder,
the unit and the build, so a rerun into the same folder finds what it built,
and two folders never share a memory.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from nemori_cli.errors import InputError
from nemori_cli.store import pg_schemas
from nemori_cli.store.contract import Store
from nemori_cli.store.engines import open_store, parse_target
from nemori_cli.store.pg_target import PgTarget
from nemori_cli.store.target import shown_url


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "_"


class FileStores:
    """A SQLite file per memory: OUT/memories/UNIT/BUILD.db."""

    engine = "sqlite"

    def __init__(self, out: Path):
        self.folder = out / "memories"

    def path(self, unit_key: str, build_key: str) -> Path:
        return self.folder / _safe(unit_key) / f"{_safe(build_key)}.db"

    def exists(self, unit_key: str, build_key: str) -> bool:
        return self.path(unit_key, build_key).exists()

    def remove(self, unit_key: str, build_key: str) -> None:
        path = self.path(unit_key, build_key)
        for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            p.unlink(missing_ok=True)

    def open(self, unit_key: str, build_key: str) -> Store:
        path = self.path(unit_key, build_key)
        path.parent.mkdir(parents=True, exist_ok=True)
        return open_store(path)

    def size_bytes(self, db: Store, unit_key: str, build_key: str) -> int:
        path = self.path(unit_key, build_key)
        return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())

    def describe(self) -> dict[str, str]:
        return {"engine": self.engine, "where": str(self.folder)}


class SchemaStores:
    """A schema per memory in one PostgreSQL database; the vector extension stays in ``public``, shared by all."""

    engine = "postgresql"

    def __init__(self, url: str, out: Path):
        if not isinstance(parse_target(url), PgTarget):
            raise InputError(f"bench --db takes a postgresql:// URL, not {url!r} (SQLite memories are kept in the output folder)")
        if "options=" in url:
            raise InputError("bench --db: leave out options= (the bench sets each memory's search_path itself)")
        self.url = url
        # The folder as given to this run, resolved: two folders, two sets of schemas.
        self.folder_key = str(out.resolve())
        pg_schemas.ensure_vector_in_public(url)

    def schema(self, unit_key: str, build_key: str) -> str:
        """nemori_bench_UNIT_BUILD_HASH, lower case, within PostgreSQL's 63 characters."""
        digest = hashlib.sha256(f"{self.folder_key}\0{unit_key}\0{build_key}".encode()).hexdigest()[:10]
        readable = re.sub(r"[^a-z0-9]+", "_", f"{unit_key}_{build_key}".lower()).strip("_")[:36]
        return f"nemori_bench_{readable}_{digest}"

    def exists(self, unit_key: str, build_key: str) -> bool:
        return pg_schemas.store_exists(self.url, self.schema(unit_key, build_key))

    def remove(self, unit_key: str, build_key: str) -> None:
        pg_schemas.drop_schema(self.url, self.schema(unit_key, build_key))

    def open(self, unit_key: str, build_key: str) -> Store:
        schema = self.schema(unit_key, build_key)
        pg_schemas.create_schema(self.url, schema)
        return open_store(pg_schemas.url_in_schema(self.url, schema))

    def size_bytes(self, db: Store, unit_key: str, build_key: str) -> int:
        return db.size_bytes()

    def describe(self) -> dict[str, str]:
        return {"engine": self.engine, "where": shown_url(self.url)}


def stores_for(db: str | None, out: Path) -> FileStores | SchemaStores:
    """The stores of a bench run writing into ``out``: SchemaStores for a --db URL, else FileStores."""
    return SchemaStores(db, out) if db else FileStores(out)
