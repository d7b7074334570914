"""Stores kept as schemas of one PostgreSQL database: make one, find one, drop one, and the URL that opens it.

The store code keeps to its connection's current schema (store/pg.py), so a
store in a schema is a URL whose search_path names that schema first and
``public`` (where pgvector lives) after it. `nemori bench --db` keeps each
memory it builds this way (bench/stores.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

from nemori_cli.errors import StoreError
from nemori_cli.store.target import shown_url

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow


def _admin(url: str) -> psycopg.Connection[TupleRow]:
    import psycopg

    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.Error as e:
        raise StoreError(f"PostgreSQL at {shown_url(url)}: {str(e).strip().splitlines()[0]}") from None


def ensure_vector_in_public(url: str) -> None:
    """pgvector in ``public``, where every schema's store finds it.

    Created inside a store's schema, dropping that schema would take the
    extension, and every other store's vectors, with it.
    """
    with _admin(url) as conn:
        if not conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
            conn.execute("CREATE EXTENSION vector SCHEMA public")


def store_exists(url: str, schema: str) -> bool:
    """Whether ``schema`` holds a nemori store (its migrations table)."""
    with _admin(url) as conn:
        row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{schema}.schema_migrations",)).fetchone()
    assert row is not None  # a SELECT without FROM answers one row
    return bool(row[0])


def create_schema(url: str, schema: str) -> None:
    with _admin(url) as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')


def drop_schema(url: str, schema: str) -> None:
    with _admin(url) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def url_in_schema(url: str, schema: str) -> str:
    """The URL of the store in ``schema`` of the database at ``url``."""
    separator = "&" if "?" in url else "?"
    return f"{url}{separator}options={quote(f'-csearch_path={schema},public')}"
