"""A real PostgreSQL server with pgvector for the tests, started by the tests themselves.

The `pgserver` wheel carries PostgreSQL 16 and pgvector, so nobody installs or
starts a server by hand: the first test that asks for one starts it (about a
second) in a folder of its own, and it stops when the test process ends. Each
test gets a new database made from a template that already has the vector
extension (a file copy, not a migration run), so tests never see each other's rows.

NEMORI_TEST_POSTGRES=off skips every PostgreSQL test (a machine without the wheel).
Otherwise a missing wheel is a failure, not a skip, under CI (CI=true), so the
second engine's coverage cannot vanish from a green run; on a developer's
machine it is a skip that says how to install it.
"""

from __future__ import annotations

import itertools
import os
import tempfile

import pytest

_server = None
_count = itertools.count()
TEMPLATE = "nemori_template"


def server_uri() -> str:
    """The running server's URI (started on first use)."""
    global _server
    if os.environ.get("NEMORI_TEST_POSTGRES") == "off":
        pytest.skip("NEMORI_TEST_POSTGRES=off")
    if _server is None:
        try:
            import pgserver
        except ImportError:
            if os.environ.get("CI"):
                pytest.fail("pgserver is not installed: CI must run the PostgreSQL tests (pip install -e '.[dev]')")
            pytest.skip("pgserver is not installed (pip install -e '.[dev]')")
        import psycopg

        folder = tempfile.mkdtemp(prefix="nemori-pg-")
        _server = pgserver.get_server(folder, cleanup_mode="delete")
        with psycopg.connect(_server.get_uri(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {TEMPLATE}")
        with psycopg.connect(_uri(TEMPLATE), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")
    return _server.get_uri()


def _uri(database: str) -> str:
    base = server_uri()
    # pgserver's URI is postgresql://postgres:@/postgres?host=SOCKET: swap the database name.
    head, _, tail = base.partition("@/")
    _, _, query = tail.partition("?")
    return f"{head}@/{database}?{query}" if query else f"{head}@/{database}"


def new_database() -> str:
    """The URI of a new, empty database on the test server."""
    import psycopg

    name = f"nemori_t{os.getpid()}_{next(_count)}"
    with psycopg.connect(server_uri(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
    return _uri(name)
